"""`swapgen` in a child process that sends itself a signal at its N-th durable step.

    python tests/killpoints.py N SIGNAL swapgen-args…

A durable step is a rename that replaces a file (every write swapgen makes goes through one)
or doit saving its state. The signal is sent just before step N, so every state an
interruption can leave on disk is reached by some N, a half-written temp file included. The
child exits 0 when the run has fewer than N steps.
"""

from __future__ import annotations

import os
import signal
import sys


def arm(point: int, signum: int) -> None:
    from doit.dependency import SqliteDB  # noqa: PLC0415 - patched in the child only

    count = 0

    def step() -> None:
        nonlocal count
        count += 1
        if count == point:
            os.kill(os.getpid(), signum)

    real_replace, real_dump = os.replace, SqliteDB.dump

    def replace(src, dst, **kwargs):
        step()
        real_replace(src, dst, **kwargs)

    def dump(self):
        step()
        real_dump(self)

    os.replace = replace
    SqliteDB.dump = dump


if __name__ == "__main__":
    point, name, *argv = sys.argv[1:]
    arm(int(point), getattr(signal, name))
    from autogen.commands.cli import main

    sys.exit(main(argv))
