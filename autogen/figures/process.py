"""One engine started as llama-swap would start it, watched until it answers, and stopped with
everything it started.

The engine runs in a process group of its own (`start_new_session`): vLLM's engine core and
workers, and anything a wrapper script starts, are in it. Stopping sends SIGTERM to the group
(llama-server then prints its memory breakdown and exits; vLLM shuts its workers down), waits
`GRACE_S`, then SIGKILLs whatever of the group is left. `EngineProcess` is a context manager: leaving it
for any reason, an exception, Ctrl-C or SIGTERM included, stops the group.

Starting and stopping are not cut in half by a signal (`held_signals`): Ctrl-C that lands while the
engine's process is being created is held until its group is known (then the engine is stopped
before the interrupt goes on), and a second Ctrl-C while the engine is being stopped waits until
the group is gone, SIGKILL included.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence

#: Seconds between SIGTERM and SIGKILL.
GRACE_S = 15.0
POLL_S = 0.25
#: What stops a calibration: Ctrl-C, `kill`, a closed terminal.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def held_signals() -> Iterator[list[int]]:
    """`STOP_SIGNALS` that arrive inside the block are held, then handed to their own handlers on
    leaving it (the first one): nothing is left half started (running, its group not yet known)
    or half stopped (SIGTERM sent, SIGKILL not). Yields the signals held so far."""
    held: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield held
        return
    previous = {s: signal.signal(s, lambda signum, frame: held.append(signum)) for s in STOP_SIGNALS}
    try:
        yield held
    finally:
        for s, handler in previous.items():
            signal.signal(s, signal.SIG_DFL if handler is None else handler)
        if held:
            signal.raise_signal(held[0])


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.bind((host.strip("[]"), 0))
        return s.getsockname()[1]


class EngineProcess:
    """A started command, its log file and its process group."""

    def __init__(self, argv: Sequence[str], env: dict[str, str], log_path: str):
        self.argv, self.env, self.log_path = list(argv), env, log_path
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> EngineProcess:
        os.makedirs(os.path.dirname(self.log_path) or ".", exist_ok=True)
        with held_signals() as held:
            with open(self.log_path, "wb") as log:
                self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT,
                                             stdin=subprocess.DEVNULL, env=self.env, start_new_session=True)
            if held:  # interrupted while starting: `__exit__` will not run, so stop it here
                self.stop()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def exited(self) -> int | None:
        return self.proc.poll() if self.proc is not None else None

    def wait_healthy(self, url: str, timeout: float) -> str:
        """"healthy", "exited" (the engine stopped before answering) or "timeout"."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.exited is not None:
                return "exited"
            with contextlib.suppress(OSError, urllib.error.URLError, ValueError), \
                    urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return "healthy"
            time.sleep(POLL_S)
        return "exited" if self.exited is not None else "timeout"

    def pids(self) -> list[int]:
        """Every live process of the engine's group (Linux /proc; the leader elsewhere)."""
        if self.proc is None:
            return []
        found = []
        with contextlib.suppress(OSError):
            for name in os.listdir("/proc"):
                if name.isdigit():
                    with contextlib.suppress(OSError):
                        if os.getpgid(int(name)) == self.proc.pid:
                            found.append(int(name))
            return found
        return [self.proc.pid] if self.exited is None else []

    def stop(self) -> None:
        """SIGTERM to the group, SIGKILL to what is left after `GRACE_S`; returns when the leader
        is reaped and no member of the group is alive."""
        if self.proc is None:
            return
        pgid = self.proc.pid
        with held_signals():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGTERM)
            deadline = time.monotonic() + GRACE_S
            while time.monotonic() < deadline and (self.exited is None or self._group_alive(pgid)):
                time.sleep(POLL_S)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(GRACE_S)
            deadline = time.monotonic() + GRACE_S
            while self._group_alive(pgid) and time.monotonic() < deadline:
                time.sleep(POLL_S)

    @staticmethod
    def _group_alive(pgid: int) -> bool:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def log(self) -> str:
        with contextlib.suppress(OSError), open(self.log_path, encoding="utf-8", errors="replace") as f:
            return f.read()
        return ""
