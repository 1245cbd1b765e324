"""Streaming GGUF header reader: key/values and tensor infos, never tensor data.

`gguf.GGUFReader` maps the whole file and decodes every vocabulary string (15+ s and 500 MB
for a 150k-token vocabulary: docs/maintainers/discovery.md#why-a-streaming-reader), so we walk the header ourselves
over a small read buffer: arrays we do not need are skipped without decoding, and every length
read from the file is checked against the file size before anything is allocated or skipped,
so a hostile header costs a precise `GGUFError`, never memory. Layout and limits:
docs/maintainers/discovery.md#layout and docs/maintainers/discovery.md#what-is-read-and-the-limits.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Mapping

import xxhash
from attrs import frozen

from autogen.errors import ModelError
from autogen.metadata.chat_template import template_markers
from autogen.metadata.gguf_keys import (
    DEFAULT_ALIGNMENT,
    GGML_TYPE_SIZES,
    GGUF_MAGIC,
    SCALAR_FORMATS,
    SUPPORTED_VERSIONS,
    Keys,
    ValueType,
)

__all__ = ["GGUFError", "GGUFHeader", "read_gguf_header"]

#: Bytes fetched per read; a small header costs one read, a 150k vocabulary ~100.
_CHUNK = 1 << 16
#: Walked string arrays, by (count, xxh3-64 of their first _PROBE_BYTES) → (bytes, xxh3-128).
_WALKED: dict[tuple[int, int], tuple[int, bytes]] = {}
_WALKED_MAX = 256
_PROBE_BYTES = 1 << 12
_HASH_WINDOW = 1 << 20
#: Longest key or tensor name accepted (the GGUF spec caps keys at 2^16 - 1 bytes).
MAX_NAME_BYTES = (1 << 16) - 1
#: String values longer than this are skipped (not kept); the chat template is never kept.
MAX_KEPT_STRING = 1 << 16
#: A chat template up to this size is scanned for `chat_template.TEMPLATE_MARKERS` (real ones are
#: a few KB); a longer one is skipped unscanned.
MAX_SCANNED_TEMPLATE = 1 << 18
#: Numeric arrays up to this many elements are decoded (per-layer counts, SWA patterns).
MAX_DECODED_ARRAY = 65536
#: GGML_MAX_DIMS (ggml/include/ggml.h).
MAX_DIMS = 4
#: Smallest possible KV (empty key, type, 1-byte value) and tensor info (empty name, 0 dims).
_MIN_KV_BYTES = 8 + 4 + 1
_MIN_TENSOR_INFO_BYTES = 8 + 4 + 4 + 8
_I64_MAX = (1 << 63) - 1

_U32 = struct.Struct("<I").unpack_from
_U64 = struct.Struct("<Q").unpack_from
_SCALARS = {vt: struct.Struct("<" + code) for vt, code in SCALAR_FORMATS.items()}
_SKIPPED_ARRAY_PREFIX = "tokenizer."
#: SD1/SD2 (`cond_stage_model.`) and SDXL (`conditioner.embedders.`) text encoders in a checkpoint.
_BAKED_ENCODER_PREFIXES = (b"cond_stage_model.", b"conditioner.embedders.")
#: llama.cpp's vision tower and projector tensor names (tools/mtmd/clip-impl.h `TN_*`:
#: `v.patch_embd.weight`, `v.blk.%d.…`, `mm.%d.%s`).
_VISION_PREFIXES = (b"v.", b"mm.")
_LORA_A = b".lora_a"
#: Projections whose input is the residual stream (llama.cpp tensor names, gguf-py
#: `TENSOR_NAMES`): their `lora_a` is as wide as the model's embedding.
_RESIDUAL_INPUTS = frozenset((b"attn_q", b"attn_k", b"attn_v", b"attn_qkv", b"ffn_up", b"ffn_gate"))


class GGUFError(ModelError):
    """The file cannot be read as a GGUF header; the message is the skip reason."""


@frozen
class GGUFHeader:
    """What a GGUF header says, reduced to what swapgen needs (no tensor names are kept).

    Example: GGUFHeader(path="/m/Qwen3-8B-Q4_K_M.gguf", version=3, tensor_count=399, …,
    kv={"general.architecture": "qwen3", "qwen3.block_count": 36, …}).
    """

    path: str
    #: Bytes on disk (st_size).
    file_size: int
    #: GGUF version (2 or 3).
    version: int
    tensor_count: int
    kv_count: int
    #: Decoded values: every scalar, strings up to MAX_KEPT_STRING bytes, numeric arrays of up
    #: to MAX_DECODED_ARRAY elements (as tuples) outside `tokenizer.*`. Last occurrence wins.
    kv: Mapping[str, object]
    #: Element count of every array, decoded or skipped. Example: {"tokenizer.ggml.tokens": 151936}.
    array_lengths: Mapping[str, int]
    #: `tokenizer.chat_template` is present, and its size in bytes (the text is not kept).
    has_chat_template: bool
    chat_template_bytes: int
    #: `chat_template.template_markers` of the whole template; None = no template, or one over
    #: MAX_SCANNED_TEMPLATE. Example: ("tool_call_xml", "tools_var").
    chat_template_markers: tuple[str, ...] | None
    #: `general.alignment` or 32.
    alignment: int
    #: Absolute offset of the tensor data (end of the tensor infos, aligned).
    data_offset: int
    #: Sum of declared tensor sizes, and the part in MoE expert tensors (names with `_exps`).
    tensor_bytes: int
    expert_tensor_bytes: int
    #: Tensors whose ggml type has no size in GGML_TYPE_SIZES (not counted in tensor_bytes).
    untyped_tensors: int
    #: Dims of `token_embd.weight` in ggml order (n_embd, n_vocab); () when absent.
    token_embd_dims: tuple[int, ...]
    #: Bytes of `token_embd.weight` in a file without `output.weight` (the output layer reads the
    #: embeddings: a tied model); 0 otherwise, and in a split set, whose later shards are not read.
    tied_output_bytes: int
    #: Stable-diffusion UNet markers in tensor names (`input_blocks.`, `label_emb.`), and text
    #: encoders baked into the checkpoint (names under `cond_stage_model.` or
    #: `conditioner.embedders.`: docs/maintainers/classes.md#full-checkpoint-or-split-load).
    has_unet_blocks: bool
    has_label_emb: bool
    has_baked_encoders: bool
    #: Tensors of a vision tower or its projector (`v.`, `mm.`: llama.cpp's clip names) in the
    #: file: a projector's own, or a tower packed into a model file (Ollama's own engine layout).
    vision_tensor_count: int
    #: (ggml type id, declared bytes), largest first: the dominant type is the quant label.
    bytes_by_type: tuple[tuple[int, int], ...]
    #: data_offset + the end of the furthest tensor: what a complete file measures.
    expected_file_size: int
    #: `split.*` keys (0 when absent; split_no is 0-based and only meaningful with split_count).
    split_no: int
    split_count: int
    split_tensors_count: int
    #: Bytes actually read from disk (read-ahead included), for benchmarks.
    bytes_read: int
    #: xxh3-128 (hex) of `tokenizer.ggml.tokens`' bytes as stored (each token's length and
    #: bytes): two files with the same digest have the same token list. "" without one.
    vocab_digest: str = ""
    #: LoRA adapters (tensors `<base tensor>.lora_a` / `.lora_b`, llama.cpp src/llama-adapter.cpp):
    #: the largest rank (ne1 of a `lora_a`), the width of the layers' input (ne0 of the `lora_a`
    #: of a projection that reads the residual stream: attention q/k/v, FFN up/gate), and the
    #: blocks it touches (highest `blk.N` + 1). 0 when the file has no such tensors.
    lora_rank: int = 0
    lora_width: int = 0
    lora_layers: int = 0


class _Cursor:
    """A read position over a small window of the file; every move is bounds-checked."""

    __slots__ = ("base", "buf", "bytes_read", "f", "p", "size")

    def __init__(self, f, size: int):
        self.f = f
        self.size = size
        self.buf = b""
        self.base = 0  # file offset of buf[0]
        self.p = 0  # index into buf
        self.bytes_read = 0

    @property
    def offset(self) -> int:
        return self.base + self.p

    def need(self, n: int, what: str) -> None:
        """Make n bytes at the cursor available in `buf`, or fail if the file ends first."""
        if self.p + n <= len(self.buf):
            return
        off = self.base + self.p
        if off + n > self.size:
            raise GGUFError(
                f"truncated header: {what} at offset {off} needs {n} bytes, file has {self.size}")
        self.f.seek(off)
        data = self.f.read(max(n, _CHUNK))
        self.bytes_read += len(data)
        if len(data) < n:
            raise GGUFError(f"truncated header: {what} at offset {off}: file shrank while reading")
        self.buf, self.base, self.p = data, off, 0

    def check_claim(self, start: int, n: int, what: str) -> None:
        """Fail unless n bytes from file offset `start` (after an 8-byte length) fit the file."""
        if start + 8 + n > self.size:
            raise GGUFError(
                f"truncated header: {what} at offset {start} claims {n} bytes, "
                f"file has {self.size}")

    def skip(self, n: int) -> None:
        """Move past n bytes already checked against the file size."""
        if self.p + n <= len(self.buf):
            self.p += n
        else:
            self.buf, self.base, self.p = b"", self.base + self.p + n, 0

    def u32(self, what: str) -> int:
        self.need(4, what)
        value = _U32(self.buf, self.p)[0]
        self.p += 4
        return value

    def u64(self, what: str) -> int:
        self.need(8, what)
        value = _U64(self.buf, self.p)[0]
        self.p += 8
        return value

    def string_len(self, what: str) -> int:
        """Read a string's u64 length and check the string fits in the file."""
        start = self.offset
        n = self.u64(f"length of {what}")
        self.check_claim(start, n, what)
        return n

    def name(self, what: str) -> bytes:
        """A key or tensor name: short by rule, so it is read whole."""
        start = self.offset
        n = self.string_len(what)
        if n > MAX_NAME_BYTES:
            raise GGUFError(f"{what} at offset {start} is {n} bytes long (limit {MAX_NAME_BYTES})")
        self.need(n, what)
        raw = self.buf[self.p:self.p + n]
        self.p += n
        return raw

    def skip_strings(self, count: int, key: str, *, digest: bool = False) -> bytes | None:
        """Move past `count` strings without decoding them (tokens, merges); with `digest`,
        return the xxh3-128 of the array's bytes (length prefixes and strings), hashed while
        they stream past: the vocabulary's identity, never decoded.

        Walking 300k length prefixes costs ~35 ms of Python, the bulk of a cold read. Most
        libraries hold many files with the same vocabulary (quants and fine-tunes of one
        model), so each walked array is remembered by (count, hash of its first bytes) →
        (byte length, hash of all its bytes): an array that hashes the same, byte for byte,
        has the same walk, and costs one read and an xxhash instead (exact, not a guess).
        The memo lives for the process: one cold scan.
        """
        start = self.offset
        self.need(min(_PROBE_BYTES, self.size - start), f"array {key!r}")
        probe = (count, xxhash.xxh3_64_intdigest(self.buf[self.p:self.p + _PROBE_BYTES]))
        known = _WALKED.get(probe)
        if known is not None and known[1] and start + known[0] <= self.size:
            found = self.digest(start, known[0])
            if found == known[1]:
                self.seek(start + known[0])
                return found if digest else None
        hasher = xxhash.xxh3_128() if digest else None
        self.walk_strings(count, key, hasher)
        nbytes = self.offset - start
        if len(_WALKED) >= _WALKED_MAX:
            _WALKED.clear()
        # A vocabulary seen once is only remembered; the second file with it pays one extra
        # read for the digest (unless it was hashed on the way), so a library of distinct
        # vocabularies reads each array once.
        whole = hasher.digest() if hasher is not None else self.digest(start, nbytes) if known is not None else b""
        _WALKED[probe] = (nbytes, whole)
        self.seek(start + nbytes)
        return whole if digest else None

    def seek(self, offset: int) -> None:
        """Continue at a file offset already checked against the file size."""
        self.buf, self.base, self.p = b"", offset, 0

    def digest(self, start: int, n: int) -> bytes:
        """xxh3-128 of n file bytes from `start` (read in windows, never held whole)."""
        h = xxhash.xxh3_128()
        self.f.seek(start)
        while n > 0:
            data = self.f.read(min(n, _HASH_WINDOW))
            if not data:
                break
            self.bytes_read += len(data)
            h.update(data)
            n -= len(data)
        return h.digest()

    def pass_bytes(self, n: int, hasher) -> None:
        """Move past n bytes already checked against the file size, hashing them: those in the
        window, then the rest read in windows."""
        end = self.p + n
        if end <= len(self.buf):
            hasher.update(memoryview(self.buf)[self.p:end])
            self.p = end
            return
        hasher.update(memoryview(self.buf)[self.p:])
        rest, offset = end - len(self.buf), self.base + len(self.buf)
        self.f.seek(offset)
        while rest > 0:
            data = self.f.read(min(rest, _HASH_WINDOW))
            if not data:
                raise GGUFError(f"truncated header at offset {offset}: file shrank while reading")
            self.bytes_read += len(data)
            hasher.update(data)
            rest -= len(data)
            offset += len(data)
        self.seek(offset)

    def walk_strings(self, count: int, key: str, hasher=None) -> None:
        """The exact walk: one unpack and one branch per string while the next length prefix
        is inside the window; leaving it is handled below. With a hasher, every byte walked is
        hashed once, window by window."""
        unpack = _U64
        i = 0
        while i < count:
            self.need(8, f"length of string {i} of array {key!r}")
            buf, p = self.buf, self.p
            first = p
            limit = len(buf) - 8
            start = i
            # the index of the string that leaves the window is read after the loop
            for i in range(start, count):  # noqa: B007
                q = p
                p += 8 + unpack(buf, q)[0]
                if p > limit:
                    break
            else:
                if hasher is not None:
                    hasher.update(memoryview(buf)[first:p])
                self.p = p
                return
            # String i ends past the window, or the next length prefix is outside it.
            n = p - q - 8
            self.check_claim(self.base + q, n, f"string {i} of array {key!r}")
            if hasher is not None:
                hasher.update(memoryview(buf)[first:q])
                self.p = q
                self.pass_bytes(8 + n, hasher)
            else:
                self.p = q
                self.skip(8 + n)
            i += 1


def read_gguf_header(path: str | os.PathLike[str]) -> GGUFHeader:
    """Read a GGUF file's header up to the tensor data; raise `GGUFError` with the reason."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            return _read(f, path, os.fstat(f.fileno()).st_size)
    except OSError as e:
        raise GGUFError(f"cannot read: {e.strerror or e}") from e


def _preamble(cur: _Cursor, size: int) -> tuple[int, int, int]:
    """(version, tensor count, key/value count) after the magic, each checked."""
    cur.need(4, "magic")
    magic = cur.buf[:4]
    cur.p = 4
    if magic != GGUF_MAGIC:
        raise GGUFError(f"not a GGUF file (magic {magic!r})")
    version = cur.u32("version")
    if version not in SUPPORTED_VERSIONS:
        if int.from_bytes(version.to_bytes(4, "little"), "big") in SUPPORTED_VERSIONS:
            raise GGUFError("big-endian GGUF files are not supported")
        raise GGUFError(f"unsupported GGUF version {version} (expected 2 or 3)")
    tensor_count = cur.u64("tensor count")
    kv_count = cur.u64("key/value count")
    for count, label, least in ((kv_count, "key/values", _MIN_KV_BYTES),
                                (tensor_count, "tensors", _MIN_TENSOR_INFO_BYTES)):
        if 24 + count * least > size:
            raise GGUFError(f"header claims {count} {label} (at least {count * least} bytes), "
                            f"file has {size}")
    return version, tensor_count, kv_count


def _read(f, path: str, size: int) -> GGUFHeader:
    cur = _Cursor(f, size)
    version, tensor_count, kv_count = _preamble(cur, size)
    kv: dict[str, object] = {}
    array_lengths: dict[str, int] = {}
    template_bytes = -1
    markers: tuple[str, ...] | None = None
    vocab_digest = ""
    for _ in range(kv_count):
        key = cur.name("key").decode("utf-8", "replace")
        type_off = cur.offset
        vtype = cur.u32(f"type of {key!r}")
        if vtype == ValueType.STRING:
            n = cur.string_len(f"string {key!r}")
            if key == Keys.Tokenizer.CHAT_TEMPLATE:
                template_bytes, markers = n, None
                if n <= MAX_SCANNED_TEMPLATE:
                    cur.need(n, f"string {key!r}")
                    markers = template_markers(cur.buf[cur.p:cur.p + n].decode("utf-8", "replace"))
                    cur.p += n
                else:
                    cur.skip(n)
            elif n > MAX_KEPT_STRING:
                kv.pop(key, None)
                cur.skip(n)
            else:
                cur.need(n, f"string {key!r}")
                kv[key] = cur.buf[cur.p:cur.p + n].decode("utf-8", "replace")
                cur.p += n
        elif vtype == ValueType.ARRAY:
            array_lengths[key], values = _read_array(cur, key)
            if isinstance(values, bytes):
                vocab_digest = values.hex()
            elif values is None:
                kv.pop(key, None)
            else:
                kv[key] = values
        elif vtype in _SCALARS:
            unpack = _SCALARS[vtype]
            cur.need(unpack.size, f"value of {key!r}")
            kv[key] = unpack.unpack_from(cur.buf, cur.p)[0]
            cur.p += unpack.size
        else:
            raise GGUFError(f"unknown value type {vtype} for key {key!r} at offset {type_off}")

    alignment = _alignment(kv)
    tensors = _scan_tensors(cur, tensor_count)
    infos_end = cur.offset
    data_offset = -(-infos_end // alignment) * alignment
    return GGUFHeader(
        path=path,
        file_size=size,
        version=version,
        tensor_count=tensor_count,
        kv_count=kv_count,
        kv=kv,
        array_lengths=array_lengths,
        has_chat_template=template_bytes >= 0,
        chat_template_bytes=max(template_bytes, 0),
        chat_template_markers=markers,
        alignment=alignment,
        data_offset=data_offset,
        tensor_bytes=tensors.total,
        expert_tensor_bytes=tensors.experts,
        untyped_tensors=tensors.untyped,
        token_embd_dims=tensors.token_embd_dims,
        tied_output_bytes=0 if tensors.output or _int_or_zero(kv.get(Keys.Split.LLM_KV_SPLIT_COUNT)) > 1
        else tensors.token_embd_bytes,
        has_unet_blocks=tensors.unet,
        has_label_emb=tensors.label_emb,
        has_baked_encoders=tensors.baked_encoders,
        vision_tensor_count=tensors.vision,
        bytes_by_type=tuple(sorted(tensors.by_type.items(), key=lambda kv_: (-kv_[1], kv_[0]))),
        expected_file_size=data_offset + tensors.end if tensor_count else infos_end,
        split_no=_int_or_zero(kv.get(Keys.Split.LLM_KV_SPLIT_NO)),
        split_count=_int_or_zero(kv.get(Keys.Split.LLM_KV_SPLIT_COUNT)),
        split_tensors_count=_int_or_zero(kv.get(Keys.Split.LLM_KV_SPLIT_TENSORS_COUNT)),
        bytes_read=cur.bytes_read,
        vocab_digest=vocab_digest,
        lora_rank=tensors.lora_rank,
        lora_width=tensors.lora_width,
        lora_layers=tensors.lora_layers,
    )


def _read_array(cur: _Cursor, key: str) -> tuple[int, tuple | bytes | None]:
    """Return (element count, decoded tuple, or None when skipped); the token list gives the
    digest of its bytes instead (`GGUFHeader.vocab_digest`)."""
    start = cur.offset
    etype = cur.u32(f"element type of array {key!r}")
    count = cur.u64(f"element count of array {key!r}")
    if etype == ValueType.ARRAY:
        raise GGUFError(f"nested array in key {key!r} at offset {start}")
    if etype == ValueType.STRING:
        least, label = 8, "strings"
    elif etype in _SCALARS:
        least, label = _SCALARS[etype].size, ValueType(etype).name.lower()
    else:
        raise GGUFError(f"unknown array element type {etype} for key {key!r} at offset {start}")
    if cur.offset + count * least > cur.size:
        raise GGUFError(f"truncated header: array {key!r} at offset {start} claims {count} "
                        f"{label} (at least {count * least} bytes), file has {cur.size}")
    if etype == ValueType.STRING:
        return count, cur.skip_strings(count, key, digest=key == Keys.Tokenizer.LIST)
    nbytes = count * least
    if count > MAX_DECODED_ARRAY or key.startswith(_SKIPPED_ARRAY_PREFIX):
        cur.skip(nbytes)
        return count, None
    cur.need(nbytes, f"array {key!r}")
    values = struct.unpack_from(f"<{count}{SCALAR_FORMATS[ValueType(etype)]}", cur.buf, cur.p)
    cur.p += nbytes
    return count, values


def _alignment(kv: Mapping[str, object]) -> int:
    value = kv.get(Keys.General.ALIGNMENT, DEFAULT_ALIGNMENT)
    if type(value) is not int or value <= 0 or value & (value - 1):
        raise GGUFError(f"{Keys.General.ALIGNMENT} must be a power of two (got {value!r})")
    return value


def _int_or_zero(value: object) -> int:
    return value if type(value) is int else 0


class _TensorTotals:
    """Running aggregates over the tensor infos (names are not kept)."""

    __slots__ = (
        "baked_encoders",
        "by_type",
        "end",
        "experts",
        "label_emb",
        "lora_layers",
        "lora_rank",
        "lora_width",
        "output",
        "token_embd_bytes",
        "token_embd_dims",
        "total",
        "unet",
        "untyped",
        "vision",
    )

    def __init__(self) -> None:
        self.total = self.experts = self.untyped = self.end = self.vision = 0
        self.lora_rank = self.lora_width = self.lora_layers = 0
        self.token_embd_dims: tuple[int, ...] = ()
        self.token_embd_bytes = 0
        self.unet = self.label_emb = self.baked_encoders = self.output = False
        self.by_type: dict[int, int] = {}


def _scan_tensors(cur: _Cursor, count: int) -> _TensorTotals:
    """Tensor infos (docs/maintainers/discovery.md#what-is-read-and-the-limits): sizes from GGML_TYPE_SIZES."""
    if cur.offset + count * _MIN_TENSOR_INFO_BYTES > cur.size:
        raise GGUFError(f"header claims {count} tensors (at least "
                        f"{count * _MIN_TENSOR_INFO_BYTES} bytes from offset {cur.offset}), "
                        f"file has {cur.size}")
    t = _TensorTotals()
    for _ in range(count):
        start = cur.offset
        name = cur.name("tensor name")
        n_dims = cur.u32("tensor n_dims")
        if n_dims > MAX_DIMS:
            raise GGUFError(f"tensor at offset {start} has {n_dims} dims (max {MAX_DIMS})")
        cur.need(8 * n_dims + 12, "tensor dims, type and offset")
        dims = struct.unpack_from(f"<{n_dims}Q", cur.buf, cur.p)
        ggml_type, offset = struct.unpack_from("<IQ", cur.buf, cur.p + 8 * n_dims)
        cur.p += 8 * n_dims + 12
        elements = 1
        for d in dims:
            elements *= d
        if elements > _I64_MAX or any(d > _I64_MAX for d in dims):
            raise GGUFError(f"tensor at offset {start} has absurd dims {list(dims)}")
        if offset > _I64_MAX:
            raise GGUFError(f"tensor at offset {start} has absurd data offset {offset}")
        sizes = GGML_TYPE_SIZES.get(ggml_type)
        if sizes is None:
            t.untyped += 1
            nbytes = 0
        else:
            nbytes = elements * sizes[1] // sizes[0]
            t.total += nbytes
            t.by_type[ggml_type] = t.by_type.get(ggml_type, 0) + nbytes
        t.end = max(t.end, offset + nbytes)
        _note_name(t, name, dims, nbytes)
    return t


def _note_name(t: _TensorTotals, name: bytes, dims: tuple[int, ...], nbytes: int) -> None:
    """What one tensor's name tells: experts, a vision tower, the embeddings and whether an
    output layer of its own exists, UNet and baked-encoder markers, a LoRA."""
    if b"_exps" in name:
        t.experts += nbytes
    if name.startswith(_VISION_PREFIXES):
        t.vision += 1
    if name == b"token_embd.weight":
        t.token_embd_dims, t.token_embd_bytes = dims, nbytes
    elif name == b"output.weight":
        t.output = True
    elif b"input_blocks." in name:
        t.unet = True
    elif b"label_emb." in name:
        t.label_emb = True
    elif name.startswith(_BAKED_ENCODER_PREFIXES):
        t.baked_encoders = True
    elif name.endswith(_LORA_A) and len(dims) == 2:
        _count_lora(t, name, dims)


def _count_lora(t: _TensorTotals, name: bytes, dims: tuple[int, ...]) -> None:
    """One `lora_a` tensor: (ne0 = the input width, ne1 = the rank)."""
    t.lora_rank = max(t.lora_rank, dims[1])
    parts = name.split(b".")
    if parts[0] == b"blk" and len(parts) > 2 and parts[1].isdigit():
        t.lora_layers = max(t.lora_layers, int(parts[1]) + 1)
        if not t.lora_width and parts[2] in _RESIDUAL_INPUTS:
            t.lora_width = dims[0]
