"""What swapgen writes is a config llama-swap accepts: our validator, the upstream schema, argv.

One library in a temporary folder holds every kind of input (dense, MoE, projector pair,
embedder, split set, real HF `config.json` folders, a pinned vLLM GGUF, broken and hostile
files); `swapgen` runs on it once and each test reads the result its own way.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
from pathlib import Path

import pytest
import yaml
from ruamel.yaml import YAML

from autogen.cmdline import split_command
from autogen.commands import cli
from autogen.router.validate import validate_text
from tests import schema_facts
from tests.gguf_fixtures import Q, llama_tensors, write_gguf, write_split_set
from tests.shared import HF_CONFIGS

LLAMA = "/opt/llama.cpp/build/bin/llama-server"
VLLM = "/opt/vllm env/bin/vllm"  # a space in the path: it must come back whole from the split
#: A name with everything a shell or YAML cares about; names llama-swap would misread (macro, newline).
HOSTILE = "Odd 'quoted' \"name\" $HOME #1 back\\slash ünï-Q4_K_M.gguf"
MACRO_LIKE = "Sneaky-${PORT}-Q4_K_M.gguf"
NEWLINE = "Line\nbreak-Q4_K_M.gguf"

SETTINGS = f"""\
roots: [models]
vram_budget_gb: 16
card_vram_gb: 24
backends:
  - {{id: llama-cuda, kind: llama, path: {json.dumps(LLAMA)}, default: true}}
  - {{id: vllm, kind: vllm, path: {json.dumps(VLLM)}, version: "0.11.0"}}
overrides:
  - {{match: "*Pinned-7B*", backend: vllm, extra_args: [--max-num-seqs, "8"]}}
  - {{match: "*Dense-8B*", parallel: 2}}
groups:
  - {{name: small, match: ["dense-*", "pinned-*"]}}
"""


def llama_kv(ctx=32768, blocks=8, embd=1024, **extra):
    kv = {"{arch}.context_length": ctx, "{arch}.block_count": blocks, "{arch}.embedding_length": embd,
          "{arch}.feed_forward_length": 4 * embd, "{arch}.attention.head_count": 16,
          "{arch}.attention.head_count_kv": 4}
    return kv | {f"{{arch}}.{k}": v for k, v in extra.items()}


def write_safetensors(path: Path, size: int) -> None:
    header = json.dumps({"__metadata__": {"format": "pt"}}).encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header)
    os.truncate(path, size)


def build_library(root: Path) -> list[str]:
    """Every kind of input swapgen reads; returns the HF config names it copied in."""
    def folder(rel: str) -> Path:
        (root / rel).mkdir(parents=True, exist_ok=True)
        return root / rel

    dense = llama_tensors(8, 1024, 32000, 4096)
    write_gguf(folder("pub/Dense-GGUF") / "Dense-8B-Q4_K_M.gguf", kv=llama_kv(), tensors=dense)
    write_gguf(folder("pub/Pinned-GGUF") / "Pinned-7B-Q4_K_M.gguf", kv=llama_kv(), tensors=dense)
    moe = [("token_embd.weight", (2048, 32000), Q.Q4_K)]
    moe += [(f"blk.{i}.ffn_gate_exps.weight", (2048, 768, 64), Q.Q4_K) for i in range(24)]
    write_gguf(folder("pub/MoE-GGUF") / "MoE-30B-A3B-Q4_K_M.gguf", "qwen3moe",
               kv=llama_kv(40960, 24, 2048, expert_count=64, expert_used_count=8,
                           expert_feed_forward_length=768), tensors=moe)
    vision = folder("pub/Vision-GGUF")
    write_gguf(vision / "Vision-12B-Q4_K_M.gguf", "gemma3", kv=llama_kv(131072, 12, 2048), tensors=dense)
    write_gguf(vision / "mmproj-F16.gguf", "clip",
               kv={"clip.has_vision_encoder": True, "clip.vision.image_size": 896},
               tensors=[("v.blk.0.attn_qkv.weight", (1152, 3456), Q.F16)])
    write_gguf(folder("pub/Embed-GGUF") / "embed-text-v1.5.Q8_0.gguf", "nomic-bert",
               kv=llama_kv(2048, 12, 768, pooling_type=1), tensors=[("token_embd.weight", (768, 30528), Q.Q8_0)])
    write_split_set(folder("pub/Split-GGUF"), "Split-70B-Q4_K_M", "llama", shards=3,
                    kv=llama_kv(131072, 8, 1024), tensors=dense)
    odd = folder("pub/Odd names")
    write_gguf(odd / HOSTILE, kv=llama_kv(), tensors=dense)
    write_gguf(odd / MACRO_LIKE, kv=llama_kv(), tensors=dense)
    write_gguf(odd / NEWLINE, kv=llama_kv(), tensors=dense)
    (folder("broken") / "not-a-model-Q8_0.gguf").write_bytes(b"<html>404 Not Found</html>\n")
    copied = []
    for config in sorted(HF_CONFIGS.glob("*/config.json")):
        hf = folder(f"hf/{config.parent.name}")
        shutil.copyfile(config, hf / "config.json")
        write_safetensors(hf / "model-00001-of-00001.safetensors", 16 << 30)
        copied.append(config.parent.name)
    return copied


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """(settings path, config path, HF config names) after one `swapgen` run."""
    base = tmp_path_factory.mktemp("library")
    copied = build_library(base / "models")
    settings = base / "swapgen.yaml"
    settings.write_text(SETTINGS)
    assert cli.main(["--settings", str(settings)]) == 0
    return settings, base / "config.yaml", copied


@pytest.fixture(scope="module")
def text(generated) -> str:
    return generated[1].read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def models(text) -> dict:
    return YAML(typ="safe", pure=True).load(text)["models"]


def test_our_validator_reports_nothing(generated, text):
    assert validate_text(text, str(generated[1])) == []


def test_llama_swaps_json_schema_accepts_it(text):
    """llama-swap's schema (as `tests/data` records it), applied by jsonschema rather than our validator."""
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft7Validator(schema_facts.to_json_schema(schema_facts.load()))
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
              for e in validator.iter_errors(YAML(typ="safe", pure=True).load(text))]
    assert errors == []


def test_every_cmd_runs_its_backend_on_the_port_llama_swap_assigns(models):
    paths = {"llama-cuda": LLAMA, "vllm": VLLM}
    assert {m["metadata"]["backend"] for m in models.values()} == set(paths)
    for model_id, model in models.items():
        argv = split_command(model["cmd"])
        assert argv[0] == paths[model["metadata"]["backend"]], model_id
        ports = [argv[i + 1] for i, arg in enumerate(argv[:-1]) if arg in ("--port", "--listen-port")]
        assert ports == ["${PORT}"], model_id


def test_every_proxy_is_where_its_engine_listens(models):
    """`proxy` names the bind host of the command (never llama-swap's default `localhost`), and
    `concurrencyLimit` appears exactly where the command sets the engine's slots."""
    for model_id, model in models.items():
        argv = split_command(model["cmd"])
        host = argv[argv.index("--host") + 1]
        assert model["proxy"] == f"http://{host}:${{PORT}}", model_id
        slots = [argv[i + 1] for i, arg in enumerate(argv[:-1]) if arg in ("-np", "--parallel", "--max-num-seqs")]
        assert model.get("concurrencyLimit") == (int(slots[-1]) if slots else None), model_id
    assert models["dense-8b-q4_k_m"]["concurrencyLimit"] == 2 and models["pinned-7b-q4_k_m"]["concurrencyLimit"] == 8


def test_no_model_id_or_alias_appears_twice(text):
    """Checked on the YAML nodes, before any loader could fold duplicates together."""
    root = yaml.compose(text)
    models = next(v for k, v in root.value if k.value == "models")
    ids = [k.value for k, _ in models.value]
    assert len(ids) == len(set(ids))
    names = list(ids)
    for _, model in models.value:
        for key, value in model.value:
            if key.value == "aliases":
                names += [item.value for item in value.value]
    assert len(names) == len(set(names))


def test_every_input_is_served_or_skipped_with_a_reason(text, models):
    skipped = dict(re.findall(r'^  # SKIPPED "([^"]+)": (.+)$', text, re.MULTILINE))
    assert skipped["not-a-model-q8_0"].startswith("not a GGUF file")
    assert any("/Sneaky-" in why and "macro" in why for why in skipped.values()), skipped
    assert any("/Line\\nbreak-" in why for why in skipped.values()), skipped
    for expected in ("dense-8b-q4_k_m", "moe-30b-a3b-q4_k_m", "vision-12b-q4_k_m",
                     "embed-text-v1.5-q8_0", "split-70b-q4_k_m", "pinned-7b-q4_k_m"):
        assert expected in models, sorted(models)
    hostile = [m for m in models.values() if HOSTILE in " ".join(split_command(m["cmd"]))]
    assert len(hostile) == 1 and split_command(hostile[0]["cmd"])[2].endswith("/" + HOSTILE)


def test_the_projector_is_attached_and_the_embedder_pools(models):
    vision = split_command(models["vision-12b-q4_k_m"]["cmd"])
    assert vision[vision.index("--mmproj") + 1].endswith("/pub/Vision-GGUF/mmproj-F16.gguf")
    embed = split_command(models["embed-text-v1.5-q8_0"]["cmd"])
    assert "--embeddings" in embed and embed[embed.index("--pooling") + 1] == "mean"


def test_real_hf_folders_are_served_by_vllm(generated, text, models):
    copied = generated[2]
    assert "qwen3-8b" in copied
    served = [m for m in models.values() if "/hf/qwen3-8b" in m["cmd"]]
    assert len(served) == 1 and split_command(served[0]["cmd"])[:2] == [VLLM, "serve"]
    for name in copied:  # every real config is either an entry or a SKIPPED line
        assert f"/hf/{name}" in text or re.search(rf'# SKIPPED "[^"]*{re.escape(name)}', text, re.I), name


def test_swapgen_validate_accepts_it_with_a_summary(generated, models, capsys):
    settings, config, _ = generated
    capsys.readouterr()
    assert cli.main(["--settings", str(settings), "validate"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [f"{config}: valid llama-swap config ({len(models)} models, 1 group)"]


def test_swapgen_validate_names_each_hand_made_mistake_by_line(generated, text, tmp_path, capsys):
    lines = text.splitlines(keepends=True)
    after = next(i for i, line in enumerate(lines) if line.startswith("    ttl: ")) + 1
    lines[after:after] = ['    env: ["cuda_visible_devices=0"]\n', '    description: "on ${engine}"\n',
                          "    checkEndpoint: health\n"]
    broken = tmp_path / "broken.yaml"
    broken.write_text("".join(lines), encoding="utf-8")
    capsys.readouterr()
    assert cli.main(["validate", str(broken)]) == 1
    out = capsys.readouterr().out.splitlines()
    found = [re.fullmatch(rf"{re.escape(str(broken))}:(\d+): (.+)", line) for line in out]
    assert all(found), out
    by_line = {int(m[1]): m[2] for m in found}
    assert len(found) == len(by_line) == 3
    env, macro, endpoint = (by_line.get(after + n, "") for n in (1, 2, 3))
    assert ".env[0]:" in env and "does not match" in env
    assert "unknown macro '${engine}'" in macro
    assert ".checkEndpoint:" in endpoint and "'health'" in endpoint
