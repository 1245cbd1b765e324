"""whisper-server's flags: every argument of the recorded build (`whisper_1_8_5`, read from its
parser) and the meaning swapgen gives the ones it writes.

whisper-server stops at an argument its parser does not know, prints its usage and exits with
status 0 (examples/server/server.cpp `whisper_params_parse`): llama-swap then sees a server that
quit cleanly before answering. So every command is checked here before it is written: an
unknown flag, a flag without its value, or the `--flag=value` form (which the parser does not
split) in `extra_args` is a reason to skip the model, never a command that cannot start.
"""

from __future__ import annotations

import functools

from autogen.errors import ModelError
from autogen.flags.whisper_1_8_5 import OPTIONS, VERSION

#: Meaning → the spellings of the options that carry it: a user's flag of a meaning in
#: `extra_args` replaces swapgen's.
KNOBS: dict[str, tuple[str, ...]] = {
    "model": ("-m", "--model"),
    "host": ("--host",),
    "port": ("--port",),
    "threads": ("-t", "--threads"),
    "flash_attn": ("-fa", "--flash-attn", "-nfa", "--no-flash-attn"),
    "gpu": ("-ng", "--no-gpu", "-dev", "--device"),
    "vad": ("--vad", "-vm", "--vad-model"),
    "inference_path": ("--inference-path", "--request-path"),
    "language": ("-l", "--language"),
}
#: Spelling → meaning (`KNOBS` read backwards).
FLAG_KNOBS: dict[str, str] = {flag: knob for knob, flags in KNOBS.items() for flag in flags}


@functools.cache
def values_taken() -> dict[str, int]:
    """Every spelling whisper-server's parser accepts → the values it takes (0 or 1)."""
    return {name: values for names, values in OPTIONS for name in names}


def split_extra(extra: tuple[str, ...]) -> tuple[tuple[str, ...], frozenset[str]]:
    """(`extra_args` as whisper-server must receive them, the meanings they set). A known flag
    given as `--flag=value` is split in two; an unknown flag or a missing value is a
    ModelError naming it (module docstring)."""
    known = values_taken()
    out: list[str] = []
    meanings: set[str] = set()
    i = 0
    while i < len(extra):
        token = extra[i]
        flag, eq, value = token.partition("=")
        if flag not in known:
            raise ModelError(f"extra_args: whisper-server {VERSION} has no argument {flag!r}; it would print its "
                             "usage and exit instead of serving (recorded from its parser, "
                             "autogen/flags/whisper_1_8_5.py)")
        if eq and known[flag] != 1:
            raise ModelError(f"extra_args: whisper-server's {flag} takes no value, got {token!r}")
        args = [flag, value] if eq else [flag]
        if not eq and known[flag]:
            if i + 1 >= len(extra):
                raise ModelError(f"extra_args: whisper-server's {flag} needs a value")
            args.append(extra[i + 1])
            i += 1
        out += args
        meanings.add(FLAG_KNOBS.get(flag, flag))
        i += 1
    return tuple(out), frozenset(meanings)

