"""One run that `swapgen watch` started: `python -m autogen.commands.watch_run WATCHER_PID ARGS…`.

The run is `swapgen ARGS…` in every way, and it ends by its own interruption rules (SIGTERM, as
`swapgen run` handles it) when the watcher dies, however it dies (`kill -9` included): Linux's
`prctl(PR_SET_PDEATHSIG)` signals it then. Armed here, in the run, rather than by a
`preexec_fn` between fork and exec, which is not safe beside the watcher's threads.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys

from autogen.commands.cli import main

#: linux/prctl.h: the signal a process gets when its parent ends.
PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int) -> None:
    """SIGTERM when the watcher dies (Linux; elsewhere nothing), and now if it already has (the
    signal is armed for the parent of the moment, which may already be init)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGTERM)


if __name__ == "__main__":
    watcher, *args = sys.argv[1:]
    die_with_parent(int(watcher))
    sys.exit(main(args))
