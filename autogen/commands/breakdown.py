"""A memory record's bytes, part by part, per device (`report_records.DeviceFigures`): what
`swapgen show`'s memory table and the plan page's bars read.

An engine's own report has llama.cpp's three parts (`footprint.MemoryRecord`: model, context,
compute); what it does not show (`unseen`) is named here by the charges swapgen's estimate made
for it (`emit.entry.Entry.charges`: runtime, base, a projector on the GPU, a speculative draft),
in their proportions, so every source's device adds up to the same total it always had.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from autogen.commands.report_records import PARTS, DeviceFigures, SourceFigures
from autogen.footprint import DeviceMemory, Fact, MemoryRecord, Source

#: A charge's name (`sizing.llama.fixed_charges`) → the part of `DeviceFigures` it fills; any
#: other charge is `other`.
CHARGE_PARTS = {"projector": "projector", "runtime": "runtime", "base": "base", "draft weights": "draft",
                "draft context": "draft"}
#: The parts `unseen` bytes are split into.
UNSEEN_PARTS = ("projector", "runtime", "base", "draft", "other")


def split_unseen(unseen: int, charges: Sequence[Fact]) -> dict[str, int]:
    """`unseen` bytes split over the parts its `charges` name, in their proportions, to the byte
    (the largest part takes the rounding); all `other` when nothing names them."""
    parts = dict.fromkeys(UNSEEN_PARTS, 0)
    whole = sum(int(c.bytes) for c in charges)
    if unseen <= 0:
        return parts
    if whole <= 0:
        parts["other"] = unseen
        return parts
    for charge in charges:
        parts[CHARGE_PARTS.get(charge.name, "other")] += unseen * int(charge.bytes) // whole
    largest = max(parts, key=lambda name: parts[name])
    parts[largest] += unseen - sum(parts.values())
    return parts


def device_figures(record: MemoryRecord, i: int, charges: Sequence[Fact],
                   estimate: MemoryRecord | None = None) -> DeviceFigures:
    """Device `i` of `record`; `estimate`: the estimate to compare it with (None = it is the estimate)."""
    d = record.devices[i]
    unseen = split_unseen(record.unseen[i] if i < len(record.unseen) else 0, charges)
    vs = None
    if estimate is not None and i < len(estimate.devices):
        vs = record.device_bytes(i) - estimate.device_bytes(i)
    return DeviceFigures(device=d.name, weights=d.model, kv_state=d.context, compute=d.compute, **unseen,
                         margin=record.margin[i] if i < len(record.margin) else 0, total=record.device_bytes(i),
                         vs_estimate=vs)


def host_figures(host: DeviceMemory | None) -> DeviceFigures | None:
    """Host memory beside the devices, in the same parts (what the engine keeps on the CPU)."""
    if host is None:
        return None
    return DeviceFigures(device=host.name, weights=host.model, kv_state=host.context, compute=host.compute,
                         **dict.fromkeys(UNSEEN_PARTS, 0), margin=0, total=host.total, vs_estimate=None)


def source_figures(source: Source, record: MemoryRecord | None, missing: str, used: bool, charges: Sequence[Fact],
                   estimate: MemoryRecord | None) -> SourceFigures:
    """One source's figures for an entry (`estimate`: the entry's own estimate, which the other
    sources are compared with), or why it has none."""
    if record is None:
        return SourceFigures(source=source, used=used, devices=(), host=None, note="", missing=missing)
    compare = estimate if source != Source.ESTIMATE else None
    devices = tuple(device_figures(record, i, charges, compare) for i in range(len(record.devices)))
    return SourceFigures(source=source, used=used, devices=devices, host=host_figures(record.host), note=record.note,
                         missing="")


def spread_figures(figures: DeviceFigures, shares: Sequence[float]) -> tuple[DeviceFigures, ...]:
    """One device's figures over several cards in proportion to `shares` (each card's VRAM, as
    llama-server splits layers and the routing planner spreads an estimate), each part rounded up
    so no card is told less than its share (`footprint.MemoryRecord.spread`)."""
    whole = sum(shares)
    out = []
    for i, share in enumerate(shares):
        parts = {p: math.ceil(getattr(figures, p) * share / whole) for p in PARTS}
        out.append(DeviceFigures(device=f"{figures.device}/{i}" if len(shares) > 1 else figures.device, **parts,
                                 total=sum(parts.values()), vs_estimate=None))
    return tuple(out)
