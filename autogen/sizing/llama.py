"""llama-server sizing: context, GPU layers, MoE expert offload and KV cache type from a VRAM budget.

Pure arithmetic on bytes (reference `spec-discovery-generate.md` §4, restated for llama.cpp
b11434). Speed first, then context:

1. Overhead = a fixed base + the device runtime + the compute buffer (vocab, ubatch, width)
   + the projector when it sits on the GPU (§4.4).
2. KV type: a pin wins; else f16 when the minimum context fits on the GPU at f16 with every
   layer there (the file size, as §4.3), else q8_0 — for MoE models too, decided before any
   expert moves: a q8_0 cache costs no speed where each layer of CPU experts does, so experts are
   never moved to keep f16; and once the minimum fits at f16, f16 stays and experts (not a
   quantised cache) buy the context above it.
3. Context: with every layer on the GPU, the largest context up to the trained length (and the
   ladder top) that fits. If that is under the minimum (32768 or the trained length), a dense
   model still takes the largest context ≥ 4096 that fits on the GPU, else offloads layers
   (`-ngl`) to reach the minimum. A MoE model whose whole-GPU context is under its target
   (the trained length, at most 65536, `moeCtxTarget` §4.7) moves the experts of the fewest
   layers to the CPU (`--n-cpu-moe`) that reach the target; only with every expert on the CPU
   does the context shrink (to the minimum at least, offloading layers below it) (§4.7–4.9).
   A pinned ctx is used as given. `--n-cpu-moe N` moves the experts of the first N layers, so the
   leading dense layers of DeepSeek / Kimi / GLM-MoE (`leading_dense_blocks`) count in N but move
   nothing: experts per MoE layer = expert bytes / (blocks − leading).
4. `--parallel N` multiplies the KV cost; `-c` is N × the per-slot context.
5. Recurrent state (SSM / linear attention, `KvCost.state_bytes_per_seq`) is a fixed charge per
   sequence llama-server allocates: `--parallel N` → N; no `--parallel` → its auto 4 slots
   (`AUTO_SLOTS`). With flash attention off the attention scores of one layer are materialised:
   -c × ubatch × heads × 4 bytes (`attention_scores`), a compute-buffer charge that grows with ctx.

Raises `ModelError` (→ a `# SKIPPED` line) instead of guessing when the header lacks what the
math needs. Deliberate differences from the reference: no context-checkpoint charge (sliding-window
layers are already charged as full attention, which over-covers the small SWA checkpoints) and one
MoE share table.
"""

from __future__ import annotations

import math

from attrs import frozen

from autogen.errors import ModelError
from autogen.metadata.kvcost import F16_BYTES, KV_TYPE_BYTES, KvCost, kv_bytes
from autogen.metadata.model_meta import ModelMeta
from autogen.numfmt import GIB

#: Fixed charge on top of weights, KV and compute buffers (reference §4.1 `vramOverheadGB`).
BASE_OVERHEAD = GIB // 2
#: Device runtime by backend build variant (reference §4.1 newest split); others 0.4 GB.
RUNTIME_GB = {"cuda": 0.3, "rocm": 0.8, "hip": 0.8, "vulkan": 0.4}
DEFAULT_RUNTIME_GB = 0.4
#: Compute buffer when vocab or width is unknown (replaces runtime + graph, reference §4.4).
COMPUTE_FALLBACK = int(0.17 * GIB)
#: llama-server's default physical batch (`-ub`, b11434); we never change it for chat models.
UBATCH = 512
#: Compute-graph terms of §4.4: logits rows are capped at 1024 tokens, 8 activation copies.
LOGITS_TOKEN_CAP = 1024
ACTIVATION_COPIES = 8
#: Context granularity; contexts below it only when the trained window is smaller.
CTX_STEP = 4096
#: Trained window assumed when the header has none (reference §4.1).
NATIVE_CTX_FALLBACK = 32768
#: Top rung of the reference's default context ladder (`denseCtxLadder[0]`).
LADDER_TOP = 1048576
#: Minimum context worth offloading for (`denseMinCtx`), capped by the trained window.
MIN_CTX = 32768
#: Context a MoE model buys by moving experts to the CPU (`moeCtxTarget`).
MOE_CTX_TARGET = 65536
#: Projector charge: the file (assumed 1 GiB when unknown) + CLIP compute buffer, which needs
#: vision dims we do not read; the reference's fallback `visionOverheadGB` is 1.0 (§4.10).
MMPROJ_ASSUMED = GIB
CLIP_BUFFER = GIB
#: Share of a MoE file held by expert tensors when the header's tensor scan gave none
#: (reference §4.1 `genMoeShare`).
MOE_SHARE = {"gemma4": 0.88, "qwen3": 0.90, "qwen3moe": 0.90, "qwen35moe": 0.90, "llama": 0.80,
             "llama4": 0.80, "lfm2": 0.78, "lfm2moe": 0.78}
MOE_SHARE_DEFAULT = 0.85
#: Cache types stored unquantized (2 bytes per element or more); every other type needs flash
#: attention for V (llama.cpp refuses a quantized V cache with `-fa off`).
FLOAT_KV_TYPES = frozenset(t for t, size in KV_TYPE_BYTES.items() if size >= F16_BYTES)
#: Slots of llama-server b11434 without `--parallel` (tools/server/server.cpp: "n_parallel is set
#: to auto, using n_parallel = 4 and kv_unified = true"): one KV pool of -c, but 4 sequences.
AUTO_SLOTS = 4
#: Attention scores without flash attention: f32 (llama-graph.cpp `build_attn_mha`: kq =
#: ggml_mul_mat(k, q) with GGML_PREC_F32, then ggml_soft_max_ext in place).
SCORE_BYTES = 4


def gb(n_bytes: float) -> str:
    """Display form of a byte count in GiB, two decimals."""
    return f"{n_bytes / GIB:.2f}"


@frozen
class LlamaKnobs:
    """The user's sizing choices for one model, already merged (extra_args > override > settings)."""

    #: Per-slot context; None = sized here.
    ctx: int | None = None
    #: `-ctk/-ctv` type; None = f16 or q8_0 by budget.
    kv_type: str | None = None
    parallel: int = 1
    #: "on" | "off" | "auto"; None = llama-server's default (auto).
    flash_attn: str | None = None
    #: Pinned `-ngl` / `--n-cpu-moe`; None = placed here.
    ngl: int | None = None
    n_cpu_moe: int | None = None
    #: Sequences llama-server allocates recurrent state for; None = `parallel` (AUTO_SLOTS
    #: when the command has no `--parallel`).
    sequences: int | None = None


@frozen
class LlamaSizing:
    """What `size_llama` decided, with every number it used (bytes; GiB derived)."""

    #: Per-slot context; `-c` is ctx × parallel.
    ctx: int
    parallel: int
    #: `-ngl`; block_count + 1 = every layer and the output layer on the GPU.
    ngl: int
    #: `--n-cpu-moe` (0 = none).
    n_cpu_moe: int
    kv_type: str
    #: KV bytes per token at kv_type, one slot.
    kv_bytes_per_token: int
    #: KV bytes of all slots at ctx.
    kv_total: int
    weights: int
    compute: int
    projector: int
    overhead: int
    est_vram: int
    est_ram: int
    budget: int
    #: The model's block_count (ngl above it = all layers).
    blocks: int
    #: Short reason for the comment line ("largest ctx that fits on the GPU").
    why: str
    #: One line per number, for `swapgen show`.
    notes: tuple[str, ...] = ()
    #: Recurrent state of every sequence and attention scores (flash attention off), part of
    #: `overhead`.
    state: int = 0
    scores: int = 0

    @property
    def ctx_total(self) -> int:
        return self.ctx * self.parallel

    @property
    def full_gpu(self) -> bool:
        return self.n_cpu_moe == 0 and self.ngl > self.blocks


def runtime_bytes(variant: str) -> int:
    """Device runtime charge for a backend build variant ("cuda", "rocm", "vulkan", "cpu", "")."""
    return int(RUNTIME_GB.get(variant.strip().lower(), DEFAULT_RUNTIME_GB) * GIB)


def compute_buffer(meta: ModelMeta, ubatch: int, runtime: int) -> tuple[int, str]:
    """Compute-buffer charge (reference §4.4) and its note."""
    if meta.vocab_size <= 0 or meta.embedding_length <= 0:
        return COMPUTE_FALLBACK, f"compute buffer {gb(COMPUTE_FALLBACK)} GB (flat: vocab or width unknown)"
    logits = meta.vocab_size * min(ubatch, LOGITS_TOKEN_CAP) * 4
    acts = ubatch * meta.embedding_length * ACTIVATION_COPIES * 4
    total = runtime + logits + acts
    return total, (f"compute buffer {gb(total)} GB = runtime {gb(runtime)} + logits {meta.vocab_size}×"
                   f"{min(ubatch, LOGITS_TOKEN_CAP)}×4 B + activations {ubatch}×{meta.embedding_length}×"
                   f"{ACTIVATION_COPIES}×4 B")


def projector_charge(mmproj_bytes: int) -> int:
    """VRAM of a GPU-placed projector: its file plus the CLIP compute buffer (reference §4.10)."""
    return (mmproj_bytes if mmproj_bytes > 0 else MMPROJ_ASSUMED) + CLIP_BUFFER


def expert_bytes(meta: ModelMeta, size: int) -> tuple[int, str]:
    """Bytes of expert tensors in the file: from the tensor scan, else the family share table."""
    if meta.expert_tensor_bytes > 0 and meta.tensor_bytes > 0:
        share = meta.expert_tensor_bytes / meta.tensor_bytes
        how = "tensor scan"
    else:
        share = MOE_SHARE.get(meta.arch, MOE_SHARE_DEFAULT)
        how = f"assumed share for {meta.arch or 'unknown arch'}"
    return int(size * share), f"experts {share:.1%} of the weights ({how})"


def attention_scores(meta: ModelMeta, cost: KvCost, n_kv: int, n_tokens: int, flash_attn: str | None) -> int:
    """Bytes of one layer's attention scores when flash attention is off: n_kv × n_tokens ×
    heads, f32 (`build_attn_mha`; the graph allocator reuses the buffer across layers). 0 with
    flash attention on or auto (llama-server's default: on where the backend supports it)
    and for models without attention."""
    if flash_attn != "off" or not cost.bytes_per_token:
        return 0
    return n_kv * n_tokens * max(meta.head_count, 1) * SCORE_BYTES


def max_ctx(cost: KvCost, room: int, element_bytes: float, parallel: int, scores_per_token: int = 0) -> int:
    """Largest per-slot context whose KV (and attention scores, `scores_per_token` bytes per
    token of -c) fits in `room` bytes (0 if none; huge if KV-free)."""
    if room <= 0:
        return 0
    if not cost.bytes_per_token:
        return LADDER_TOP

    def need(ctx: int) -> int:
        return kv_bytes(cost, ctx, element_bytes=element_bytes, parallel=parallel) + scores_per_token * ctx * parallel

    probe = 1 << 20
    ctx = int(room // (need(probe) / probe))
    while ctx > 0 and need(ctx) > room:
        ctx -= 1
    return ctx


def fit_ctx(limit: int, ceiling: int) -> int:
    """`limit` capped at `ceiling`, rounded down to CTX_STEP unless it is the ceiling itself."""
    ctx = min(limit, ceiling)
    if ctx == ceiling or ctx < CTX_STEP:
        return ctx
    return ctx // CTX_STEP * CTX_STEP


@frozen
class Weights:
    """The model file as placement sees it."""

    size: int
    blocks: int
    #: Bytes of expert tensors (0 = dense).
    experts: int = 0
    #: Leading layers with a dense FFN: `--n-cpu-moe N` counts them but they move nothing.
    leading: int = 0

    def cpu_experts(self, ncm: int) -> int:
        """Expert bytes `--n-cpu-moe ncm` keeps on the CPU: those of layers leading..ncm-1."""
        moved = max(0, min(ncm, self.blocks) - self.leading)
        return -(-self.experts * moved // (self.blocks - self.leading)) if moved else 0


def _place(w: Weights, *, kv: int, overhead: int, budget: int, ngl_pin: int | None,
           ncm_pin: int | None) -> tuple[int, int, str]:
    """(ngl, n_cpu_moe, note) that fit `budget` (reference §4.8–4.9, without the crossover)."""
    blocks, all_layers = w.blocks, w.blocks + 1
    if ngl_pin is not None or ncm_pin is not None:
        ngl = all_layers if ngl_pin is None else ngl_pin
        ncm = 0 if ncm_pin is None else min(ncm_pin, blocks)
        return ngl, ncm, "placement pinned"
    if w.size + kv + overhead <= budget:
        return all_layers, 0, f"all {blocks} layers on the GPU"
    room = budget - overhead
    if w.experts > 0:
        moe_layers = blocks - w.leading
        per_layer = w.experts / moe_layers
        ncm = w.leading + max(1, math.ceil((w.size + kv + overhead - budget) / per_layer))
        while ncm < blocks and _price(w, kv=kv, overhead=overhead, ngl=all_layers, ncm=ncm)[0] > budget:
            ncm += 1
        if ncm <= blocks and _price(w, kv=kv, overhead=overhead, ngl=all_layers, ncm=ncm)[0] <= budget:
            dense = f", after {w.leading} dense layers" if w.leading else ""
            return all_layers, ncm, (f"experts of {ncm - w.leading} of {moe_layers} MoE layers on the CPU "
                                     f"({gb(per_layer)} GB each{dense})")
        rest = (w.size - w.experts + kv) / blocks
        ngl = max(0, min(blocks, int(room // rest)))
        return ngl, blocks, f"all experts on the CPU and {ngl} of {blocks} layers on the GPU"
    per_layer = (w.size + kv) / blocks
    ngl = max(0, min(blocks, int(room // per_layer)))
    return ngl, 0, f"{ngl} of {blocks} layers on the GPU ({gb(per_layer)} GB each with KV)"


def _price(w: Weights, *, kv: int, overhead: int, ngl: int, ncm: int) -> tuple[int, int]:
    """(VRAM, RAM) of a placement: CPU experts leave the GPU; the rest splits by ngl/blocks."""
    cpu_experts = w.cpu_experts(ncm)
    rest = w.size - cpu_experts + kv
    on_gpu = rest * min(ngl, w.blocks) // w.blocks
    return on_gpu + overhead, cpu_experts + rest - on_gpu


def choose_kv_type(cost: KvCost, knobs: LlamaKnobs, room: int, min_ctx: int) -> tuple[str, str]:
    """(type, note): a pin wins; f16 when the minimum context fits on the GPU at f16, else q8_0."""
    if knobs.kv_type:
        return knobs.kv_type, f"KV type {knobs.kv_type} (pinned)"
    if knobs.flash_attn == "off":
        return "f16", "KV type f16 (flash attention off: llama-server cannot quantize V without it)"
    fits = max_ctx(cost, room, KV_TYPE_BYTES["f16"], knobs.parallel)
    if fits >= min_ctx:
        return "f16", f"KV type f16: {min_ctx} tokens fit on the GPU at f16 ({fits} would)"
    return "q8_0", f"KV type q8_0: only {fits} of {min_ctx} tokens fit on the GPU at f16"


def _moe_ctx(cost: KvCost, room_moe: int, element_bytes: float, parallel: int, scores_per_token: int,
             target: int, min_ctx: int) -> tuple[int, str]:
    """(ctx, why) of a MoE model that misses its target on the GPU: the target when it fits with
    every expert on the CPU (`_place` then moves the fewest), else the largest ctx that does, but
    not under the minimum (layers leave the GPU too)."""
    fits = fit_ctx(max_ctx(cost, room_moe, element_bytes, parallel, scores_per_token), target)
    if fits >= target:
        return target, f"experts to the CPU for ctx {target}"
    if fits >= min_ctx:
        return fits, f"all experts on the CPU, largest ctx that fits, under {target}"
    return min_ctx, f"experts and layers to the CPU for ctx {min_ctx}"


def _weights(meta: ModelMeta, size: int) -> tuple[Weights, str]:
    """The file's bytes for placement, and the MoE note ("" for a dense model)."""
    if meta.expert_count <= 0:
        return Weights(size=size, blocks=meta.block_count), ""
    leading = meta.leading_dense_blocks
    if leading >= meta.block_count:
        raise ModelError(f"{leading} leading dense layers of {meta.block_count}: no MoE layer to place experts of")
    experts, note = expert_bytes(meta, size)
    dense = f", first {leading} layers dense (--n-cpu-moe counts them)" if leading else ""
    return Weights(size=size, blocks=meta.block_count, experts=experts, leading=leading), note + dense


def _recurrent_state(cost: KvCost, knobs: LlamaKnobs) -> tuple[int, str]:
    """Recurrent state of every sequence llama-server allocates, and its note ("" when none)."""
    per_seq = cost.state_bytes_per_seq
    if not per_seq:
        return 0, ""
    seqs = knobs.sequences or knobs.parallel
    return per_seq * seqs, f"recurrent state {gb(per_seq * seqs)} GB = {per_seq} B × {seqs} sequences"


def size_llama(meta: ModelMeta, cost: KvCost | None, *, size: int, budget: int, knobs: LlamaKnobs,
               runtime: int, projector: int = 0) -> LlamaSizing:
    """Size one chat model for llama-server. Raises ModelError when the header is insufficient."""
    blocks = meta.block_count
    if blocks <= 0:
        raise ModelError("GGUF header has no block_count: cannot place layers on the GPU")
    if cost is None or cost.bytes_per_token is None:
        why = cost.note if cost is not None else "no attention metadata"
        raise ModelError(f"KV cache cost unknown ({why}): cannot size the context")
    if size <= 0:
        raise ModelError("model size unknown: cannot size the context")
    if knobs.kv_type and knobs.kv_type not in FLOAT_KV_TYPES and knobs.flash_attn == "off":
        raise ModelError(f"kv_type {knobs.kv_type} needs flash attention: llama-server refuses a "
                         "quantized V cache with flash_attn off (set flash_attn: auto or kv_type: f16)")
    w, experts_note = _weights(meta, size)
    compute, compute_note = compute_buffer(meta, UBATCH, runtime)
    state, state_note = _recurrent_state(cost, knobs)
    fixed = BASE_OVERHEAD + compute + projector + state
    if fixed >= budget:
        raise ModelError(f"VRAM budget {gb(budget)} GB does not cover llama-server's fixed overhead "
                         f"{gb(fixed)} GB")
    model_max = meta.context_length if meta.context_length > 0 else NATIVE_CTX_FALLBACK
    top = min(model_max, LADDER_TOP)
    min_ctx = knobs.ctx if knobs.ctx else min(MIN_CTX, model_max)
    room_full = budget - size - fixed
    parallel = knobs.parallel
    scores_per_token = attention_scores(meta, cost, 1, UBATCH, knobs.flash_attn)

    kv_type, kv_type_note = choose_kv_type(cost, knobs, room_full, min_ctx)
    eb = KV_TYPE_BYTES[kv_type]
    fits_full = max_ctx(cost, room_full, eb, parallel, scores_per_token)

    moe_target = min(top, MOE_CTX_TARGET)
    if knobs.ctx:
        ctx, why = knobs.ctx, "ctx pinned"
    elif w.experts and fits_full < moe_target:
        ctx, why = _moe_ctx(cost, budget - (size - w.experts) - fixed, eb, parallel, scores_per_token,
                            moe_target, min_ctx)
    elif fits_full >= min(CTX_STEP, model_max):
        ctx = fit_ctx(fits_full, top)
        if ctx == model_max:
            why = "trained length fits on the GPU"
        elif ctx == LADDER_TOP:
            why = "ladder top fits on the GPU"
        elif ctx >= min_ctx:
            why = "largest ctx that fits on the GPU"
        else:
            why = f"largest ctx that fits on the GPU, under {min_ctx}"
    else:
        ctx, why = min_ctx, f"layers offloaded for ctx {min_ctx}"
    if scores_per_token and not knobs.ctx and ctx * parallel * scores_per_token > budget - fixed:
        # offloading layers frees weights and KV, never the scores: they bound the context
        ctx = fit_ctx((budget - fixed) // (parallel * scores_per_token), top)
        if ctx <= 0:
            raise ModelError("flash attention off: the attention scores of one token do not fit the budget")
        why = f"attention scores (flash attention off) cap ctx at {ctx}; {why}"

    kv_total = kv_bytes(cost, ctx, element_bytes=eb, parallel=parallel)
    scores = scores_per_token * ctx * parallel
    overhead = fixed + scores
    ngl, ncm, place_note = _place(w, kv=kv_total, overhead=overhead, budget=budget, ngl_pin=knobs.ngl,
                                  ncm_pin=knobs.n_cpu_moe)
    vram, ram = _price(w, kv=kv_total, overhead=overhead, ngl=ngl, ncm=ncm)
    if knobs.ctx and (ncm or ngl <= blocks):
        why = f"ctx pinned; {place_note}"
    per_token = kv_bytes(cost, 1 << 20, element_bytes=eb) >> 20
    extras = [state_note] if state else []
    if scores:
        extras.append(f"attention scores {gb(scores)} GB = -c {ctx * parallel} × ubatch {UBATCH} × "
                      f"{max(meta.head_count, 1)} heads × {SCORE_BYTES} B (flash attention off)")
    notes = [
        f"weights {gb(size)} GB, {blocks} layers" + (f", MoE: {experts_note}" if w.experts else ""),
        f"KV cost {cost.bytes_per_token} B/token at f16 ({cost.note})",
        kv_type_note,
        compute_note,
        *extras,
        f"overhead {gb(overhead)} GB = base {gb(BASE_OVERHEAD)} + compute {gb(compute)} + projector "
        f"{gb(projector)}" + (f" + state {gb(state)}" if state else "") + (f" + scores {gb(scores)}" if scores else ""),
        f"ctx {ctx}" + (f" × {parallel} slots" if parallel > 1 else "") + f": {why} (trained {model_max})",
        f"KV {gb(kv_total)} GB at {kv_type} ({per_token} B/token per slot)",
        f"placement: {place_note}",
        f"estimate: VRAM {gb(vram)} GB of {gb(budget)} GB budget, RAM {gb(ram)} GB"
        + (" (ABOVE BUDGET)" if vram > budget else ""),
    ]
    return LlamaSizing(ctx=ctx, parallel=parallel, ngl=ngl, n_cpu_moe=ncm, kv_type=kv_type,
                       kv_bytes_per_token=per_token, kv_total=kv_total, weights=size, compute=compute,
                       projector=projector, overhead=overhead, est_vram=vram, est_ram=ram, budget=budget,
                       blocks=blocks, why=why, notes=tuple(notes), state=state, scores=scores)
