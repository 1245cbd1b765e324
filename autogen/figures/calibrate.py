"""Measuring one entry: start its real command as llama-swap would run it, read what the engine
reports about its own memory, stop it (`swapgen calibrate` runs this for each selected entry).

The command runs with `${PORT}` set to a free port, the entry's env over swapgen's own, bound
where its `--host` says, and is ready when its check endpoint (`/health`) answers 200 within the
timeout. llama-server is asked for its buffer lines at load (`LLAMA_ARG_LOG_VERBOSITY=4`, unless
the entry sets it); vLLM logs its figures at any level (each engine's `logs.LogReader`, named by
its row). Where `nvidia-smi` or `rocm-smi` is on PATH, the engine's processes' memory per GPU is
read while it runs. Then the engine is stopped (`process`). A command that does not start is a
measurement with the engine's own line. The engine's log is kept in
`cache_dir/calibration-logs/<id>.log`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Sequence

from autogen.emit.entry import Entry
from autogen.engines import engine_row, imported
from autogen.figures import logs
from autogen.figures.measurements import Measurement
from autogen.figures.process import EngineProcess, free_port
from autogen.footprint import HOST_DEVICE, MemoryRecord
from autogen.numfmt import gib_text
from autogen.resolve.job import Job

LOGS = "calibration-logs"


def command(entry: Entry, port: int) -> tuple[list[str], str]:
    """(argv, health URL) with `${PORT}` set."""
    argv = [a.replace("${PORT}", str(port)) for a in entry.argv]
    base = (entry.proxy or "http://127.0.0.1:${PORT}").replace("${PORT}", str(port))
    check = entry.check_endpoint if entry.check_endpoint not in (None, "none") else "/health"
    return argv, base.rstrip("/") + "/" + check.lstrip("/")


def log_reader(job: Job) -> logs.LogReader:
    """How the log of the job's engine is read (`EngineRow.log_reader`)."""
    return imported(engine_row(job.engine).log_reader)


def environment(job: Job, entry: Entry) -> dict[str, str]:
    env = {**os.environ, **dict(e.split("=", 1) for e in entry.env if "=" in e)}
    for name, value in log_reader(job).env:
        env.setdefault(name, value)
    return env


def measure(cache_dir: str, job: Job, entry: Entry, timeout: float) -> Measurement:
    """Start, wait, read, stop: one entry's measurement (never raises for the engine's failures)."""
    host = (entry.proxy or "http://127.0.0.1").split("//", 1)[-1].rsplit(":", 1)[0]
    argv, url = command(entry, free_port(host))
    log_path = os.path.join(cache_dir, LOGS, f"{entry.id}.log")
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
    its row says (`logs.LogReader.figures`)."""
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
        return logs.nvidia_per_process(apps, gpus, pids)
    if shutil.which("rocm-smi"):
        return logs.rocm_per_process(run("rocm-smi", "--showpids"), pids)
    return {}


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
