"""Crash-safe file writes and the run lock.

llama-swap polls its config every 2 s and restarts every model on a change, so the output is
written only when its bytes differ, through a temp file in the same folder, fsync'd, then
renamed over the old one: a reader sees the old file or the new one, never half of either.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import os
import stat
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager

from autogen.errors import SwapgenError


def read_bytes(path: str) -> bytes | None:
    """The bytes of the regular file `path`; None when there is none to read (absent,
    unreadable, or a folder, a device, a FIFO or a socket: never read, so a FIFO cannot hang
    the run, nor a device fill it)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except (OSError, ValueError):  # absent, unreadable, a name too long, a NUL byte
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    with os.fdopen(fd, "rb") as f:
        return f.read()


class NotAFile(OSError):
    """`write_if_changed` was asked to replace what is not a regular file (a folder, a device,
    a FIFO, a socket): a rename would put a file in its place (`output: /dev/null` as root)."""

    def __init__(self, path: str, mode: int):
        super().__init__(errno.EEXIST, f"{path} is {kind_of(mode)}, not a file swapgen replaces", path)


_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"))


def kind_of(mode: int) -> str | None:
    """What a file that is not a regular one is ("a folder", "a FIFO", …); None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def file_size(path: str) -> int | None:
    """Bytes of `path` through symlinks; None when it is absent or unreadable (a component not
    downloaded yet is a warning for the emitters, not an error). A path with a NUL byte (YAML
    lets `"\0"` through) is None too: the image emitter refuses it with a reason of its own."""
    try:
        return os.stat(path).st_size
    except (OSError, ValueError):
        return None


def _temp_file(path: str, data: bytes, *, durable: bool) -> tuple[str, str]:
    """(folder, temp file) of `data` written beside `path`, under a name `remove_stale_temps`
    knows; fsync'd when `durable`. Nothing is left behind when writing fails."""
    folder = os.path.dirname(os.path.abspath(path)) or "."
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            if durable:
                f.flush()
                os.fsync(f.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return folder, tmp


def write_if_changed(path: str, data: bytes, *, mode: int = 0o644, durable: bool = True) -> bool:
    """Atomically replace `path` with `data` unless it already holds exactly that. True = written.

    A symlink is followed (its target is replaced, the link stays) and an existing file keeps
    its permissions (a config holding API keys may be 0600); `mode` is for new files.
    `durable=False` skips the fsyncs: for cache files a lost write only costs a re-emit. Only
    a regular file is ever replaced: anything else at `path` raises `NotAFile`."""
    path = os.path.realpath(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise NotAFile(path, st.st_mode)
    if st is not None and st.st_size == len(data) and read_bytes(path) == data:
        return False
    if st is not None:
        mode = st.st_mode & 0o7777
    folder, tmp = _temp_file(path, data, durable=durable)
    try:
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if not durable:
        return True
    try:
        dir_fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError:
        pass  # some file systems cannot fsync a folder; the rename is still atomic
    return True


def write_new(path: str, data: bytes) -> bool:
    """Create `path` holding `data`, whole or not at all, and never in place of a file: False
    when `path` already exists. The data goes to a temp file first, then a hard link gives it
    its name (`link` refuses an existing name, where `rename` would replace it)."""
    _, tmp = _temp_file(path, data, durable=True)
    try:
        os.chmod(tmp, 0o644)
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    return True


def remove_stale_temps(path: str) -> None:
    """Delete the temp files `write_if_changed` leaves beside `path` when a process is killed
    between writing one and renaming it. Call only under the run lock (no write in flight)."""
    path = os.path.realpath(path)
    folder, base = os.path.split(path)
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        if name.startswith(f".{base}.") and name.endswith(".tmp"):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(folder, name))


LOCK_NAME = "swapgen.lock"


@contextmanager
def run_lock(cache_dir: str, *, timeout: float = 600.0, notify=None) -> Iterator[None]:
    """Hold an exclusive lock in `cache_dir` so two runs never interleave.

    The second run waits (saying so once through `notify`) and fails clearly after `timeout`
    seconds. The lock is an `flock`, released by the kernel when a process dies (kill -9).
    """
    os.makedirs(cache_dir, exist_ok=True)
    path = os.path.join(cache_dir, LOCK_NAME)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + timeout
        told = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                if not told and notify is not None:
                    notify(f"swapgen: another run holds {path}; waiting (up to {timeout:g} s)")
                    told = True
                if time.monotonic() >= deadline:
                    raise SwapgenError(
                        f"{path}: another swapgen run still holds the lock after {timeout:g} s; "
                        "wait for it to finish or stop it"
                    ) from None
                time.sleep(0.1)
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        yield
    finally:
        os.close(fd)


@functools.cache
def code_stamp() -> tuple[tuple[str, int, int], ...]:
    """(path, size, mtime_ns) of every module of the package, folders included: the part of a
    cache key that says which swapgen computed the cached value. Stat'ed once per process."""
    package = os.path.dirname(os.path.abspath(__file__))
    stamp = []
    for folder, dirs, files in os.walk(package):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                st = os.stat(path)
                stamp.append((os.path.relpath(path, package), st.st_size, st.st_mtime_ns))
    return tuple(stamp)
