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
    return attrs.evolve(entry, env=kept + env, comment=(*entry.comment, line),
                        metadata=(*entry.metadata, ("devices", placement.label)))


def place_plan(plan: Plan, placement: Placement) -> Plan:
    """Every entry of the plan pinned to the same placement."""
    return attrs.evolve(plan, entries=tuple(_placed(e, placement) for e in plan.entries))


#: Sizing results an entry loses when it moves from a split to one card (llama metadata keys).
_SIZING_KEYS = ("ctx", "ngl", "n_cpu_moe", "kv_type")


def prefer_one_card(split: Plan, single: Plan, placement: Placement, one: Placement) -> Plan:
    """Per entry, the one-card version when it keeps every sizing result of the split (context,
    layers, experts, KV type) and its estimate fits that card; else the split. One card avoids
    the pipeline hop between GPUs and leaves the other cards free."""
    card = one.gpus[0].vram_gb
    alone = {e.id: e for e in single.entries}
    entries, notes = [], []
    for entry in split.entries:
        alt = alone.get(entry.id)
        same = alt is not None and all(dict(alt.metadata).get(k) == dict(entry.metadata).get(k) for k in _SIZING_KEYS)
        est = dict(alt.metadata).get("est_vram_gb", 0) if alt is not None else 0
        if same and isinstance(est, (int, float)) and est <= card:
            entries.append(_placed(alt, one))
            notes.append(f"devices of {entry.id}: {one.label} alone (fits one card, loses nothing)")
        else:
            entries.append(_placed(entry, placement))
            notes.append(f"devices of {entry.id}: {placement.label}, layers split by VRAM")
    return attrs.evolve(split, entries=tuple(entries), notes=split.notes + tuple(notes))
