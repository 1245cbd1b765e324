"""Which cache each layer of a model keeps: the one typed layout that the KV cost, llama-server
sizing and vLLM sizing read (docs/maintainers/sizing.md#the-layer-layout).

Like vLLM's list of `KVCacheSpec`s (vllm/v1/kv_cache_interface.py: `FullAttentionSpec`,
`SlidingWindowSpec`, `ChunkedLocalAttentionSpec`, `MLAAttentionSpec`, `MambaSpec`), each
layer's cache is a small frozen class that knows the elements one token adds to it. How much of
each kind an engine keeps (llama.cpp's window cells, vLLM's blocks and groups) is that engine's
sizer's rule; which layer is what is decided here, once, by the reader each source has:

- which layers slide and over what window: a GGUF as llama.cpp's loader reads it (`SWA_RULES`,
  each architecture's `load_arch_hparams` in src/models/*.cpp), an HF config as vLLM does
  (`layer_types`, or Mistral's model-wide `sliding_window`);
- each layer's head widths (`HeadWidths`): the file's own marks of its sliding layers, since
  Gemma 4's are narrower than its full ones (llama.cpp `llama_hparams::n_embd_head_k(il)`,
  vLLM `Gemma4DecoderLayer`); unmarked, every layer takes the wider of each;
- MLA (DeepSeek V2/V3, Kimi): one latent of kv_lora_rank + rope dims per token and layer and no
  V (`MLAAttentionSpec`; llama.cpp since its V-less MLA cache, ggml-org/llama.cpp#19067), with
  the per-head widths beside it for an engine that expands the latent;
- recurrent state (mamba, gated delta net, short conv, RWKV): per recurrent layer and sequence
  llama.cpp's `n_embd_r()` conv + `n_embd_s()` state elements (src/llama-hparams.cpp), the
  element counts of vLLM's `MambaSpec` (`mamba_utils.MambaStateShapeCalculator`).

A layer without a per-token cache (recurrent, MLP-only) is None in `LayerLayout.layers`; the
recurrent state is one `RecurrentState` for all its layers, since no engine rule asks which
layers they are.
"""

from __future__ import annotations

from attrs import frozen

from autogen.metadata.model_meta import ModelMeta


@frozen
class Attention:
    """A layer that caches `kv_heads` rows of `key_length` K and `value_length` V elements per token."""

    kv_heads: int
    key_length: int
    value_length: int

    @property
    def key_elements(self) -> int:
        """K elements one token adds (llama.cpp `n_embd_k_gqa(il)`)."""
        return self.kv_heads * self.key_length

    @property
    def value_elements(self) -> int:
        """V elements one token adds (`n_embd_v_gqa(il)`); 0 for MLA."""
        return self.kv_heads * self.value_length

    @property
    def elements(self) -> int:
        return self.key_elements + self.value_elements


@frozen
class FullAttention(Attention):
    """Every token of the context (vLLM `FullAttentionSpec`, llama.cpp's `llama_kv_cache`)."""


@frozen
class SlidingWindow(Attention):
    """The last `window` tokens (vLLM `SlidingWindowSpec`, llama.cpp `LLAMA_SWA_TYPE_STANDARD`)."""

    window: int


@frozen
class ChunkedAttention(Attention):
    """The tokens of the current `chunk`-token chunk: Llama 4 (vLLM `ChunkedLocalAttentionSpec`,
    llama.cpp `LLAMA_SWA_TYPE_CHUNKED`, whose window cache holds n_swa = the chunk)."""

    chunk: int


@frozen
class MlaAttention(FullAttention):
    """One latent row per token: 1 "head" of kv_lora_rank + rope_dims elements and no V (vLLM
    `MLAAttentionSpec`). The query heads and their per-head widths (qk_nope + rope, v_head_dim)
    are what an engine that attends in the latent or expands it needs beside the cache."""

    kv_lora_rank: int
    rope_dims: int
    heads: int
    head_key_length: int
    head_value_length: int


#: The kinds llama.cpp keeps in its window cache (`llama_kv_cache_iswa`).
WINDOWED = (SlidingWindow, ChunkedAttention)


@frozen
class HeadWidths:
    """Per-head (key, value) widths of the full-attention and of the sliding-window layers, which
    differ on Gemma 4 (GGUF `key_length_swa`; HF `head_dim` beside `global_head_dim`)."""

    full: tuple[int, int]
    sliding: tuple[int, int]
    #: The file marks its sliding layers (`ModelMeta.sliding_layers`); unmarked, every layer
    #: takes the wider of each width.
    marked: bool = False

    @property
    def mixed(self) -> bool:
        return self.full != self.sliding

    @property
    def wider(self) -> tuple[int, int]:
        return max(self.full[0], self.sliding[0]), max(self.full[1], self.sliding[1])

    def at(self, marked_sliding: bool) -> tuple[int, int]:
        """The widths of a layer the file marks sliding (or not)."""
        if not self.mixed:
            return self.full
        if not self.marked:
            return self.wider
        return self.sliding if marked_sliding else self.full


@frozen
class RecurrentState:
    """What each of `layers` recurrent layers keeps per sequence: the conv window and the SSM
    state, in elements (llama.cpp `n_embd_r()` / `n_embd_s()`; vLLM keeps the conv window in the
    model dtype, so the two stay apart)."""

    layers: int
    conv_elements: int = 0
    ssm_elements: int = 0
    #: How the elements follow from the sizes. Example: "conv (4 - 1) × (512 + 2 × 2 × 128) + state 128 × 512".
    how: str = ""

    @property
    def elements(self) -> int:
        return self.conv_elements + self.ssm_elements


@frozen
class LayerLayout:
    """Every layer's cache of one model, and why it is unknown when it is."""

    blocks: int
    #: Per block, its per-token cache; None = none (a recurrent or MLP-only layer).
    layers: tuple[Attention | None, ...] = ()
    state: RecurrentState | None = None
    widths: HeadWidths = HeadWidths((0, 0), (0, 0))
    #: Why the per-token cache cannot be read ("" = it can). Example: "no KV head count".
    unknown: str = ""

    @property
    def attention(self) -> tuple[Attention, ...]:
        return tuple(layer for layer in self.layers if layer is not None)

    @property
    def kv_heads(self) -> tuple[int, ...]:
        """Cached heads per block (an MLA latent is 1, no cache 0)."""
        return tuple(layer.kv_heads if layer is not None else 0 for layer in self.layers)

    @property
    def mla(self) -> MlaAttention | None:
        return next((layer for layer in self.layers if isinstance(layer, MlaAttention)), None)

    @property
    def window(self) -> int:
        """Tokens a windowed layer keeps (llama.cpp's n_swa: a window or a chunk); 0 = none slides."""
        return max((_window(layer) for layer in self.layers if isinstance(layer, WINDOWED)), default=0)


def _window(layer: SlidingWindow | ChunkedAttention) -> int:
    return layer.window if isinstance(layer, SlidingWindow) else layer.chunk


# -- which layers slide ----------------------------------------------------------------------


@frozen
class SwaRule:
    """How an architecture marks its sliding-window layers (llama.cpp src/models/<arch>.cpp)."""

    #: `set_swa_pattern(n)`: layer il slides unless il % n == n - 1 (dense_first: il % n == 0).
    period: int
    dense_first: bool = False
    #: n_swa when the GGUF has no `attention.sliding_window` (0 = the key is required).
    default_window: int = 0
    #: Llama 4's chunked attention: n_swa is this chunk whatever the window key says (llama.cpp
    #: turns it off for a key of 0, which `ModelMeta` cannot tell from an absent key).
    chunk: int = 0
    #: LFM2: every attention layer slides (`is_swa = !is_recr`).
    all_attention: bool = False


#: Architectures whose llama.cpp loader builds a sliding-window cache. A per-layer
#: `sliding_window_pattern` array in the GGUF (Gemma 4, MiMo-2, Granite SWA) wins over `period`;
#: an integer one replaces it. Phi-3's window is disabled in llama.cpp (src/models/phi3.cpp).
SWA_RULES: dict[str, SwaRule] = {
    "gemma2": SwaRule(2, default_window=4096),
    "gemma3": SwaRule(6),
    "gpt-oss": SwaRule(2),
    "cohere2": SwaRule(4),
    "cohere2moe": SwaRule(4, dense_first=True),
    "olmo2": SwaRule(4),
    "afmoe": SwaRule(4),
    "exaone-moe": SwaRule(4),
    "llama4": SwaRule(4, chunk=8192),
    "lfm2": SwaRule(0, all_attention=True),
    "lfm2moe": SwaRule(0, all_attention=True),
    "gemma4": SwaRule(0),
    "mimo2": SwaRule(0),
    "granite-swa": SwaRule(0),
}
#: HF families whose config's `sliding_window` without `layer_types` slides every layer in vLLM
#: (`Attention` falls back to the model's window; recorded for Mistral). transformers fills
#: `layer_types` in for Gemma, gpt-oss and the others, so a config of theirs without it is full.
WHOLE_MODEL_WINDOW_TYPES = frozenset({"mistral"})


def _gguf_windows(meta: ModelMeta) -> tuple[tuple[bool, ...], int, bool]:
    """(per-layer sliding flags, n_swa, chunked) as llama.cpp's loader sets them; flags () = none."""
    rule = SWA_RULES.get(meta.arch)
    if rule is None:
        return (), 0, False
    window = rule.chunk or meta.sliding_window or rule.default_window
    if window <= 0:
        return (), 0, False
    layers = meta.block_count
    if rule.all_attention:
        flags = tuple(h > 0 for h in meta.head_count_kv)
    elif len(meta.sliding_layers) == layers:
        flags = meta.sliding_layers
    else:
        n = meta.sliding_pattern or rule.period
        if n <= 0:
            return (), 0, False  # the per-layer array is required and absent: charged as full attention
        flags = tuple((i % n != 0) if rule.dense_first else (i % n < n - 1) for i in range(layers))
    return flags, window, rule.chunk > 0


def _hf_windows(meta: ModelMeta) -> tuple[tuple[bool, ...], int]:
    """(per-layer sliding flags, window) as vLLM reads a config: `layer_types`' sliding layers, or
    every layer of a `WHOLE_MODEL_WINDOW_TYPES` family; flags () = none."""
    window = meta.sliding_window
    if window <= 0:
        return (), 0
    if len(meta.sliding_layers) == meta.block_count:
        return meta.sliding_layers, window
    if meta.arch in WHOLE_MODEL_WINDOW_TYPES:
        return (True,) * meta.block_count, window
    return (), 0


# -- the layout ------------------------------------------------------------------------------


def layer_layout(meta: ModelMeta) -> LayerLayout:
    """`meta`'s layers and their caches, or a layout whose `unknown` says why they cannot be read."""
    layers, heads = meta.block_count, meta.head_count_kv
    if layers <= 0:
        return LayerLayout(0, unknown="no layer count")
    if not heads:
        return LayerLayout(layers, unknown="no KV head count")
    if len(heads) != layers:
        return LayerLayout(layers, unknown=f"{len(heads)} KV head entries for {layers} layers")
    if any(h < 0 for h in heads):
        return LayerLayout(layers, unknown="negative KV head count")
    state = _recurrent_state(meta)
    if meta.kv_lora_rank > 0:
        mla = MlaAttention(kv_heads=1, key_length=meta.kv_lora_rank + meta.qk_rope_head_dim, value_length=0,
                           kv_lora_rank=meta.kv_lora_rank, rope_dims=meta.qk_rope_head_dim, heads=meta.head_count,
                           head_key_length=meta.key_length, head_value_length=meta.value_length)
        return LayerLayout(layers, tuple(mla if h > 0 else None for h in heads), state)
    widths = _head_widths(meta)
    known = (meta.key_length > 0 and meta.value_length > 0) or not any(heads)
    flags, window, chunked = _gguf_windows(meta) if meta.source == "gguf" else (*_hf_windows(meta), False)
    caches = tuple(_attention(h, widths.at(widths.marked and meta.sliding_layers[i]),
                              window if flags and flags[i] else 0, chunked) if h > 0 else None
                   for i, h in enumerate(heads))
    return LayerLayout(layers, caches, state, widths, "" if known else "no key/value head width")


def _head_widths(meta: ModelMeta) -> HeadWidths:
    """The full layers' widths, the sliding layers' (each defaults to the full one, as llama.cpp's
    loader does: `n_embd_head_k_swa = n_embd_head_k_full` unless `key_length_swa` says otherwise),
    and whether the file marks which layers slide."""
    full = (meta.key_length, meta.value_length)
    sliding = (meta.key_length_swa or full[0], meta.value_length_swa or full[1])
    return HeadWidths(full, sliding, marked=len(meta.sliding_layers) == meta.block_count)


def _attention(heads: int, widths: tuple[int, int], window: int, chunked: bool) -> Attention:
    if window <= 0:
        return FullAttention(heads, *widths)
    return ChunkedAttention(heads, *widths, window) if chunked else SlidingWindow(heads, *widths, window)


def _recurrent_state(meta: ModelMeta) -> RecurrentState | None:
    """One recurrent layer's state elements in llama.cpp's terms, None without recurrent layers."""
    if meta.recurrent_layers <= 0:
        return None
    d = meta.embedding_length
    if meta.wkv_head_size > 0:  # RWKV: n_embd_r = token_shift_count × n_embd, n_embd_s = n_embd × head
        shift, head = meta.token_shift_count, meta.wkv_head_size
        return RecurrentState(meta.recurrent_layers, shift * d, d * head,
                              f"token shift {shift} × {d} + {d} × wkv head {head}")
    # mamba / mamba2 / gated delta net / short conv
    kernel, inner = meta.ssm_conv_kernel, meta.ssm_inner_size
    groups, width = meta.ssm_group_count, meta.ssm_state_size
    return RecurrentState(meta.recurrent_layers, max(kernel - 1, 0) * (inner + 2 * groups * width), width * inner,
                          f"conv ({kernel} - 1) × ({inner} + 2 × {groups} × {width}) + state {width} × {inner}")
