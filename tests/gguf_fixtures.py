"""Builders for GGUF test files, shared by every test that needs a model on disk.

Real files come from `gguf.GGUFWriter`; tensors are declared but never written, and the file
is extended sparsely to its declared size (gguf-py `GGUFWriter.add_tensor_info`, then `os.truncate`), so a "30 GB" model
costs a few KB of disk. Hostile headers are built byte by byte with the `pack_*` helpers.
"""

from __future__ import annotations

import math
import os
import struct
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFValueType, GGUFWriter
from gguf.gguf_writer import GGUFValue

Q = GGMLQuantizationType
#: (name, dims in ggml order: ne0 first, e.g. token_embd (n_embd, n_vocab), ggml type).
TensorSpec = tuple[str, Sequence[int], GGMLQuantizationType]


def write_gguf(path: str | os.PathLike[str], arch: str | None = "llama", *,
               kv: Mapping[str, object] | None = None, tensors: Iterable[TensorSpec] = (),
               sparse_size: int | None = None, vocab: int = 0, tokens: Sequence[str] | None = None,
               tokenizer: tuple[str, str] = ("gpt2", ""), chat_template: str | None = None) -> Path:
    """Write a GGUF header for `arch` and extend the file (sparsely) to its declared size.

    `kv` keys may use `{arch}`; values are typed by Python type (bool, int → u32 or u64,
    float → f32, str, list → array) or given exactly as a `gguf.gguf_writer.GGUFValue`.
    `sparse_size` sets the final size instead (smaller = an interrupted download).
    `vocab` adds a tokenizer of that many tokens, token types and merges; `tokens` gives the
    token list itself; `tokenizer` is (`tokenizer.ggml.model`, `tokenizer.ggml.pre`).
    `arch=None` writes no `general.architecture` (llama-imatrix and gguf_init_empty files).
    """
    path = Path(path)
    w = GGUFWriter(path, arch or "none")
    if arch is None:
        w.kv_data[0].pop("general.architecture")
    _add_common(w, arch or "", kv, vocab, chat_template, tokens, tokenizer)
    ends = _declare_all(w, tensors)
    _write_header(w)
    full = _full_size(os.path.getsize(path), ends[0], w.data_alignment)
    os.truncate(path, full if sparse_size is None else sparse_size)
    return path


def write_split_set(directory: str | os.PathLike[str], stem: str, arch: str, *, shards: int,
                    kv: Mapping[str, object] | None = None,
                    tensors: Sequence[TensorSpec] = ()) -> list[Path]:
    """Write a split set with GGUFWriter's own splitter: model keys in shard 1 only,
    `split.*` in every shard (docs/maintainers/discovery.md#split-sets). Returns the shard paths in order."""
    assert len(tensors) >= shards, "each shard needs at least one tensor"
    w = GGUFWriter(Path(directory) / f"{stem}.gguf", arch,
                   split_max_tensors=math.ceil(len(tensors) / shards))
    _add_common(w, arch, kv, 0, None)
    ends = _declare_all(w, tensors)
    paths = w.format_shard_names(Path(directory) / f"{stem}.gguf")
    _write_header(w)
    for shard, end in zip(paths, ends, strict=False):
        os.truncate(shard, _full_size(os.path.getsize(shard), end, w.data_alignment))
    return paths


def tensor_nbytes(dims: Sequence[int], qtype: GGMLQuantizationType) -> int:
    block, size = GGML_QUANT_SIZES[qtype]
    return math.prod(dims) // block * size


def llama_tensors(blocks: int, embd: int, vocab: int, ffn: int,
                  qtype: GGMLQuantizationType = Q.Q4_K) -> list[TensorSpec]:
    """A llama-shaped tensor list (attention + dense FFN per block) for realistic sizes."""
    out: list[TensorSpec] = [("token_embd.weight", (embd, vocab), qtype),
                             ("output_norm.weight", (embd,), Q.F32),
                             ("output.weight", (embd, vocab), Q.Q6_K)]
    for i in range(blocks):
        out += [(f"blk.{i}.attn_norm.weight", (embd,), Q.F32),
                (f"blk.{i}.attn_q.weight", (embd, embd), qtype),
                (f"blk.{i}.attn_k.weight", (embd, embd // 4), qtype),
                (f"blk.{i}.attn_v.weight", (embd, embd // 4), qtype),
                (f"blk.{i}.attn_output.weight", (embd, embd), qtype),
                (f"blk.{i}.ffn_gate.weight", (embd, ffn), qtype),
                (f"blk.{i}.ffn_up.weight", (embd, ffn), qtype),
                (f"blk.{i}.ffn_down.weight", (ffn, embd), qtype)]
    return out


def _add_common(w: GGUFWriter, arch: str, kv: Mapping[str, object] | None, vocab: int,
                chat_template: str | None, tokens: Sequence[str] | None = None,
                tokenizer: tuple[str, str] = ("gpt2", "")) -> None:
    for key, value in (kv or {}).items():
        _add(w, key.format(arch=arch), value)
    if vocab or tokens:
        # Byte-level BPE tokens average ~7 bytes, merges ~9 (Qwen3's tokenizer).
        tokens = list(tokens) if tokens is not None else [f"Ġtok{i:05d}" for i in range(vocab)]
        w.add_tokenizer_model(tokenizer[0])
        if tokenizer[1]:
            w.add_tokenizer_pre(tokenizer[1])
        w.add_token_list(tokens)
        w.add_token_types([1] * len(tokens))
        w.add_token_merges([f"Ġt ok{i:05d}" for i in range(len(tokens) - 1)])
    if chat_template is not None:
        w.add_chat_template(chat_template)


def _add(w: GGUFWriter, key: str, value: object) -> None:
    if key == "general.alignment":
        w.add_custom_alignment(value)  # also pads the tensor offsets to it
    elif isinstance(value, GGUFValue):
        w.add_key_value(key, value.value, value.type, value.sub_type)
    elif isinstance(value, bool):
        w.add_bool(key, value)
    elif isinstance(value, int):
        (w.add_uint32 if 0 <= value < 1 << 32 else w.add_uint64)(key, value)
    elif isinstance(value, float):
        w.add_float32(key, value)
    elif isinstance(value, str):
        w.add_key_value(key, value, GGUFValueType.STRING)  # add_string drops ""
    elif isinstance(value, (list, tuple)):
        w.add_array(key, list(value))
    else:
        raise TypeError(f"no GGUF type for {key}={value!r}")


def _declare_all(w: GGUFWriter, tensors: Iterable[TensorSpec]) -> list[int]:
    """Declare tensors without data; return per shard the end of its last tensor's bytes."""
    for name, dims, qtype in tensors:
        nbytes = tensor_nbytes(dims, qtype)
        byte_shape = (*reversed(dims[1:]), nbytes // max(math.prod(dims[1:]), 1))
        w.add_tensor_info(name, byte_shape, np.dtype(np.uint8), nbytes, raw_dtype=qtype)
    ends = []
    for shard in w.tensors:
        infos = list(shard.values())
        ends.append(sum(GGUFWriter.ggml_pad(t.nbytes, w.data_alignment) for t in infos[:-1])
                    + (infos[-1].nbytes if infos else 0))
    return ends


def _write_header(w: GGUFWriter) -> None:
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()


def _full_size(header_len: int, tensors_end: int, alignment: int) -> int:
    if not tensors_end:
        return header_len
    return -(-header_len // alignment) * alignment + tensors_end


# -- byte-level builders for hostile headers -------------------------------------------------

def pack_header(n_tensors: int, n_kv: int, version: int = 3, magic: bytes = b"GGUF") -> bytes:
    return magic + struct.pack("<IQQ", version, n_tensors, n_kv)


def pack_string(text: str | bytes, claimed_len: int | None = None) -> bytes:
    raw = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(raw) if claimed_len is None else claimed_len) + raw


def pack_kv_u32(key: str, value: int) -> bytes:
    return pack_string(key) + struct.pack("<II", GGUFValueType.UINT32, value)


def pack_kv_string(key: str, value: str) -> bytes:
    return pack_string(key) + struct.pack("<I", GGUFValueType.STRING) + pack_string(value)


def pack_kv_array_header(key: str, elem_type: int, count: int) -> bytes:
    return pack_string(key) + struct.pack("<IIQ", GGUFValueType.ARRAY, elem_type, count)


def pack_tensor_info(name: str, dims: Sequence[int], ggml_type: int, offset: int,
                     n_dims: int | None = None) -> bytes:
    n = len(dims) if n_dims is None else n_dims
    return (pack_string(name) + struct.pack("<I", n) + struct.pack(f"<{len(dims)}Q", *dims)
            + struct.pack("<IQ", ggml_type, offset))


def minimal_header(arch: str = "llama", tensors: Sequence[tuple[str, Sequence[int], int]] = (
        ("token_embd.weight", (64, 100), 0),)) -> bytes:
    """A small valid v3 header built by hand: arch, block count, and the given F32/… tensors."""
    kvs = pack_kv_string("general.architecture", arch) + pack_kv_u32(f"{arch}.block_count", 2)
    infos, offset = b"", 0
    for name, dims, ggml_type in tensors:
        infos += pack_tensor_info(name, dims, ggml_type, offset)
        known = ggml_type in GGMLQuantizationType._value2member_map_
        nbytes = tensor_nbytes(dims, GGMLQuantizationType(ggml_type)) if known else 0
        offset += -(-nbytes // 32) * 32
    return pack_header(len(tensors), 2) + kvs + infos


# -- files that are not models -----------------------------------------------------------------

def lora_tensors(blocks: int, embd: int, rank: int, kv_out: int | None = None) -> list[TensorSpec]:
    """A LoRA's tensors as llama.cpp's convert_lora_to_gguf.py writes them: per adapted weight
    `<name>.lora_a` (ne0 = the input width, ne1 = the rank) and `<name>.lora_b` (rank, output)."""
    out: list[TensorSpec] = []
    for i in range(blocks):
        for name, width in (("attn_q", embd), ("attn_k", kv_out or embd // 4), ("attn_v", kv_out or embd // 4)):
            out += [(f"blk.{i}.{name}.weight.lora_a", (embd, rank), Q.F16),
                    (f"blk.{i}.{name}.weight.lora_b", (rank, width), Q.F16)]
    return out


def write_lora(path: str | os.PathLike[str], arch: str = "llama", *, blocks: int = 2, embd: int = 64, rank: int = 8,
               alpha: float = 16.0, base: tuple[str, str, str] | None = None, name: str = "Adapter") -> Path:
    """A LoRA GGUF with convert_lora_to_gguf.py's header: `general.type = adapter`,
    `adapter.type = lora`, `adapter.lora.alpha`, and the model card's base model
    (`base` = (name, organization, repo url)) as `general.base_model.*`."""
    kv: dict[str, object] = {"general.type": "adapter", "adapter.type": "lora", "adapter.lora.alpha": float(alpha),
                             "general.name": name}
    if base is not None:
        kv.update({"general.base_model.count": 1, "general.base_model.0.name": base[0],
                   "general.base_model.0.organization": base[1], "general.base_model.0.repo_url": base[2]})
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    return write_gguf(path, arch, kv=kv, tensors=lora_tensors(blocks, embd, rank))
