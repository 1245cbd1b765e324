"""ik_llama.cpp's real llama-server takes every command swapgen writes for it, loads the model,
answers, and allocates what swapgen estimated.

Runs only when `IK_LLAMA_SERVER` points to ik_llama.cpp's llama-server (`bash
scripts/setup-slow-checks.sh ik-llama` builds it from the ik-llama-cpp-python sdist, CPU);
skips otherwise. The models are tiny random GGUFs (a llama, a Qwen3-MoE and a DeepSeek-style MLA
one, `tests/tiny_model.py`) and, for memory, headers at real widths whose data is a sparse hole.
Commands go through the path llama-swap uses: the config's `cmd` text, `${PORT}` substituted,
split as llama-swap splits it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from autogen.cmdline import split_command
from autogen.commands import cli
from autogen.figures.logs import IK_LLAMA_LOG
from autogen.metadata.gguf_header import read_gguf_header
from autogen.metadata.gguf_meta import meta_from_gguf
from autogen.router.validate import validate_text
from autogen.sizing.ik_llama_memory import ik_allocations
from autogen.sizing.llama_memory import Launch
from tests.shared import not_set_up
from tests.test_llama_server_real import free_port, get, serving
from tests.tiny_model import mla_hp, mla_tensors, write_sparse, write_tiny, write_tiny_moe

SERVER = os.environ.get("IK_LLAMA_SERVER", "")

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not (SERVER and os.access(SERVER, os.X_OK)),
                                 reason=not_set_up("ik_llama.cpp's llama-server ($IK_LLAMA_SERVER)"))]

SETTINGS = """\
roots: [models]
vram_budget_gb: 2
card_vram_gb: 0
threads: 2
backends:
  - {{id: ik-cpu, kind: ik_llama, path: {server}, variant: cpu, default: true}}
overrides:
  - match: "*Tiny-Llama*"
    ctx_profiles: [4096]
    profiles: [{{name: two slots, parallel: 2, kv_type: q8_0}}, {{name: repack, run_time_repack: true}}]
  - match: "*Tiny-MoE*"
    n_cpu_moe: 1
    fused_moe: false
    profiles: [{{name: all experts, extra_args: [--cpu-moe]}}, {{name: fa off, flash_attn: "off"}}]
  - match: "*Tiny-DeepSeek*"
    ctx: 8192
    profiles: [{{name: mla1, mla: 1}}, {{name: mla2 fa off, mla: 2, flash_attn: "off"}},
               {{name: mla0, mla: 0}}, {{name: amb, flash_attn: "off", extra_args: [-amb, "16"]}},
               {{name: q8, kv_type: q8_0, run_time_repack: true}}]
"""


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    root = tmp_path_factory.mktemp("ik")
    models = root / "models" / "pub lisher"
    models.mkdir(parents=True)
    write_tiny(models / "Tiny-Llama-F32.gguf")
    write_tiny_moe(models / "Tiny-MoE-F32.gguf", "qwen3moe")
    write_tiny_moe(models / "Tiny-DeepSeek-F32.gguf", "deepseek2")
    (root / "swapgen.yaml").write_text(SETTINGS.format(server=json.dumps(SERVER)))
    assert cli.main(["--settings", str(root / "swapgen.yaml")]) == 0
    return root


def parts(record) -> dict[str, int]:
    """A memory record's model, context and compute bytes, over its devices and the host."""
    rows = [*record.devices, *((record.host,) if record.host is not None else ())]
    return {part: sum(getattr(r, part) for r in rows) for part in ("model", "context", "compute")}


def estimate_of(entry: dict) -> dict[str, int]:
    """The entry's estimate (`metadata.memory`, MiB) by part; what it keeps in RAM counts as model."""
    memory = entry["metadata"]["memory"]
    mib = {part: sum(r.get(f"{part}_mib", 0) for r in memory["devices"]) for part in ("model", "context", "compute")}
    mib["model"] += memory.get("host_mib", 0)
    return {part: value << 20 for part, value in mib.items()}


def test_every_entry_starts_answers_and_allocates_the_estimate(library, tmp_path):
    text = (library / "config.yaml").read_text()
    assert validate_text(text, "config.yaml") == []
    models = YAML(typ="safe").load(text)["models"]
    assert len(models) == 13, sorted(models)  # 6 DeepSeek, 4 llama and 3 MoE entries
    for model_id, entry in sorted(models.items()):
        port = free_port()
        argv = split_command(entry["cmd"].replace("${PORT}", str(port)))
        assert argv[0] == SERVER and "-fit" not in argv
        log = tmp_path / f"{model_id}.log"
        with serving(argv, f"http://127.0.0.1:{port}", log):
            status, reply = get(f"http://127.0.0.1:{port}/v1/chat/completions", {
                "model": model_id, "max_tokens": 4, "seed": 1,
                "messages": [{"role": "user", "content": "Hi"}]}, timeout=120)
            assert status == 200 and reply["choices"][0]["message"]["content"] is not None, model_id
        report, _ = IK_LLAMA_LOG.figures(log.read_text(errors="replace"), ())
        assert report is not None, model_id
        measured, estimated = parts(report), estimate_of(entry)
        assert estimated["context"] == pytest.approx(measured["context"], rel=0.10, abs=1 << 20), model_id
        total = sum(measured.values())
        assert sum(estimated.values()) == pytest.approx(total, rel=0.10, abs=2 << 20), model_id
        assert not (Path.cwd() / "llama.log").exists()  # --log-disable: nothing written where it starts


#: Real-width headers: (name, arch, header keys, tensors) and the launches each runs.
def _wide(directory: Path) -> list[tuple[Path, list[list[str]]]]:
    dsv3 = write_sparse(directory / "dsv3.gguf", "deepseek2", mla_hp(7168, 128, 2, 8, 8, 2048, 18432),
                        mla_tensors(7168, 128, 2, 8, 2048, 18432, 438))
    lite = write_sparse(directory / "dsv2-lite.gguf", "deepseek2", mla_hp(2048, 16, 2, 64, 6, 1408, 10944),
                        mla_tensors(2048, 16, 2, 64, 1408, 10944, 438))
    return [(dsv3, [["-c", "8192"], ["-c", "8192", "-mla", "1"], ["-c", "8192", "-fa", "off", "-amb", "64"]]),
            (lite, [["-c", "16384"], ["-c", "8192", "-ctk", "q8_0", "-ctv", "q8_0"], ["-c", "8192", "-mla", "0"]])]


def _launch(args: list[str]) -> Launch:
    flags = dict(zip(args[::2], args[1::2], strict=False))
    return Launch(ctx=int(flags["-c"]), type_k=flags.get("-ctk", "f16"), type_v=flags.get("-ctv", "f16"),
                  flash_attn=flags.get("-fa", "on") != "off", mla=int(flags.get("-mla", 3)),
                  attn_max_batch=int(flags.get("-amb", 0)))


def test_mla_estimates_match_the_report_at_real_widths(tmp_path):
    """DeepSeek-V3's and DeepSeek-V2-Lite's attention at real width: the KV cache exactly, the
    compute buffer (MLA's decompression, `-amb`'s slices) within 10%."""
    for path, launches in _wide(tmp_path):
        meta = meta_from_gguf(read_gguf_header(path))
        for args in launches:
            port, log = free_port(), tmp_path / f"{path.stem}-{'_'.join(args)}.log"
            argv = [SERVER, "-m", str(path), "--host", "127.0.0.1", "--port", str(port), "-ngl", "0",
                    "--log-disable", *args]
            with serving(argv, f"http://127.0.0.1:{port}", log):
                pass
            report, _ = IK_LLAMA_LOG.figures(log.read_text(errors="replace"), ())
            assert report is not None, log.read_text()[-2000:]
            measured, ours = parts(report), ik_allocations(meta, _launch(args))
            assert measured["context"] == pytest.approx(ours.kv_total + ours.state, rel=0.01, abs=1 << 16), args
            assert ours.compute == pytest.approx(measured["compute"], rel=0.10), args  # + a 2 KiB output buffer
