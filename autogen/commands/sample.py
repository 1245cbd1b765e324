"""The bundled sample library, created on demand from the small recipes below.

Weights are sparse files of realistic size (GBs on paper, kilobytes on disk); headers are
real GGUF written with `gguf.GGUFWriter`, and HF folders carry real-shaped `config.json`
files. It shows each kind of entry: a plain llama GGUF, a split set, a GGUF with a projector,
an embedding model, an HF folder, an HF cache snapshot, a model pinned to vLLM, an image
model, a speech (ASR) model, a folder that must be rejected (T5) and a broken file.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

from autogen.numfmt import GIB

SAMPLE_DIR = "sample-library"
MARKER = ".swapgen-sample"
#: Bump when a recipe changes so existing sample libraries are rebuilt.
SAMPLE_VERSION = "4"

Q4_K, Q8_0, F16 = 12, 8, 1  # ggml type ids (gguf.GGMLQuantizationType)
_TYPE_SIZE = {Q4_K: (256, 144), Q8_0: (32, 34), F16: (1, 2)}


def _gguf(path: Path, arch: str, kv: dict, tensors: list[tuple[str, int, int]], *,
          shard: tuple[int, int] | None = None, size: int | None = None) -> None:
    """Write a header-only GGUF and extend it sparsely to the declared tensor size.

    `tensors` = (name, approximate bytes, ggml type); each becomes a 2-D tensor of that size.
    `size` cuts the file short (an interrupted download).
    """
    # lazy: only the first run of the sample library writes GGUFs (numpy is slow to import)
    import numpy as np  # noqa: PLC0415
    from gguf import GGMLQuantizationType, GGUFWriter  # noqa: PLC0415

    path.parent.mkdir(parents=True, exist_ok=True)
    w = GGUFWriter(str(path), arch)
    for key, value in kv.items():
        if isinstance(value, bool):
            w.add_bool(key, value)
        elif isinstance(value, int):
            w.add_uint32(key, value)
        elif isinstance(value, float):
            w.add_float32(key, value)
        elif isinstance(value, str):
            w.add_string(key, value)
        elif isinstance(value, list):
            w.add_array(key, value)
    if shard is not None:
        w.add_uint16("split.no", shard[0])
        w.add_uint16("split.count", shard[1])
        w.add_int32("split.tensors.count", len(tensors))
    for name, nbytes, qtype in tensors:
        block, type_size = _TYPE_SIZE[qtype]
        row_bytes = 4096 // block * type_size
        rows = max(1, nbytes // row_bytes)
        w.add_tensor_info(name, (rows, row_bytes), np.dtype(np.uint8), rows * row_bytes,
                          raw_dtype=GGMLQuantizationType(qtype))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()
    # deliberate lazy import: only building the library reads headers, not every run's check
    from autogen.metadata.gguf_header import read_gguf_header  # noqa: PLC0415

    os.truncate(path, size or read_gguf_header(str(path)).expected_file_size)


def _llm_tensors(blocks: int, total_gb: float, *, experts: bool = False,
                 qtype: int = Q4_K) -> list[tuple[str, int, int]]:
    per_block = int(total_gb * GIB * 0.95 / blocks)
    tensors = [("token_embd.weight", int(total_gb * GIB * 0.025), qtype)]
    for i in range(blocks):
        if experts:
            tensors.append((f"blk.{i}.attn_qkv.weight", per_block // 10, qtype))
            tensors.append((f"blk.{i}.ffn_gate_exps.weight", per_block * 9 // 10, qtype))
        else:
            tensors.append((f"blk.{i}.attn_qkv.weight", per_block // 3, qtype))
            tensors.append((f"blk.{i}.ffn_up.weight", per_block * 2 // 3, qtype))
    tensors.append(("output.weight", int(total_gb * GIB * 0.025), qtype))
    return tensors


def _llama_kv(arch: str, *, ctx: int, blocks: int, embd: int, heads: int, kv_heads: int, ff: int, **extra) -> dict:
    kv = {
        f"{arch}.context_length": ctx,
        f"{arch}.block_count": blocks,
        f"{arch}.embedding_length": embd,
        f"{arch}.feed_forward_length": ff,
        f"{arch}.attention.head_count": heads,
        f"{arch}.attention.head_count_kv": kv_heads,
        # a template that offers tools, as instruct models' templates do
        "tokenizer.chat_template": "{% if tools %}{{ tools | tojson }}{% endif %}"
                                   "{% for m in messages %}{{ m.content }}{% endfor %}",
    }
    kv.update({f"{arch}.{k}": v for k, v in extra.items()})
    return kv


def _safetensors(path: Path, size_bytes: int) -> None:
    header = json.dumps({"__metadata__": {"format": "pt"}}).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header)
    os.truncate(path, size_bytes)


def _config(path: Path, config: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config, indent=2) + "\n")


QWEN3_8B_CONFIG = {
    "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "torch_dtype": "bfloat16",
    "hidden_size": 4096, "intermediate_size": 12288, "num_hidden_layers": 36, "num_attention_heads": 32,
    "num_key_value_heads": 8, "head_dim": 128, "max_position_embeddings": 40960, "vocab_size": 151936,
    "rope_theta": 1000000, "tie_word_embeddings": False,
}
LLAMA31_8B_CONFIG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "torch_dtype": "bfloat16",
    "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
    "num_key_value_heads": 8, "max_position_embeddings": 131072, "vocab_size": 128256,
}
T5_BASE_CONFIG = {
    "architectures": ["T5ForConditionalGeneration"], "model_type": "t5", "d_model": 768, "num_layers": 12,
    "num_heads": 12, "vocab_size": 32128,
}


def build(root: Path) -> None:
    """Write the whole sample library under `root` (idempotent: files are rewritten)."""
    gb = GIB
    _gguf(root / "bartowski/Meta-Llama-3.1-8B-Instruct-GGUF/Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf", "llama",
          _llama_kv("llama", ctx=131072, blocks=32, embd=4096, heads=32, kv_heads=8, ff=14336),
          _llm_tensors(32, 4.58))
    moe = _llama_kv("qwen3moe", ctx=40960, blocks=48, embd=2048, heads=32, kv_heads=4, ff=6144,
                    expert_count=128, expert_used_count=8, expert_feed_forward_length=768)
    moe["qwen3moe.attention.key_length"] = 128
    moe["qwen3moe.attention.value_length"] = 128
    tensors = _llm_tensors(48, 17.28, experts=True)
    half = len(tensors) // 2
    for i, part in enumerate((tensors[:half], tensors[half:]), start=1):
        _gguf(root / f"unsloth/Qwen3-30B-A3B-GGUF/Qwen3-30B-A3B-Q4_K_M-0000{i}-of-00002.gguf", "qwen3moe",
              moe if i == 1 else {}, part, shard=(i - 1, 2))
    gemma = _llama_kv("gemma3", ctx=131072, blocks=48, embd=3840, heads=16, kv_heads=8, ff=15360,
                      **{"attention.key_length": 256, "attention.value_length": 256,
                         "attention.sliding_window": 1024})
    _gguf(root / "unsloth/gemma-3-12b-it-GGUF/gemma-3-12b-it-Q4_K_M.gguf", "gemma3", gemma, _llm_tensors(48, 6.79))
    _gguf(root / "unsloth/gemma-3-12b-it-GGUF/mmproj-F16.gguf", "clip",
          {"general.type": "mmproj", "clip.has_vision_encoder": True, "clip.projector_type": "gemma3",
           "clip.vision.image_size": 896, "clip.vision.patch_size": 14, "clip.vision.block_count": 27,
           "clip.vision.embedding_length": 1152, "clip.vision.feed_forward_length": 4304,
           "clip.vision.attention.head_count": 16, "clip.vision.projection_dim": 3840},
          [("v.blk.0.attn_qkv.weight", int(0.8 * gb), F16)])
    _gguf(root / "nomic-ai/nomic-embed-text-v1.5-GGUF/nomic-embed-text-v1.5.Q8_0.gguf", "nomic-bert",
          {"nomic-bert.context_length": 2048, "nomic-bert.block_count": 12, "nomic-bert.embedding_length": 768,
           "nomic-bert.attention.head_count": 12, "nomic-bert.pooling_type": 1},
          [("token_embd.weight", int(0.14 * gb), Q8_0)])
    mistral = _llama_kv("llama", ctx=32768, blocks=32, embd=4096, heads=32, kv_heads=8, ff=14336)
    _gguf(root / "bartowski/Mistral-7B-Instruct-v0.3-GGUF/Mistral-7B-Instruct-v0.3-Q4_K_M.gguf", "llama",
          mistral, _llm_tensors(32, 4.07))
    sdxl = [("model.diffusion_model.input_blocks.0.0.weight", int(1.5 * gb), Q8_0),
            ("model.diffusion_model.label_emb.0.0.weight", int(1.2 * gb), Q8_0),
            ("conditioner.embedders.0.transformer.text_model.embeddings.token_embedding.weight",
             int(0.2 * gb), F16),
            ("first_stage_model.decoder.conv_in.weight", int(0.1 * gb), F16)]
    _gguf(root / "stabilityai/sdxl/sd_xl_base_1.0-Q8_0.gguf", "sdxl", {"general.type": "diffusion"}, sdxl)
    # speech: a Parakeet ASR model (parakeet-server, CPU, coexistence group "asr")
    _gguf(root / "nvidia/parakeet-tdt-0.6b-v3-GGUF/parakeet-tdt-0.6b-v3-Q8_0.gguf", "parakeet", {},
          [("encoder.blk.0.weight", int(0.67 * gb), Q8_0)])
    # HF folder, a cache snapshot (weights are symlinks into blobs/), a rejected T5 folder
    _config(root / "Qwen/Qwen3-8B/config.json", QWEN3_8B_CONFIG)
    for i in (1, 2):
        _safetensors(root / f"Qwen/Qwen3-8B/model-0000{i}-of-00002.safetensors", int(8.19 * gb))
    cache = root / "hf-cache/models--meta-llama--Llama-3.1-8B-Instruct"
    snapshot = cache / "snapshots/0e9e39f249a16976918f6564b8830bc894c89659"
    _config(snapshot / "config.json", LLAMA31_8B_CONFIG)
    _safetensors(cache / "blobs/5b1d", int(14.96 * gb))
    link = snapshot / "model.safetensors"
    if not link.is_symlink():
        link.symlink_to(os.path.relpath(cache / "blobs/5b1d", snapshot))
    _config(root / "google-t5/t5-base/config.json", T5_BASE_CONFIG)
    _safetensors(root / "google-t5/t5-base/model.safetensors", int(0.89 * gb))
    _gguf(root / "broken/Phi-4-mini-instruct-Q4_K_M.gguf", "phi3",
          _llama_kv("phi3", ctx=131072, blocks=32, embd=3072, heads=24, kv_heads=8, ff=8192),
          _llm_tensors(32, 2.49), size=int(1.2 * gb))
    corrupt = root / "broken/not-a-model-Q8_0.gguf"
    corrupt.write_bytes(b"<html>404 Not Found</html>\n")
    (root / MARKER).write_text(SAMPLE_VERSION + "\n")


def ensure(root: Path) -> bool:
    """Build the library unless the marker says it is current. True = (re)built."""
    marker = root / MARKER
    if marker.exists() and marker.read_text().strip() == SAMPLE_VERSION:
        return False
    build(root)
    return True


def ensure_for_settings(settings_path: Path, repo_dir: Path) -> None:
    """Only the repo's own `swapgen.yaml` uses the sample library; build it on first use."""
    if settings_path.resolve() == (repo_dir / "swapgen.yaml").resolve():
        ensure(repo_dir / SAMPLE_DIR)
