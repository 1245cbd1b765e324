"""Which vLLM `--tool-call-parser` a model gets, and which vLLM versions know each name.

vLLM answers every request carrying `tools` with HTTP 400 unless it was started with
`--enable-auto-tool-choice --tool-call-parser X`, and X is the model family's tool-call format.
A WRONG parser does not fail: tool calls come back unparsed in the reply text, which is worse
than the 400. So the table is short on purpose, a name is only emitted when the installed
vLLM registers it, and the user can pin (`vllm_tool_parser`) or extend (`tool_parsers`).
Reference: `spec-backends-vllm-hf.md` §4, seed `backends.md` ("Tool calling needs a parser").
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from attrs import frozen

#: Architecture (GGUF `general.architecture` or HF `model_type`, lower case) → parser.
#: Mirrors the original's `vllmToolParsers` (reference §4.1), both spellings listed.
TOOL_PARSERS: dict[str, str] = {
    "qwen2": "hermes",
    "qwen2_moe": "hermes",
    "qwen2moe": "hermes",
    "qwen3": "hermes",
    "qwen3_moe": "hermes",
    "qwen3moe": "hermes",
    "qwen3_next": "hermes",
    "qwen3next": "hermes",
    "qwen3_5": "qwen3_coder",
    "qwen3_5_moe": "qwen3_coder",
    "qwen35": "qwen3_coder",
    "qwen35moe": "qwen3_coder",
    "llama": "llama3_json",
    "mistral": "mistral",
    "mistral3": "mistral",
    "gemma4": "gemma4",
    "glm4_moe": "glm45",
    "glm4moe": "glm45",
    "deepseek_v3": "deepseek_v3",
    "granite": "granite",
    "granitemoe": "granite",
    "minimax_m2": "minimax_m2",
    # llama.cpp's GGUF spelling of the same architecture (gguf-py MODEL_ARCH_NAMES); the
    # original listed only the HF one.
    "minimax-m2": "minimax_m2",
    "olmo3": "olmo3",
}

#: The newest vLLM whose registry `VLLM_PARSERS_BY_VERSION` lists in full; an unknown backend
#: version is taken to be this one.
VLLM_CURRENT = (0, 33, 0)

_V0_9_0 = (0, 9, 0)
_V0_33_0 = VLLM_CURRENT

#: Every built-in parser name of vLLM 0.33.0 (`vllm/tool_parsers/__init__.py`
#: `_TOOL_PARSERS_TO_REGISTER`, reference ecosystem.md §6.3) → the first release known to
#: register it. Each version is an UPPER bound (the earliest release where we saw the name),
#: so gating errs towards "no parser" (a 400), never towards an unknown name (a failed start):
#: - 0.9.0: module list of docs.vllm.ai/en/v0.9.0 …/tool_parsers (the oldest release checked;
#:   older releases are not told apart);
#: - 0.9.2, 0.10.0, 0.10.2: the same page for those releases;
#: - 0.10.1: the registry printed by 0.10.1's `invalid tool call parser` error
#:   (vllm-project/recipes#83, which also dates `openai` to 0.10.2);
#: - gemma4 0.19.0 (vllm-project/vllm#39468 runs it on 0.19.0), minimax_m2 0.18.1 and olmo3
#:   0.19.1 (docs.vllm.ai pages of those releases);
#: - 0.33.0 for every other name: present in 0.33.0, first release not established.
VLLM_PARSERS_BY_VERSION: dict[str, tuple[int, ...]] = {
    "deepseek_v3": _V0_9_0,
    "granite": _V0_9_0,
    "granite-20b-fc": _V0_9_0,
    "hermes": _V0_9_0,
    "internlm": _V0_9_0,
    "jamba": _V0_9_0,
    "llama3_json": _V0_9_0,
    "llama4_pythonic": _V0_9_0,
    "mistral": _V0_9_0,
    "phi4_mini_json": _V0_9_0,
    "pythonic": _V0_9_0,
    "xlam": (0, 9, 2),
    "glm45": (0, 10, 0),
    "hunyuan_a13b": (0, 10, 0),
    "kimi_k2": (0, 10, 0),
    "qwen3_coder": (0, 10, 0),
    "llama4_json": (0, 10, 1),
    "step3": (0, 10, 1),
    "deepseek_v31": (0, 10, 2),
    "openai": (0, 10, 2),
    "seed_oss": (0, 10, 2),
    "minimax_m2": (0, 18, 1),
    "gemma4": (0, 19, 0),
    "olmo3": (0, 19, 1),
    "apertus": _V0_33_0,
    "beam": _V0_33_0,
    "cohere_command3": _V0_33_0,
    "cohere_command4": _V0_33_0,
    "deepseek_v32": _V0_33_0,
    "deepseek_v4": _V0_33_0,
    "deepseek_v41": _V0_33_0,
    "dots": _V0_33_0,
    "ernie45": _V0_33_0,
    "functiongemma": _V0_33_0,
    "gigachat3": _V0_33_0,
    "glm47": _V0_33_0,
    "granite4": _V0_33_0,
    "hf": _V0_33_0,
    "hy_v3": _V0_33_0,
    "hy_v4": _V0_33_0,
    "inkling": _V0_33_0,
    "k2_horizon": _V0_33_0,
    "kimi_k3": _V0_33_0,
    "lfm2": _V0_33_0,
    "ling3": _V0_33_0,
    "longcat": _V0_33_0,
    "mimo": _V0_33_0,
    "minicpm5": _V0_33_0,
    "minimax_m3": _V0_33_0,
    "muse": _V0_33_0,
    "muse_glimmer": _V0_33_0,
    "musespark1x": _V0_33_0,
    "plamo3": _V0_33_0,
    "poolside_v1": _V0_33_0,
    "qwen3_json": _V0_33_0,
    "qwen3_xml": _V0_33_0,
    "step3p5": _V0_33_0,
    "step5": _V0_33_0,
}

#: The value that turns the parser off (in a pin or in the settings table).
OFF = "none"

_VERSION = re.compile(r"\s*v?(\d+(?:\.\d+)*)")


def parse_version(text: str | None) -> tuple[int, ...] | None:
    """Leading numeric part of a version string: "0.10.2" → (0, 10, 2), "v0.11.0rc1" →
    (0, 11, 0), "0.10.2+cu128" → (0, 10, 2); None when there is none ("", "main")."""
    match = _VERSION.match(text or "")
    if not match:
        return None
    return tuple(int(part) for part in match.group(1).split("."))


def format_version(version: tuple[int, ...]) -> str:
    return ".".join(map(str, version))


def known_at(name: str, version: tuple[int, ...] | None) -> bool | None:
    """Does vLLM `version` (None = current) register parser `name`? None = a name we do not
    track (a `--tool-parser-plugin` parser, or one newer than our list)."""
    since = VLLM_PARSERS_BY_VERSION.get(name)
    if since is None:
        return None
    return (version or VLLM_CURRENT) >= since


@frozen
class ParserChoice:
    """The parser to emit ("" = none) and why, for the entry's comment and `swapgen show`.

    Example: ParserChoice(parser="qwen3_coder", note="auto: qwen3moe, coder model").
    """

    parser: str
    note: str


def choose_tool_parser(
    arch: str,
    model_id: str,
    *,
    pin: str | None = None,
    table: Mapping[str, str] | None = None,
    version: tuple[int, ...] | None = None,
) -> ParserChoice:
    """Pick the parser for a model (reference §4.2, plus version gating).

    `pin` is the override's `vllm_tool_parser` (used verbatim; "none" turns it off), `table`
    the settings' `tool_parsers` (arch → parser or "none", over the built-in table), `version`
    the backend row's vLLM version (None = unknown, taken as current).
    """
    shown = format_version(version or VLLM_CURRENT)
    pinned = (pin or "").strip()
    if pinned.lower() == OFF:
        return ParserChoice("", "turned off by vllm_tool_parser: none")
    if pinned:
        if known_at(pinned, version) is False:
            return ParserChoice(pinned, f"pinned; vLLM {shown} does not register it")
        return ParserChoice(pinned, "pinned")

    key = arch.strip().lower()
    user = {k.strip().lower(): v.strip() for k, v in (table or {}).items()}
    source = "tool_parsers" if key in user else "auto"
    parser = user.get(key, TOOL_PARSERS.get(key, ""))
    if parser.lower() == OFF:
        return ParserChoice("", f"turned off for arch {arch!r} by tool_parsers")
    if not parser:
        return ParserChoice("", f"no parser known for arch {arch!r}; set vllm_tool_parser or tool_parsers")
    if parser == "hermes" and key.startswith("qwen3") and "coder" in model_id.lower():
        parser, source = "qwen3_coder", f"{source}, coder model"
    known = known_at(parser, version)
    if known is False:
        since = format_version(VLLM_PARSERS_BY_VERSION[parser])
        return ParserChoice("", f"{parser} needs vLLM {since} or newer, backend is {shown}")
    if known is None:
        source += f"; not a built-in parser of vLLM {format_version(VLLM_CURRENT)}"
    return ParserChoice(parser, f"{source}: {key}")
