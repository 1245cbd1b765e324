"""llama-server sizing: context, GPU layers, MoE expert offload and KV cache type from a VRAM budget.

Pure arithmetic on bytes, on llama.cpp b11434's own allocations (`llama_memory.allocations`:
KV cache with its sliding-window part, recurrent state, compute buffer, each at the exact
launch). Speed first, then context:

1. Fixed charge = a base + the device runtime + the projector when it sits on the GPU
   (docs/maintainers/sizing.md#device-side-charges-a-cpu-run-cannot-show). Everything that grows with the
   context — KV cells, the KQ masks and scores of the compute buffer — is priced at the context being tried.
2. KV type: a pin wins; else f16 when the minimum context fits on the GPU at f16 with every
   layer there, else q8_0 — for MoE models too, decided before any expert moves: a q8_0 cache
   costs no speed where each layer of CPU experts does, so experts are never moved to keep f16;
   and once the minimum fits at f16, f16 stays and experts (not a quantised cache) buy the
   context above it.
3. Context: with every layer on the GPU, the largest context up to the trained length (and the
   ladder top) that fits. If that is under the minimum (32768 or the trained length), a dense
   model still takes the largest context ≥ 4096 that fits on the GPU, else offloads layers
   (`-ngl`) to reach the minimum. A MoE model whose whole-GPU context is under its target
   (the trained length, at most 65536) moves the experts of the fewest layers to the CPU
   (`--n-cpu-moe`) that reach the target; only with every expert on the CPU does the context
   shrink (to the minimum at least, offloading layers below it). Offloading frees weights and
   KV, never the compute buffer or the recurrent state: they cap the context. A pinned ctx is
   used as given. `--n-cpu-moe N` moves the experts of the first N layers, so the leading dense
   layers of DeepSeek / Kimi / GLM-MoE (`leading_dense_blocks`) count in N but move nothing:
   experts per MoE layer = expert bytes / (blocks − leading).
4. `--parallel N` gives each of N slots its own KV stream; `-c` is N × the per-slot context.
   Without it llama-server runs 4 slots (`AUTO_SLOTS`) over one shared pool of `-c` cells.

Raises `ModelError` (→ a `# SKIPPED` line) instead of guessing when the header lacks what the
math needs. Context checkpoints of sliding-window models live in host memory, not charged here.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import attrs
from attrs import field, frozen

from autogen.errors import ModelError
from autogen.footprint import HOST_DEVICE, DeviceMemory, Fact, Gap, MemoryRecord, Source
from autogen.metadata.kvcost import F16_BYTES, KV_TYPE_BYTES, KvCost, kv_bytes
from autogen.metadata.layers import LayerLayout, layer_layout
from autogen.metadata.model_meta import ModelMeta
from autogen.numfmt import GIB, gib_text
from autogen.sizing.correction import NO_CORRECTION, EngineCorrection
from autogen.sizing.curves import ContextCurve, ContextPlan, sample_contexts
from autogen.sizing.ik_llama_memory import DEFAULT_MLA
from autogen.sizing.llama_memory import Launch, LlamaMemory, allocations
from autogen.sizing.projector import ProjectorCharge

#: Device-side charges llama.cpp's own report does not show
#: (docs/maintainers/sizing.md#device-side-charges-a-cpu-run-cannot-show): a base for the driver context,
#: library workspaces and the host-visible output buffer, and the runtime of each backend build.
BASE_OVERHEAD = GIB // 2
RUNTIME_GB = {"cuda": 0.3, "rocm": 0.8, "hip": 0.8, "vulkan": 0.4}
DEFAULT_RUNTIME_GB = 0.4
#: Context granularity; contexts below it only when the trained window is smaller.
CTX_STEP = 4096
#: Trained window assumed when the header has none (docs/maintainers/sizing.md#context-cache-type-and-placement).
NATIVE_CTX_FALLBACK = 32768
#: Top rung of the Go original's default context ladder (`denseCtxLadder[0]`).
LADDER_TOP = 1048576
#: Minimum context worth offloading for (`denseMinCtx`), capped by the trained window.
MIN_CTX = 32768
#: Context a MoE model buys by moving experts to the CPU (`moeCtxTarget`).
MOE_CTX_TARGET = 65536
#: Share of a MoE file held by expert tensors when the header's tensor scan gave none
#: (the Go original's `genMoeShare`).
MOE_SHARE = {"gemma4": 0.88, "qwen3": 0.90, "qwen3moe": 0.90, "qwen35moe": 0.90, "llama": 0.80,
             "llama4": 0.80, "lfm2": 0.78, "lfm2moe": 0.78}
MOE_SHARE_DEFAULT = 0.85
#: Cache types stored unquantized (2 bytes per element or more); every other type needs flash
#: attention for V (llama.cpp refuses a quantized V cache with `-fa off`).
FLOAT_KV_TYPES = frozenset(t for t, size in KV_TYPE_BYTES.items() if size >= F16_BYTES)
#: What a llama-server allocates for a launch (`EngineRow.memory`: `llama_memory.allocations`,
#: `ik_llama_memory.ik_allocations`).
Rules = Callable[[ModelMeta, Launch, int, LayerLayout], LlamaMemory]
#: Slots of llama-server b11434 without `--parallel` (tools/server/server.cpp: "n_parallel is set
#: to auto, using n_parallel = 4 and kv_unified = true"): one KV pool of -c, but 4 sequences.
AUTO_SLOTS = 4


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
    #: Sequences llama-server runs; None = `parallel` (AUTO_SLOTS over one shared KV pool when
    #: the command has no `--parallel`).
    sequences: int | None = None
    #: `--kv-unified` with an explicit `--parallel`: one KV stream for every slot.
    kv_unified: bool = False
    #: `--swa-full`: sliding-window layers keep every cell.
    swa_full: bool = False
    #: ik_llama.cpp only (docs/maintainers/sizing.md#ik_llamacpp): `-mla` (None = its default,
    #: 3), `-amb` in MiB (0 = none), `-rtr` (weights loaded without mmap and repacked).
    mla: int | None = None
    attn_max_batch: int = 0
    run_time_repack: bool = False


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
    #: Recurrent state of every sequence and the device runtime, part of `overhead`.
    state: int = 0
    runtime: int = 0
    #: llama.cpp's allocations at the chosen launch, part by part (None for embedding models).
    memory: LlamaMemory | None = None
    #: A speculative-decoding draft's weights and its context's allocations (0 / None without).
    draft_weights: int = 0
    draft_memory: LlamaMemory | None = None
    #: swapgen's own figures for the chosen launch, on one device ("GPU0"; the emitter spreads
    #: them over several), and the figures the decision used: the same, or corrected by the
    #: engine's readings (`sizing.correction`).
    estimate: MemoryRecord | None = None
    decided: MemoryRecord | None = None
    #: The byte figures of the decision with their reasons (weights, KV, state, compute, the fixed
    #: charges, VRAM, RAM), as `swapgen show` prints them: `decided` is made of the same figures.
    facts: tuple[Fact, ...] = ()
    #: The device-side charges beside llama.cpp's own parts (runtime, base, projector, draft):
    #: what the estimate's `unseen` bytes are made of.
    charges: tuple[Fact, ...] = ()
    #: What the context could have been at each length and cache type (`LlamaContext.plan`);
    #: None for embedding models.
    context: LlamaContext | None = field(default=None, eq=False)

    def fact(self, name: str) -> Fact | None:
        return next((f for f in self.facts if f.name == name), None)

    @property
    def ctx_total(self) -> int:
        return self.ctx * self.parallel

    @property
    def full_gpu(self) -> bool:
        return self.n_cpu_moe == 0 and self.ngl > self.blocks


@frozen
class DraftLoad:
    """A speculative-decoding draft (`-md`) as sizing sees it: all its layers on the GPU
    (`-ngld`), and a context of its own made from the main one's parameters (llama.cpp
    common/speculative.cpp `common_base_params_to_speculative`: the same `-c`, slots and
    batches, the cache types of `-ctkd`/`-ctvd`, which swapgen sets to the main cache's)."""

    meta: ModelMeta
    cost: KvCost
    weights: int

    @property
    def layers(self) -> int:
        """`-ngld`: every block and the output layer."""
        return self.meta.block_count + 1


def runtime_bytes(build: str) -> int:
    """Device runtime charge for a backend's build ("cuda", "rocm", "vulkan", "cpu", "")."""
    return int(RUNTIME_GB.get(build.strip().lower(), DEFAULT_RUNTIME_GB) * GIB)


def expert_bytes(meta: ModelMeta, size: int) -> tuple[int, str]:
    """Bytes of expert tensors in the file: from the tensor scan, else the family share table."""
    if meta.expert_tensor_bytes > 0 and meta.tensor_bytes > 0:
        share = meta.expert_tensor_bytes / meta.tensor_bytes
        how = "tensor scan"
    else:
        share = MOE_SHARE.get(meta.arch, MOE_SHARE_DEFAULT)
        how = f"assumed share for {meta.arch or 'unknown arch'}"
    return int(size * share), f"experts {share:.1%} of the weights ({how})"


def max_ctx(need: Callable[[int], int], room: int, ceiling: int) -> int:
    """Largest per-slot context ≤ `ceiling` whose `need(ctx)` bytes fit in `room` (0 if none).
    `need` never falls as the context grows (cells, masks and scores all grow with it)."""
    if room <= 0 or need(1) > room:
        return 0
    low, high = 1, ceiling
    while low < high:
        mid = (low + high + 1) // 2
        if need(mid) <= room:
            low = mid
        else:
            high = mid - 1
    return low


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
    """(ngl, n_cpu_moe, note) that fit `budget` (docs/maintainers/sizing.md#context-cache-type-and-placement,
    without the crossover)."""
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
                                     f"({gib_text(per_layer)} each{dense})")
        rest = (w.size - w.experts + kv) / blocks
        ngl = max(0, min(blocks, int(room // rest)))
        return ngl, blocks, f"all experts on the CPU and {ngl} of {blocks} layers on the GPU"
    per_layer = (w.size + kv) / blocks
    ngl = max(0, min(blocks, int(room // per_layer)))
    return ngl, 0, f"{ngl} of {blocks} layers on the GPU ({gib_text(per_layer)} each with KV)"


def _price(w: Weights, *, kv: int, overhead: int, ngl: int, ncm: int) -> tuple[int, int]:
    """(VRAM, RAM) of a placement: CPU experts leave the GPU; the rest splits by ngl/blocks."""
    on_gpu, on_host = _split(w, kv=kv, ngl=ngl, ncm=ncm)
    return sum(on_gpu) + overhead, sum(on_host)


def _split(w: Weights, *, kv: int, ngl: int, ncm: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """((weights, KV) on the GPU, (weights, KV) on the host) of a placement."""
    layers = min(ngl, w.blocks)
    weights = w.size - w.cpu_experts(ncm)
    gpu = (weights * layers // w.blocks, kv * layers // w.blocks)
    return gpu, (w.size - gpu[0], kv - gpu[1])


def memory_record(w: Weights, *, kv: int, state: int, compute: int, unseen: int, ngl: int, ncm: int,
              source: Source = Source.ESTIMATE, note: str = "") -> MemoryRecord:
    """A placement's figures in llama.cpp's parts: the recurrent state and the compute buffer stay on
    the GPU whatever is offloaded (what `_price` charges as overhead), the rest splits by layers."""
    (model, context), (host_model, host_context) = _split(w, kv=kv, ngl=ngl, ncm=ncm)
    host = DeviceMemory(HOST_DEVICE, host_model, host_context, 0) if host_model or host_context else None
    return MemoryRecord(source=source, devices=(DeviceMemory("GPU0", model, context + state, compute),), host=host,
                     unseen=(unseen,), note=note)



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


def launch(knobs: LlamaKnobs, ctx: int, kv_type: str) -> Launch:
    """The llama-server launch a per-slot `ctx` at `kv_type` makes of `knobs`."""
    slots = knobs.sequences or knobs.parallel
    return Launch(ctx=ctx * knobs.parallel, slots=slots, unified=knobs.sequences is not None or knobs.kv_unified,
                  type_k=kv_type, type_v=kv_type, flash_attn=knobs.flash_attn != "off", swa_full=knobs.swa_full,
                  mla=DEFAULT_MLA if knobs.mla is None else knobs.mla, attn_max_batch=knobs.attn_max_batch)


class _Engine:
    """llama.cpp's allocations for one model at any context and cache type (memoised: the
    context search asks for the same points more than once)."""

    def __init__(self, meta: ModelMeta, cost: KvCost, knobs: LlamaKnobs, draft: DraftLoad | None = None,
                 correction: EngineCorrection = NO_CORRECTION, rules: Rules = allocations) -> None:
        self.meta, self.state_per_seq, self.knobs, self.draft = meta, cost.state_bytes_per_seq, knobs, draft
        self.correction, self.rules = correction, rules
        self.layout = layer_layout(meta)
        self.draft_layout = layer_layout(draft.meta) if draft is not None else None
        self._seen: dict[tuple[int, str], LlamaMemory] = {}
        self._draft_seen: dict[tuple[int, str], LlamaMemory] = {}

    def at(self, ctx: int, kv_type: str) -> LlamaMemory:
        key = (ctx, kv_type)
        if key not in self._seen:
            self._seen[key] = self.rules(self.meta, launch(self.knobs, ctx, kv_type), self.state_per_seq,
                                         self.layout)
        return self._seen[key]

    def draft_at(self, ctx: int, kv_type: str) -> int:
        """Bytes of the draft's context at `ctx` (KV, state, compute: all on the GPU), 0 without one."""
        if self.draft is None:
            return 0
        key = (ctx, kv_type)
        if key not in self._draft_seen:
            self._draft_seen[key] = self.rules(self.draft.meta, launch(self.knobs, ctx, kv_type),
                                               self.draft.cost.state_bytes_per_seq, self.draft_layout)
        m = self._draft_seen[key]
        return m.kv_total + m.state + m.compute

    def draft_memory(self, ctx: int, kv_type: str) -> LlamaMemory | None:
        if self.draft is None:
            return None
        self.draft_at(ctx, kv_type)
        return self._draft_seen[(ctx, kv_type)]

    def need(self, kv_type: str) -> Callable[[int], int]:
        """Bytes that grow with the context, or stay on the GPU whatever the placement:
        KV, recurrent state, compute buffer, and the draft's context."""
        def need(ctx: int) -> int:
            m = self.at(ctx, kv_type)
            return (self.correction.context(m.kv_total + m.state) + self.correction.compute(m.compute)
                    + self.draft_at(ctx, kv_type))
        return need

    def resident(self, kv_type: str) -> Callable[[int], int]:
        """Bytes that stay on the GPU whatever is offloaded: compute buffer, recurrent state and
        the draft's context."""
        def resident(ctx: int) -> int:
            m = self.at(ctx, kv_type)
            return (self.correction.compute(m.compute) + self.correction.context(m.state)
                    + self.draft_at(ctx, kv_type))
        return resident


@frozen(eq=False)
class LlamaContext:
    """A chat model's context at any length and cache type, priced as its sizing priced the one it
    chose (`_Engine.need` on top of the weights and fixed charges with every layer on the GPU),
    for the report's charts (`sizing.curves`)."""

    engine: _Engine
    #: The cache types the sizing chooses among: a pin, f16 alone without flash attention, else
    #: f16 and q8_0.
    kv_types: tuple[str, ...]
    #: Bytes beside what grows with the context (weights and fixed charges), and the budget.
    base: int
    budget: int
    #: The per-slot ceiling of the curves: the trained length (or the ladder top), or a pinned
    #: context above it.
    top: int
    parallel: int
    #: The chosen per-slot context and its cache type; the sequences the server runs.
    ctx: int
    kv_type: str
    slots: int
    #: The header's trained length (0 = none).
    trained: int

    def plan(self) -> ContextPlan:
        """Each cache type's curve in `-c` (every slot) against bytes, and its largest `-c` that fits."""
        curves = []
        for kv_type in self.kv_types:
            need = self.engine.need(kv_type)
            fits = max_ctx(need, self.budget - self.base, self.top)
            points = tuple((ctx * self.parallel, self.base + need(ctx))
                           for ctx in sample_contexts(self.top, (self.ctx, fits)))
            curves.append(ContextCurve(kv_type=kv_type, points=points, fits=fits * self.parallel))
        return ContextPlan(chosen=self.ctx * self.parallel, trained=self.trained, slots=self.slots,
                           kv_type=self.kv_type, budget=self.budget, curves=tuple(curves))


def kv_types(knobs: LlamaKnobs) -> tuple[str, ...]:
    """The cache types `choose_kv_type` may pick for these knobs."""
    if knobs.kv_type:
        return (knobs.kv_type,)
    return ("f16",) if knobs.flash_attn == "off" else ("f16", "q8_0")


def choose_kv_type(engine: _Engine, knobs: LlamaKnobs, room: int, min_ctx: int, top: int,
                   budget: int = 0) -> tuple[str, str]:
    """(type, note): a pin wins; f16 when the minimum context (a pinned one, whatever the
    trained length) fits on the GPU at f16, else q8_0. The note states the arithmetic: what fits at
    f16 and what the trained length (or the minimum) would need."""
    if knobs.kv_type:
        return knobs.kv_type, f"KV type {knobs.kv_type} (pinned)"
    if knobs.flash_attn == "off":
        return "f16", "KV type f16 (flash attention off: llama-server cannot quantize V without it)"
    if room <= 0:
        return "q8_0", (f"KV type q8_0: the weights and fixed charges are {gib_text(-room)} over the budget already, "
                        "no room on the GPU for a cache at f16")
    need = engine.need("f16")
    if knobs.ctx:
        pinned = need(knobs.ctx)
        if pinned <= room:
            return "f16", (f"KV type f16: the pinned ctx {knobs.ctx} needs {gib_text(pinned)} at f16 (KV, state, "
                           f"compute), {gib_text(room)} is free beside the weights")
        return "q8_0", (f"KV type q8_0: the pinned ctx {knobs.ctx} needs {gib_text(pinned)} at f16 (KV, state, "
                        f"compute), only {gib_text(room)} is free beside the weights")
    fits = max_ctx(need, room, top)

    def would(ctx: int) -> str:
        return f"{ctx:,} would need {gib_text(need(ctx) + budget - room)} of {gib_text(budget)}"

    if fits >= min_ctx:
        return "f16", f"f16 KV: {fits:,} tokens fit" + (f"; {would(top)}" if fits < top else "")
    return "q8_0", f"q8_0 KV: at f16 only {fits:,} tokens fit; {would(min_ctx)}"


def _moe_ctx(need: Callable[[int], int], room_moe: int, top: int, target: int, min_ctx: int) -> tuple[int, str]:
    """(ctx, why) of a MoE model that misses its target on the GPU: the target when it fits with
    every expert on the CPU (`_place` then moves the fewest), else the largest ctx that does, but
    not under the minimum (layers leave the GPU too)."""
    fits = fit_ctx(max_ctx(need, room_moe, top), target)
    if fits >= target:
        return target, f"experts to the CPU for ctx {target}"
    if fits >= min_ctx:
        return fits, f"all experts on the CPU, largest ctx that fits, under {target}"
    return min_ctx, f"experts and layers to the CPU for ctx {min_ctx}"


def _choose_ctx(engine: _Engine, meta: ModelMeta, knobs: LlamaKnobs, w: Weights, kv_type: str, *, budget: int,
                fixed: int, top: int, min_ctx: int) -> tuple[int, str]:
    """(per-slot ctx, why): a pin, else the largest that fits on the GPU, else the MoE or dense
    fallbacks, never above what leaves room for the compute buffer and state (offloading
    layers frees weights and KV, never those)."""
    model_max = meta.context_length if meta.context_length > 0 else NATIVE_CTX_FALLBACK
    if knobs.ctx:
        return knobs.ctx, "ctx pinned"
    need = engine.need(kv_type)
    fits_full = max_ctx(need, budget - w.size - fixed, top)
    moe_target = min(top, MOE_CTX_TARGET)
    if w.experts and fits_full < moe_target:
        ctx, why = _moe_ctx(need, budget - (w.size - w.experts) - fixed, top, moe_target, min_ctx)
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

    resident = engine.resident(kv_type)
    if resident(ctx) > budget - fixed:
        ctx = fit_ctx(max_ctx(resident, budget - fixed, top), top)
        if ctx <= 0:
            raise ModelError("the compute buffer of one token does not fit the budget")
        why = f"compute buffer caps ctx at {ctx}; {why}"
    return ctx, why


def _check_sizable(meta: ModelMeta, cost: KvCost | None, size: int, knobs: LlamaKnobs,
                   draft: DraftLoad | None) -> None:
    """ModelError when the header lacks what the sizing needs, or the knobs contradict each other."""
    if meta.block_count <= 0:
        raise ModelError("GGUF header has no block_count: cannot place layers on the GPU")
    if cost is None or cost.bytes_per_token is None:
        why = cost.note if cost is not None else "no attention metadata"
        raise ModelError(f"KV cache cost unknown ({why}): cannot size the context")
    if size <= 0:
        raise ModelError("model size unknown: cannot size the context")
    if knobs.kv_type and knobs.kv_type not in FLOAT_KV_TYPES and knobs.flash_attn == "off":
        raise ModelError(f"kv_type {knobs.kv_type} needs flash attention: llama-server refuses a "
                         "quantized V cache with flash_attn off (set flash_attn: auto or kv_type: f16)")
    if draft is not None and (draft.cost.bytes_per_token is None or draft.meta.block_count <= 0):
        raise ModelError(f"the draft's KV cache cost is unknown ({draft.cost.note or 'no block_count'})")


def fixed_charges(runtime: int, projector: ProjectorCharge | None = None, draft: DraftLoad | None = None,
                  drafted: int = 0, ctx: int = 0, kv_type: str = "") -> list[Fact]:
    """The fixed charges beside the model's own allocations: runtime and base, projector, draft
    (docs/maintainers/sizing.md#device-side-charges-a-cpu-run-cannot-show)."""
    facts = [Fact("runtime", runtime, "device runtime of the backend build"),
             Fact("base", BASE_OVERHEAD, "driver context, library workspaces, the host-visible output buffer")]
    if projector:
        facts.append(Fact("projector", projector.bytes, f"on the GPU: {projector.reason}"))
    if draft:
        facts += [Fact("draft weights", draft.weights, f"all {draft.layers} layers on the GPU (-ngld {draft.layers})"),
                  Fact("draft context", drafted, f"ctx {ctx}: KV {kv_type}, state, compute")]
    return facts


def _facts(parts: tuple[Fact, ...], charges: list[Fact], vram: int, ram: int, budget: int) -> tuple[Fact, ...]:
    """The decision's figures: the model's parts (a part of 0 bytes left out), the fixed charges,
    and what they come to on the GPU and in RAM."""
    over = " (ABOVE BUDGET)" if vram > budget else ""
    return (*(f for f in parts if f.bytes), *charges, Fact("VRAM", vram, f"of the {gib_text(budget)} budget{over}"),
            Fact("RAM", ram, "what placement keeps on the CPU"))


def size_llama(meta: ModelMeta, cost: KvCost | None, *, size: int, budget: int, knobs: LlamaKnobs,
               runtime: int, projector: ProjectorCharge | None = None, draft: DraftLoad | None = None,
               correction: EngineCorrection = NO_CORRECTION, rules: Rules = allocations) -> LlamaSizing:
    """Size one chat model for llama-server (with its speculative-decoding `draft`, whose weights
    and context stay on the GPU). Raises ModelError when the header is insufficient.
    `correction`: the engine's own figures at earlier launches of this model (`sizing.correction`);
    `projector`: a projector on the GPU (`sizing.projector.projector_charge`); `rules`: what the
    row's llama-server allocates (`EngineRow.memory`)."""
    _check_sizable(meta, cost, size, knobs, draft)
    blocks = meta.block_count
    raw, experts_note = _weights(meta, size)
    w = attrs.evolve(raw, size=correction.model(raw.size), experts=correction.model(raw.experts))
    engine = _Engine(meta, cost, knobs, draft, correction, rules)
    projector_bytes = projector.bytes if projector else 0
    charges = BASE_OVERHEAD + runtime + projector_bytes + (draft.weights if draft else 0)
    fixed = correction.fixed(charges)
    least = fixed + engine.resident(knobs.kv_type or "q8_0")(1)
    if least >= budget:
        raise ModelError(f"VRAM budget {gib_text(budget)} does not cover llama-server's fixed overhead "
                         f"{gib_text(least)}")
    model_max = meta.context_length if meta.context_length > 0 else NATIVE_CTX_FALLBACK
    top = min(model_max, LADDER_TOP)
    min_ctx = knobs.ctx if knobs.ctx else min(MIN_CTX, model_max)
    kv_type, kv_type_note = choose_kv_type(engine, knobs, budget - w.size - fixed, min_ctx, top, budget)
    ctx, why = _choose_ctx(engine, meta, knobs, w, kv_type, budget=budget, fixed=fixed, top=top, min_ctx=min_ctx)

    memory = engine.at(ctx, kv_type)
    drafted = engine.draft_at(ctx, kv_type)
    kv, state, compute = (correction.context(memory.kv_total), correction.context(memory.state),
                          correction.compute(memory.compute))
    overhead = fixed + compute + state + drafted
    ngl, ncm, place_note = _place(w, kv=kv, overhead=overhead, budget=budget, ngl_pin=knobs.ngl,
                                  ncm_pin=knobs.n_cpu_moe)
    vram, ram = _price(w, kv=kv, overhead=overhead, ngl=ngl, ncm=ncm)
    ram += unmapped_output(meta, knobs, ngl)
    # a draft is charged beside the parts llama-fit-params reports: it never loads the draft
    estimate = memory_record(raw, kv=memory.kv_total, state=memory.state, compute=memory.compute,
                         unseen=charges + drafted, ngl=ngl, ncm=ncm)
    decided = memory_record(w, kv=kv, state=state, compute=compute, unseen=fixed + drafted, ngl=ngl, ncm=ncm,
                        note=correction.describe() if correction.readings else "")
    if knobs.ctx and (ncm or ngl <= blocks):
        why = f"ctx pinned; {place_note}"
    parallel = knobs.parallel
    slots = f" × {parallel} slots" if parallel > 1 else ""
    charges = fixed_charges(runtime, projector, draft, drafted, ctx, kv_type)
    parts = (Fact("weights", w.size, f"{blocks} layers" + (f", MoE: {experts_note}" if w.experts else "")),
             Fact("KV cache", kv, f"ctx {ctx}{slots} at {kv_type}"),
             Fact("recurrent state", state, f"{launch(knobs, ctx, kv_type).slots} sequences"),
             Fact("compute buffer", compute, "llama.cpp's graph buffers at this launch"))
    facts = _facts(parts, charges, vram, ram, budget)
    notes = [
        f"weights {gib_text(size)}, {blocks} layers" + (f", MoE: {experts_note}" if w.experts else ""),
        kv_type_note,
        f"ctx {ctx}{slots}: {why} (trained {model_max})",
        *memory.rules,
        *(fact.line for fact in charges),
        f"placement: {place_note}",
        *([f"corrected by {correction.describe()}"] if correction.readings else []),
        f"estimate: VRAM {gib_text(facts[-2].bytes)} of {gib_text(budget)} budget, RAM {gib_text(facts[-1].bytes)}"
        + (" (ABOVE BUDGET)" if vram > budget else ""),
    ]
    return LlamaSizing(ctx=ctx, parallel=parallel, ngl=ngl, n_cpu_moe=ncm, kv_type=kv_type,
                       kv_bytes_per_token=kv_bytes(cost, 1 << 20, element_bytes=KV_TYPE_BYTES[kv_type]) >> 20,
                       kv_total=memory.kv_total, weights=size, compute=memory.compute, projector=projector_bytes,
                       overhead=overhead, est_vram=vram, est_ram=ram, budget=budget, blocks=blocks, why=why,
                       notes=tuple(notes), state=memory.state, runtime=runtime, memory=memory,
                       draft_weights=draft.weights if draft else 0,
                       draft_memory=engine.draft_memory(ctx, kv_type) if draft else None,
                       estimate=estimate, decided=decided, facts=facts, charges=tuple(charges),
                       context=LlamaContext(engine=engine, kv_types=kv_types(knobs), base=w.size + fixed, budget=budget,
                                            top=max(top, ctx), parallel=parallel, ctx=ctx, kv_type=kv_type,
                                            slots=launch(knobs, ctx, kv_type).slots, trained=meta.context_length))


def unmapped_output(meta: ModelMeta, knobs: LlamaKnobs, ngl: int) -> int:
    """Host bytes `-rtr` adds: it loads the weights without mmap, and a tied model's output
    layer left on the CPU (ngl ≤ blocks) then holds its own copy of the token embeddings
    (ik_llama.cpp `create_embd_output`, TENSOR_DUPLICATED; docs/maintainers/sizing.md#ik_llamacpp)."""
    return meta.tied_output_bytes if knobs.run_time_repack and ngl <= meta.block_count else 0


def estimator_gap(meta: ModelMeta, cost: KvCost | None, knobs: LlamaKnobs, ctx: int, kv_type: str) -> Gap | None:
    """What a unified slot pool holds beyond one sequence: llama-fit-params b11434 takes no
    `--kv-unified`, so it is asked with `-np 1` (the same full-attention cells) and the window
    cells and recurrent state of the other sequences, with their wider KQ masks, come from
    llama.cpp's rules (`llama_memory`). Both sides reserve logits for n_ubatch outputs, as the
    estimator does. None when the pool has one sequence or the difference is nil."""
    full = launch(knobs, ctx, kv_type)
    if not full.unified or full.slots <= 1:
        return None
    state = cost.state_bytes_per_seq if cost is not None else 0
    full = attrs.evolve(full, outputs=full.ubatch)
    layout = layer_layout(meta)
    pool, one = allocations(meta, full, state, layout), allocations(meta, attrs.evolve(full, slots=1), state, layout)
    context = pool.kv_total + pool.state - one.kv_total - one.state
    compute = pool.compute - one.compute
    if not context and not compute:
        return None
    return Gap(why=f"{full.slots} slots share one KV pool, which llama-fit-params cannot be asked about "
                   f"(no --kv-unified): asked with -np 1, the other {full.slots - 1} sequences' window cells and "
                   "recurrent state added by llama.cpp's rules", context=context, compute=compute)
