"""A plan pinned to its devices: the vendor variables, the `devices` metadata and the comment
line of each entry, and the choice between one card and a split for llama-server.

Which devices a model gets is decided in `resolve.devices`; this module only writes it into
the emitter's output.
"""

from __future__ import annotations

import attrs

from autogen.emit.entry import Entry, Plan
from autogen.resolve.devices import Placement


def _placed(entry: Entry, placement: Placement) -> Entry:
    """The entry with the placement's variables (replacing an emitter's of the same name), its
    `devices` metadata and a comment line saying why."""
    if not placement.gpus:
        return entry
    env = placement.env
    names = {e.split("=", 1)[0] for e in env}
    kept = tuple(e for e in entry.env if e.split("=", 1)[0] not in names)
    if env:
        line = f"devices {placement.label} ({placement.why}): {env[-1]}"
    else:
        line = f"devices {placement.label} ({placement.why}): a {placement.family} build takes no device pin"
    footprint = entry.footprint
    if footprint is not None:
        footprint = attrs.evolve(footprint, gpus=tuple(g.index for g in placement.gpus))
    return attrs.evolve(entry, env=kept + env, comment=(*entry.comment, line), footprint=footprint,
                        metadata=(*entry.metadata, ("devices", placement.label)))


def place_plan(plan: Plan, placement: Placement) -> Plan:
    """Every entry of the plan pinned to the same placement."""
    return attrs.evolve(plan, entries=tuple(_placed(e, placement) for e in plan.entries))


def prefer_one_card(split: Plan, single: Plan, placement: Placement, one: Placement) -> Plan:
    """Per entry, the one-card version when it keeps every sizing result of the split (context,
    layers, experts, KV type) and its estimate fits that card; else the split. One card avoids
    the pipeline hop between GPUs and leaves the other cards free."""
    card = one.gpus[0].vram_gb
    alone = {e.id: e for e in single.entries}
    entries, notes = [], []
    for entry in split.entries:
        alt = alone.get(entry.id)
        if alt is not None and _keeps_everything(alt, entry, card):
            entries.append(_placed(alt, one))
            notes.append(f"devices of {entry.id}: {one.label} alone (fits one card, loses nothing)")
        else:
            entries.append(_placed(entry, placement))
            notes.append(f"devices of {entry.id}: {placement.label}, layers split by VRAM")
    return attrs.evolve(split, entries=tuple(entries), notes=split.notes + tuple(notes))


def _keeps_everything(alone: Entry, split: Entry, card_gb: float) -> bool:
    """The one-card entry has the split's sizing results (context, layers, experts, KV type) and
    its estimate fits the card."""
    if alone.footprint is None or split.footprint is None:
        return False
    return alone.footprint.results == split.footprint.results and alone.footprint.vram_gb <= card_gb
