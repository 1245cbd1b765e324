"""KV-cache bytes per token, as the engines allocate them (docs/maintainers/sizing.md#kv-cache-cost).

One formula for GGUF headers and HF configs, because `ModelMeta` is already normalised:
Σ over layers that keep a per-token cache of kv_heads × (key_len + value_len) × bytes per
element. vLLM's page sizes are the check (`vllm/v1/kv_cache_interface.py`:
`FullAttentionSpec.real_page_size_bytes` = block × kv_heads × (head_size + head_size_v) × dtype;
`MLAAttentionSpec` = block × 1 × (kv_lora_rank + qk_rope_head_dim) × dtype). llama.cpp agrees
since its V-less MLA cache (ggml-org/llama.cpp#19067). Sliding-window layers count as full
attention here, at their own head width when it differs (Gemma 4); what each engine keeps of
them is priced on top: `sizing.llama_memory` (llama.cpp's window cells) and `sizing.vllm_memory`
(vLLM's start-up check).

Recurrent state (mamba, gated delta net, short conv, RWKV) is a constant per sequence, stated
apart as `state_bytes_per_seq`: llama.cpp's `llama_memory_recurrent` keeps, per recurrent
layer and sequence, `n_embd_r()` conv + `n_embd_s()` state elements in f32
(`src/llama-hparams.cpp`); vLLM's `MambaSpec` page holds the same element counts
(`mamba_utils.MambaStateShapeCalculator`), in the model dtype or f32, so f32 bounds both;
`conv_elements` / `ssm_elements` keep the two parts apart for vLLM's page.
"""

from __future__ import annotations

import math
from fractions import Fraction

from attrs import frozen

from autogen.errors import ModelError
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
    #: One recurrent layer's state elements: the conv window (vLLM keeps it in the model dtype)
    #: and the SSM state (f32 or the model dtype); `state_bytes_per_seq` is their sum in f32.
    conv_elements: int = 0
    ssm_elements: int = 0


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
    state, state_lines, (conv, ssm) = _state(meta)
    state_kw = {"state_bytes_per_seq": state, "conv_elements": conv, "ssm_elements": ssm}
    lines = [_layers_line(meta, len(attention), layers)]
    if not attention:
        note = "no attention layers: no per-token KV cache (recurrent state is constant)"
        return KvCost(0, 0, layers, heads, note=note, derivation=(*lines, note, *state_lines), **state_kw)

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
                      _size_note(total), _finish(meta, lines, state_lines), **state_kw)

    k, v = meta.key_length, meta.value_length
    if k <= 0 or v <= 0:
        return _unknown("no key/value head width", layers, len(attention))
    k_swa, v_swa = meta.key_length_swa or k, meta.value_length_swa or v
    if (k_swa, v_swa) != (k, v):
        if len(meta.sliding_layers) == layers:
            total = _per_layer_widths(meta, attention, (k, v), (k_swa, v_swa), lines)
            return KvCost(total, len(attention), layers, heads, k, v, False, _size_note(total),
                          _finish(meta, lines, state_lines), **state_kw)
        k, v = max(k, k_swa), max(v, v_swa)
        lines.append(f"sliding layers not marked: every layer charged at the wider key {k} + value {v}")
    head_sum = sum(heads)
    total = head_sum * (k + v) * F16_BYTES
    uniform = {heads[i] for i in attention}
    if len(uniform) == 1:
        (n,) = uniform
        lines.append(f"{len(attention)} layers × {n} KV heads × (key {k} + value {v}) × {F16_BYTES} B "
                     f"= {total} B per token")
    else:
        lines.append(f"KV heads per layer: {_run_lengths(heads)}; key {k} + value {v} per head")
        lines.append(f"{head_sum} heads in all × ({k} + {v}) × {F16_BYTES} B = {total} B per token")
    return KvCost(total, len(attention), layers, heads, k, v, False, _size_note(total),
                  _finish(meta, lines, state_lines), **state_kw)


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


def _per_layer_widths(meta: ModelMeta, attention: list[int], full: tuple[int, int],
                      swa: tuple[int, int], lines: list[str]) -> int:
    """Σ heads × (key + value) with each layer at its own width (llama.cpp
    `n_embd_head_k(il)`, vLLM `Gemma4DecoderLayer`); appends the arithmetic to `lines`."""
    groups: dict[tuple[int, int, int], int] = {}
    for i in attention:
        k, v = swa if meta.sliding_layers[i] else full
        groups[(meta.head_count_kv[i], k, v)] = groups.get((meta.head_count_kv[i], k, v), 0) + 1
    elements = sum(n * h * (k + v) for (h, k, v), n in groups.items())
    total = elements * F16_BYTES
    lines.append(f"sliding-window layers: key {swa[0]} + value {swa[1]} per head; "
                 f"full layers: key {full[0]} + value {full[1]}")
    terms = " + ".join(f"{n} × {h} × ({k} + {v})" for (h, k, v), n in groups.items())
    lines.append(f"({terms}) × {F16_BYTES} B = {total} B per token")
    return total


def _state(meta: ModelMeta) -> tuple[int, tuple[str, ...], tuple[int, int]]:
    """Recurrent state bytes per sequence, the lines that derive them, and one layer's
    (conv, SSM state) elements."""
    layers = meta.recurrent_layers
    if layers <= 0:
        return 0, (), (0, 0)
    d = meta.embedding_length
    if meta.wkv_head_size > 0:  # RWKV: n_embd_r = token_shift_count × n_embd, n_embd_s = n_embd × head
        shift, head = meta.token_shift_count, meta.wkv_head_size
        conv, ssm = shift * d, d * head
        how = f"token shift {shift} × {d} + {d} × wkv head {head}"
    else:  # mamba / mamba2 / gated delta net / short conv
        kernel, inner = meta.ssm_conv_kernel, meta.ssm_inner_size
        groups, width = meta.ssm_group_count, meta.ssm_state_size
        conv, ssm = max(kernel - 1, 0) * (inner + 2 * groups * width), width * inner
        how = f"conv ({kernel} - 1) × ({inner} + 2 × {groups} × {width}) + state {width} × {inner}"
    elements = conv + ssm
    if elements <= 0:
        return 0, (f"{counted(layers, 'recurrent layer')}: state sizes not given, not charged",), (0, 0)
    total = layers * elements * STATE_BYTES
    return total, (
        f"recurrent state per layer: {how} = {elements} elements",
        f"{counted(layers, 'recurrent layer')} × {elements} × {STATE_BYTES} B = {total} B per sequence"
        " (constant in context length)",
    ), (conv, ssm)


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
