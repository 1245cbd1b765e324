"""`swapgen calibrate [ID ...]`: start each selected entry with its real command, one at a time,
read what the engine reports about its own memory, stop it, and keep the figures for later runs.

Each command runs as llama-swap would run it: its argv with `${PORT}` set to a free port, the
entry's env over swapgen's own, bound where its `--host` says, and is ready when its check
endpoint (`/health`) answers 200 within `--timeout` (the settings' `health_check_timeout`).
llama-server is asked for its buffer lines at load (`LLAMA_ARG_LOG_VERBOSITY=4`, unless the
entry sets it); vLLM logs its figures at any level (each engine's `engine_logs.LogReader`, named by
its row). Where `nvidia-smi` or `rocm-smi` is on PATH,
the engine's processes' memory per GPU is read while it runs. Then the engine is stopped
(`engine_process`), and the measurement is stored (`measurements`) under the model files' stamp,
the exact command and the engine binary's identity: the next run uses it for that command.

A command that does not start is stored with the engine's own line, and `swapgen list` shows it.
The engine's log is kept in `cache_dir/calibration-logs/<id>.log`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence

from autogen.commands import engine_logs
from autogen.commands.engine_figures import EngineFigures
from autogen.commands.engine_process import EngineProcess, free_port
from autogen.commands.library import Library
from autogen.commands.measurements import Measurement
from autogen.commands.tasks import Terminated
from autogen.emit.dispatch import Job
from autogen.emit.entry import Entry
from autogen.engines import engine_row, imported
from autogen.errors import SwapgenError
from autogen.footprint import HOST_DEVICE, MemoryRecord
from autogen.numfmt import gib_text

LOGS = "calibration-logs"


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


def command(entry: Entry, port: int) -> tuple[list[str], str]:
    """(argv, health URL) with `${PORT}` set."""
    argv = [a.replace("${PORT}", str(port)) for a in entry.argv]
    base = (entry.proxy or "http://127.0.0.1:${PORT}").replace("${PORT}", str(port))
    check = entry.check_endpoint if entry.check_endpoint not in (None, "none") else "/health"
    return argv, base.rstrip("/") + "/" + check.lstrip("/")


def log_reader(job: Job) -> engine_logs.LogReader:
    """How the log of the job's engine is read (`EngineRow.log_reader`)."""
    return imported(engine_row(job.engine).log_reader)


def environment(job: Job, entry: Entry) -> dict[str, str]:
    env = {**os.environ, **dict(e.split("=", 1) for e in entry.env if "=" in e)}
    for name, value in log_reader(job).env:
        env.setdefault(name, value)
    return env


def measure(library: Library, job: Job, entry: Entry, timeout: float) -> Measurement:
    """Start, wait, read, stop: one entry's measurement (never raises for the engine's failures)."""
    host = (entry.proxy or "http://127.0.0.1").split("//", 1)[-1].rsplit(":", 1)[0]
    argv, url = command(entry, free_port(host))
    log_path = os.path.join(library.settings.cache_dir, LOGS, f"{entry.id}.log")
    started = time.monotonic()
    per_process: dict[int, int] = {}
    try:
        with EngineProcess(argv, environment(job, entry), log_path) as engine:
            state = engine.wait_healthy(url, timeout)
            if state == "healthy":
                per_process = driver_memory(engine.pids())
    except OSError as exc:  # the binary is missing or not executable
        return Measurement(entry.id, job.engine, None, error=f"cannot start {argv[0]}: {exc.strerror or exc}")
    seconds = time.monotonic() - started
    text = engine.log()
    if state != "healthy":
        why = log_reader(job).error(text)
        if state == "timeout":
            why = f"no answer on {url} within {timeout:g} s" + (f" (last error: {why})" if why else "")
        return Measurement(entry.id, job.engine, None, error=why or f"exited before answering on {url}",
                           seconds=seconds)
    figures, kv_tokens = read_figures(job, entry, text)
    if figures is None:
        return Measurement(entry.id, job.engine, None, seconds=seconds,
                           error="started, but its log has no memory report (is its log verbosity below 4?)")
    devices = [_gpu_index(d.name, i, visible_devices(entry.env)) for i, d in enumerate(figures.devices)]
    held = tuple(per_process.get(i, 0) for i in devices) if per_process and None not in devices else ()
    return Measurement(entry.id, job.engine, figures, per_process=held, seconds=seconds, kv_tokens=kv_tokens)


def read_figures(job: Job, entry: Entry, text: str) -> tuple[MemoryRecord | None, int]:
    """(the engine's report as a memory record, the KV cache's capacity in tokens or 0), read as
    its row says (`engine_logs.LogReader.figures`)."""
    planned = entry.estimate.devices if entry.estimate is not None else ()
    return log_reader(job).figures(text, planned)


def visible_devices(env: Sequence[str]) -> list[int]:
    """The physical GPU indices the entry's device variable lists (CUDA0 is the first of them)."""
    for item in env:
        name, _, value = item.partition("=")
        if name.endswith("_VISIBLE_DEVICES") and all(v.strip().isdigit() for v in value.split(",")):
            return [int(v) for v in value.split(",")]
    return []


def _gpu_index(name: str, position: int, visible: Sequence[int]) -> int | None:
    """The driver's index of the engine's device `name` ("CUDA1" → the second visible GPU)."""
    if name == HOST_DEVICE:
        return None
    digits = "".join(c for c in name if c.isdigit())
    local = int(digits) if digits else position
    return visible[local] if local < len(visible) else local


def driver_memory(pids: Sequence[int]) -> dict[int, int]:
    """GPU index → bytes the processes hold, from nvidia-smi or rocm-smi when on PATH."""
    def run(*args: str) -> str:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            return subprocess.run(args, capture_output=True, text=True, timeout=20, check=False).stdout
        return ""

    if not pids:
        return {}
    if shutil.which("nvidia-smi"):
        apps = run("nvidia-smi", "--query-compute-apps=pid,gpu_uuid,used_memory", "--format=csv,noheader,nounits")
        gpus = run("nvidia-smi", "--query-gpu=index,uuid", "--format=csv,noheader")
        return engine_logs.nvidia_per_process(apps, gpus, pids)
    if shutil.which("rocm-smi"):
        return engine_logs.rocm_per_process(run("rocm-smi", "--showpids"), pids)
    return {}


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
            measured = measure(library, job, entry, limit)
            figures.measurements.put(library.stamps.get(job.row.id, ""), entry.argv, entry.env,
                                     figures.engine_identity(entry.argv[0]), measured)
            print(f"  {summary(measured, entry)}", flush=True)
            failed += bool(measured.error)
    print(f"swapgen: {len(chosen) - failed} measured, {failed} failed to start; run swapgen to use the figures")
    return 1 if failed else 0


def summary(measured: Measurement, entry: Entry) -> str:
    """One line: what the engine reported per device, beside swapgen's estimate of the same parts."""
    if measured.error:
        return f"failed to start: {measured.error}"
    assert measured.record is not None
    parts = ", ".join(f"{d.name} {gib_text(d.total)}" for d in measured.record.devices)
    estimate = entry.estimate
    ours = "" if estimate is None else (
        f" (swapgen's estimate of the same parts: {gib_text(sum(d.total for d in estimate.devices))})")
    return f"measured in {measured.seconds:.1f} s: {parts}{ours}"
