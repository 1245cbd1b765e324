"""What the override's `extra_args` decide for vLLM, read as vLLM's own argparse reads them.

A `--max-model-len` or `--tensor-parallel-size` in `extra_args` is a pin (vLLM takes the last
value, and extra_args come last on the command line), a `--max-num-batched-tokens` sets how many
tokens a sliding window holds in flight (`sizing.vllm_memory`), and a memory, tool-parser or
chat-template flag there replaces ours. Kept apart from the emitter because `devices`
reads the tensor-parallel pin too, before any emitter runs.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from attrs import frozen

from autogen.errors import ModelError
from autogen.settings.schema import INT32_MAX, MAX_GPU_INDEX, Override

#: `--max-model-len auto` / `-1`: vLLM fits the window to its KV memory
#: (`vllm/v1/core/kv_cache_planning.py` `_auto_fit_max_model_len`).
AUTO = -1

#: Options of `extra_args` we read, with the shortest prefix vLLM 0.33.0's argparse
#: (`allow_abbrev=True`) resolves to them uniquely; `_` is read as `-` like vLLM does.
#: `--chat-template-content-format` and `-kwargs` share the template's prefix, so only the
#: full name counts there.
_OPTIONS = {
    "--kv-cache-memory-bytes": "--kv-cache-mem",
    "--gpu-memory-utilization": "--gp",
    "--device-memory-utilization": "--device-m",
    "--tool-call-parser": "--tool-c",
    "--chat-template": "--chat-template",
    "--max-model-len": "--max-m",
    "--tensor-parallel-size": "--te",
    "--max-num-batched-tokens": "--max-num-b",
}
_MEMORY = ("--kv-cache-memory-bytes", "--gpu-memory-utilization", "--device-memory-utilization")
#: vLLM's only short spelling among them (exact, or `-tp=N`).
_SHORT = {"-tp": "--tensor-parallel-size"}
#: `human_readable_int` (vllm/utils/argparse_utils.py): `32k` = 32000, `32K` = 32768.
_HUMAN_INT = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")
_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


@frozen
class ExtraArgs:
    """What the override's `extra_args` decide for vLLM, read as its parser reads them.

    Example: ExtraArgs(max_model_len=32000, tensor_parallel=2, sets_memory=False,
    sets_parser=True, sets_template=False) for `--max-m=32k -tp 2 --tool-call-parser x`.
    """

    #: Tokens, or AUTO; None = not given.
    max_model_len: int | None = None
    #: `--max-num-batched-tokens` (how far a sliding window's in-flight tokens reach); None = vLLM's default.
    max_num_batched_tokens: int | None = None
    tensor_parallel: int | None = None
    sets_memory: bool = False
    sets_parser: bool = False
    sets_template: bool = False


def parse_max_model_len(text: str) -> int:
    """vLLM's `human_readable_int_or_auto`: `32768`, `32k`, `32K`, `1.5k`, `auto` or `-1` (AUTO);
    raises ValueError where vLLM's parser refuses the value."""
    text = text.strip()
    if text == "-1" or text.lower() == "auto":
        return AUTO
    match = _HUMAN_INT.fullmatch(text)
    if match is None:
        return int(text)
    number, suffix = match.groups()
    if suffix in _DECIMAL:
        return int(float(number) * _DECIMAL[suffix])
    return int(number) * _BINARY[suffix]


def read_extra_args(extra_args: Sequence[str]) -> ExtraArgs:
    """One pass over `extra_args`: options spelled in full, abbreviated, with `_`, or `--x=value`;
    the last value of a repeated option wins, as in argparse. Raises ModelError for a length or
    tensor-parallel value vLLM would refuse."""
    given: dict[str, str | None] = {}
    for i, arg in enumerate(extra_args):
        name, eq, value = arg.partition("=")
        option = _SHORT.get(name)
        if option is None and name.startswith("--"):
            name = name.replace("_", "-")
            option = next((full for full, least in _OPTIONS.items()
                           if full.startswith(name) and len(name) >= len(least)), None)
        if option is not None:
            given[option] = value if eq else (extra_args[i + 1] if i + 1 < len(extra_args) else None)
    length, tp, batched = (_count(given, option) for option in _COUNTS)
    return ExtraArgs(max_model_len=length, tensor_parallel=tp, max_num_batched_tokens=batched,
                     sets_memory=any(flag in given for flag in _MEMORY),
                     sets_parser="--tool-call-parser" in given, sets_template="--chat-template" in given)


#: Option → (its parser, as vLLM's argparse type reads it; the lowest and highest value; what
#: a value outside them is not). At most a C `int` (docs/settings.md#numbers).
_COUNTS: dict[str, tuple[Callable[[str], int], int, int, str]] = {
    "--max-model-len": (parse_max_model_len, 1, INT32_MAX, "a length vLLM accepts (tokens such as 32768, 32k, "
                                                           "32K, or auto, at most 2147483647)"),
    "--tensor-parallel-size": (int, 1, MAX_GPU_INDEX + 1, "a GPU count"),
    "--max-num-batched-tokens": (parse_max_model_len, 1, INT32_MAX, "a token count"),  # human_readable_int
}


def _count(given: dict[str, str | None], option: str) -> int | None:
    """The value `extra_args` gives `option` (None when it gives none); ModelError for one vLLM
    would refuse or that is past a C `int`."""
    if option not in given:
        return None
    text = given[option] or ""
    parse, lowest, highest, what = _COUNTS[option]
    value = _or_zero(parse, text)
    if value == AUTO and option == "--max-model-len":
        return value
    if not lowest <= value <= highest:
        raise ModelError(f"extra_args {option} {text!r} is not {what}")
    return value


def _or_zero(parse: Callable[[str], int], text: str) -> int:
    """`parse(text)`, or 0 for what is no number, infinite or longer than any count (`1e400`,
    5,000 digits); the callers bound the rest (at most a C `int`: docs/settings.md#numbers)."""
    if len(text) > 40:
        return 0
    try:
        return parse(text)
    except (ValueError, OverflowError):
        return 0


def vllm_tensor_parallel(override: Override | None) -> tuple[int, str]:
    """(ranks, what pinned them), the one rule `sizing.vllm.size_vllm` and the placement read: a `-tp` /
    `--tensor-parallel-size` in `extra_args` (any spelling vLLM accepts; it comes last on the
    command line, so it wins) over the override's `vllm_tensor_parallel`; (1, "") when neither.
    Raises ModelError for a value vLLM would refuse."""
    if override is None:
        return 1, ""
    if (tp := read_extra_args(override.extra_args).tensor_parallel) is not None:
        return tp, "extra_args --tensor-parallel-size"
    if override.vllm_tensor_parallel:
        return override.vllm_tensor_parallel, "vllm_tensor_parallel"
    return 1, ""
