"""KV-cache bytes per token, as the engines allocate them (PRODUCT.md §6.2).

One formula for GGUF headers and HF configs, because `ModelMeta` is already normalised:
Σ over layers that keep a per-token cache of kv_heads × (key_len + value_len) × bytes per
element. vLLM's page sizes are the check (`vllm/v1/kv_cache_interface.py`:
`FullAttentionSpec.real_page_size_bytes` = block × kv_heads × (head_size + head_size_v) × dtype;
`MLAAttentionSpec` = block × 1 × (kv_lora_rank + qk_rope_head_dim) × dtype; `MambaSpec` is a
constant per sequence). llama.cpp agrees since its V-less MLA cache (ggml-org/llama.cpp#19067).
Sliding-window layers are charged as full attention: the seed's conservative choice, and what
vLLM does with `--disable-hybrid-kv-cache-manager`.
"""

from __future__ import annotations

import math
from fractions import Fraction

from attrs import frozen

from autogen.errors import ModelError
from autogen.metadata import ModelMeta

#: bytes_per_token is stated at f16/bf16.
F16_BYTES = 2

#: Bytes per cached element for llama.cpp's `--cache-type-k/-v` values: ggml block bytes over
#: block elements (`gguf.constants.GGML_QUANT_SIZES`; q8_0 is a 2-byte scale + 32 int8).
KV_TYPE_BYTES: dict[str, float] = {
    "f32": 4.0,
    "f16": 2.0,
    "bf16": 2.0,
    "q8_0": (2 + 32) / 32,
    "q5_1": (2 + 2 + 4 + 16) / 32,
    "q5_0": (2 + 4 + 16) / 32,
    "q4_1": (2 + 2 + 16) / 32,
    "q4_0": (2 + 16) / 32,
    "iq4_nl": (2 + 16) / 32,
}


@frozen
class KvCost:
    """Per-token KV cache of one model, with the arithmetic that produced it."""

    #: Bytes per token at f16/bf16 (2 bytes per element); None = cannot be determined.
    bytes_per_token: int | None
    #: Layers that keep a per-token cache / all layers.
    attention_layers: int = 0
    total_layers: int = 0
    #: KV heads per layer (0 = no per-token cache); an MLA layer counts as 1 (the latent).
    kv_heads: tuple[int, ...] = ()
    #: Cached elements per head: MLA keeps one latent as "key" and nothing separate for V.
    key_length: int = 0
    value_length: int = 0
    mla: bool = False
    #: One line for a `# ` comment or a skip reason. Example: "128 KiB per token".
    note: str = ""
    #: Lines for `swapgen show`: which layers counted, heads, dims, the arithmetic.
    derivation: tuple[str, ...] = ()


def kv_cost(meta: ModelMeta) -> KvCost:
    """Bytes per token of `meta`'s KV cache, or a KvCost that says why it is unknown."""
    layers = meta.block_count
    heads = meta.head_count_kv
    if layers <= 0:
        return _unknown("no layer count")
    if not heads:
        return _unknown("no KV head count", layers)
    if len(heads) != layers:
        return _unknown(f"{len(heads)} KV head entries for {layers} layers", layers)
    if any(h < 0 for h in heads):
        return _unknown("negative KV head count", layers)

    attention = [i for i, h in enumerate(heads) if h > 0]
    lines = [_layers_line(meta, len(attention), layers)]
    if not attention:
        note = "no attention layers: no per-token KV cache (recurrent state is constant)"
        return KvCost(0, 0, layers, heads, note=note, derivation=(*lines, note))

    if meta.kv_lora_rank > 0:
        width = meta.kv_lora_rank + meta.qk_rope_head_dim
        per_layer = tuple(1 if h > 0 else 0 for h in heads)
        total = len(attention) * width * F16_BYTES
        lines.append(
            f"MLA: one latent of kv_lora_rank {meta.kv_lora_rank} + rope {meta.qk_rope_head_dim}"
            " per layer, shared by K and V"
        )
        lines.append(
            f"{len(attention)} layers × ({meta.kv_lora_rank} + {meta.qk_rope_head_dim})"
            f" × {F16_BYTES} B = {total} B per token"
        )
        return KvCost(total, len(attention), layers, per_layer, width, 0, True,
                      _size_note(total), _swa(meta, lines))

    k, v = meta.key_length, meta.value_length
    if k <= 0 or v <= 0:
        return _unknown("no key/value head width", layers, len(attention))
    head_sum = sum(heads)
    total = head_sum * (k + v) * F16_BYTES
    uniform = {heads[i] for i in attention}
    if len(uniform) == 1:
        (n,) = uniform
        lines.append(f"{n} KV heads per attention layer, key {k} + value {v} per head")
        lines.append(f"{len(attention)} layers × {n} × ({k} + {v}) × {F16_BYTES} B = {total} B per token")
    else:
        lines.append(f"KV heads per layer: {_run_lengths(heads)}; key {k} + value {v} per head")
        lines.append(f"{head_sum} heads in all × ({k} + {v}) × {F16_BYTES} B = {total} B per token")
    return KvCost(total, len(attention), layers, heads, k, v, False, _size_note(total), _swa(meta, lines))


def kv_bytes(cost: KvCost, ctx: int, *, element_bytes: float = 2.0, parallel: int = 1) -> int:
    """Bytes of KV cache for `parallel` sequences of `ctx` tokens at `element_bytes` per element.

    `element_bytes` is a `KV_TYPE_BYTES` value (q8_0 = 34/32); exact fractions, rounded up.
    """
    if cost.bytes_per_token is None:
        raise ModelError(cost.note)
    if ctx < 0 or parallel < 1 or element_bytes <= 0:
        raise ValueError(f"kv_bytes needs ctx ≥ 0, parallel ≥ 1, element_bytes > 0 "
                         f"(got {ctx}, {parallel}, {element_bytes})")
    elements = Fraction(cost.bytes_per_token, F16_BYTES)
    return math.ceil(elements * Fraction(element_bytes) * ctx * parallel)


# -- helpers -------------------------------------------------------------------------------


def _unknown(reason: str, layers: int = 0, attention: int = 0) -> KvCost:
    note = f"KV cost unknown: {reason}"
    return KvCost(None, attention, layers, note=note, derivation=(note,))


def _layers_line(meta: ModelMeta, attention: int, layers: int) -> str:
    if meta.layout_note:
        return f"layers: {meta.layout_note}"
    return f"layers: {attention} of {layers} keep a per-token KV cache"


def _swa(meta: ModelMeta, lines: list[str]) -> tuple[str, ...]:
    if meta.sliding_window > 0:
        lines.append(f"sliding window {meta.sliding_window}: those layers charged as full attention")
    return tuple(lines)


def _size_note(total: int) -> str:
    if total % 1024 == 0:
        return f"{total // 1024} KiB per token"
    return f"{total / 1024:.1f} KiB per token"


def _run_lengths(values: tuple[int, ...]) -> str:
    """(0, 0, 0, 4, 0, 0, 0, 4) → "0×3, 4, 0×3, 4": short enough for one line."""
    runs: list[list[int]] = []
    for v in values:
        if runs and runs[-1][0] == v:
            runs[-1][1] += 1
        else:
            runs.append([v, 1])
    return ", ".join(f"{v}×{n}" if n > 1 else str(v) for v, n in runs)
