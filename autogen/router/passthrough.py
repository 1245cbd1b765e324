"""The user's own llama-swap keys (`llama_swap:` at the top of the settings and in overrides):
which ones swapgen owns, their check against llama-swap's schema when the settings are read,
and the top-level block written into the config.

The values are plain YAML data, written as given (`fragments.render_data`). Each place is
checked with the tables the config validator uses (`llamaswap_schema`), so a mistake is
reported at its line of the settings file; what needs the whole config (a selector target, a
profile pin, a preload naming a model) is checked on the assembled config before it is written
(`validate`), and the run fails naming it.
"""

from __future__ import annotations

import math
import re
from typing import Any

from autogen.errors import did_you_mean
from autogen.router.llamaswap_schema import GO_INT, MODEL_SPEC, TOP_SPEC, check, macro_entries
from autogen.router.yamllines import LineMap, LineSeq
from autogen.settings.schema import Settings

#: Top-level keys swapgen writes itself, with what to use instead. `healthCheckTimeout` only in
#: `output_mode: full` (a fragment leaves it to the main file).
OWNED_TOP: dict[str, str] = {
    "models": "swapgen writes every model entry; per-model keys go in an override's `llama_swap:`",
    "groups": "swapgen writes the groups; use the settings' `groups:`",
    "matrix": "swapgen writes the router; use the settings' `groups:`",
    "healthCheckTimeout": "swapgen writes it from `health_check_timeout`",
}
#: Keys under `routing` swapgen writes (legacy `groups` and `routing.router` exclude each other).
OWNED_ROUTING: dict[str, str] = {
    "router": "swapgen writes the router (its `groups:`, or the matrix of `routing: auto`); "
              "`routing.scheduler` is yours",
}
#: Per-model keys swapgen writes for every entry, with what to use instead.
OWNED_MODEL: dict[str, str] = {
    "cmd": "swapgen writes the command; add flags with the override's `extra_args`",
    "proxy": "swapgen writes the address the engine binds",
    "ttl": "swapgen writes it from `ttl`",
    "unlisted": "use the override's `unlisted`",
    "capabilities": "swapgen derives them from the model",
}
#: Where an API key that is not written in plain text comes from (`${env.X}`, substituted by
#: llama-swap when it reads the file: `internal/config/load.go`).
ENV_MACRO = "${env."


def _with_lines(value: Any) -> Any:
    """Plain data → the validator's `LineMap`/`LineSeq` (no line numbers: `settings_error`
    finds them in the settings file by path)."""
    if isinstance(value, dict):
        out = LineMap()
        for key, item in value.items():
            out[key], out.lines[key] = _with_lines(item), None
        return out
    if isinstance(value, list):
        seq = LineSeq(_with_lines(item) for item in value)
        seq.lines = [None] * len(seq)
        return seq
    return value


def _data_problems(value: Any, path: str) -> list[str]:
    """What YAML gave that is no llama-swap value: a date, a binary, a non-finite number, an
    integer past Go's 64 bits (llama-swap would read it as a float, or refuse it)."""
    if isinstance(value, dict):
        keys = [f"{path}: keys are strings, got {k!r} (quote it)" for k in value if not isinstance(k, str)]
        return keys or [p for k, v in value.items() for p in _data_problems(v, f"{path}.{k}")]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _data_problems(v, f"{path}[{i}]")]
    if isinstance(value, float) and not math.isfinite(value):
        return [f"{path}: expected a finite number, got {value}"]
    if isinstance(value, int) and not isinstance(value, bool) and value not in GO_INT:
        return [f"{path}: expected an integer llama-swap reads (Go's int: {GO_INT.start} to {GO_INT.stop - 1}), "
                f"got {value if abs(value) < 10**30 else f'a {len(str(abs(value)))}-digit integer'}"]
    if value is None or isinstance(value, (str, int, float, bool)):
        return []
    return [f"{path}: expected a string, number, true/false, null, list or mapping, got {type(value).__name__} "
            f"{value!r} (quote it to keep it a string)"]


def _spec_problems(value: Any, spec, path: str) -> list[str]:
    """`value` against its schema node; a `macros` block by the loader's declaration rules."""
    found: list[str] = []

    def add(_line, message, severity="error"):
        found.append(message)

    if spec.kind == "macros":
        macro_entries(_with_lines(value), path, None, add)
    else:
        check(_with_lines(value), spec, path, None, add)
    return found


def _owned(key: str, owned: dict[str, str], path: str) -> str:
    return f"{path}.{key}: a key swapgen owns ({owned[key]})"


def _unknown(key: str, known, path: str, what: str) -> str:
    return f"{path}.{key}: unknown {what} llama-swap key{did_you_mean(key, sorted(known))}"


def _routing_problems(value: Any, spec, path: str) -> list[str]:
    """`routing`: the scheduler is the user's; the router is swapgen's."""
    if not isinstance(value, dict):
        return _spec_problems(value, spec, path)
    problems = [_owned(k, OWNED_ROUTING, path) for k in value if k in OWNED_ROUTING]
    rest = {k: v for k, v in value.items() if k not in OWNED_ROUTING}
    return problems + _spec_problems(rest, spec, path)


def _block_problems(block: Any, path: str, owned: dict[str, str], spec, what: str,
                    checks: dict | None = None) -> list[str]:
    """One `llama_swap:` block: each key refused when swapgen owns it or llama-swap does not know
    it, else checked by its schema entry (or by `checks[key]`, called as the schema check is)."""
    problems = _data_problems(block, path)
    for key, value in block.items() if not problems else ():
        if key in owned:
            problems.append(_owned(key, owned, path))
        elif key not in spec.fields:
            problems.append(_unknown(key, spec.fields, path, what))
        else:
            problems += (checks or {}).get(key, _spec_problems)(value, spec.fields[key], f"{path}.{key}")
    return problems


def top_level_problems(settings: Settings) -> list[str]:
    """`llama_swap:` at the top of the settings, as llama-swap's schema and loader read it."""
    block, path = settings.llama_swap, "llama_swap"
    owned = dict(OWNED_TOP)
    if settings.output_mode == "fragment":
        del owned["healthCheckTimeout"]
    if settings.hosts:  # a fleet front: docs/gpu-hosts.md
        owned["peers"] = "a fleet front writes one peer per entry of `hosts:`"
        owned["selectors"] = "a fleet front writes the selectors of models several hosts serve"
    problems = _block_problems(block, path, owned, TOP_SPEC, "top-level", {"routing": _routing_problems})
    keys = block.get("apiKeys") if not problems else None
    for i, key in enumerate(keys if isinstance(keys, list) else ()):
        if isinstance(key, str) and " " in key:  # load.go: the one loader rule of a lone key
            problems.append(f"{path}.apiKeys[{i}]: api key cannot contain spaces")
    return problems


def model_problems(settings: Settings) -> list[str]:
    """Each override's `llama_swap:` block: per-model keys swapgen does not own."""
    return [problem for i, ov in enumerate(settings.overrides)
            for problem in _block_problems(ov.llama_swap, f"overrides[{i}].llama_swap", OWNED_MODEL, MODEL_SPEC,
                                           "per-model")]


def settings_problems(settings: Settings) -> list[str]:
    """Every `place: message` of the settings' llama-swap keys (empty when they are fine)."""
    return top_level_problems(settings) + model_problems(settings)


def plain_text_keys(settings: Settings) -> list[str]:
    """API keys written in the settings as text (they would sit in the config, and in git):
    `apiKeys` items and peers' `apiKey` without `${env.…}`."""
    block = settings.llama_swap
    found = []  # (place, the variable to read the key from)
    keys = block.get("apiKeys")
    for i, key in enumerate(keys if isinstance(keys, list) else ()):
        if isinstance(key, str) and key and ENV_MACRO not in key:
            found.append((f"llama_swap.apiKeys[{i}]", "LLAMA_SWAP_API_KEY"))
    peers = block.get("peers")
    for name, peer in (peers.items() if isinstance(peers, dict) else ()):
        key = peer.get("apiKey") if isinstance(peer, dict) else None
        if isinstance(key, str) and key and ENV_MACRO not in key:
            # the peer's own key, not this llama-swap's: a variable of its own
            variable = re.sub(r"[^A-Z0-9]+", "_", str(name).upper()).strip("_") + "_API_KEY"
            found.append((f"llama_swap.peers.{name}.apiKey", variable))
    return [f"{where}: an API key in plain text ends up in {settings.output} (and in git); write "
            f'"${{env.{variable}}}" and set that variable where llama-swap runs' for where, variable in found]

