"""The worker that runs what `swapgen watch` asks for:
`python -m autogen.commands.watch_run WATCHER_PID ARGS…`.

It stays up between runs, so a run after a change pays neither the interpreter's start nor
the imports, and reads the records the previous run wrote from memory (`records.read_record`):
from a finished download to the written config takes the settle time and the run's own work.
Each line on its stdin (`run`) runs `swapgen ARGS…` in every way (the run lock, crash
consistency, write on change), and answers one JSON line on stdout: the exit status and the
run's summary line. It ends at the end of its stdin, when a run was interrupted (SIGTERM or
Ctrl-C), when swapgen's own code changed on disk (the watcher starts a new worker, which runs
the new code), and when the watcher dies, however it dies (`kill -9` included): Linux's
`prctl(PR_SET_PDEATHSIG)` sends it SIGTERM then. Armed here, in the worker, rather than by a
`preexec_fn` between fork and exec, which is not safe beside the watcher's threads.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import json
import os
import signal
import sys

from autogen.commands.cli import main
from autogen.fsutil import code_stamp
from autogen.resolve.gpus import forget_readings

#: linux/prctl.h: the signal a process gets when its parent ends.
PR_SET_PDEATHSIG = 1
#: Exit statuses of an interrupted run (SIGTERM, Ctrl-C): the worker ends with it.
INTERRUPTED = (128 + signal.SIGTERM, 130)


def die_with_parent(parent: int) -> None:
    """SIGTERM when the watcher dies (Linux; elsewhere nothing), and now if it already has (the
    signal is armed for the parent of the moment, which may already be init)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGTERM)


def run_once(args: list[str]) -> tuple[int, str]:
    """(exit status, the last `swapgen: ` line of its output) of `swapgen ARGS…` in this process,
    which reads the machine again as a fresh process would (the GPUs: a new one is seen)."""
    forget_readings()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(args)
    summary = [line for line in out.getvalue().splitlines() if line.startswith("swapgen: ")]
    return code, summary[-1] if summary else ""


def code_changed(started: tuple) -> bool:
    """Whether swapgen's modules on disk are not the ones this process runs (an upgrade)."""
    code_stamp.cache_clear()
    return code_stamp() != started


def serve(args: list[str], requests=None, answers=None) -> int:
    """One run per request line; 0 at the end of the requests."""
    requests, answers = requests or sys.stdin, answers or sys.stdout
    started = code_stamp()
    for _ in requests:
        if code_changed(started):
            return 0
        code, summary = run_once(args)
        answers.write(json.dumps({"code": code, "summary": summary}) + "\n")
        answers.flush()
        if code in INTERRUPTED:
            return code
    return 0


if __name__ == "__main__":
    watcher, *arguments = sys.argv[1:]
    die_with_parent(int(watcher))
    sys.exit(serve(arguments))
