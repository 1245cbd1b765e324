"""What ik_llama.cpp's llama-server allocates for one launch, part by part, by its own rules
(docs/maintainers/sizing.md#ik_llamacpp), the counterpart of `llama_memory.allocations`.

Pure arithmetic on a `ModelMeta` and a `Launch`, read from ik_llama.cpp's source
(ik-llama-cpp-python 0.1.5) and held to what its llama-server logs
(`tests/data/ik_llama_alloc_015.json`). What differs from llama.cpp:

- context (`llama_init_from_model`, src/llama.cpp): `n_ctx` is padded to 256 with flash
  attention and to 32 without (`llama_kv_cache_get_padding`); the KV cache is one pool of
  `n_ctx` cells that every slot shares (the server gives each slot n_ctx / `--parallel` of it),
  and every layer keeps all of them: there is no sliding-window cache (`llama_kv_cache_init`).
- MLA (DeepSeek-style, `-mla`, default 3): with flash attention one latent row of
  kv_lora_rank + rope at the K type; without it `-mla 1` adds a V row of kv_lora_rank, `-mla
  2|3` keep the latent alone at the V type; `-mla 0` caches per-head K and V. A file converted
  before the `_mla` keys is MLA too (`ModelMeta.latent_rank`).
- compute buffer: the worst-case graph reserves every ubatch row as an output, so the logits
  (n_vocab × n_ubatch f32) are often the whole buffer; the KQ masks are f16 with flash attention
  and f32 without, a second one at full width for sliding-window models; `-mla 2|3` with flash
  attention decompresses K and V of every cell for a prompt (`build_deepseek2`: `kv_f32`, `v`,
  `k_nope`), in slices of heads under `-amb`; without flash attention the scores of all heads,
  or of `-amb`'s slices (MLA, and models whose K/V heads equal their heads).
- fused MoE (`-no-fmoe` turns it off) moves no buffer: measured equal within 0.5 MiB.
"""

from __future__ import annotations

from autogen.metadata.layers import LayerLayout, layer_layout
from autogen.metadata.model_meta import ModelMeta
from autogen.numfmt import gib_text
from autogen.sizing.llama_memory import (
    UNGATED_FFN_ARCHS,
    Geometry,
    Launch,
    LlamaMemory,
    expert_width,
    pad,
    row_bytes,
    sliding_layers,
    state_bytes,
)

#: `llama_kv_cache_get_padding`: the flash-attention kernels want 256 cells, else 32.
FA_PAD, PAD = 256, 32
#: ik_llama.cpp's default `-mla` (common/common.h `mla_attn`).
DEFAULT_MLA = 3
F32 = 4


def latent(meta: ModelMeta) -> tuple[int, int]:
    """(kv_lora_rank, rope dims) of a DeepSeek-style model as ik_llama.cpp reads it; (0, 0) = none."""
    rank = meta.kv_lora_rank or meta.latent_rank
    return (rank, meta.qk_rope_head_dim) if rank else (0, 0)


def geometry(meta: ModelMeta, launch: Launch) -> Geometry:
    """One pool of n_ctx cells, shared by the slots, for every layer."""
    n_ctx = pad(launch.ctx or meta.context_length, FA_PAD if launch.flash_attn else PAD)
    n_batch = min(n_ctx, launch.batch)
    n_ubatch = min(n_batch, launch.ubatch)
    return Geometry(n_ctx, n_ctx // max(1, launch.slots), 1, n_ubatch, n_ctx, 0, 0)


def _mla_rows(meta: ModelMeta, launch: Launch) -> tuple[int, int, str]:
    """(K bytes, V bytes, how) of one cell of an MLA layer (`llama_kv_cache_init`)."""
    rank, rope = latent(meta)
    if launch.mla == 0:
        k, v = meta.head_count * meta.key_length, meta.head_count * meta.value_length
        return row_bytes(launch.type_k, k), row_bytes(launch.type_v, v), f"-mla 0: per-head K {k} + V {v}"
    if launch.flash_attn:
        return row_bytes(launch.type_k, rank + rope), 0, f"latent {rank} + rope {rope} at {launch.type_k}"
    if launch.mla == 1:
        return (row_bytes(launch.type_k, rank + rope), row_bytes(launch.type_v, rank),
                f"-mla 1 without flash attention: latent {rank} + rope {rope} and V^T {rank}")
    return 0, row_bytes(launch.type_v, rank + rope), f"-mla {launch.mla} without flash attention: latent at V's type"


def kv_bytes(meta: ModelMeta, layout: LayerLayout, launch: Launch, geo: Geometry) -> tuple[int, list[str]]:
    """Bytes of the one pool, and the rule line: every attention layer of the layout keeps every
    cell, a sliding-window one too."""
    cached = meta.block_count - meta.nextn_layers  # the MTP layers keep no cache (`model.mtp` off)
    if latent(meta)[0]:
        k, v, how = _mla_rows(meta, launch)
        layers = sum(1 for h in meta.head_count_kv[:cached] if h > 0) or cached
        total = (k + v) * geo.cells * layers
    else:
        rows = [a for a in layout.layers[:cached] if a is not None]
        layers, how = len(rows), f"K {launch.type_k} / V {launch.type_v}, sliding-window layers too"
        total = sum(row_bytes(launch.type_k, a.key_elements)
                    + (row_bytes(launch.type_v, a.value_elements) if a.value_elements else 0) for a in rows) * geo.cells
    return total, [f"KV {gib_text(total)}: {layers} layers × {geo.cells} cells (n_ctx {geo.n_ctx}, shared by "
                   f"{launch.slots} slot(s)), {how} (llama_kv_cache_init)"]


def _head_slices(n_head: int, size_mib: float, amb: int) -> int:
    """Heads per slice of `-amb` MiB (`build_deepseek2` `n_max_head`): every head without it."""
    if amb <= 0 or size_mib <= amb:
        return n_head
    return next((n_head // n for n in range(2, n_head) if n_head % n == 0 and size_mib / n <= amb), 1)


def _score_heads(n_head: int, size_mib: int, amb: int, sliced: bool) -> int:
    """Heads whose scores are alive at once without flash attention (`llm_build_kqv`, `n_step`)."""
    if amb <= 0 or amb >= size_mib or not sliced:
        return n_head
    steps = min(-(-size_mib // amb), n_head)
    return -(-n_head // steps)


def _mla_attention(meta: ModelMeta, launch: Launch, cells: int, tokens: int) -> tuple[int, str]:
    """Bytes of an MLA layer's attention at its peak (`build_deepseek2`)."""
    rank, rope = latent(meta)
    heads, nope, v = meta.head_count, meta.key_length - rope, meta.value_length
    absorbed = (heads * (2 * rank + 2 * rope + nope + v) + 2 * meta.embedding_length) * tokens * F32
    if launch.mla == 0:
        return 0, ""
    if launch.flash_attn and launch.mla >= 2:  # the prompt graph decompresses every cell
        size_mib = heads * (nope + v) * cells * F32 // (1 << 20)
        part = _head_slices(heads, size_mib, launch.attn_max_batch)
        per_cell = part * (F32 * (nope + v) + row_bytes(launch.type_k, v) + row_bytes(launch.type_k, nope))
        fixed = (heads * (2 * (nope + rope) + v) + 2 * meta.embedding_length) * tokens * F32
        return fixed + per_cell * cells, f"K and V of every cell decompressed, {part} of {heads} heads at once"
    if launch.flash_attn:
        return absorbed, "attention in the latent (-mla 1)"
    size_mib = cells * tokens * heads * F32 // (1 << 20)
    part = _score_heads(heads, size_mib, launch.attn_max_batch, True)
    transposed = cells * row_bytes("f16", rank) if launch.mla >= 2 else 0
    return (absorbed + cells * tokens * part * F32 + transposed,
            f"scores of {part} of {heads} heads" + (", the latent transposed" if transposed else ""))


def _attention(meta: ModelMeta, launch: Launch, cells: int, tokens: int) -> tuple[int, str]:
    """Bytes of a layer's attention at its peak (`llm_build_kqv`), masks aside."""
    if latent(meta)[0] and launch.mla:
        return _mla_attention(meta, launch, cells, tokens)
    kv_heads = max(meta.head_count_kv, default=0)
    q = meta.head_count * meta.key_length
    block = (2 * q + 2 * kv_heads * meta.key_length + 2 * meta.embedding_length) * tokens * F32
    if launch.flash_attn:
        return block, "Q, K, V and the output of a ubatch"
    size_mib = cells * tokens * meta.head_count * F32 // (1 << 20)
    part = _score_heads(meta.head_count, size_mib, launch.attn_max_batch, kv_heads == meta.head_count)
    return block + cells * tokens * part * F32, f"scores of {part} of {meta.head_count} heads"


def compute_bytes(meta: ModelMeta, launch: Launch, geo: Geometry) -> tuple[int, list[str]]:
    """The compute buffer: the larger of the logits of every ubatch row (with one n_embd row)
    and the KQ masks with the larger of a layer's attention and its FFN."""
    tokens, cells = geo.n_ubatch, geo.cells
    masks = cells * tokens * (2 if launch.flash_attn else F32) * (2 if sliding_layers(meta)[0] else 1)
    attention, how = _attention(meta, launch, cells, tokens)
    rows = 1 if meta.arch in UNGATED_FFN_ARCHS else 3
    dense = rows * meta.feed_forward_length if not meta.expert_count or meta.leading_dense_blocks else 0
    routed = 0
    if meta.expert_count > 0 and meta.expert_used_count > 0:  # the used experts' rows, each token's input once each
        routed = (rows * expert_width(meta) + meta.embedding_length) * meta.expert_used_count
    feed_forward = (max(dense, routed) + 2 * meta.embedding_length) * tokens * F32
    logits = (max(meta.vocab_size, 0) + meta.embedding_length) * tokens * F32
    total = max(logits, masks + max(attention, feed_forward))
    return total, [f"compute buffer {gib_text(total)} = the larger of the logits of {tokens} outputs "
                   f"{gib_text(logits)} and KQ masks {gib_text(masks)} + max(attention {gib_text(attention)}: "
                   f"{how}, FFN {gib_text(feed_forward)}) (llama_init_from_model, worst-case graph)"]


def ik_allocations(meta: ModelMeta, launch: Launch, state_per_seq: int = 0,
                   layout: LayerLayout | None = None) -> LlamaMemory:
    """Everything ik_llama.cpp's llama-server allocates beside the weights for `launch`; `layout`
    is `meta`'s (`metadata.layers.layer_layout`), built here when not given."""
    layout = layer_layout(meta) if layout is None else layout
    geo = geometry(meta, launch)
    kv, kv_lines = kv_bytes(meta, layout, launch, geo)
    state, state_lines = state_bytes(meta, launch, state_per_seq)
    compute, compute_lines = compute_bytes(meta, launch, geo)
    return LlamaMemory(geo, kv, 0, state, compute, (*kv_lines, *state_lines, *compute_lines))
