"""The id ledger: which id each file had on the previous run (`ids.json` in `cache_dir`), so
the file that held an id keeps it (`naming.assign_unique_ids`) and an id that changes is said
in one line (`id_changes`); docs/maintainers/discovery.md#model-ids.

Kept apart from the id rules (`discovery.naming`): a run served from the load memo reads the
`Discovery` record, which holds a ledger, and imports nothing that makes ids.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping

import attrs

from autogen.fsutil import write_if_changed

LEDGER = "ids.json"

@attrs.frozen
class Ledger:
    """path → (id, st_dev, st_ino, st_mtime_ns) of the previous run: the id a file had, and the
    file itself, to tell a renamed file (same inode and time) from a new one (a freed inode
    is reused, but not with the old file's modification time)."""

    entries: Mapping[str, tuple[str, int, int, int]] = attrs.field(factory=dict)

    @property
    def ids(self) -> dict[str, str]:
        return {path: entry[0] for path, entry in self.entries.items()}


def load_ledger(cache_dir: str) -> Ledger:
    """The previous run's ledger; empty when there is none or it cannot be read."""
    try:
        with open(os.path.join(cache_dir, LEDGER), encoding="utf-8") as f:
            data = json.load(f)
        return Ledger({p: (str(e[0]), int(e[1]), int(e[2]), int(e[3])) for p, e in data["ids"].items()})
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError):
        return Ledger()


def save_ledger(cache_dir: str, ledger: Ledger) -> None:
    with contextlib.suppress(OSError):
        os.makedirs(cache_dir, exist_ok=True)
        text = json.dumps({"ids": {p: list(e) for p, e in ledger.entries.items()}}, sort_keys=True)
        write_if_changed(os.path.join(cache_dir, LEDGER), text.encode("utf-8", "surrogatepass"), durable=False)


def id_changes(previous: Ledger, current: Ledger) -> list[str]:
    """One line per file whose id changed: the same path under a new id, or a file renamed (the
    same device and inode under a new path) whose name makes another id."""
    by_inode = {(dev, ino, mtime): (path, model_id) for path, (model_id, dev, ino, mtime) in current.entries.items()}
    lines = []
    for path, (old_id, dev, ino, mtime) in sorted(previous.entries.items()):
        now = current.entries.get(path)
        if now is not None:
            if now[0] != old_id:
                lines.append(f"id {old_id!r} of {path} is now {now[0]!r}: clients that use the old id must change")
            continue
        moved = by_inode.get((dev, ino, mtime))
        if moved is not None and moved[0] not in previous.entries and moved[1] != old_id:
            lines.append(f"id {old_id!r} is now {moved[1]!r}: {path} was renamed to {moved[0]}; clients that use "
                         "the old id must change")
    return lines
