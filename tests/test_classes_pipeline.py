"""Non-LLM classes end to end through `autogen.commands.cli.main`: a library of image, speech and SAM
models plus the diffusion components, codecs and projectors that must never be served."""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from autogen.cmdline import split_command
from autogen.router.validate import validate_text
from tests.gguf_fixtures import Q, write_gguf
from tests.runs import generate

GIB = 1 << 30
TINY = [("token_embd.weight", (64, 64), Q.F16)]

SETTINGS = """roots: [models]
vram_budget_gb: 7
card_vram_gb: 0
threads: 7
encoders:
  flux_vae: models/flux/ae.safetensors
  clip_l: models/flux/clip_l.safetensors
  t5xxl: models/flux/t5xxl_fp16.safetensors
backends:
  - {id: llama, kind: llama, path: /opt/llama/llama-server, default: true}
  - {id: sd, kind: sd, path: /opt/sd/sd-server, default: true}
  - {id: qwentts, kind: tts, path: /opt/qwentts/tts-server, default: true}
  - {id: ttscpp, kind: ttscpp, path: /opt/ttscpp/tts-server}
  - {id: parakeet, kind: parakeet, path: /opt/parakeet/parakeet-server}
  - {id: audiocpp, kind: audiocpp, path: /opt/audiocpp/audiocpp_server, variant: cuda}
  - {id: sam, kind: sam3, path: /opt/sam/sam3_server}
"""
UPSCALE_ROW = "  - {id: esrgan, kind: realesrgan, path: /opt/esrgan/realesrgan-ncnn-vulkan, default: true}\n"

SERVED = {
    "flux1-dev-q4_k_s": ("sd-server", "image"),
    "sd_xl_base_1.0-q8_0": ("sd-server", "image"),
    "qwen-talker-1.7b-base-q8_0": ("qwentts.cpp", "tts"),
    "kokoro_no_espeak-q8_0": ("tts.cpp", "tts"),
    "parakeet-tdt-0.6b-v3-q8_0": ("parakeet.cpp", "asr"),
    "moss-tts-nano-100m-q8_0": ("audio.cpp", "tts"),
    "sam2.1-hiera-tiny-f16": ("sam3_server", "segment"),
    "qwen3-0.6b-q8_0": ("llama.cpp", "llm"),
}


def _sparse(path, size):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.truncate(size)


def _gguf(root, rel, arch, *, size=None, kv=None):
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    write_gguf(path, arch, kv=kv, tensors=TINY, sparse_size=size)


def build_library(tmp_path):
    m = tmp_path / "models"
    _gguf(m, "flux/flux1-dev-Q4_K_S.gguf", "flux", size=int(6.5 * GIB), kv={"general.type": "diffusion"})
    for name, size in (("ae.safetensors", 0.31), ("clip_l.safetensors", 0.23), ("t5xxl_fp16.safetensors", 9.1)):
        _sparse(m / "flux" / name, int(size * GIB))
    # components that must never be served (docs/maintainers/discovery.md#file-rules, rules 8 and 11)
    for name in ("t5xxl-Q8_0.gguf", "clip_l.gguf", "clip-g-Q8_0.gguf", "flux-vae-f16.gguf", "ae.gguf",
                 "umt5-xxl-encoder-Q5_K_M.gguf"):
        _gguf(m, f"flux/{name}", "llama", kv={"{arch}.block_count": 2})
    _gguf(m, "flux/text-model-Q8_0.gguf", "t5encoder")
    _gguf(m, "sdxl/sd_xl_base_1.0-Q8_0.gguf", "sdxl", size=int(2.7 * GIB), kv={"general.type": "diffusion"})
    _gguf(m, "tts/qwen-talker-1.7b-base-Q8_0.gguf", "qwen3", size=GIB, kv={"{arch}.block_count": 28})
    _gguf(m, "tts/qwen-tokenizer-12hz-Q8_0.gguf", "qwentts-codec", size=int(0.2 * GIB))
    _gguf(m, "tts/Kokoro_no_espeak_Q8_0.gguf", "kokoro", size=int(0.3 * GIB))
    _gguf(m, "asr/parakeet-tdt-0.6b-v3-q8_0.gguf", "parakeet", size=int(0.7 * GIB))
    _gguf(m, "speech/moss-tts-nano-100m-q8_0.gguf", "audiocpp", size=int(0.2 * GIB),
          kv={"audiocpp.model_spec.family": "moss_tts_nano"})
    _sparse(m / "sam/sam2.1_hiera_tiny_f16.ggml", 22 << 20)
    _gguf(m, "chat/Qwen3-0.6B-Q8_0.gguf", "qwen3", size=int(0.6 * GIB), kv={
        "{arch}.block_count": 28, "{arch}.context_length": 40960, "{arch}.embedding_length": 1024,
        "{arch}.attention.head_count": 16, "{arch}.attention.head_count_kv": 8,
        "{arch}.feed_forward_length": 3072})
    _gguf(m, "chat/mmproj-F16.gguf", "clip")
    settings = tmp_path / "swapgen.yaml"
    settings.write_text(SETTINGS)
    return settings


def run(settings):
    rc, graph = generate(settings)
    assert rc == 0
    return (settings.parent / "config.yaml").read_text(), graph.stats


@pytest.fixture
def generated(tmp_path):
    settings = build_library(tmp_path)
    text, _ = run(settings)
    return tmp_path, text, YAML(typ="safe").load(text)


def argv(config, model_id):
    return split_command(config["models"][model_id]["cmd"])


def first_comment(text, model_id):
    lines = text.splitlines()
    at = lines.index(f'  "{model_id}":')
    start = at
    while start > 0 and lines[start - 1].startswith("  # ") and not lines[start - 1].startswith("  # SKIPPED"):
        start -= 1
    return lines[start]


def test_config_is_valid_and_serves_exactly_the_models(generated):
    _, text, config = generated
    assert validate_text(text, "config.yaml") == []
    assert set(config["models"]) == set(SERVED)
    assert "SKIPPED" not in text


def test_components_codecs_and_projectors_are_never_served(generated):
    _, _text, config = generated
    for model in config["models"].values():
        words = split_command(model["cmd"])
        model_path = words[words.index("--model") + 1] if "--model" in words else ""
        assert not re.search(r"(?i)(ae|vae|clip|t5xxl|umt5|encoder|tokenizer|mmproj|text-model)[^/]*$", model_path)


def test_every_entry_keeps_to_llama_swap_keys_and_metadata(generated):
    _, text, config = generated
    for model_id, (engine, _) in SERVED.items():
        model = config["models"][model_id]
        caps = model["capabilities"]
        assert set(caps["in"]) | set(caps["out"]) <= {"text", "image", "audio"}
        meta = model["metadata"]
        assert meta["engine"] == engine and {"backend", "arch", "size_gb"} <= set(meta)
        cpu = model_id in ("kokoro_no_espeak-q8_0", "parakeet-tdt-0.6b-v3-q8_0", "sam2.1-hiera-tiny-f16")
        assert ("est_vram_gb" in meta) is not cpu
        memory = meta["memory"]  # every entry says what it holds where, by its engine's flat rule
        assert memory["source"] == "estimate", model_id
        if cpu:
            assert memory["devices"] == [] and memory["host_mib"] >= math.floor(meta["size_gb"] * 1024), model_id
        else:
            (gpu,) = memory["devices"]
            total = sum(gpu[k] for k in ("model_mib", "context_mib", "compute_mib", "other_mib"))
            assert abs(total - meta["est_vram_gb"] * 1024) <= 12, (model_id, memory)
        assert re.match(r"  # \S+ · \S+ · [\d.]+ GiB · \S", first_comment(text, model_id)), model_id


def test_image_entries_follow_the_reference(generated):
    tmp_path, _, config = generated
    flux = argv(config, "flux1-dev-q4_k_s")
    assert flux[:9] == ["/opt/sd/sd-server", "--diffusion-model", str(tmp_path / "models/flux/flux1-dev-Q4_K_S.gguf"),
                        "-l", "127.0.0.1", "--listen-port", "${PORT}", "--max-vram", "6.5"]
    assert "--port" not in flux and flux[flux.index("--vae") + 1] == str(tmp_path / "models/flux/ae.safetensors")
    assert flux[-2:] == ["--offload-to-cpu", "--vae-on-cpu"]
    assert config["models"]["flux1-dev-q4_k_s"]["checkEndpoint"] == "/"
    assert config["models"]["flux1-dev-q4_k_s"]["capabilities"] == {"in": ["text"], "out": ["image"]}
    sdxl = argv(config, "sd_xl_base_1.0-q8_0")
    assert sdxl[1] == "-m" and "--offload-to-cpu" not in sdxl


def test_speech_and_sam_entries_follow_the_reference(generated):
    tmp_path, _, config = generated
    models = config["models"]
    talker = argv(config, "qwen-talker-1.7b-base-q8_0")
    assert talker[:2] == ["/opt/qwentts/tts-server", "--model"]
    assert talker[talker.index("--codec") + 1] == str(tmp_path / "models/tts/qwen-tokenizer-12hz-Q8_0.gguf")
    kokoro = argv(config, "kokoro_no_espeak-q8_0")
    assert kokoro[:2] == ["/opt/ttscpp/tts-server", "--model-path"]
    assert models["kokoro_no_espeak-q8_0"]["useModelName"] == "Kokoro_no_espeak_Q8_0"
    assert argv(config, "parakeet-tdt-0.6b-v3-q8_0")[0] == "/opt/parakeet/parakeet-server"
    assert models["parakeet-tdt-0.6b-v3-q8_0"]["checkEndpoint"] == "none"
    audio = argv(config, "moss-tts-nano-100m-q8_0")
    assert audio[0] == "/opt/audiocpp/audiocpp_server" and "--model" not in audio
    assert audio[audio.index("--backend") + 1] == "cuda" and "--config" in audio
    assert argv(config, "sam2.1-hiera-tiny-f16")[0] == "/opt/sam/sam3_server"


def test_cpu_classes_get_coexistence_groups(generated):
    _, _, config = generated
    groups = config["groups"]
    for name, members in (("sam", ["sam2.1-hiera-tiny-f16"]), ("tts", ["kokoro_no_espeak-q8_0"]),
                          ("asr", ["parakeet-tdt-0.6b-v3-q8_0"])):
        assert groups[name] == {"swap": False, "exclusive": False, "persistent": True, "members": members}
    grouped = {m for g in groups.values() for m in g["members"]}
    assert "qwen-talker-1.7b-base-q8_0" not in grouped and "moss-tts-nano-100m-q8_0" not in grouped


def test_an_upscale_row_never_changes_the_config(tmp_path):
    settings = build_library(tmp_path)
    before, _ = run(settings)
    settings.write_text(SETTINGS + UPSCALE_ROW)
    after, stats = run(settings)
    assert after.encode() == before.encode()
    assert stats["emitted"] == 0 and stats.get("config", "unchanged") == "unchanged"
    settings.write_text(SETTINGS)
    assert run(settings)[0].encode() == before.encode()


def test_audiocpp_config_named_by_the_cmd_is_written_and_restored(generated):
    tmp_path, _, config = generated
    audio = argv(config, "moss-tts-nano-100m-q8_0")
    path = audio[audio.index("--config") + 1]
    written = Path(path).read_text()
    assert "moss_tts_nano" in written

    os.unlink(path)
    _text, stats = run(tmp_path / "swapgen.yaml")
    assert stats["emitted"] == 1 and Path(path).read_text() == written
    with open(path, "w") as f:  # a run stopped after writing it, before its fragment
        f.write(written.replace("moss_tts_nano", "other"))
    _text, stats = run(tmp_path / "swapgen.yaml")
    assert stats["emitted"] == 1 and Path(path).read_text() == written


def test_downloading_a_missing_component_re_emits_the_image_model(tmp_path):
    settings = build_library(tmp_path)
    t5 = tmp_path / "models/flux/t5xxl_fp16.safetensors"
    t5.unlink()
    text, _ = run(settings)
    assert "WARNING" in text and "--t5xxl" not in argv(YAML(typ="safe").load(text), "flux1-dev-q4_k_s")
    _sparse(t5, int(9.1 * GIB))
    text, stats = run(settings)
    assert stats["emitted"] == 2  # the two image models (both read the declared encoders), nothing else
    assert "--t5xxl" in argv(YAML(typ="safe").load(text), "flux1-dev-q4_k_s")
