"""A synthetic model library for the benchmarks: N models with real-sized GGUF headers.

Each GGUF LLM header carries a ~150k-token vocabulary (tokens, token types and merges, ~6.5 MB,
the size of Qwen3's; one vocabulary per model family, six in all) and several hundred tensor
infos; its tensors are never written: the file is extended sparsely to 1–70 GB. Writing 1,000
such headers through `gguf.GGUFWriter` would encode a vocabulary 1,000 times (minutes); instead
each family's tokenizer arrays are encoded once into one bytes blob (`vocab_blob`) and every
header is assembled by hand around it with `struct` (per-model KVs before, tensor infos
after): ~6.3 GB of writes, 13–25 s on 2 cores; the library is reused while its stamp matches.
The layout is GGUF v3 as `gguf.GGUFWriter` writes it (docs/maintainers/discovery.md#layout); the test
`tests/test_bench_library.py` checks a built header against `gguf.GGUFReader`.

The mix: single GGUFs (most), split sets (shard 1 carries the vocabulary), GGUFs with an
`mmproj` projector beside them, HF folders (plain and HF-cache layout) with sparse
safetensors. Everything is derived from the model index, so a rebuild gives the same library.
"""

from __future__ import annotations

import functools
import json
import os
import random
import shutil
import struct
from pathlib import Path

from autogen.commands.sample import LLAMA31_8B_CONFIG, QWEN3_8B_CONFIG

#: Bump when the recipe changes: an existing library with another stamp is rebuilt.
RECIPE = "4"
MARKER = ".bench-library"
GIB = 1 << 30
ALIGN = 32
# gguf.GGUFValueType numbers
U32, I32, STRING, ARRAY, U16 = 4, 5, 8, 9, 2
Q4_K, F16, F32 = 12, 1, 0  # gguf.GGMLQuantizationType; Q4_K = 144 bytes per 256 weights
#: (arch, blocks, embd, heads, kv_heads, ffn, ctx): shapes of real families.
SHAPES = (
    ("llama", 32, 4096, 32, 8, 14336, 131072),
    ("qwen2", 28, 3584, 28, 4, 18944, 32768),
    ("qwen3", 36, 4096, 32, 8, 12288, 40960),
    ("llama", 80, 8192, 64, 8, 28672, 131072),
    ("gemma3", 48, 3840, 16, 8, 15360, 131072),
    ("qwen3", 64, 5120, 64, 8, 25600, 40960),
)


def _s(text: str | bytes) -> bytes:
    raw = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(raw)) + raw


def _kv_u32(key: str, value: int) -> bytes:
    return _s(key) + struct.pack("<II", U32, value)


def _kv_str(key: str, value: str) -> bytes:
    return _s(key) + struct.pack("<I", STRING) + _s(value)


@functools.lru_cache(maxsize=len(SHAPES))
def vocab_blob(n: int) -> bytes:
    """tokenizer.ggml.model/tokens/token_type/merges KVs for an n-token BPE vocabulary (4 KVs).

    Tokens average ~7 bytes and merges ~11 (byte-level BPE as in Qwen3/Llama 3)."""
    tokens = [f"Ġ{i:x}ab"[: 3 + i % 9].encode() + str(i).encode() for i in range(n)]
    merges = [f"Ġt{i % 97} ok{i}".encode() for i in range(n)]
    parts = [_kv_str("tokenizer.ggml.model", "gpt2"),
             _s("tokenizer.ggml.tokens"), struct.pack("<IIQ", ARRAY, STRING, n)]
    parts += [struct.pack("<Q", len(t)) + t for t in tokens]
    parts += [_s("tokenizer.ggml.token_type"), struct.pack("<IIQ", ARRAY, I32, n), struct.pack(f"<{n}i", *([1] * n))]
    parts += [_s("tokenizer.ggml.merges"), struct.pack("<IIQ", ARRAY, STRING, n)]
    parts += [struct.pack("<Q", len(m)) + m for m in merges]
    return b"".join(parts)


def _tensors(blocks: int, embd: int, vocab: int, total: int) -> list[tuple[str, tuple[int, ...], int, int]]:
    """(name, ggml dims, type, bytes): 9 tensors per block, sized so the sum is ~`total`."""
    q4k = lambda ne0, ne1: ne0 * ne1 // 256 * 144  # noqa: E731
    out = [("token_embd.weight", (embd, vocab), Q4_K, q4k(embd, vocab)),
           ("output_norm.weight", (embd,), F32, 4 * embd)]
    per_block = max(total - 2 * q4k(embd, vocab), total // 2) // blocks
    big = ("attn_q", "attn_output", "ffn_gate", "ffn_up", "ffn_down")
    rows = max(1, per_block // len(big) // q4k(embd, 1))
    for i in range(blocks):
        out.append((f"blk.{i}.attn_norm.weight", (embd,), F32, 4 * embd))
        out.append((f"blk.{i}.ffn_norm.weight", (embd,), F32, 4 * embd))
        out += [(f"blk.{i}.{t}.weight", (embd, rows), Q4_K, q4k(embd, rows)) for t in big]
        out += [(f"blk.{i}.{t}.weight", (embd, embd // 8), Q4_K, q4k(embd, embd // 8)) for t in ("attn_k", "attn_v")]
    out.append(("output.weight", (embd, vocab), Q4_K, q4k(embd, vocab)))
    return out


def write_gguf(path: Path, kvs: list[bytes], tensors: list[tuple[str, tuple[int, ...], int, int]],
               *, vocab: bytes = b"", vocab_kvs: int = 0) -> int:
    """Write header bytes, extend sparsely to the declared size; return the header length."""
    infos, offset = [], 0
    for name, dims, qtype, nbytes in tensors:
        infos.append(_s(name) + struct.pack(f"<I{len(dims)}QIQ", len(dims), *dims, qtype, offset))
        offset += -(-nbytes // ALIGN) * ALIGN
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs) + vocab_kvs)
    body = [head, *kvs, vocab, *infos]
    header_len = sum(map(len, body))
    data_offset = -(-header_len // ALIGN) * ALIGN
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.writelines(body)
    os.truncate(path, data_offset + offset)
    return header_len


def _llm(path: Path, rng: random.Random, n_vocab: int, *, split: tuple[int, int] | None = None,
         ctx: int | None = None) -> int:
    shape = rng.randrange(len(SHAPES))
    arch, blocks, embd, heads, kv_heads, ffn, trained_ctx = SHAPES[shape]
    n_vocab += 17 * shape  # one vocabulary per family, as in a real library
    vocab = vocab_blob(n_vocab)
    total = int(rng.uniform(1, 70) * GIB)
    kvs = [_kv_str("general.architecture", arch), _kv_str("general.name", path.stem),
           _kv_u32(f"{arch}.context_length", ctx or trained_ctx), _kv_u32(f"{arch}.block_count", blocks),
           _kv_u32(f"{arch}.embedding_length", embd), _kv_u32(f"{arch}.feed_forward_length", ffn),
           _kv_u32(f"{arch}.attention.head_count", heads), _kv_u32(f"{arch}.attention.head_count_kv", kv_heads),
           _kv_str("tokenizer.chat_template", "{% for m in messages %}{{ m.content }}{% endfor %}" * 20)]
    tensors = _tensors(blocks, embd, n_vocab, total)
    if split:
        kvs += [_s("split.no") + struct.pack("<IH", U16, split[0]),
                _s("split.count") + struct.pack("<IH", U16, split[1]),
                _s("split.tensors.count") + struct.pack("<Ii", I32, len(tensors))]
        part = len(tensors) // split[1]
        tensors = tensors[split[0] * part:(split[0] + 1) * part if split[0] + 1 < split[1] else None]
    if split and split[0] > 0:
        return write_gguf(path, kvs[-3:], tensors)
    return write_gguf(path, kvs, tensors, vocab=vocab, vocab_kvs=4)


def _projector(path: Path) -> int:
    kvs = [_kv_str("general.architecture", "clip"), _s("clip.has_vision_encoder") + struct.pack("<I?", 7, True),
           _kv_u32("clip.vision.image_size", 896), _kv_u32("clip.vision.block_count", 27),
           _kv_u32("clip.vision.embedding_length", 1152)]
    tensors = [(f"v.blk.{i}.attn_qkv.weight", (1152, 3456), F16, 1152 * 3456 * 2) for i in range(27)]
    return write_gguf(path, kvs, tensors)


def _hf(folder: Path, rng: random.Random, shards: int) -> None:
    config = dict(rng.choice((QWEN3_8B_CONFIG, LLAMA31_8B_CONFIG)))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    for i in range(1, shards + 1):
        p = folder / f"model-{i:05d}-of-{shards:05d}.safetensors"
        header = json.dumps({"__metadata__": {"format": "pt"}}).encode()
        p.write_bytes(struct.pack("<Q", len(header)) + header)
        os.truncate(p, int(rng.uniform(2, 5) * GIB))


def llm_path(root: Path, i: int) -> Path:
    return root / f"pub{i % 40:02d}" / f"Model{i:04d}-GGUF" / f"Model{i:04d}-{8 + i % 50}B-Q4_K_M.gguf"


def plan_counts(models: int) -> dict[str, int]:
    """How the library's models split into kinds (about 8% HF, 4% split sets, 2% projectors)."""
    hf = max(1, models * 8 // 100)
    split = max(1, models * 4 // 100)
    return {"hf": hf, "split": split, "single": max(0, models - hf - split), "projectors": max(1, models // 50)}


def build(root: Path, models: int = 1000, n_vocab: int = 150_000) -> dict[str, int]:
    """(Re)build the library under `root`; reuse it when its marker matches. Returns stats."""
    stamp = f"{RECIPE} {models} {n_vocab}"
    marker = root / MARKER
    if marker.exists():
        stats = json.loads(marker.read_text())
        if stats.get("stamp") == stamp:
            return stats
    if root.exists():
        shutil.rmtree(root)
    rng = random.Random(1000)
    counts = plan_counts(models)
    header_bytes = files = 0
    for i in range(counts["single"]):
        header_bytes += _llm(llm_path(root, i), rng, n_vocab)
        files += 1
        if i < counts["projectors"]:
            header_bytes += _projector(llm_path(root, i).parent / "mmproj-F16.gguf")
            files += 1
    for j in range(counts["split"]):
        n = 2 + j % 3
        folder = root / "splits" / f"Big{j:03d}-GGUF"
        state = rng.getstate()
        for k in range(n):
            rng.setstate(state)  # every shard draws the same shape
            header_bytes += _llm(folder / f"Big{j:03d}-Q4_K_M-{k + 1:05d}-of-{n:05d}.gguf", rng, n_vocab,
                                 split=(k, n))
            files += 1
    for j in range(counts["hf"]):
        if j % 4 == 0:
            folder = root / "hf-cache" / f"models--org{j % 7}--Repo{j:03d}" / "snapshots" / f"{j:040x}"
        else:
            folder = root / f"hf{j % 5}" / f"Repo{j:03d}"
        _hf(folder, rng, 1 + j % 4)
        files += 2 + j % 4
    stats = {"stamp": stamp, "models": models, "files": files, "gguf_header_bytes": header_bytes, **counts}
    marker.write_text(json.dumps(stats))
    return stats


def change_one(root: Path, n_vocab: int, ctx: int | None) -> Path:
    """Rewrite model 0's header with context length `ctx` (None = as built); same size."""
    path = llm_path(root, 0)
    size = path.stat().st_size
    _llm(path, random.Random(1000), n_vocab, ctx=ctx)
    os.truncate(path, size)
    return path


def add_one(path: Path, n_vocab: int, seed: int) -> int:
    """A new model file at `path`, shaped as the library's (a finished download)."""
    return _llm(path, random.Random(10_000 + seed), n_vocab)
