"""`swapgen calibrate [ID ...]`: measure each selected entry with its real command, one at a
time (`figures.calibrate.measure`), and keep the figures for later runs: the measurement is
stored (`figures.measurements`) under the model files' stamp, the exact command and the engine
binary's identity, and the next run uses it for that command. SIGTERM and SIGHUP stop the
engine that runs as Ctrl-C does.

A command that does not start is stored with the engine's own line, and `swapgen list` shows it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence

from autogen.commands.library import Library
from autogen.commands.tasks import Terminated
from autogen.emit.entry import Entry
from autogen.errors import SwapgenError
from autogen.figures.calibrate import measure, summary
from autogen.figures.plan import EngineFigures
from autogen.resolve.job import Job


@contextlib.contextmanager
def _stops_like_ctrl_c() -> Iterator[None]:
    """SIGTERM, and SIGHUP (the terminal closed) unless it is ignored (`nohup`), stop the engine
    that runs as Ctrl-C does (`tasks.Terminated`), instead of ending swapgen with the engine, in a
    session of its own, still running."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise Terminated(signum)

    caught = [s for s in (signal.SIGTERM, signal.SIGHUP) if signal.getsignal(s) is not signal.SIG_IGN]
    previous = {s: signal.signal(s, handler) for s in caught}
    try:
        yield
    finally:
        for s, handler_before in previous.items():
            signal.signal(s, signal.SIG_DFL if handler_before is None else handler_before)


def selected(library: Library, ids: Sequence[str]) -> list[tuple[Job, Entry]]:
    """The entries to measure: those named (an entry id, or a model id for all its entries),
    else every served entry of an engine whose start can be measured. Raises SwapgenError for an
    id that names none."""
    wanted = set(ids)
    found: list[tuple[Job, Entry]] = []
    seen: set[str] = set()
    for job in library.jobs:
        model = job.row.id
        # a profile's id extends its model's: `-<name>`, `-draft`, `+<LoRA adapter>`
        if wanted and not (model in wanted or any(i.startswith((model + "-", model + "+")) for i in wanted)):
            continue
        if not job.served_by.measured or job.error is not None:
            if model in wanted:
                raise SwapgenError(f"calibrate: {model} is not served by llama-server or vLLM here "
                                   f"({job.error or 'engine ' + job.engine})")
            continue
        for entry in library.host_plan(job).entries:  # the commands as they run here (before `path_map`)
            if not wanted or model in wanted or entry.id in wanted:
                found.append((job, entry))
                seen.add(entry.id)
        seen.add(model)
    missing = sorted(wanted - seen)
    if missing:
        raise SwapgenError(f"calibrate: no served entry {', '.join(repr(m) for m in missing)}; "
                           "`swapgen list` shows the ids")
    return found


def main(library: Library, ids: Sequence[str], timeout: float | None = None) -> int:
    """Measure the selected entries; 1 when any failed to start."""
    chosen = selected(library, ids)
    if not chosen:
        print("swapgen: calibrate: no llama-server or vLLM entry to measure", file=sys.stderr)
        return 0
    limit = timeout if timeout is not None else float(library.settings.health_check_timeout)
    figures: EngineFigures = library.engine
    failed = 0
    with _stops_like_ctrl_c():
        for n, (job, entry) in enumerate(chosen, 1):
            print(f"[{n}/{len(chosen)}] {entry.id}: starting {os.path.basename(entry.argv[0])} …", flush=True)
            measured = measure(library.settings.cache_dir, job, entry, limit)
            figures.measurements.put(library.stamps.get(job.row.id, ""), entry.argv, entry.env,
                                     figures.engine_identity(entry.argv[0]), measured)
            print(f"  {summary(measured, entry)}", flush=True)
            failed += bool(measured.error)
    print(f"swapgen: {len(chosen) - failed} measured, {failed} failed to start; run swapgen to use the figures")
    return 1 if failed else 0


