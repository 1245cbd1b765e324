"""The llama-swap keys of an entry that follow from what runs, and the user's own per-model keys.

- `proxy` is the address the engine binds (its `--host`, sd-server's `-l`), so llama-swap never
  tries `localhost`, which may resolve to `::1` while the engine listens on 127.0.0.1 only
  (llama-swap's default proxy is `http://localhost:${PORT}`: `internal/config/model_config.go`).
- `concurrencyLimit` is the engine's slot count where the command sets it (llama-server
  `--parallel`, vLLM `--max-num-seqs`): a request past the slots gets llama-swap's HTTP 429
  instead of waiting inside the engine behind the others.
- An override's `llama_swap:` block adds the keys swapgen does not own (docs/llama-swap-settings.md);
  the keys it may not add are refused when the settings are read
  (`router.passthrough`), and the ones an engine's entry happens to set (a `checkEndpoint`, a
  metadata key, a device variable) become `Plan.conflicts`, which stop the run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from autogen.emit.entry import Entry, Plan
from autogen.engines import engine_row
from autogen.footprint import MEMORY_KEY

#: Where llama-swap reaches an engine that binds every address (or names none).
LOOPBACK = "127.0.0.1"
#: Override `llama_swap:` keys that name the model itself, so only its own entry gets them
#: (a profile `<id>-64k` has its own id; two entries cannot share an alias).
MODEL_ONLY_KEYS = ("aliases", "name")
#: The keys a sleeping vLLM entry sets itself (`emit.vllm.sleep_argv`, `resolve.sleep.unload_timeout`).
SLEEP_KEYS = ("cmdStop", "unloadTimeout")


def flag_value(argv: Sequence[str], flags: tuple[str, ...]) -> str | None:
    """The value of the last of `flags` in `argv` (`--flag value` or `--flag=value`)."""
    value = None
    for i, arg in enumerate(argv):
        flag, eq, inline = arg.partition("=")
        if flag in flags:
            value = inline if eq else (argv[i + 1] if i + 1 < len(argv) else None)
    return value


def bind_proxy(argv: Sequence[str], engine: str) -> str:
    """`http://<bind host>:${PORT}` from the engine's `host_flags` (the last one in the command
    wins, as for every flag an `extra_args` entry replaces); an engine bound to every address, or
    naming none, is reached on loopback."""
    host = flag_value(argv, engine_row(engine).host_flags) or LOOPBACK
    if host in ("0.0.0.0", ""):
        host = LOOPBACK
    elif host == "::":
        host = "[::1]"
    elif ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:${{PORT}}"


def engine_slots(argv: Sequence[str], engine: str) -> int | None:
    """The slot count the engine's `slot_flags` set (llama-server b11434 `--help`, vLLM `vllm
    serve --help`), if they set a positive one."""
    value = flag_value(argv, engine_row(engine).slot_flags)
    try:
        slots = int(value) if value is not None else None
    except ValueError:
        return None
    return slots if slots is not None and slots > 0 else None


def _own_keys(entry: Entry, model_id: str, block: dict[str, Any]) -> dict[str, Any]:
    """The override's keys this entry takes: all of them on the model's own entry; on a
    profile, all but the ones that name the model (and `setParamsByID`, whose keys are aliases)."""
    if entry.id == model_id:
        return block
    keys = {k: v for k, v in block.items() if k not in MODEL_ONLY_KEYS}
    filters = keys.get("filters")
    if isinstance(filters, dict) and "setParamsByID" in filters:
        keys["filters"] = {k: v for k, v in filters.items() if k != "setParamsByID"}
    return keys


def _set_by_swapgen(entry: Entry, key: str) -> str | None:
    """How swapgen sets `key` for this entry, for a conflict line; None = it does not."""
    if key == "checkEndpoint" and entry.check_endpoint is not None:
        return f"{entry.check_endpoint!r} for {entry.id!r} (its engine's readiness path)"
    if key == "useModelName" and entry.use_model_name is not None:
        return f"{entry.use_model_name!r} for {entry.id!r} (the name its engine answers to)"
    if key in SLEEP_KEYS and (entry.cmd_stop or entry.unload_timeout is not None):
        return f"for {entry.id!r} (its vLLM daemon sleeps through vllm-wrapper; turn `vllm_sleep` off to set your own)"
    return None


def _finished(entry: Entry, engine: str, model_id: str, block: dict[str, Any], where: str,
              conflicts: list[str]) -> Entry:
    proxy = bind_proxy(entry.argv, engine)
    slots = engine_slots(entry.argv, engine)
    extra: list[tuple[str, Any]] = []
    env, aliases = entry.env, entry.aliases
    for key, value in _own_keys(entry, model_id, block).items():
        if key == "concurrencyLimit":
            slots = value  # the user's limit replaces the slot count (e.g. to let requests queue)
        elif key == "aliases":
            aliases += tuple(a for a in value if a not in aliases)
        elif key == "env":
            ours = {e.split("=", 1)[0]: e for e in entry.env}
            for i, item in enumerate(value):
                name = item.split("=", 1)[0]
                if name in ours:
                    conflicts.append(f"{where}.env[{i}]: swapgen sets {name} for {entry.id!r} ({ours[name]})")
            env += tuple(value)
        elif key == "metadata":
            memory = entry.footprint.memory if entry.footprint is not None else None
            ours = dict(entry.metadata) | ({MEMORY_KEY: memory.source.value} if memory is not None else {})
            for name in value.keys() & ours.keys():
                conflicts.append(f"{where}.metadata.{name}: swapgen writes this metadata key for {entry.id!r} "
                                 f"({name}: {ours[name]!r}); pick another name")
            extra.append((key, value))
        elif (why := _set_by_swapgen(entry, key)) is not None:
            conflicts.append(f"{where}.{key}: swapgen sets {key} {why}")
        else:
            extra.append((key, value))
    return attrs.evolve(entry, proxy=proxy, concurrency_limit=slots, env=env, aliases=aliases,
                        llama_swap=tuple(extra))


def finish_plan(plan: Plan, engine: str, block: dict[str, Any] | None = None, where: str = "") -> Plan:
    """Every entry with its `proxy`, its `concurrencyLimit` and the override's `llama_swap:`
    keys (`block`, found at `where` in the settings, e.g. `overrides[3].llama_swap`)."""
    conflicts: list[str] = []
    entries = tuple(_finished(e, engine, plan.model_id, block or {}, where, conflicts) for e in plan.entries)
    return attrs.evolve(plan, entries=entries, conflicts=plan.conflicts + tuple(conflicts))
