"""KV-cache bytes per token, as the engines allocate them (docs/maintainers/sizing.md#kv-cache-cost).

One sum over the layer layout (`metadata.layers`), for GGUF headers and HF configs alike: Σ over
the layers that keep a per-token cache of the elements one token adds, at 2 bytes each. vLLM's
page sizes are the check (`vllm/v1/kv_cache_interface.py`: `FullAttentionSpec.real_page_size_bytes`
= block × kv_heads × (head_size + head_size_v) × dtype; `MLAAttentionSpec` = block × 1 ×
(kv_lora_rank + qk_rope_head_dim) × dtype). llama.cpp agrees since its V-less MLA cache
(ggml-org/llama.cpp#19067). Sliding-window layers count as full attention here, at their own
head width; what each engine keeps of them is priced on top: `sizing.llama_memory` (llama.cpp's
window cells) and `sizing.vllm_memory` (vLLM's start-up check).

Recurrent state (mamba, gated delta net, short conv, RWKV) is a constant per sequence, stated
apart as `state_bytes_per_seq`: llama.cpp's `llama_memory_recurrent` keeps, per recurrent
layer and sequence, the layout's conv + state elements in f32 (`src/llama-hparams.cpp`); vLLM's
`MambaSpec` page holds the same element counts in the model dtype or f32, so f32 bounds both.
"""

from __future__ import annotations

import math
from fractions import Fraction

from attrs import frozen

from autogen.errors import ModelError
from autogen.metadata.layers import LayerLayout, RecurrentState, layer_layout
from autogen.metadata.model_meta import ModelMeta
from autogen.numfmt import counted

#: bytes_per_token is stated at f16/bf16.
F16_BYTES = 2
#: Recurrent state elements are f32 (llama.cpp `type_r` / `type_s`; vLLM ≤ this).
STATE_BYTES = 4

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
    #: Bytes of recurrent (SSM / linear-attention) state one sequence holds, constant in
    #: context length; 0 when the model has none (or its sizes are not given).
    state_bytes_per_seq: int = 0


def kv_cost(meta: ModelMeta) -> KvCost:
    """Bytes per token of `meta`'s KV cache, or a KvCost that says why it is unknown."""
    layout = layer_layout(meta)
    layers, attention = layout.blocks, layout.attention
    if layout.unknown:
        return _unknown(layout.unknown, layers, len(attention))
    state, state_lines = _state(layout.state)
    lines = [_layers_line(meta, len(attention), layers)]
    if not attention:
        note = "no attention layers: no per-token KV cache (recurrent state is constant)"
        return KvCost(0, 0, layers, layout.kv_heads, note=note, derivation=(*lines, note, *state_lines),
                      state_bytes_per_seq=state)
    total = sum(layer.elements for layer in attention) * F16_BYTES
    mla = layout.mla
    if mla is not None:
        lines.append(f"MLA: one latent of kv_lora_rank {mla.kv_lora_rank} + rope {mla.rope_dims}"
                     " per layer, shared by K and V")
        lines.append(f"{len(attention)} layers × ({mla.kv_lora_rank} + {mla.rope_dims}) × {F16_BYTES} B"
                     f" = {total} B per token")
        k, v = mla.key_length, 0
    else:
        k, v = _head_lines(layout, total, lines)
    return KvCost(total, len(attention), layers, layout.kv_heads, k, v, mla is not None, _size_note(total),
                  _finish(meta, lines, state_lines), state_bytes_per_seq=state)


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


def _finish(meta: ModelMeta, lines: list[str], state_lines: tuple[str, ...]) -> tuple[str, ...]:
    if meta.sliding_window > 0:
        lines.append(f"sliding window {meta.sliding_window}: per token those layers count as full attention; "
                     "the engine keeps less of them (its cache lines below)")
    return (*lines, *state_lines)


def _head_lines(layout: LayerLayout, total: int, lines: list[str]) -> tuple[int, int]:
    """Append the arithmetic of `total` over the attention layers' heads and widths to `lines`;
    return the (key, value) width per head the KvCost states: the full layers'."""
    widths, attention = layout.widths, layout.attention
    if widths.mixed and widths.marked:  # each layer at its own width (Gemma 4)
        groups: dict[tuple[int, int, int], int] = {}
        for layer in attention:
            shape = (layer.kv_heads, layer.key_length, layer.value_length)
            groups[shape] = groups.get(shape, 0) + 1
        lines.append(f"sliding-window layers: key {widths.sliding[0]} + value {widths.sliding[1]} per head; "
                     f"full layers: key {widths.full[0]} + value {widths.full[1]}")
        terms = " + ".join(f"{n} × {h} × ({k} + {v})" for (h, k, v), n in groups.items())
        lines.append(f"({terms}) × {F16_BYTES} B = {total} B per token")
        return widths.full
    k, v = widths.at(False)
    if widths.mixed:
        lines.append(f"sliding layers not marked: every layer charged at the wider key {k} + value {v}")
    heads = layout.kv_heads
    uniform = {layer.kv_heads for layer in attention}
    if len(uniform) == 1:
        (n,) = uniform
        lines.append(f"{len(attention)} layers × {n} KV heads × (key {k} + value {v}) × {F16_BYTES} B "
                     f"= {total} B per token")
    else:
        lines.append(f"KV heads per layer: {_run_lengths(heads)}; key {k} + value {v} per head")
        lines.append(f"{sum(heads)} heads in all × ({k} + {v}) × {F16_BYTES} B = {total} B per token")
    return k, v


def _state(state: RecurrentState | None) -> tuple[int, tuple[str, ...]]:
    """Recurrent state bytes per sequence, and the lines that derive them."""
    if state is None:
        return 0, ()
    if state.elements <= 0:
        return 0, (f"{counted(state.layers, 'recurrent layer')}: state sizes not given, not charged",)
    total = state.layers * state.elements * STATE_BYTES
    return total, (
        f"recurrent state per layer: {state.how} = {state.elements} elements",
        f"{counted(state.layers, 'recurrent layer')} × {state.elements} × {STATE_BYTES} B = {total} B per sequence"
        " (constant in context length)",
    )


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
