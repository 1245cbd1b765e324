"""How much of a card one vLLM entry takes: `--max-model-len`, the KV-cache size,
`--gpu-memory-utilization` and the estimate, each with the note that explains it.

vLLM preallocates: its KV pool comes from `--max-model-len` and its share of the card from
`--gpu-memory-utilization`, so both are derived from the model's VRAM budget and its real f16
KV cost instead of the trained window and a flat 0.90 (docs/maintainers/sizing.md#--max-model-len and
docs/maintainers/sizing.md#vllm-footprint-and-utilization). Only the override's `ctx`, `vllm_*` knobs and
`extra_args` apply; llama's knobs are ignored. A `--max-model-len` or `--tensor-parallel-size`
in `extra_args` (`vllm_args`) is a pin like `ctx` / `vllm_tensor_parallel`, so the sizing
follows it. Kept apart from `emit_vllm`, which turns these numbers into argv and a Plan.

KV-cache size (`--kv-cache-memory-bytes`, docs/maintainers/sizing.md#vllm-kv-cache-size): `(KvReserve(ctx) + 1 block)
× 1.10 + 0.25 GiB`, computed in integer bytes and rounded UP to a whole MiB (1,048,576 bytes); the
footprint then charges the rounded KV-cache size, uncapped by the budget. `--max-model-len` is not shrunk
to make room for the 10 % + 0.25 GiB margin, which keeps the Go original's numbers
(docs/maintainers/sizing.md#vllm-worked-examples).

KvReserve(ctx) is what vLLM's start-up check charges one request of `ctx` tokens
(`vllm_memory.VllmKv.needed`, vLLM's `_max_memory_usage_bytes_from_groups`): full-attention
and MLA layers at `ctx`, sliding-window layers at their window plus the tokens in flight,
recurrent layers at their padded state pages; the check keeps one block more back (the null
block), which the KV-cache size adds. vLLM refuses to start unless its pool holds that, so the window is
the longest whose KvReserve fits the room, and the footprint and the KV-cache size carry it. Models whose
layers vLLM groups in ways not modelled there keep the Go original's `slope·ctx + const`: every
layer at `ctx` plus one sequence's recurrent state (`KvCost.state_bytes_per_seq`).

Devices (`ctx.devices`): vLLM's utilization and KV-cache size are per GPU, so on devices every number
is one rank's, against the smallest card: weights / TP, the KV one rank holds
(`per_gpu_bytes_per_token`: heads fewer than ranks and MLA latents are copied to every rank),
the overhead, and `max-model-len` from the budget's share per card. There the window is also
capped to what fits 0.95 of the card (the KV-cache margin included), and a model that does not fit even
at the 4096 floor is a Skip: vLLM could not start it. `--tensor-parallel-size` is the device
count unless pinned. Without devices, a card reading (`card_vram_gb`, or the one eligible GPU
declared or probed) is the one GPU vLLM runs on: the same cap and the same Skip apply, so the
numbers equal those of `devices: [0]` on that card. Only a tensor-parallel pin without devices
keeps the Go original's pooled numbers.

Nodes (`ctx.nodes`, `vllm_nodes`): tensor parallel per node × pipeline parallel across nodes;
each GPU holds `1 / (tp × pp)` of the weights, its tensor-parallel share of the KV heads of its
stage's layers (`stage_share`, `stage_layout`), the overhead, against the smallest card used,
with the same cap and Skip as devices.

Measured (`ctx.readings`, `Measured`): where `swapgen calibrate` started an earlier command of
this model on as many GPUs, vLLM's own model-loading size (plus the stated margin) replaces the
estimated weights, and the tokens its KV cache held per pool byte bound the window (less the
margin) and size the pinned pool (docs/maintainers/sizing.md#exact-numbers-for-your-machine).

Where we differ from the original: the 4096 floor for over-budget weights is capped by a
shorter trained window (vLLM refuses a longer one); a model with no per-token KV
(bytes_per_token 0) gets its trained window and no KV-cache size; weights are the row's size rounded to
2 decimals, as the original's `SizeGB`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import attrs
from attrs import field, frozen

from autogen.errors import ModelError
from autogen.flags.vllm import AUTO, ExtraArgs, read_extra_args, vllm_tensor_parallel
from autogen.footprint import MARGIN_SHARE, Fact, Reading, Source, margin
from autogen.metadata.kvcost import KvCost
from autogen.metadata.model_meta import ModelMeta
from autogen.numfmt import GIB, ceil_to, format_g, gib, gib_text, round_half_away, size_gb
from autogen.resolve.context import EmitContext
from autogen.sizing.curves import ContextCurve, ContextPlan, sample_contexts
from autogen.sizing.vllm_memory import CONCURRENT_BATCHES, VllmKv, default_batched_tokens, rank_heads, vllm_kv
from autogen.versions import format_version

# Constants of the Go original (docs/maintainers/sizing.md#vllm-constants).
DEFAULT_UTIL = 0.90
MIN_UTIL, MAX_UTIL = 0.10, 0.95
#: Flat reserve for activations, CUDA graphs and the profiling peak (vLLM's allocator is opaque): 1.5 GiB.
OVERHEAD = 3 * GIB // 2
FALLBACK_CTX = 32768
CTX_STEP = 4096
#: Upper end of the search for the longest window that fits (tokens): far past any trained length.
LONGEST_SEARCHED = 1 << 30

#: The KV-cache size's margin: paged blocks and hybrid page sizes do not match our cost byte for byte.
KV_CACHE_FACTOR_TENTHS = 11  # × 1.10
KV_CACHE_PAD_BYTES = GIB // 4  # + 0.25 GiB
MIB = 1 << 20

#: `--kv-cache-memory-bytes` first shipped in vLLM 0.10.2 (vllm-project/vllm#21489).
KV_PIN_SINCE = (0, 10, 2)


def rounded_ctx(tokens: float) -> int:
    """Floor to a multiple of 4096, at least 4096 (`RoundedCtx`)."""
    return max(CTX_STEP, int(tokens // CTX_STEP) * CTX_STEP)


def per_gpu_bytes_per_token(kv: KvCost | None, meta: ModelMeta | None, tp: int) -> int | None:
    """f16 KV bytes per token on one of `tp` ranks (None = no cost model): each layer's heads
    split as vLLM splits them (`vllm_memory.rank_heads`: MLA's one latent per layer whole on every
    rank)."""
    if kv is None or kv.bytes_per_token is None:
        return None
    total = kv.bytes_per_token
    if tp == 1:
        return total
    heads = [h for h in (kv.kv_heads or (meta.head_count_kv if meta is not None else ())) if h > 0]
    if not heads:
        return -(-total // tp)
    return -(-total * sum(rank_heads(h, tp, latent=kv.mla) for h in heads) // sum(heads))


def kv_cache_flag_bytes(kv_bytes: int) -> int:
    """`--kv-cache-memory-bytes` for `kv_bytes` of KV: × 1.10 + 0.25 GiB, rounded up to a whole
    MiB, in integers so no float noise reaches the argv."""
    tenths = kv_bytes * KV_CACHE_FACTOR_TENTHS + KV_CACHE_PAD_BYTES * 10
    return -(-tenths // (10 * MIB)) * MIB


@frozen
class VllmSizing:
    """Every sizing number of one vLLM entry, in bytes, with the note that explains it; `facts`
    are the byte figures with their reasons, as `swapgen show` and the memory record read them.

    Example: VllmSizing(max_model_len=32768, ctx_note="sized to 6.5 GiB free of budget",
    footprint=16_642_998_272, util=0.65, util_note="15.5 GiB needed … of 24.0 GiB card, under the
    16.0 GiB budget", kv_cache_bytes=None, kv_cache_note="vLLM 0.10.1 lacks --kv-cache-memory-bytes",
    est_vram=16_750_372_454, kv_reserve=6_442_450_944, tensor_parallel=1, weights=8_589_934_592,
    gpu_util=0.65, util_flag="0.65", extra=ExtraArgs()).
    """

    #: The window vLLM will use (for `auto`, our estimate of what it fits).
    max_model_len: int
    ctx_note: str
    #: What vLLM holds on one GPU: its weights' share, the KV (or the KV-cache size) and the overhead.
    footprint: int
    util: float
    util_note: str
    #: `--kv-cache-memory-bytes`; None = not pinned (see kv_cache_note).
    kv_cache_bytes: int | None
    kv_cache_note: str
    #: `est_vram_gb` in bytes: `util` × the cards (GiB to two decimals, the Go original's rounding).
    est_vram: int
    #: f16 KV of `max_model_len` tokens plus one sequence's recurrent state, on one GPU; None = no
    #: KV cost model.
    kv_reserve: int | None
    #: `--tensor-parallel-size`: extra_args' or the override's pin, else the number of devices.
    tensor_parallel: int = 1
    #: The row's size as every formula charges it: GiB to two decimals (`numfmt.size_gb`), in bytes.
    weights: int = 0
    #: `util` rounded to 2 decimals (metadata) and as the flag prints it.
    gpu_util: float = 0.0
    util_flag: str = ""
    extra: ExtraArgs = field(factory=ExtraArgs)
    #: One sequence's recurrent state on one GPU, in bytes (part of `kv_reserve` and the KV-cache size):
    #: vLLM's state pages where `layout` is known.
    state_bytes: int = 0
    #: One GPU's KV-cache layers as vLLM groups them (`vllm_memory`); None = every layer charged
    #: at the full context.
    layout: VllmKv | None = None
    #: `--pipeline-parallel-size`: the number of nodes of a multi-node model, else 1.
    pipeline_parallel: int = 1
    #: How many GPUs the figures are shared by: 1 = each is one GPU's (devices, nodes, a card), the
    #: tensor-parallel pin without devices: the pooled figures of all its ranks.
    pooled_over: int = 1
    #: The byte figures of one GPU with their reasons (weights, overhead, budget, limit, KV,
    #: KV-cache size, footprint, estimate).
    facts: tuple[Fact, ...] = ()
    #: What the window could have been at each length (`VllmContext.plan`).
    context: VllmContext | None = field(default=None, eq=False)

    def fact(self, name: str) -> Fact | None:
        return next((f for f in self.facts if f.name == name), None)


def per_gpu_state_bytes(kv: KvCost | None, tp: int) -> int:
    """Recurrent state one sequence holds on one of `tp` ranks: vLLM splits the state's heads and
    conv channels over the ranks (`MambaStateShapeCalculator`,
    vllm/model_executor/layers/mamba/mamba_utils.py); rounded up."""
    return -(-kv.state_bytes_per_seq // tp) if kv is not None else 0


@frozen
class Measured:
    """What `swapgen calibrate` measured at earlier launches of this model on as many GPUs (only
    figures of the exact commands, the model's files and the engine binary as they are now reach
    sizing: a changed one is another key, `figures.measurements`): vLLM's model-loading size per
    GPU, the largest seen, and its KV cache's capacity, the fewest tokens per pool byte seen.

    Example: Measured(weights=8_063_891_046, capacity=(202_176, 13_249_974_108), launches=1).
    """

    weights: int
    #: (tokens, pool bytes) of vLLM's `GPU KV cache size`; None = no launch reported it.
    capacity: tuple[int, int] | None
    launches: int

    @classmethod
    def of(cls, readings: Sequence[Reading], world: int) -> Measured | None:
        found = [r.engine for r in readings if r.engine.source == Source.MEASURED and len(r.engine.devices) == world]
        if not found:
            return None
        pools = [(r.kv_tokens, r.engine.devices[0].context) for r in readings
                 if r.engine.source == Source.MEASURED and r.kv_tokens and r.engine.devices[0].context > 0]
        return cls(weights=max(d.model for record in found for d in record.devices),
                   capacity=min(pools, key=lambda p: p[0] / p[1]) if pools else None, launches=len(found))

    def tokens_in(self, pool: float) -> int:
        """Tokens a pool of `pool` bytes holds at the measured capacity, less the margin."""
        assert self.capacity is not None
        tokens, bytes_ = self.capacity
        return int(pool * tokens / bytes_ * (1 - MARGIN_SHARE))

    def pool_for(self, tokens: int) -> int:
        """The pool (whole MiB) that holds `tokens` at the measured capacity, with the margin."""
        assert self.capacity is not None
        held, bytes_ = self.capacity
        return -(-int(tokens * bytes_ / held / (1 - MARGIN_SHARE)) // MIB) * MIB


@frozen
class VllmLayout:
    """Phase 1, the layout: how one model spreads over GPUs and what one GPU holds of it (bytes)."""

    #: `--tensor-parallel-size`, the ranks one GPU shares the heads with, pipeline stages.
    tp: int
    ranks: int
    stages: int
    #: The card each rank is sized against, as read (GiB) and in bytes; None = no reading.
    card_gb: float | None
    card: int | None
    #: "24.0 GiB card 0" and the like, for the notes.
    of_card: str
    #: The row's size to 0.01 GiB (the Go original's `SizeGB`), and one GPU's share of it (the
    #: measured model-loading size with its margin, where a launch was measured).
    weights: int
    rank_weights: int
    #: The budget's share per GPU.
    share: int
    per_token: int | None
    layout: VllmKv | None
    state: int
    trained: int
    measured: Measured | None = None

    @property
    def world(self) -> int:
        return self.ranks * self.stages

    @property
    def per_gpu(self) -> str:
        return " per GPU" if self.world > 1 else ""


@frozen
class VllmContext:
    """A vLLM entry's window at any length, priced as its sizing priced the one it chose: per GPU
    its weights' share, the KV its start-up check asks for (as the pinned KV-cache size when one is
    written) and the overhead, over every GPU together, for the report's charts (`sizing.curves`)."""

    lay: VllmLayout
    #: A `--kv-cache-memory-bytes` is written: the pool is the check's KV with its margin.
    pinned_pool: bool
    max_len: int

    def need(self, tokens: int) -> int:
        """Bytes on every GPU together at a window of `tokens`."""
        lay = self.lay
        kv = _check_bytes(lay.layout, lay.per_token, lay.state, tokens)
        return (lay.rank_weights + (kv_cache_flag_bytes(kv) if self.pinned_pool else kv) + OVERHEAD) * lay.world

    def plan(self) -> ContextPlan:
        """The one curve of the model's own cache type ("auto"), and the longest window (a multiple
        of 4096) whose bytes fit the budget; none without a per-token KV cost."""
        lay = self.lay
        budget = lay.share * lay.world
        curves: tuple[ContextCurve, ...] = ()
        if lay.per_token:
            top = max(lay.trained or FALLBACK_CTX, self.max_len)
            room = lay.share - lay.rank_weights - OVERHEAD
            if self.pinned_pool:
                room = (room - KV_CACHE_PAD_BYTES - MIB) * 10 / KV_CACHE_FACTOR_TENTHS
            longest = _longest(lay.layout, lay.per_token, lay.state, room, pool=self.pinned_pool) if room > 0 else 0
            fits = min(top, max(0, longest) // CTX_STEP * CTX_STEP)
            points = tuple((n, self.need(n)) for n in sample_contexts(top, (self.max_len, fits)))
            curves = (ContextCurve(kv_type="auto", points=points, fits=fits),)
        return ContextPlan(chosen=self.max_len, trained=lay.trained, slots=None, kv_type="auto", budget=budget,
                           curves=curves)


def size_vllm(ctx: EmitContext, version: tuple[int, ...] | None) -> VllmSizing:
    """`--max-model-len`, the KV-cache size, the footprint, `--gpu-memory-utilization`, the estimate:
    the layout, the length limit, the window, the KV cache and the utilisation, in that order.

    On devices (`ctx.devices`) every number is per GPU (module docstring). Without devices the
    card reading is one GPU, unless a tensor-parallel pin makes it the pooled reading (then the
    pin changes only the flag: the Go original's numbers). Raises ModelError when vLLM could not
    start: a tensor-parallel pin above the devices, a model over 0.95 of the smallest card at the
    floor, an unreadable extra_args value.
    """
    ov = ctx.override
    extra = read_extra_args(ov.extra_args if ov is not None else ())
    util_pin = ov.vllm_gpu_util if ov is not None and ov.vllm_gpu_util else None
    length_pin = extra.max_model_len or (ov.ctx if ov is not None and ov.ctx else None)
    lay = vllm_layout(ctx, extra)
    kv_cache_note = _why_no_kv_cache_flag(bool(util_pin), extra, length_pin, lay.per_token, version)
    limit = length_limit(ctx, lay, util_pin, length_pin, pinned_pool=not kv_cache_note)
    max_len, ctx_note = window(lay, extra, length_pin, limit, pinned_pool=not kv_cache_note)
    kv_gpu = _reserve(lay.layout, lay.per_token, lay.state, max_len)
    kv_cache = (kv_cache_flag_bytes(_check_bytes(lay.layout, lay.per_token, lay.state, max_len))
                if not kv_cache_note and kv_gpu is not None else None)
    if kv_cache is not None:
        base = _kv_cache_margin_base(lay.layout, kv_gpu, lay.state)
        kv_cache_note = f"{base}{lay.per_gpu} × 1.10 + 0.25 GiB, whole MiB"
        if lay.measured is not None and lay.measured.capacity is not None \
                and (held := lay.measured.pool_for(max_len)) > kv_cache:
            kv_cache, kv_cache_note = held, (f"{max_len} tokens at the measured KV cache's capacity, + "
                                             f"{MARGIN_SHARE:.0%}, whole MiB")
    footprint = _footprint(lay, kv_gpu, kv_cache, max_len)
    util, util_note = utilisation(lay, footprint, util_pin, kv_cache is not None, ceiling=_ceiling(ctx, lay))
    est = _estimate(ctx, lay, util, footprint)
    facts = (Fact("weights", lay.rank_weights, _weights_reason(lay)),
             Fact("overhead", OVERHEAD, "activations, CUDA graphs and the profiling peak"),
             Fact("budget", lay.share, f"the model's VRAM budget{lay.per_gpu}"),
             *((Fact("limit", limit, _limit_reason(ctx, lay, util_pin)),) if limit is not None else ()),
             *((Fact("KV at max-model-len", kv_gpu, f"{max_len} tokens{lay.per_gpu}"),) if kv_gpu is not None else ()),
             *((Fact("kv-cache-memory-bytes", kv_cache, kv_cache_note),) if kv_cache is not None else ()),
             Fact("footprint", footprint, f"what vLLM holds{lay.per_gpu or ' on the GPU'}: weights, KV and overhead"),
             Fact("estimate", est, "utilization × each device's card" if ctx.devices or ctx.nodes
                  else "utilization × card" if lay.card is not None else "footprint, no card reading"))
    gpu_util = round_half_away(util, 2)
    return VllmSizing(max_model_len=max_len, ctx_note=ctx_note, footprint=footprint, util=util,
                      util_note=util_note, kv_cache_bytes=kv_cache, kv_cache_note=kv_cache_note, est_vram=est,
                      kv_reserve=kv_gpu, tensor_parallel=lay.tp, weights=lay.weights, gpu_util=gpu_util,
                      util_flag=format_g(gpu_util), extra=extra, state_bytes=lay.state, layout=lay.layout,
                      pipeline_parallel=lay.stages, pooled_over=lay.tp * lay.stages // lay.world, facts=facts,
                      context=VllmContext(lay=lay, pinned_pool=kv_cache is not None, max_len=max_len))


def _ceiling(ctx: EmitContext, lay: VllmLayout) -> float:
    """The highest utilisation vLLM can start with beside the sleeping daemons on its card:
    vLLM 0.33.0 refuses to start when less than utilisation × the card is free
    (vllm/v1/worker/utils.py `request_memory`)."""
    if not ctx.held[1] or lay.card is None:
        return MAX_UTIL
    return min(MAX_UTIL, math.floor((lay.card - ctx.held[1]) / lay.card * 100) / 100)


def _limit_reason(ctx: EmitContext, lay: VllmLayout, util_pin: float | None) -> str:
    share = f"{util_pin or MAX_UTIL:g} of {lay.of_card}"
    if ctx.held[1] and lay.card is not None and lay.card - ctx.held[1] < (util_pin or MAX_UTIL) * lay.card:
        return f"{lay.of_card} less {gib_text(ctx.held[1])} that sleeping vLLM models keep there ({ctx.held[2]})"
    return share


def _weights_reason(lay: VllmLayout) -> str:
    if lay.measured is not None:
        launches = "launch" if lay.measured.launches == 1 else f"{lay.measured.launches} launches"
        return f"measured (vLLM's model loading at {launches}) + its margin, {MARGIN_SHARE:.0%} or 128 MiB"
    return f"the files to 0.01 GiB{f', / {lay.world}' if lay.world > 1 else ''}"


def vllm_layout(ctx: EmitContext, extra: ExtraArgs) -> VllmLayout:
    """Phase 1: the ranks, the card each is sized against, and one GPU's share of the weights,
    the budget and the KV cost."""
    ov = ctx.override
    card = ctx.card_vram_gb if ctx.card_vram_gb and ctx.card_vram_gb > 0 else None
    tp_pin, tp_source = vllm_tensor_parallel(ov)
    tp, ranks, stages, card = _layout(ctx, tp_pin if tp_source else None, tp_source, card)
    world = ranks * stages
    layers = ctx.meta.block_count if ctx.meta is not None else 0
    per_token = stage_share(per_gpu_bytes_per_token(ctx.kv, ctx.meta, ranks), layers, stages)
    in_flight = CONCURRENT_BATCHES * (extra.max_num_batched_tokens or default_batched_tokens(card))
    layout = stage_layout(vllm_kv(ctx.kv, ctx.meta, ranks, in_flight), layers, stages) if per_token else None
    state = _state_bytes(layout, ctx.kv, per_token, ranks, stage=lambda b: stage_share(b, layers, stages))
    weights = int(size_gb(ctx.row.size_bytes) * GIB)
    found = Measured.of(ctx.readings, world)
    rank_weights = found.weights + margin(found.weights) if found is not None else weights // world
    return VllmLayout(tp=tp, ranks=ranks, stages=stages, card_gb=card,
                      card=round(card * GIB) if card is not None else None,
                      of_card=_card_text(ctx, card, world), weights=weights, rank_weights=rank_weights,
                      share=round(ctx.budget_gb * GIB) // world, per_token=per_token, layout=layout, state=state,
                      trained=ctx.meta.context_length if ctx.meta is not None else 0, measured=found)


def length_limit(ctx: EmitContext, lay: VllmLayout, util_pin: float | None, length_pin: int | None, *,
                 pinned_pool: bool) -> float | None:
    """Phase 2: the bytes one GPU may hold (its utilisation of the smallest card), or None without
    a card; a reading without devices is the one card vLLM runs on (no tensor parallel), checked
    the same way. ModelError when even the shortest window cannot start."""
    if lay.card is None or not (ctx.devices or ctx.nodes or lay.tp == 1):
        return None
    limit = min((util_pin or MAX_UTIL) * lay.card, lay.card - ctx.held[1])
    floor = min(n for n in (CTX_STEP, lay.trained, length_pin) if n is not None and n > 0)
    kv = _check_bytes(lay.layout, lay.per_token, lay.state, floor)
    need = lay.rank_weights + (kv_cache_flag_bytes(kv) if pinned_pool else kv) + OVERHEAD
    if need > limit:
        kv_what = "KV + recurrent state" if lay.state else "KV"
        raise ModelError(f"needs {gib(need):.1f} GiB per GPU at max-model-len {floor} (weights "
                         f"{gib(lay.rank_weights):.1f} GiB + {kv_what} + {gib(OVERHEAD):g} GiB overhead), over "
                         f"{gib(limit):.1f} GiB of {lay.of_card}: vLLM cannot start it; give it more devices or a "
                         "smaller quant")
    return limit


def window(lay: VllmLayout, extra: ExtraArgs, length_pin: int | None, limit: float | None, *,
           pinned_pool: bool) -> tuple[int, str]:
    """Phase 3: `--max-model-len` and its note (docs/maintainers/sizing.md#--max-model-len): a pin
    stands as given; else the budget's window, cut to what the limit holds."""
    if length_pin is not None and length_pin != AUTO:
        return length_pin, "pinned by extra_args" if extra.max_model_len else "pinned"
    fits = None
    if limit is not None and lay.per_token:
        # KV room under the limit, less the KV-cache margin and its whole-MiB rounding, and the state
        room = limit - lay.rank_weights - OVERHEAD
        if pinned_pool:
            room = (room - KV_CACHE_PAD_BYTES - MIB) * 10 / KV_CACHE_FACTOR_TENTHS
        fits = (rounded_ctx(_longest(lay.layout, lay.per_token, lay.state, room, pool=True)),
                f"{gib(limit):.1f} GiB of {lay.of_card}")
    max_len, note = _budget_window(lay.share - lay.rank_weights - OVERHEAD, lay.per_token, lay.trained, fits,
                                   lay.per_gpu, lay.state, lay.layout)
    if lay.measured is not None and lay.measured.capacity is not None:
        room = min(lay.share, limit if limit is not None else lay.share) - lay.rank_weights - OVERHEAD
        cap = rounded_ctx(lay.measured.tokens_in(room))
        if cap < max_len:
            tokens, pool = lay.measured.capacity
            max_len, note = cap, (f"{note}, cut to the measured KV cache ({tokens:,} tokens in {gib_text(pool)}, "
                                  f"less {MARGIN_SHARE:.0%})")
    if length_pin == AUTO:
        note = f"auto in extra_args: vLLM fits it to its memory, about {max_len} ({note})"
    return max_len, note


def _footprint(lay: VllmLayout, kv_gpu: int | None, kv_cache: int | None, max_len: int) -> int:
    """Phase 4's result, what one GPU holds (docs/maintainers/sizing.md#vllm-footprint-and-utilization):
    uncapped with a KV-cache size, since that is what the process holds."""
    if kv_cache is not None:
        return lay.rank_weights + kv_cache + OVERHEAD
    if kv_gpu is None:
        return lay.share
    return min(lay.share, lay.rank_weights + _check_bytes(lay.layout, lay.per_token, lay.state, max_len) + OVERHEAD)


def utilisation(lay: VllmLayout, footprint: int, util_pin: float | None, pinned_pool: bool, *,
                ceiling: float = MAX_UTIL) -> tuple[float, str]:
    """Phase 5: `--gpu-memory-utilization` and its note
    (docs/maintainers/sizing.md#vllm-footprint-and-utilization); at most `ceiling` (what sleeping
    vLLM daemons leave of the card: vLLM refuses to start when less than its share is free)."""
    if util_pin:
        return util_pin, "pinned"
    if lay.card is None:
        return DEFAULT_UTIL, "no GPU reading"
    util = min(ceiling, max(MIN_UTIL, ceil_to(footprint / lay.card, 2)))
    what = "weights+KV+overhead" if lay.world == 1 else f"weights/{lay.world}+KV+overhead"
    if footprint < lay.share or pinned_pool:
        side = "under" if footprint <= lay.share else "over"
        return util, (f"{gib(footprint):.1f} GiB needed ({what}) of {lay.of_card}, {side} the "
                      f"{gib(lay.share):.1f} GiB budget{lay.per_gpu}")
    return util, f"{gib(footprint):.1f} GiB budget{lay.per_gpu} of {lay.of_card}"


def _estimate(ctx: EmitContext, lay: VllmLayout, util: float, footprint: int) -> int:
    """`est_vram_gb` in bytes: each rank takes `util` of its own card, to 0.01 GiB (the Go original)."""
    cards = (sum(g.vram_gb for g in ctx.nodes.gpus) if ctx.nodes is not None
             else sum(g.vram_gb for g in ctx.devices[:lay.ranks]) if ctx.devices
             else lay.card_gb)
    est = round_half_away(util * cards if cards is not None else gib(footprint) * lay.world, 2)
    return round(est * GIB)


def _state_bytes(layout: VllmKv | None, kv: KvCost | None, per_token: int | None, ranks: int, stage) -> int:
    """The recurrent state one GPU charges: vLLM's state pages where the layout is known, else one
    sequence's state (of its pipeline stage's layers: `stage`)."""
    if layout is not None:
        return layout.state_bytes()
    return stage(per_gpu_state_bytes(kv, ranks)) if per_token is not None else 0


def _layout(ctx: EmitContext, tp_pin: int | None, tp_source: str,
            card: float | None) -> tuple[int, int, int, float | None]:
    """(tensor parallel flag, ranks one GPU shares the heads with, pipeline stages, the card each
    rank is sized against): the nodes' layout, else the devices', else the card reading."""
    if ctx.nodes is not None:
        return (ctx.nodes.tensor_parallel, ctx.nodes.tensor_parallel, ctx.nodes.pipeline_parallel,
                min(g.vram_gb for g in ctx.nodes.gpus))
    if not ctx.devices:
        return tp_pin or 1, 1, 1, card
    if tp_pin is not None and tp_pin > len(ctx.devices):
        raise ModelError(f"{tp_source} {tp_pin} needs {tp_pin} GPUs; devices "
                         f"{','.join(str(g.index) for g in ctx.devices)} give {len(ctx.devices)}")
    ranks = tp_pin or len(ctx.devices)
    return ranks, ranks, 1, min(g.vram_gb for g in ctx.devices[:ranks])  # vLLM takes the first `tp` visible GPUs


def _card_text(ctx: EmitContext, card: float | None, world: int) -> str:
    if card is None:
        return ""
    if ctx.nodes is not None:
        return f"the smallest {card:.1f} GiB card of {world} on {ctx.nodes.label}"
    if not ctx.devices:
        return f"{card:.1f} GiB card"
    if world == 1:
        return f"{card:.1f} GiB card {ctx.devices[0].index}"
    return f"the smallest {card:.1f} GiB card of {world}"


def stage_share(per_rank: int | None, layers: int, stages: int) -> int | None:
    """What one pipeline stage of `stages` holds of a per-rank cost spread over `layers` layers:
    vLLM gives each stage a contiguous slice of the layers, some one layer longer when they do
    not divide (`get_pp_indices`, vllm/distributed/utils.py), so the longest slice is charged;
    rounded up."""
    if per_rank is None or stages == 1 or layers <= 0:
        return per_rank
    return -(-per_rank * -(-layers // stages) // layers)


def stage_layout(layout: VllmKv | None, layers: int, stages: int) -> VllmKv | None:
    """`layout` for the longest pipeline stage: each kind of layer in the stage's share, rounded
    up (a stage's slice may hold more of one kind than the average)."""
    if layout is None or stages == 1 or layers <= 0:
        return layout
    return attrs.evolve(layout, full=stage_share(layout.full, layers, stages),
                        sliding=stage_share(layout.sliding, layers, stages),
                        mamba=stage_share(layout.mamba, layers, stages))


def _check_bytes(layout: VllmKv | None, per_token: int | None, state: int, tokens: int) -> int:
    """The pool vLLM's start-up check asks of one GPU at `tokens` (`vllm_memory`); without a grouped
    layout, every layer at the full context plus one sequence's state."""
    if layout is not None:
        return layout.check_bytes(tokens)
    return (per_token or 0) * tokens + state


def _longest(layout: VllmKv | None, per_token: int, state: int, room: float, *, pool: bool) -> int:
    """The longest window (before rounding) whose KV fits `room` bytes: as vLLM's check counts a
    `pool` (with its null block), else one request's reservation out of the budget."""
    if layout is not None:
        return layout.longest(int(room), LONGEST_SEARCHED, null_block=pool)
    return int((room - state) // per_token)


def _reserve(layout: VllmKv | None, per_token: int | None, state: int, tokens: int) -> int | None:
    """One request's KV on one GPU (`_max_memory_usage_bytes_from_groups`); None = no cost model."""
    if layout is not None:
        return layout.needed(tokens)
    return per_token * tokens + state if per_token is not None else None


def _kv_cache_margin_base(layout: VllmKv | None, kv: int, state: int) -> str:
    """What the KV-cache margin multiplies, for its note."""
    if layout is None:
        return (f"KV {gib_text(kv)}" if not state else
                f"(KV {gib_text(kv - state)} + one sequence's recurrent state {gib_text(state)})")
    what = f"KV {gib_text(kv - state)}"
    if layout.sliding:
        what += f" ({layout.sliding} sliding-window layers at window {layout.window} + {layout.in_flight} in flight)"
    if state:
        what += f" + recurrent state pages {gib_text(state)}"
    return f"({what} + 1 block)"


def _why_no_kv_cache_flag(util_pinned: bool, extra: ExtraArgs, length_pin: int | None, per_token: int | None,
                version: tuple[int, ...] | None) -> str:
    """Why no KV-cache size is written (docs/maintainers/sizing.md#vllm-kv-cache-size); "" = it is."""
    if util_pinned:
        return "utilization pinned (vLLM fills its share)"
    if extra.sets_memory:
        return "extra_args set the memory"
    if length_pin == AUTO:
        return "max-model-len auto: vLLM sizes the window from its memory"
    if per_token is None:
        return "no KV cost model"
    if per_token == 0:
        return "no per-token KV cache to size a pool from"
    if version is not None and version < KV_PIN_SINCE:
        return f"vLLM {format_version(version)} lacks --kv-cache-memory-bytes (0.10.2+)"
    return ""


def _budget_window(avail: float, per_token: int | None, trained: int, fits: tuple[int, str] | None,
                   per_gpu: str, state: int, layout: VllmKv | None) -> tuple[int, str]:
    """`--max-model-len` and its note from `avail` bytes of KV room less `state` bytes of one
    sequence's recurrent state (docs/maintainers/sizing.md#--max-model-len, the Go original's `MaxCtxForBudget`), cut to
    `fits` = (tokens, what) the card holds on devices, then to the trained window."""
    if avail <= 0:
        max_len, note = CTX_STEP, "weights exceed the VRAM budget"
    elif per_token is None:
        max_len, note = FALLBACK_CTX, "no KV cost model; conservative default"
    elif per_token == 0:
        max_len, note = trained or FALLBACK_CTX, "no per-token KV cache"
    else:
        max_len = rounded_ctx(_longest(layout, per_token, state, avail, pool=False))
        note = f"sized to {gib(avail):.1f} GiB free of budget{per_gpu}" + (
            f", less {gib_text(state)} recurrent state" if state else "")
        if fits is not None and fits[0] < max_len:
            max_len, note = fits[0], f"{note}, cut to fit {fits[1]}"
    # vLLM refuses a window past the trained one, so the 4096 floor is capped too
    if 0 < trained < max_len:
        return trained, f"{note}; trained context" if avail <= 0 else "trained context"
    return max_len, note
