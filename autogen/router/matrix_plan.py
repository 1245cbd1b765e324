"""`routing: auto`: llama-swap's `matrix` router planned from each entry's VRAM estimate.

A pure function of the served entries (`Load`: estimate, devices, size on disk, from each
entry's `Footprint`) and the host's
cards (`Device`) → `MatrixPlan`: the maximal sets of entries that fit together on every card
they use, every CPU-only entry in each set, an evict cost per entry. `docs/maintainers/routing.md` gives the
rules and the measurements; docs/vram-routing.md an example.

- An entry's demand on a card is its `est_vram_gb` spread over its devices in proportion to
  their VRAM: llama-server's `-ts` (and its default split) and vLLM's per-GPU
  `--gpu-memory-utilization` both scale with the card. Its devices are the GPUs it is pinned to
  (`devices` in its metadata), else llama-server spreads over every card and any other engine uses
  the first one.
- Entries of one model (its llama profiles) never share: they are the same weights twice.
- Sets are the maximal feasible sets (no entry can join without overflowing a card). Their
  number can grow exponentially with the entry count; past `MAX_EXACT_SETS` the plan keeps a
  pair cover instead: maximal sets chosen so that every two entries that fit together share one.
  What that drops (some combinations of three or more) is named in a warning.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable, Sequence

import attrs
from attrs import frozen

from autogen.engines import ENGINES
from autogen.footprint import Footprint
from autogen.numfmt import format_g, size_gb
from autogen.router.fragments import quote

#: Above this many maximal sets the plan switches to a pair cover (`docs/maintainers/routing.md`).
MAX_EXACT_SETS = 1000
#: Estimates are compared in hundredths of a GiB (they are written with two decimals).
_UNIT = 100
#: The engines (as footprints name them) that spread layers over every visible card
#: (`EngineRow.splits_layers`: llama-server); others take the first device.
SPREADING_ENGINES = frozenset(row.label for row in ENGINES.values() if row.splits_layers)


@frozen
class Load:
    """What one served entry asks of the cards, from its typed footprint (`footprint.Footprint`).

    Example: Load(entry_id="qwen3-8b-share", model_id="qwen3-8b", est_vram_gb=10.9,
    devices=(0,), size_gb=4.68, engine="llama.cpp").
    """

    entry_id: str
    #: The model the entry belongs to (a model's profiles share its id here).
    model_id: str
    #: 0 = the entry uses no GPU (a CPU-only engine).
    est_vram_gb: float
    #: The GPUs the entry is pinned to; None = the engine's default devices.
    devices: tuple[int, ...] | None
    #: The model's files on disk: the cost of loading it again (evict cost).
    size_gb: float
    engine: str
    #: GiB it keeps on each of its cards while its vLLM daemon sleeps: in every set, it is in or not.
    asleep_gb: float = 0.0

    @classmethod
    def of(cls, entry_id: str, model_id: str, footprint: Footprint | None) -> Load:
        """The entry's demand as its metadata states it (GiB to two decimals); no footprint = a
        CPU-only entry swapgen knows nothing of."""
        if footprint is None:
            return cls(entry_id=entry_id, model_id=model_id, est_vram_gb=0.0, devices=None, size_gb=0.0, engine="")
        return cls(entry_id=entry_id, model_id=model_id, est_vram_gb=footprint.vram_gb, devices=footprint.gpus or None,
                   size_gb=footprint.disk_gb, engine=footprint.engine, asleep_gb=size_gb(footprint.asleep))


@frozen
class Device:
    """One card the matrix plans against. `index` None = the pooled card reading (no inventory).

    Example: Device(index=0, vram_gb=24.0, shared_gb=22.0).
    """

    index: int | None
    vram_gb: float
    #: What entries sharing the card may take together: the settings' `vram_budget_gb`, capped
    #: by the card (the rest is the headroom the user keeps). One entry alone may take the card.
    shared_gb: float | None = None

    @property
    def label(self) -> str:
        return "the card" if self.index is None else f"GPU {self.index}"


@frozen
class MatrixPlan:
    """`routing.router.settings.matrix`, ready to render, with what the planner has to say."""

    #: (var, entry id) in entry-id order: `m1`, `m2`, … (llama-swap's schema: 1–8 alphanumerics).
    vars: tuple[tuple[str, str], ...]
    #: Each maximal set as entry ids (sorted), in a stable order.
    sets: tuple[tuple[str, ...], ...]
    #: (entry id, cost): whole GiB on disk, at least 1.
    evict_costs: tuple[tuple[str, int], ...]
    #: Entries that use no GPU: in every set.
    cpu_only: tuple[str, ...]
    #: False when the maximal sets were too many and a pair cover was kept.
    exact: bool
    warnings: tuple[str, ...]
    #: Per set: (device label, GiB used, GiB of the card) of each card it uses.
    usage: tuple[tuple[tuple[str, float, float], ...], ...]


def host_devices(eligible_gpus: Sequence, card_gb: float | None, budget_gb: float | None) -> tuple[Device, ...]:
    """The cards to plan against: each eligible GPU of the inventory; else one card of the card
    reading; else one of the per-model budget (or 8 GiB, the default budget). Shared, each card
    holds at most `budget_gb` (as `resolve.devices.budget_gb` charges a card)."""
    if eligible_gpus:
        cards = [(g.index, g.vram_gb) for g in sorted(eligible_gpus, key=lambda g: g.index)]
    else:
        cards = [(None, card_gb or budget_gb or 8.0)]
    return tuple(Device(i, vram, min(vram, budget_gb) if budget_gb else None) for i, vram in cards)


def cards_used(load: Load, devices: Sequence[Device]) -> list[int | None]:
    """The indices of the devices the entry runs on: its pins, else every card for an engine that
    spreads its layers, else the first card."""
    indices = [d.index for d in devices]
    used = [i for i in (load.devices or ()) if i in indices]
    return used or (indices if load.engine in SPREADING_ENGINES else indices[:1])


def with_sleepers(loads: Sequence[Load], devices: Sequence[Device]) -> tuple[list[Load], tuple[Device, ...]]:
    """The loads and cards as the sets must see them when vLLM models sleep: what each sleeping
    daemon keeps on its cards is there in every set, so it comes off those cards (and their shared
    size), and off the sleeper's own estimate, which holds it too (docs/maintainers/routing.md#sleeping-vllm-models)."""
    held = {d.index: 0.0 for d in devices}
    for load in loads:
        for card in cards_used(load, devices) if load.asleep_gb > 0 else ():
            held[card] += load.asleep_gb
    if not any(held.values()):
        return list(loads), tuple(devices)
    cards = tuple(Device(d.index, round(d.vram_gb - held[d.index], 2),
                         round(d.shared_gb - held[d.index], 2) if d.shared_gb else None) for d in devices)
    own = [attrs.evolve(load, est_vram_gb=round(load.est_vram_gb - load.asleep_gb * len(cards_used(load, devices)), 2))
           if load.asleep_gb > 0 else load for load in loads]
    return own, cards


def demand(load: Load, devices: Sequence[Device]) -> tuple[int, ...]:
    """Hundredths of a GiB the entry takes on each device (rounded up, so sums stay safe)."""
    if load.est_vram_gb <= 0:
        return (0,) * len(devices)
    used = cards_used(load, devices)
    total = sum(d.vram_gb for d in devices if d.index in used)
    return tuple(math.ceil(load.est_vram_gb * _UNIT * d.vram_gb / total - 1e-9) if d.index in used else 0
                 for d in devices)


def capacity(device: Device) -> int:
    """Hundredths of a GiB one entry alone may take of the card."""
    return math.floor(device.vram_gb * _UNIT + 1e-9)


def shared_capacity(device: Device) -> int:
    """Hundredths of a GiB two or more entries may take of the card together."""
    return math.floor((device.shared_gb or device.vram_gb) * _UNIT + 1e-9)


def card_problems(needs: Iterable[tuple[int, ...]], devices: Sequence[Device]) -> list[int]:
    """The devices (positions) a set of entries overflows: a card holding one entry may be
    filled to its VRAM, one holding several to its shared capacity."""
    needs = list(needs)
    problems = []
    for k, d in enumerate(devices):
        on_card = [need[k] for need in needs if need[k]]
        limit = capacity(d) if len(on_card) == 1 else shared_capacity(d)
        if sum(on_card) > limit:
            problems.append(k)
    return problems


class _TooMany(Exception):
    pass


class _Packing:
    """Entries as bit positions, their demands, the cards' capacities, and which pairs may share
    (room on every card and different models).

    A load on every card is one integer, a field per card with a guard bit above it (SWAR):
    adding an entry is one addition, and "fits on every card" one mask test. Which entries still
    fit beside a load is a lookup: per card, the entries sorted by demand and the mask of each
    prefix of that order."""

    def __init__(self, demands: list[tuple[int, ...]], models: list[str], caps: tuple[int, ...]):
        self.n, self.caps = len(demands), caps
        self.width = width = max(caps, default=0).bit_length() + 2  # room for load + demand, each ≤ a card
        guard = 1 << (width - 1)
        self.guard = sum(guard << (k * width) for k in range(len(caps)))
        self.offset = sum((guard - 1 - cap) << (k * width) for k, cap in enumerate(caps))
        self.demand = [sum(d << (k * width) for k, d in enumerate(need)) for need in demands]
        self.by_demand: list[list[int]] = []
        self.prefix: list[list[int]] = []
        for k in range(len(caps)):
            order = sorted(range(self.n), key=lambda i, k=k: demands[i][k])
            self.by_demand.append([demands[i][k] for i in order])
            masks = [0]
            for i in order:
                masks.append(masks[-1] | 1 << i)
            self.prefix.append(masks)
        self.compat = [0] * self.n
        for i in range(self.n):
            for j in range(i + 1, self.n):
                if models[i] != models[j] and self.fits(self.demand[i], j):
                    self.compat[i] |= 1 << j
                    self.compat[j] |= 1 << i

    def fits(self, load: int, i: int) -> bool:
        return not (load + self.demand[i] + self.offset) & self.guard

    def addable(self, mask: int, load: int) -> int:
        """The entries of `mask` that fit beside `load` on every card."""
        field = (1 << self.width) - 1
        for k, cap in enumerate(self.caps):
            free = cap - (load >> (k * self.width) & field)
            mask &= self.prefix[k][bisect_right(self.by_demand[k], free)]
        return mask

    def joined(self, mask: int, load: int) -> int | None:
        """The load with every entry of `mask` added, or None when they do not all fit."""
        for i in _bits(mask):
            if not self.fits(load, i):
                return None
            load += self.demand[i]
        return load

    def maximal_sets(self, limit: int) -> list[int]:
        """Every maximal feasible set (bitmask), Bron–Kerbosch style without a pivot (a pivot
        is only sound for pairwise constraints): R grows, P holds what may still join, X what
        may join but was already explored. Raises _TooMany past `limit` sets."""
        found: list[int] = []

        def report(members: int) -> None:
            found.append(members)
            if len(found) > limit:
                raise _TooMany

        def expand(r: int, load: int, p: int, x: int) -> None:
            if not p:
                if not x:
                    report(r)
                return
            if all(self.compat[i] & p == p & ~(1 << i) for i in _bits(p)):
                whole = self.joined(p, load)
                if whole is not None:  # all of P joins: R ∪ P is the one candidate here
                    joined = r | p
                    if not any(self.compat[i] & joined == joined and self.fits(whole, i) for i in _bits(x)):
                        report(joined)
                    return
            for v in _bits(p):
                p &= ~(1 << v)
                grown = load + self.demand[v]
                expand(r | 1 << v, grown, self.addable(p & self.compat[v], grown),
                       self.addable(x & self.compat[v], grown))
                x |= 1 << v

        expand(0, 0, (1 << self.n) - 1, 0)
        return found

    def pair_cover(self) -> list[int]:
        """Maximal sets such that every pair that may share is in one: for each pair not yet
        covered (in index order), grow it greedily by the lowest entry that still has an
        uncovered pair with a member, then by the lowest that fits."""
        covered = [0] * self.n
        sets = []
        for i in range(self.n):
            if not self.compat[i]:
                sets.append(1 << i)
                continue
            for j in _bits(self.compat[i] & ~((1 << (i + 1)) - 1)):
                if covered[i] >> j & 1:
                    continue
                members = 1 << i | 1 << j
                load = self.demand[i] + self.demand[j]
                common = self.compat[i] & self.compat[j]
                seen = covered[i] & covered[j]  # entries already paired with every member
                while candidates := self.addable(common & ~members, load):
                    fresh = candidates & ~seen
                    pick = fresh or candidates
                    best = (pick & -pick).bit_length() - 1
                    seen &= covered[best]
                    members |= 1 << best
                    common &= self.compat[best]
                    load += self.demand[best]
                for m in _bits(members):
                    covered[m] |= members & ~(1 << m)
                sets.append(members)
        return sets


def _bits(mask: int):
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


def plan_matrix(loads: Sequence[Load], devices: Sequence[Device], limit: int = MAX_EXACT_SETS) -> MatrixPlan | None:
    """The matrix for these entries on these cards; None when there is no entry to route."""
    if not loads:
        return None
    ordered = sorted(loads, key=lambda item: item.entry_id)
    caps = tuple(capacity(d) for d in devices)
    shared = tuple(shared_capacity(d) for d in devices)
    cpu = [item for item in ordered if item.est_vram_gb <= 0]
    gpu, warnings = [], []
    for item in (x for x in ordered if x.est_vram_gb > 0):
        need = demand(item, devices)
        over = [f"{d.label} ({need[k] / _UNIT:g} of {format_g(d.vram_gb)} GiB)"
                for k, d in enumerate(devices) if need[k] > caps[k]]
        if over:
            warnings.append(f"{item.entry_id!r} needs more than {', '.join(over)}: it is in no set and runs alone")
        else:
            gpu.append((item, need))
    # an entry above the shared capacity of a card fills that card: alone there it fits, and
    # nothing else fits beside it
    packed = [tuple(min(n, c) for n, c in zip(need, shared, strict=True)) for _, need in gpu]
    packing = _Packing(packed, [item.model_id for item, _ in gpu], shared)
    exact = True
    try:
        masks = packing.maximal_sets(limit)
    except _TooMany:
        exact = False
        masks = packing.pair_cover()
        warnings.append(f"more than {limit} maximal sets: kept {len(masks)} sets in which every two models that "
                        "fit together run together; some combinations of three or more are left out "
                        "(llama-swap then unloads one model more than the cards require)")
    alone = [f"{item.entry_id!r} ({format_g(item.est_vram_gb)} GiB)" for k, (item, _) in enumerate(gpu)
             if not packing.compat[k]]
    if alone:
        warnings.append(f"too big to share a card with any other model, so each runs alone: {', '.join(alone)}; "
                        "a smaller `vram_budget_gb` (or a llama profile with one) lets a model pair")
    cpu_ids = tuple(item.entry_id for item in cpu)
    sets = sorted(tuple(sorted([gpu[k][0].entry_id for k in _bits(m)] + list(cpu_ids))) for m in masks)
    if not sets and cpu_ids:
        sets = [tuple(sorted(cpu_ids))]
    if not sets:
        return None
    need_of = {item.entry_id: need for item, need in gpu}
    usage = tuple(_usage(members, need_of, devices) for members in sets)
    members_all = sorted({e for s in sets for e in s})
    size_of = {item.entry_id: item.size_gb for item in ordered}
    return MatrixPlan(vars=tuple((f"m{i + 1}", e) for i, e in enumerate(members_all)), sets=tuple(sets),
                      evict_costs=tuple((e, max(1, math.ceil(size_of[e] - 1e-9))) for e in members_all),
                      cpu_only=cpu_ids, exact=exact, warnings=tuple(warnings), usage=usage)


def _usage(members: Sequence[str], need_of: dict[str, tuple[int, ...]], devices: Sequence[Device]):
    used = [sum(need_of[e][k] for e in members if e in need_of) for k in range(len(devices))]
    return tuple((d.label, used[k] / _UNIT, d.vram_gb) for k, d in enumerate(devices) if used[k])


def factored(sets: Sequence[tuple[str, ...]]) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    """Sets that differ in one member, written once: (common members, alternatives). Each set
    joins the group of the key (the set less one member) that the most sets share, so
    `a & b & (c | d | e)` stands for three sets. Exact: the groups expand to `sets`, no more."""
    counts = Counter(key for members in sets for key in _keys(members))
    groups: dict[tuple[str, ...], list[str]] = {}
    for members in sets:
        key = max(_keys(members), key=lambda k: (counts[k], k))
        groups.setdefault(key, []).append(next(m for m in members if m not in key))
    return [(key, tuple(sorted(alts))) for key, alts in groups.items()]


def _keys(members: tuple[str, ...]) -> list[tuple[str, ...]]:
    return [members[:i] + members[i + 1:] for i in range(len(members))]


def render_matrix(plan: MatrixPlan) -> list[str]:
    """The `routing:` block, one line per var, cost and group of sets (`factored`); each set's
    comment says what it takes of each card (the most of its alternatives)."""
    var_of = {entry: var for var, entry in plan.vars}
    usage_of = dict(zip(plan.sets, plan.usage, strict=True))
    lines = ["routing:", "  router:", "    use: matrix", "    settings:", "      matrix:", "        vars:"]
    lines += [f"          {var}: {quote(entry)}" for var, entry in plan.vars]
    lines.append("        evict_costs:")
    lines += [f"          {var_of[entry]}: {cost}" for entry, cost in plan.evict_costs]
    lines.append("        sets:")
    for name, key, alts in named_sets(plan):
        most: dict[str, tuple[float, float]] = {}
        for alt in alts:
            for label, used, card in usage_of[tuple(sorted((*key, alt)))]:
                most[label] = (max(used, most.get(label, (0.0, card))[0]), card)
        up_to = "up to " if len(alts) > 1 else ""
        where = ", ".join(f"{up_to}{used:g} of {format_g(card)} GiB on {label}" for label, (used, card) in most.items())
        if len(alts) == 1:
            terms = [var_of[e] for e in sorted((*key, *alts))]
        else:
            choice = " | ".join(var_of[a] for a in alts)
            terms = [*(var_of[e] for e in key), f"({choice})" if key else choice]
        lines.append(f"          {name}: \"{' & '.join(terms)}\"  # {where or 'no GPU'}")
    return lines


def named_sets(plan: MatrixPlan) -> list[tuple[str, tuple[str, ...], tuple[str, ...]]]:
    """(name, common members, alternatives) per line of the written `sets:` (`factored`): `s1`,
    `s2`, … zero-padded to one width."""
    groups = factored(plan.sets)
    width = len(str(len(groups)))
    return [(f"s{k:0{width}d}", key, alts) for k, (key, alts) in enumerate(groups, start=1)]


def check_plan(plan: MatrixPlan, loads: Sequence[Load], devices: Sequence[Device],
               sets: Iterable[frozenset[str]] | None = None) -> list[str]:
    """Problems of a plan (a bug if any): a set that overflows a card, two profiles of one model
    in a set, a CPU-only entry missing from a set. `sets`: the concrete sets as written (the
    expanded DSL), default the plan's own."""
    by_id = {item.entry_id: item for item in loads}
    problems = []
    for members in sets if sets is not None else (frozenset(s) for s in plan.sets):
        needs = [demand(by_id[e], devices) for e in members]
        for k in card_problems(needs, devices):
            d = devices[k]
            used = sum(need[k] for need in needs) / _UNIT
            problems.append(f"set {sorted(members)} takes {used:g} GiB of {d.label} ({format_g(d.vram_gb)} GiB, "
                            f"{format_g(d.shared_gb or d.vram_gb)} GiB when shared)")
        models = [by_id[e].model_id for e in members if by_id[e].est_vram_gb > 0]
        if len(models) != len(set(models)):
            problems.append(f"set {sorted(members)} holds two entries of one model")
        if set(plan.cpu_only) - members:
            problems.append(f"set {sorted(members)} lacks CPU-only {sorted(set(plan.cpu_only) - members)}")
    return problems
