"""What llama-server b11434 allocates for one launch, part by part, by llama.cpp's own rules.

Pure arithmetic on a `ModelMeta` and a `Launch`; every figure carries the rule it came from so
`swapgen show` can print it. The rules are read from llama.cpp's source (b11434) and checked in
the tests against the allocations that llama-server itself logs (`tests/data/llama_alloc_b11434.json`):

- context geometry: `llama_context::llama_context` (src/llama-context.cpp) pads `n_ctx` to 256;
  with per-slot KV (an explicit `--parallel`) each slot's `n_ctx_seq` = n_ctx / slots padded to
  256 again, and n_ctx becomes n_ctx_seq × slots. The KV cache has `n_ctx_seq` cells in each of
  its streams: one stream when unified (llama-server's auto slots), one per slot otherwise
  (`llama_kv_cache::llama_kv_cache`, `n_stream`).
- sliding-window layers (`llama_kv_cache_iswa::llama_kv_cache_iswa`, src/llama-kv-cache-iswa.cpp)
  keep their own cache of min(cells, n_swa × (slots if unified else 1) + n_ubatch) cells padded
  to 256, or the full cells with `--swa-full`. Which layers slide, over what n_swa, is the layer
  layout's (`metadata.layers`: each architecture's `load_arch_hparams`, src/models/*.cpp).
- bytes: Σ over the layout's cached layers of `ggml_row_size(type, n_embd_k_gqa(il))` + the same
  for V, × cells × streams (`llama_kv_cache` tensor shapes). An MLA layer caches one latent row of
  kv_lora_rank + rope dims and no V.
- recurrent state: `llama_memory_recurrent` holds max(1, slots) cells of `n_embd_r()` +
  `n_embd_s()` f32 per recurrent layer (src/llama-model.cpp `create_memory`).
- compute buffer: `llama_context::sched_reserve` reserves the prompt graph of n_ubatch tokens
  against the full cache with `n_outputs_max` output rows (llama-server passes its slot count).
  See `compute_buffer` for the terms.
"""

from __future__ import annotations

from attrs import frozen

from autogen.metadata.layers import WINDOWED, LayerLayout, layer_layout
from autogen.metadata.model_meta import ModelMeta
from autogen.numfmt import counted, gib_text

#: llama.cpp's context padding (`GGML_PAD(n_ctx, 256)`, also the SWA cache's padding).
CTX_PAD = 256
#: llama-server defaults (`common/common.h`: n_batch 2048, n_ubatch 512).
BATCH = 2048
UBATCH = 512
#: ggml block bytes / block elements per cache type (ggml.c `type_traits`).
BLOCKS: dict[str, tuple[int, int]] = {
    "f32": (4, 1), "f16": (2, 1), "bf16": (2, 1), "q8_0": (34, 32), "q5_1": (24, 32), "q5_0": (22, 32),
    "q4_1": (20, 32), "q4_0": (18, 32), "iq4_nl": (18, 32),
}
#: n_embd-wide rows the graph allocator keeps alive beside a layer's largest tensors: the
#: residual stream, its normed copy, the block's output projection and their sum (measured:
#: every width in tests/data/llama_alloc_b11434.json lands within 4-5 rows).
RESIDENT_ROWS = 5
#: Architectures whose graph calls `build_ffn` with no gate and a unary activation (GELU, ReLU²;
#: src/models/{falcon,gpt2,bloom,…}.cpp). ggml-alloc computes a unary op in its input's memory
#: (`ggml_op_can_inplace`: GGML_OP_UNARY), so their FFN holds one ffn-wide row; a gated FFN
#: holds gate, up and their GLU product (GGML_OP_GLU is not in place): three. Fused gate+up
#: models (phi3, chatglm, glm4, plamo: one `ffn_up` of 2 × ffn, then SWIGLU) hold three too.
UNGATED_FFN_ARCHS = frozenset({"arcee", "bloom", "codeshell", "falcon", "gpt2", "gptneox", "jais2", "mpt",
                               "nemotron", "phi2", "plm", "starcoder", "starcoder2"})
#: Parallel blocks: the FFN reads the attention's input and the attention output waits to be
#: added after it (src/models/falcon.cpp "use the attn norm", phi2.cpp, command-r.cpp,
#: cohere2.cpp `attn_out`), one more n_embd row alive through the FFN.
PARALLEL_BLOCK_ARCHS = frozenset({"falcon", "phi2", "command-r", "cohere2"})
#: MoE architectures whose loader takes one expert's FFN width as n_ff / n_expert_used when the
#: header has no `expert_feed_forward_length` (src/models/qwen3moe.cpp and the others listed:
#: "n_ff_exp = hparams.n_ff_exp() ? hparams.n_ff_exp() : n_ff / n_expert_used"); the others take
#: n_ff itself (Mixtral as `llama`, grok, cohere2moe) or require the key.
SHARED_FFN_MOE_ARCHS = frozenset({"qwen2moe", "qwen3moe", "qwen35moe", "qwen3next", "qwen3vlmoe", "qwen4exp",
                                  "glm4moe", "grovemoe", "hy_v3", "llada-moe", "mellum", "rnd1"})


@frozen
class Launch:
    """The llama-server flags that decide its allocations."""

    #: `-c` as passed (all slots together); 0 = the trained window.
    ctx: int
    #: Sequences (`n_seq_max`): `--parallel`, or the server's auto 4.
    slots: int = 1
    #: One KV stream shared by every slot (llama-server's auto slots, `--kv-unified`).
    unified: bool = False
    type_k: str = "f16"
    type_v: str = "f16"
    flash_attn: bool = True
    swa_full: bool = False
    ubatch: int = UBATCH
    batch: int = BATCH
    #: Output rows the reserve plans for (`n_outputs_max`); None = one per slot, as llama-server
    #: sets it. `llama-fit-params` leaves it at n_batch, so n_ubatch rows are reserved.
    outputs: int | None = None
    #: ik_llama.cpp's `-mla` and `-amb` (`sizing.ik_llama_memory`); llama.cpp has neither.
    mla: int = 3
    attn_max_batch: int = 0


@frozen
class Geometry:
    """`llama_context`'s context numbers for a launch."""

    n_ctx: int
    n_ctx_seq: int
    #: KV streams: 1 when unified, else one per slot.
    streams: int
    n_ubatch: int
    #: Cells per stream of the full-attention cache and of the sliding-window cache (0 = none).
    cells: int
    swa_cells: int
    #: n_swa (0 = no sliding-window layers).
    window: int


@frozen
class LlamaMemory:
    """Bytes llama-server allocates for one launch, with the rule behind each figure."""

    geometry: Geometry
    kv: int
    kv_swa: int
    state: int
    compute: int
    #: Lines "part: bytes = rule" for `swapgen show`.
    rules: tuple[str, ...] = ()

    @property
    def kv_total(self) -> int:
        return self.kv + self.kv_swa


def pad(n: int, to: int = CTX_PAD) -> int:
    """`GGML_PAD(n, to)`."""
    return -(-n // to) * to


def row_bytes(type_name: str, elements: int) -> int:
    """`ggml_row_size(type, elements)`: bytes of one cache row."""
    block_bytes, block = BLOCKS[type_name]
    return -(-elements // block) * block_bytes


def sliding_layers(meta: ModelMeta) -> tuple[tuple[bool, ...], int]:
    """(per-layer flags of the layers in llama.cpp's window cache, n_swa); ((), 0) = none."""
    layout = layer_layout(meta)
    if not layout.window:
        return (), 0
    return tuple(isinstance(layer, WINDOWED) for layer in layout.layers), layout.window


def geometry(layout: LayerLayout, meta: ModelMeta, launch: Launch) -> Geometry:
    """`llama_context::llama_context` and `llama_kv_cache_iswa::llama_kv_cache_iswa`."""
    slots = max(1, launch.slots)
    n_ctx = pad(launch.ctx or meta.context_length)
    if launch.unified:
        n_ctx_seq, streams = n_ctx, 1
    else:
        n_ctx_seq, streams = pad(n_ctx // slots), slots
        n_ctx = n_ctx_seq * slots
    n_batch = min(n_ctx, launch.batch)
    n_ubatch = min(n_batch, launch.ubatch)
    window = layout.window
    swa_cells = 0
    if window:
        swa_cells = n_ctx_seq if launch.swa_full else pad(min(n_ctx_seq, window * (slots if launch.unified else 1)
                                                              + n_ubatch))
    return Geometry(n_ctx, n_ctx_seq, streams, n_ubatch, n_ctx_seq, swa_cells, window)


def kv_bytes(layout: LayerLayout, launch: Launch, geo: Geometry) -> tuple[int, int, list[str]]:
    """(full-attention bytes, sliding-window bytes, rule lines): each cached layer's K and V rows
    (`n_embd_k_gqa(il)` / `n_embd_v_gqa(il)`, none for an MLA latent's V) in its cache's cells."""
    full = swa = 0
    full_layers = swa_layers = 0
    for layer in layout.attention:
        v = layer.value_elements
        row = row_bytes(launch.type_k, layer.key_elements) + (row_bytes(launch.type_v, v) if v else 0)
        if isinstance(layer, WINDOWED):
            swa += row * geo.swa_cells * geo.streams
            swa_layers += 1
        else:
            full += row * geo.cells * geo.streams
            full_layers += 1
    streams = f" × {geo.streams} streams" if geo.streams > 1 else ""
    types = launch.type_k if launch.type_k == launch.type_v else f"K {launch.type_k} / V {launch.type_v}"
    lines = []
    if full_layers:
        lines.append(f"KV full attention {gib_text(full)}: {full_layers} layers × {geo.cells} cells{streams} at {types}"
                     f" (n_ctx {geo.n_ctx}, per slot {geo.n_ctx_seq}; llama_kv_cache)")
    if swa_layers:
        share = f"{launch.slots} slots × " if launch.unified and launch.slots > 1 else ""
        how = ("--swa-full: every cell" if launch.swa_full else
               f"pad256(min({geo.cells}, {share}window {geo.window} + ubatch {geo.n_ubatch}))")
        lines.append(f"KV sliding window {gib_text(swa)}: {swa_layers} layers × {geo.swa_cells} cells{streams} = {how}"
                     " (llama_kv_cache_iswa)")
    return full, swa, lines


def state_bytes(meta: ModelMeta, launch: Launch, per_seq: int) -> tuple[int, list[str]]:
    """Recurrent state: max(1, slots) cells of `per_seq` bytes (`llama_memory_recurrent`)."""
    if per_seq <= 0:
        return 0, []
    cells = max(1, launch.slots)
    total = per_seq * cells
    return total, [f"recurrent state {gib_text(total)}: {counted(cells, 'cell')} × {per_seq} B "
                   "(llama_memory_recurrent)"]


def compute_bytes(layout: LayerLayout, meta: ModelMeta, launch: Launch, geo: Geometry) -> tuple[int, list[str]]:
    """The compute buffer `llama_context::sched_reserve` reserves: the prompt graph of n_ubatch
    tokens against every cell, with one output row per slot (`n_outputs_max`, llama-server's
    `output_limits.total`). ggml's graph allocator reuses a tensor's memory once its last
    consumer ran (ggml-alloc.c `ggml_gallocr_alloc_graph`), so the buffer is the largest set of
    tensors alive at once:

    - the KQ masks (`build_attn_inp_kq_mask`, src/llama-graph.cpp): n_kv × n_ubatch, f16 with
      flash attention, f32 without; one for the full cells and one for the window's cells.
      Inputs stay alive through every layer.
    - the attention block at n_ubatch rows, f32: Q and the attention output beside the
      resident n_embd rows (`RESIDENT_ROWS`), plus, without flash attention, one layer's scores
      n_kv × n_ubatch × heads (`build_attn_mha`: `ggml_mul_mat(k, q)`, softmax in place).
    - the FFN at n_ubatch rows: gate, up and their product beside the resident rows, or one
      row without a gate (`build_ffn`, `UNGATED_FFN_ARCHS`; `build_moe_ffn` with the used
      experts' rows), plus the waiting attention output of a parallel block
      (`PARALLEL_BLOCK_ARCHS`). It reuses the freed scores.
    - after the last layer, the logits of the outputs: n_vocab × min(n_ubatch, outputs) f32
      beside the resident rows. They reuse the block the masks leave when it is large enough
      (ggml-alloc's best fit), else they come on top of it.

    So: masks + max(attention, FFN), or masks + logits + resident rows when the logits outgrow
    the masks and the layers.
    """
    tokens = geo.n_ubatch
    rows = layout.attention
    mask_bytes = 2 if launch.flash_attn else 4
    widths = []
    if any(not isinstance(layer, WINDOWED) for layer in rows):
        widths.append(geo.cells)
    if any(isinstance(layer, WINDOWED) for layer in rows):
        widths.append(geo.swa_cells)
    masks = sum(n_kv * tokens * mask_bytes for n_kv in widths)
    n_kv = max(widths, default=0)
    scores = 0 if launch.flash_attn or not rows else n_kv * tokens * max(meta.head_count, 1) * 4
    embd = meta.embedding_length
    ffn = meta.feed_forward_length
    routed = 0
    if meta.expert_count > 0 and meta.expert_used_count > 0:
        ffn = expert_width(meta) * meta.expert_used_count
        routed = embd * meta.expert_used_count  # each token's input, once per chosen expert (mul_mat_id)
    mla = layout.mla
    if mla is not None:  # MLA attends in the latent: Q absorbed to rank + rope, output rank then V
        q = mla.heads * (mla.kv_lora_rank + mla.rope_dims)
        out = mla.heads * (mla.kv_lora_rank + mla.head_value_length)
    else:
        q = meta.head_count * meta.key_length
        out = meta.head_count * meta.value_length
    resident = RESIDENT_ROWS * embd * tokens * 4
    attention = resident + scores + (q + out) * tokens * 4
    ffn_rows = 1 if meta.arch in UNGATED_FFN_ARCHS else 3
    waiting = embd if meta.arch in PARALLEL_BLOCK_ARCHS else 0
    feed_forward = resident + (ffn_rows * ffn + routed + waiting) * tokens * 4
    feed_forward = max(feed_forward, resident + _recurrent_block(meta, launch) * tokens * 4)
    outputs = min(tokens, launch.outputs or max(1, launch.slots))
    logits = max(meta.vocab_size, 0) * outputs * 4
    tail = logits + resident
    total = masks + max(attention, feed_forward) if tail <= masks else masks + max(attention, feed_forward, tail)
    mask_widths = " + ".join(str(w) for w in widths) or 0
    lines = [f"compute buffer {gib_text(total)} = KQ masks {gib_text(masks)} ({mask_widths} cells"
             f" × ubatch {tokens} × {mask_bytes} B) + max(attention {gib_text(attention)}, "
             f"FFN {gib_text(feed_forward)}) "
             f"(ubatch × ({RESIDENT_ROWS} × n_embd {embd} + Q {q} + out {out} | + {ffn_rows} × ffn {ffn}) × 4 B"
             + (f"; scores {gib_text(scores)}: flash attention off, {n_kv} × {tokens} × {meta.head_count} heads × 4 B"
                if scores else "") + ")"
             + f", or the logits {gib_text(logits)} (vocab {meta.vocab_size} × {outputs} outputs × 4 B) when larger"
             " (llama_context::sched_reserve)"]
    return total, lines


def expert_width(meta: ModelMeta) -> int:
    """One expert's FFN width as llama.cpp's loader sets it (`SHARED_FFN_MOE_ARCHS`)."""
    if meta.expert_feed_forward_length > 0:
        return meta.expert_feed_forward_length
    if meta.arch in SHARED_FFN_MOE_ARCHS:
        return meta.feed_forward_length // meta.expert_used_count
    return meta.feed_forward_length


def _recurrent_block(meta: ModelMeta, launch: Launch) -> int:
    """f32 elements per token of a recurrent layer (`llm_build_mamba_base::build_mamba2_layer`,
    src/models/mamba-base.cpp):
    the in-projection (z, x, B, C, dt), the conv window and its output, the scan output, and the
    states of every sequence spread over the ubatch."""
    if meta.recurrent_layers <= 0 or meta.ssm_inner_size <= 0:
        return 0
    inner, conv = meta.ssm_inner_size, meta.ssm_inner_size + 2 * meta.ssm_group_count * meta.ssm_state_size
    heads = max(1, inner // 64)
    states = meta.ssm_state_size * inner * max(1, launch.slots) // max(1, min(launch.ubatch, UBATCH))
    return inner + conv + heads + 2 * conv + inner + states


def allocations(meta: ModelMeta, launch: Launch, state_per_seq: int = 0,
                layout: LayerLayout | None = None) -> LlamaMemory:
    """Everything llama-server allocates beside the weights for `launch`; `layout` is `meta`'s
    (`metadata.layers.layer_layout`), built here when not given."""
    layout = layer_layout(meta) if layout is None else layout
    geo = geometry(layout, meta, launch)
    full, swa, kv_lines = kv_bytes(layout, launch, geo)
    state, state_lines = state_bytes(meta, launch, state_per_seq)
    compute, compute_lines = compute_bytes(layout, meta, launch, geo)
    return LlamaMemory(geo, full, swa, state, compute, (*kv_lines, *state_lines, *compute_lines))
