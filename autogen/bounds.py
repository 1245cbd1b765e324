"""What swapgen reads from its users, bounded: bytes, values once YAML aliases are expanded,
and nesting depth (docs/maintainers/safe-io.md#bounded-input).

One reader for every file a user hands swapgen (the settings, a fleet host's settings, the
backends file, a config or preset given to `swapgen validate`, the files of a `--config-dir`):
`read_input` refuses a regular file larger than its limit before reading a byte of it, and
reads a device or a pipe only up to the limit (`/dev/zero` is refused, never read to its end);
a FIFO nobody writes to reads as empty instead of waiting. `check_shape` walks parsed data
without recursion and stops at the first value past a limit, so an alias bomb (each level
repeating the one before nine times) costs as much as the limit and no more.
"""

from __future__ import annotations

import fcntl
import os
import stat

from attrs import frozen


@frozen
class Limits:
    """The bounds of one kind of input, as docs/settings.md#limits states them.

    Example: Limits(what="a settings file", max_bytes=1 << 20, max_values=100_000, max_depth=64).
    """

    #: How a message names the input: "a settings file".
    what: str
    max_bytes: int
    #: Scalars, lists and mappings counted as often as aliases repeat them.
    max_values: int
    #: Lists and mappings inside one another; the top level is depth 1.
    max_depth: int


#: Written by hand: a parse in pure Python costs about 0.3 s per 100 KiB, so 1 MiB holds a
#: library's settings many times over (5,000 override rows take about 300 KiB) and reads in a
#: few seconds at worst.
SETTINGS = Limits("a settings file", 1 << 20, 100_000, 64)
#: A llama-swap config or a llama.cpp models preset: machine-written, up to about 1.5 KiB and
#: 40 values per model, so 64 MiB and 2,000,000 values leave room for 40,000 models.
CONFIG = Limits("a config", 64 << 20, 2_000_000, 64)


class InputTooLarge(Exception):
    """A bound of `Limits` was passed; `str()` is the user's message (without the file)."""


def _size_text(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 and n % (1 << 20) == 0 else f"{n:,} bytes"


def read_input(path: str, limits: Limits) -> bytes:
    """The bytes of `path`, at most `limits.max_bytes`. Raises InputTooLarge, or OSError when
    it cannot be opened or read (a folder: IsADirectoryError)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO without a writer opens at once
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(21, "Is a directory", path)
        if stat.S_ISREG(st.st_mode) and st.st_size > limits.max_bytes:
            raise InputTooLarge(f"{st.st_size:,} bytes, larger than {_size_text(limits.max_bytes)}, the most "
                                f"swapgen reads of {limits.what}")
        # a pipe with a writer waits for it again; one without reads as empty
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        chunks, left = [], limits.max_bytes + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    finally:
        os.close(fd)
    if left <= 0:
        kind = "a regular file" if stat.S_ISREG(st.st_mode) else "a device or a pipe"
        raise InputTooLarge(f"{kind} longer than {_size_text(limits.max_bytes)}, the most swapgen reads of "
                            f"{limits.what}")
    return b"".join(chunks)


def check_shape(data: object, limits: Limits) -> None:
    """Raise InputTooLarge when `data` (plain lists and mappings, shared by YAML aliases or
    not) holds more values or nests deeper than `limits` allow. Iterative, and it stops at the
    first value past a limit: its cost is bounded by the limits, not by the data."""
    stack, count = [(data, 1)], 0
    while stack:
        value, depth = stack.pop()
        count += 1
        if count > limits.max_values:
            raise InputTooLarge(too_many_values(limits))
        if isinstance(value, (dict, list)):
            if depth > limits.max_depth:
                raise InputTooLarge(too_deep(limits))
            items = value.values() if isinstance(value, dict) else value
            stack.extend((item, depth + 1) for item in items)


def too_many_values(limits: Limits) -> str:
    return (f"more than {limits.max_values:,} values once YAML aliases are expanded, the most swapgen reads of "
            f"{limits.what} (an alias repeating an alias grows without end)")


def too_deep(limits: Limits) -> str:
    return (f"lists and mappings nested more than {limits.max_depth} deep (or a YAML alias inside itself), the most "
            f"swapgen reads of {limits.what}")
