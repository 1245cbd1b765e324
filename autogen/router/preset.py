"""`target: llama-server`: the library as a models preset for llama.cpp's own router
(`llama-server --models-preset FILE --models-max N`; llama.cpp tools/server/README.md, "Using
multiple models").

Each section is the llama-server entry the llama-swap config would hold, read back from its
finished command line: every flag becomes the preset key llama.cpp's own writer uses for it
(`llama_options`), so whatever the llama emitter decides reaches the preset without code here.
What a preset cannot say stops that entry, with the reason (`PresetError`):

- the router starts every instance itself: `--host`/`--port` are its own (dropped), and keys it
  owns (API key, TLS, `--models-*`) cannot come from a model;
- it runs every instance with its own binary, so an entry pinned to another build is left out;
- it passes its own environment to every instance (`server_models::load`), so a device pin
  (`CUDA_VISIBLE_DEVICES=1`) becomes the `device` key (`CUDA1`), and the variables every pin
  needs (`CUDA_DEVICE_ORDER=PCI_BUS_ID`) go into the router's environment, in the command the
  run prints;
- its reader (`common/preset.cpp`, `parse_ini_from_file`) ends a value at `;` or `#` and trims
  blanks, has one value per key, and no key for a flag with two values.

Assembly (`render_preset`) puts the keys every section shares in `[*]`, marks the settings'
preloads `load-on-startup`, and counts `--models-max`: the largest N such that any N of the
written entries fit on the cards together. `[*]` never takes a key that sizes a model: llama.cpp
applies it to the models of its own download cache too (`server_models::load_models` cascades it
over them), which would then start with a context and offload made for another model.
"""

from __future__ import annotations

import functools
import shlex
from collections.abc import Iterable, Sequence
from typing import Any

import attrs
from attrs import frozen

from autogen.emit.entry import Entry, Plan, Skip
from autogen.engines import Engine
from autogen.errors import ModelError, SwapgenError
from autogen.flags.llama import FLAG_KNOBS, OptionTable, recorded_table
from autogen.router.fragments import comment_text, quote
from autogen.router.llama_options import ALIAS_ENV, ROUTER_OWNED
from autogen.router.matrix_plan import Device, Load, capacity, demand, shared_capacity

#: The router binds each instance itself: dropped from the command line (`update_args`).
ROUTER_SETS = frozenset({"LLAMA_ARG_HOST", "LLAMA_ARG_PORT"})
#: A device pin variable (`resolve.devices.VARIABLES`) → the name ggml gives that runtime's
#: devices, numbered as the variable counts them (ggml-cuda.h `GGML_CUDA_NAME`: "CUDA", "ROCm"
#: on HIP builds; ggml-vulkan.h `GGML_VK_NAME`).
DEVICE_NAMES = {"CUDA_VISIBLE_DEVICES": "CUDA", "HIP_VISIBLE_DEVICES": "ROCm", "GGML_VK_VISIBLE_DEVICES": "Vulkan"}
DEVICE_ENV = "LLAMA_ARG_DEVICE"
#: Keys that name one model: never moved to `[*]`, even when every section has the same.
OWN_KEYS = frozenset({"model", "alias", "load-on-startup"})


@functools.cache
def sizing_keys() -> frozenset[str]:
    """The preset keys of the flags swapgen sizes a model with (`flags.llama.FLAG_KNOBS`,
    all but the thread count, which is the host's) and of its devices: never moved to `[*]`
    (module docstring)."""
    table = recorded_table()
    return frozenset({table.by_env[DEVICE_ENV].key, *(table.by_flag[flag].key for flag, knob in FLAG_KNOBS.items()
                                                       if knob != "threads" and flag in table.by_flag)})
#: llama.cpp's preset-only keys swapgen writes (`common_params_add_preset_options`).
LOAD_ON_STARTUP, STOP_TIMEOUT = "load-on-startup", "stop-timeout"
#: What ends a value in llama.cpp's preset reader (its `eol-start`: a comment or the line end).
_VALUE_ENDS = (";", "#", "\n", "\r")


class PresetError(ModelError):
    """An entry a models preset cannot carry; the reason becomes its `; SKIPPED` line."""


class PresetSettingsError(SwapgenError):
    """Settings the preset cannot follow, one `place: message` per problem (`llama_swap.hooks.
    on_startup.preload[0]: …`), for the caller to show at their lines in the settings file."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("\n".join(problems))


@frozen
class Section:
    """One `[id]` of the preset, before the keys every section shares move to `[*]`.

    Example: Section(id="qwen3-8b-q4_k_m", keys=(("model", "/models/Qwen3-8B-Q4_K_M.gguf"),
    ("ctx-size", "40960"), ("n-gpu-layers", "37"), ("fit", "off")), env=()).
    """

    id: str
    #: (key, value) in the order of the command line, then the preset-only keys.
    keys: tuple[tuple[str, str], ...]
    #: Comment lines above the section (the entry's).
    comment: tuple[str, ...] = ()
    #: `NAME=value` the router's environment must hold (every instance inherits it).
    env: tuple[str, ...] = ()
    #: Other names of the model, as the `alias` key lists them.
    aliases: tuple[str, ...] = ()

    def to_json(self) -> list:
        return [self.id, list(self.keys), list(self.comment), list(self.env), list(self.aliases)]

    @classmethod
    def from_json(cls, data: list) -> Section:
        sid, keys, comment, env, aliases = data
        return cls(id=sid, keys=tuple(tuple(k) for k in keys), comment=tuple(comment), env=tuple(env),
                   aliases=tuple(aliases))


def _checked_value(flag: str, value: str) -> str:
    """A value the preset reader gives back unchanged, or PresetError."""
    if any(c in value for c in _VALUE_ENDS):
        found = next(c for c in _VALUE_ENDS if c in value)
        raise PresetError(f"{flag} {value!r}: llama.cpp's preset reader ends a value at {found!r}; "
                          "rename the file or drop the argument")
    if value != value.strip(" \t"):
        raise PresetError(f"{flag} {value!r}: llama.cpp's preset reader trims the blanks around a value")
    return value


def _argv_keys(argv: Sequence[str], table: OptionTable) -> dict[str, str]:
    """Preset key → value for every argument after the program, in command-line order."""
    keys: dict[str, str] = {}
    i = 1
    while i < len(argv):
        flag = argv[i]
        option = table.by_flag.get(flag)
        if option is None:
            raise PresetError(f"{flag!r} is not an argument of llama-server {table.build}, so no preset key "
                              "names it")
        if option.values == 2:
            raise PresetError(f"{flag} takes two values, which a llama.cpp preset key cannot hold")
        if option.values == 0:
            value = "false" if flag in option.negatives else "true"
            i += 1
        elif i + 1 < len(argv):
            value = argv[i + 1]
            i += 2
        else:
            raise PresetError(f"{flag} has no value")
        if option.env in ROUTER_SETS:
            continue
        if option.env in ROUTER_OWNED or option.env == ALIAS_ENV:
            why = ROUTER_OWNED.get(option.env, "the router names every instance after its section")
            raise PresetError(f"{flag}: llama.cpp's router owns it ({why})")
        key = option.key
        if key in keys and keys[key] != value:
            if not option.is_list:
                raise PresetError(f"{flag} is given twice ({keys[key]!r}, {value!r}); a preset key holds one value")
            value = f"{keys[key]},{value}"
        keys[key] = _checked_value(flag, value)
    return keys


def _device_keys(entry: Entry) -> tuple[str | None, tuple[str, ...]]:
    """(the `device` value of the entry's pin or None, the variables the router must hold)."""
    devices, router_env = None, []
    for item in entry.env:
        name, _, value = item.partition("=")
        if name in DEVICE_NAMES:
            devices = ",".join(f"{DEVICE_NAMES[name]}{v.strip()}" for v in value.split(","))
        else:
            router_env.append(item)
    return devices, tuple(router_env)


def section_of(entry: Entry, router_exe: str, table: OptionTable | None = None) -> Section:
    """The entry's preset section, or PresetError saying what a preset cannot carry."""
    table = table or recorded_table()
    if entry.argv[0] != router_exe:
        raise PresetError(f"runs {entry.argv[0]}, but llama.cpp's router starts every model with its own "
                          f"binary ({router_exe}); pin that backend or use target: llama-swap")
    keys = _argv_keys(entry.argv, table)
    devices, router_env = _device_keys(entry)
    if devices is not None:
        device_key = table.by_env[DEVICE_ENV].key
        if device_key in keys:
            raise PresetError(f"devices are pinned twice: {device_key} {keys[device_key]!r} in extra_args and "
                              f"the devices setting ({devices})")
        keys[device_key] = devices
    for alias in entry.aliases:
        if "," in alias or not alias.strip():
            raise PresetError(f"alias {alias!r}: the router reads a comma-separated list of names")
    if entry.aliases:
        keys[table.by_env[ALIAS_ENV].key] = _checked_value("alias", ",".join(entry.aliases))
    stop = dict(entry.llama_swap).get("unloadTimeout")
    if stop is not None:
        keys[STOP_TIMEOUT] = str(stop)
    return Section(id=entry.id, keys=tuple(keys.items()), comment=entry.comment, env=router_env,
                   aliases=entry.aliases)


#: Why a sleeping vLLM model is not in a preset, in one line (docs/vllm-sleep.md).
SLEEPER_LEFT_OUT = ("a vLLM model that sleeps between requests: llama.cpp's router starts llama-server only and "
                    "has no stop command to put vLLM to sleep (target: llama-swap serves it through vllm-wrapper)")

#: Why the router leaves out the models of a llama-server fork: it starts every instance with its
#: own llama.cpp binary (docs/llama-server-router.md).
LEFT_OUT = {Engine.IK_LLAMA: "an ik_llama.cpp model: llama.cpp's router starts its own llama-server, which has "
                             "none of ik_llama.cpp's flags (target: llama-swap serves it)"}


def preset_plan(plan: Plan, engine: str, router_exe: str) -> tuple[Plan, tuple[Section, ...], tuple[Skip, ...]]:
    """(the plan as the preset serves it, its sections, the entries it leaves out: those no
    llama-server serves, and those a preset cannot carry, each with the reason). The run lists
    the last, so no entry the llama-swap config would serve goes missing unsaid."""
    if not plan.entries:
        return plan, (), ()
    if engine != Engine.LLAMA:  # the router runs llama-server only
        first = plan.entries[0].footprint
        engine_name = (first.engine if first is not None else "") or engine
        why = (SLEEPER_LEFT_OUT if first is not None and first.asleep else
               LEFT_OUT.get(engine, f"a {engine_name} model: llama.cpp's router starts llama-server only "
                                    "(target: llama-swap serves it)"))
        left = tuple(Skip(e.id, why) for e in plan.entries)
        return attrs.evolve(plan, entries=(), skips=plan.skips + left), (), left
    kept, sections, left = [], [], []
    for entry in plan.entries:
        try:
            sections.append(section_of(entry, router_exe))
            kept.append(entry)
        except PresetError as exc:
            left.append(Skip(entry.id, f"not in the preset: {exc}"))
    return attrs.evolve(plan, entries=tuple(kept), skips=plan.skips + tuple(left)), tuple(sections), tuple(left)


def render_skip(skip: Skip) -> str:
    return f"; SKIPPED {quote(comment_text(skip.id))}: {comment_text(skip.reason)}\n\n"


# --- the whole file ----------------------------------------------------------------------------


@frozen
class Preset:
    """The assembled preset and how to start the router on it."""

    text: str
    #: The command that serves it, e.g. `llama-server --models-preset models.ini --models-max 2`.
    command: str
    models_max: int


def models_max(loads: Sequence[Load], devices: Sequence[Device]) -> int:
    """The largest N such that any N of the entries fit on the cards together (at least 1): on
    each card, its N largest demands (`matrix_plan.demand`) must fit, one alone the card, several
    its shared capacity. The router's `--models-max` evicts by recency, not by size, so any N
    of them may meet."""
    if not loads:
        return 1
    per_card = [sorted((need[k] for need in (demand(load, devices) for load in loads)), reverse=True)
                for k in range(len(devices))]
    best = 1
    for n in range(2, len(loads) + 1):
        for k, device in enumerate(devices):
            top = [d for d in per_card[k][:n] if d]
            limit = capacity(device) if len(top) <= 1 else shared_capacity(device)
            if sum(top) > limit:
                return best
        best = n
    return best


def _preloads(settings_block: dict[str, Any], sections: Sequence[Section]) -> set[str]:
    """Section ids the settings' `llama_swap.hooks.on_startup.preload` names (by id or alias)."""
    wanted = ((settings_block.get("hooks") or {}).get("on_startup") or {}).get("preload") or []
    names = {s.id: s.id for s in sections} | {a: s.id for s in sections for a in s.aliases}
    chosen, unknown = set(), []
    for i, name in enumerate(wanted):
        if name in names:
            chosen.add(names[name])
        else:
            unknown.append(f"llama_swap.hooks.on_startup.preload[{i}]: {name!r} is not a section of the preset "
                           "(a model id or alias it writes)")
    if unknown:
        raise PresetSettingsError(unknown)
    return chosen


def _router_env(sections: Iterable[Section]) -> tuple[str, ...]:
    values: dict[str, str] = {}
    for s in sections:
        for item in s.env:
            name, _, value = item.partition("=")
            if values.setdefault(name, value) != value:
                raise SwapgenError(f"the router's environment would need {name}={values[name]} and {item} "
                                   f"(for {s.id!r}); its instances all inherit one environment")
    return tuple(f"{k}={v}" for k, v in sorted(values.items()))


def _shared(sections: Sequence[Section]) -> dict[str, str]:
    """The keys every section has with one value (two sections or more), in the first's order,
    but a model's own and those that size it."""
    if len(sections) < 2:
        return {}
    kept = OWN_KEYS | sizing_keys()
    shared = {k: v for k, v in sections[0].keys if k not in kept}
    for s in sections[1:]:
        own = dict(s.keys)
        shared = {k: v for k, v in shared.items() if own.get(k) == v}
    return shared


def start_command(router_exe: str, output: str, n: int, env: Sequence[str]) -> str:
    words = [*env, router_exe, "--models-preset", output, "--models-max", str(n)]
    return " ".join(w if w in env else shlex.quote(w) for w in words)


def render_preset(header: str, sections: Sequence[Section], skip_blocks: Sequence[tuple[str, str]],
                  settings_block: dict[str, Any], loads: Sequence[Load], devices: Sequence[Device], router_exe: str,
                  output: str) -> Preset:
    """The preset text: header, `version`, `[*]`, then sections and skip lines (`render_skip`)
    sorted by id."""
    preload = _preloads(settings_block, sections)
    stop = settings_block.get("unloadTimeout")
    finished = []
    for s in sections:
        keys = dict(s.keys)
        if stop is not None:
            keys.setdefault(STOP_TIMEOUT, str(stop))
        if s.id in preload:
            keys[LOAD_ON_STARTUP] = "true"
        finished.append(attrs.evolve(s, keys=tuple(keys.items())))
    written = {s.id for s in sections}
    n = models_max([x for x in loads if x.entry_id in written], devices)
    if len(preload) > n:
        raise PresetSettingsError([f"llama_swap.hooks.on_startup.preload: {len(preload)} models to load at start, but "
                                   f"only {n} fit on the cards together (--models-max {n}); llama-server refuses to "
                                   "start"])
    command = start_command(router_exe, output, n, _router_env(sections))
    shared = _shared(finished)
    blocks = [(s.id, render_section(s, shared)) for s in finished] + list(skip_blocks)
    cards = ", ".join(f"{d.label} ({d.vram_gb:g} GiB)" for d in devices)
    text = (header + f"; Start llama.cpp's router on it: {comment_text(command)}\n"
            f"; --models-max {n}: any {n} of these models fit together on {cards}\nversion = 1\n\n")
    if shared:
        text += "[*]\n" + "".join(f"{k} = {v}\n" for k, v in shared.items()) + "\n"
    text += "".join(body for _, body in sorted(blocks))
    return Preset(text=text, command=command, models_max=n)


def render_section(section: Section, shared: dict[str, str] | None = None) -> str:
    """`[id]` with its comment lines and the keys `[*]` (`shared`) does not already give."""
    shared = shared or {}
    lines = [f"; {comment_text(line)}" for line in section.comment]
    lines.append(f"[{section.id}]")
    lines += [f"{k} = {v}" for k, v in section.keys if shared.get(k) != v]
    return "\n".join(lines) + "\n\n"

