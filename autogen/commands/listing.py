"""`swapgen list`: one aligned line per model (and per ignored folder), or JSON for scripts.
An Ollama entry is shown by its manifest, whose path spells its name (its blob's is a digest).

Files that are not models of their own are listed with what they are: "attached" when they
serve a model all the same (a projector, a draft, a LoRA adapter offered as a profile, the
other path of a file reached twice), else "ignored".

Reasons known at load time (unreadable header, missing shard, refused pin) are always shown;
reasons an emitter finds are read from the model's last fragment when it is current. An
incomplete download also shows how far it has come: the config's skip reason does not, so the
config stays put while the download grows.
"""

from __future__ import annotations

from autogen.commands.report_records import Download, ListRow
from autogen.commands.tasks import TaskGraph
from autogen.discovery import rows as discovered
from autogen.emit.dispatch import SKIPPED_BY_OVERRIDE
from autogen.numfmt import size_gb
from autogen.router.assemble import Fragment


def rows(graph: TaskGraph) -> list[ListRow]:
    """The front's (or the one host's) models, then each fleet host's, `host` naming it."""
    return [row for g in graph.graphs for row in _rows(g)]


def _rows(graph: TaskGraph) -> list[ListRow]:
    library = graph.library
    host = graph.host.name if graph.host is not None else None
    downloads = library.discovery.downloads
    out = []
    for job in library.jobs:
        skip = job.error
        entries = [job.row.id]
        memory: dict[str, str] = {}
        start_errors: dict[str, str] = {}
        path = graph.fragments[job.row.id]
        # the fragment tells what the emitter decided, when it was emitted from today's inputs
        if skip is None and graph.fragment_is_current(job):
            try:
                fragment: Fragment | None = Fragment.load(path)
            except (OSError, ValueError, KeyError, TypeError):
                fragment = None
            if fragment is not None:
                entries = list(fragment.entry_ids)
                memory = fragment.memory_sources
                start_errors = dict(fragment.start_errors)
                if fragment.skips and not entries:
                    skip = fragment.skips[0][1]
        if job.override is not None and job.override.skip:
            skip, entries = SKIPPED_BY_OVERRIDE, []
        # weights no engine swapgen knows loads: no engine serves them unless a custom row claims them
        serves = job.backend is not None and not job.foreign_unserved
        out.append(ListRow(
            id=job.row.id, host=host, task=graph.task_name(job.row.id), kind=job.role.value, role=job.role,
            engine=str(job.backend.engine) if serves else None, backend=job.backend_id if serves else None,
            why=job.backend.why if serves else "", path=job.row.path, manifest=job.row.manifest,
            size_gb=size_gb(job.row.size_bytes), entries=tuple(entries), skipped=skip,
            download=_download(downloads.get(job.row.id)), memory=memory, start_errors=start_errors))
    for item in library.discovery.ignored:
        out.append(ListRow(id=None, host=host, task=None, kind="attached" if item.attached else "ignored", role=None,
                           engine=None, backend=None, why="", path=item.path, manifest=None, size_gb=None,
                           entries=(), skipped=item.reason, download=None, memory={}, start_errors={}))
    return out


def _download(download: discovered.Download | None) -> Download | None:
    """{"have_gb": 1.86, "expected_gb": 4.69} (expected None while unknown), or None."""
    if download is None:
        return None
    return Download(have_gb=size_gb(download.have_bytes),
                    expected_gb=size_gb(download.want_bytes) if download.want_bytes else None)


def progress(download: Download | None) -> str:
    """`; 1.86 of 4.69 GiB on disk` for an incomplete download, else ""."""
    if download is None:
        return ""
    have, want = download.have_gb, download.expected_gb
    return f"; {have:.2f} of {want:.2f} GiB on disk" if want else f"; {have:.2f} GiB on disk so far"


def printable(text: str) -> str:
    """`text` with each character a terminal would not print (a newline in a file name) escaped,
    so that a listing keeps one line per model."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _status(row: ListRow) -> str:
    """`ok`; `SKIPPED`; `START FAILED` when `swapgen calibrate` saw an entry of it fail to start
    (it stays in the config: the reason column has the engine's line); or an ignored row's class."""
    if not row.task:
        return row.kind
    if row.skipped:
        return "SKIPPED"
    return "START FAILED" if row.start_errors else "ok"


#: The table's columns: (heading, the cell of a row).
COLUMNS = (("id", lambda r: f"{r.host}/{r.id or '-'}" if r.host else r.id or "-"),
           ("class", lambda r: r.kind), ("engine", lambda r: r.engine or "-"),
           ("backend", lambda r: f"{r.backend} ({r.why})" if r.why else r.backend or "-"),
           ("status", _status),
           ("memory", lambda r: "+".join(sorted(set(r.memory.values()))) or "-"))


def table(items: list[ListRow]) -> str:
    if not items:
        return "no models found\n"
    widths = [max(len(name), *(len(str(get(r))) for r in items)) for name, get in COLUMNS]
    lines = ["  ".join(name.ljust(w) for (name, _), w in zip(COLUMNS, widths, strict=False)) + "  path / reason"]
    for r in items:
        cells = "  ".join(str(get(r)).ljust(w) for (_, get), w in zip(COLUMNS, widths, strict=False))
        tail = printable(r.manifest or r.path) + (f"  ({r.skipped}{progress(r.download)})" if r.skipped else "")
        tail += "".join(f"  ({entry} failed to start under calibrate: {line})"
                        for entry, line in sorted(r.start_errors.items()))
        lines.append(f"{cells}  {tail}")
    lines.append(_summary(items))
    return "\n".join(lines) + "\n"


def _summary(items: list[ListRow]) -> str:
    """`9 served, 2 skipped, 1 ignored, 1 attached`."""
    served = sum(1 for r in items if r.task and not r.skipped)
    skipped = sum(1 for r in items if r.task and r.skipped)
    attached = sum(1 for r in items if not r.task and r.kind == "attached")
    ignored = sum(1 for r in items if not r.task) - attached
    tail = f", {attached} attached" if attached else ""
    return f"{served} served, {skipped} skipped, {ignored} ignored{tail}"
