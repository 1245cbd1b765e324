"""Assemble the router config from per-model fragments, validate it, write it if it changed.

The assembly is a sort and a concatenation of text each model task rendered once; groups (or,
with `routing: auto`, the matrix router of `router.matrix_plan`) are the only part computed
across models. With `target: llama-server` the fragments hold preset sections instead, and
`router.preset` assembles them (`[*]`, preloads, `--models-max`). The bytes depend on the inputs
only (no timestamps).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from attrs import frozen

from autogen.emit.entry import Plan, Skip
from autogen.emit.served_paths import PathMap
from autogen.errors import SwapgenError
from autogen.footprint import Footprint
from autogen.fsutil import write_if_changed
from autogen.numfmt import counted
from autogen.resolve.gpus import card_vram_gb, eligible, inventory
from autogen.router.checked_blocks import Assembled
from autogen.router.fragments import comment_text, quote, render_data, render_plan
from autogen.router.matrix_dsl import compile_sets, expand
from autogen.router.matrix_plan import Load, check_plan, host_devices, plan_matrix, render_matrix, with_sleepers
from autogen.router.preset import Preset, PresetSettingsError, Section, render_preset
from autogen.router.preset import render_skip as render_preset_skip
from autogen.settings.globs import glob_pattern
from autogen.settings.owned import CONFIG_MARK, OUTPUT_MARKS, PRESET_MARK, replace_problem
from autogen.settings.schema import LLAMA_SERVER, LLAMA_SWAP, Settings

COEXIST_GROUP = {"swap": False, "exclusive": False, "persistent": True}


@frozen
class Fragment:
    """What one model task leaves in `cache_dir/fragments/<id>.json`."""

    model_id: str
    #: (entry or skip id, YAML text) per block.
    blocks: tuple[tuple[str, str], ...]
    #: (entry id, coexist group or None) per served entry.
    members: tuple[tuple[str, str | None], ...]
    #: (path, text) per file the model writes beside its fragment (audio.cpp's server config):
    #: what those files must hold while this fragment is current.
    files: tuple[tuple[str, str], ...] = ()
    #: (entry id, its typed footprint) per served entry, for `routing: auto` and a preset's
    #: `--models-max` (`loads`); stored as the footprint's own data, never read from metadata.
    footprints: tuple[tuple[str, Footprint | None], ...] = ()
    #: `target: llama-server`: the served entries as preset sections (`blocks` then holds the
    #: skip lines, in the preset's comment form).
    sections: tuple[Section, ...] = ()
    #: (id, reason) per skipped entry, for `swapgen list`.
    skips: tuple[tuple[str, str], ...] = ()
    #: Settings conflicts the plan found (an override's llama-swap key the entry sets too, a path
    #: outside `path_map`): the assembly refuses to write a config while any is left.
    conflicts: tuple[str, ...] = ()
    #: (entry id, the engine's own line) per entry whose command failed to start under
    #: `swapgen calibrate`, for `swapgen list`.
    start_errors: tuple[tuple[str, str], ...] = ()
    #: `target: llama-server`: (entry id, reason) per entry the preset cannot carry.
    left_out: tuple[tuple[str, str], ...] = ()
    #: The exception planning the model raised (a bug, not a skip the user asked for), e.g.
    #: "OverflowError: cannot convert float infinity to integer"; "" when it planned.
    internal_error: str = ""

    @classmethod
    def from_plan(cls, plan: Plan, target: str = LLAMA_SWAP, sections: tuple[Section, ...] = (),
                  left_out: tuple[Skip, ...] = (), start_errors: Mapping[str, str] | None = None,
                  internal_error: str = "") -> Fragment:
        blocks = render_plan(plan) if target != LLAMA_SERVER else [(s.id, render_preset_skip(s)) for s in plan.skips]
        return cls(model_id=plan.model_id, blocks=tuple(blocks),
                   members=tuple((e.id, e.coexist_group) for e in plan.entries),
                   files=tuple(plan.files), footprints=tuple((e.id, e.footprint) for e in plan.entries),
                   sections=sections, skips=tuple((s.id, s.reason) for s in plan.skips),
                   conflicts=tuple(plan.conflicts), start_errors=tuple(sorted((start_errors or {}).items())),
                   left_out=tuple((s.id, s.reason) for s in left_out), internal_error=internal_error)

    @property
    def entry_ids(self) -> tuple[str, ...]:
        return tuple(entry_id for entry_id, _ in self.members)

    @property
    def memory_sources(self) -> dict[str, str]:
        """Entry id → the source of its memory record (`swapgen list`)."""
        return {e: fp.memory.source.value for e, fp in self.footprints if fp is not None and fp.memory is not None}

    @property
    def loads(self) -> tuple[Load, ...]:
        """What each served entry asks of the GPUs (estimate, devices, size)."""
        return tuple(Load.of(entry_id, self.model_id, footprint) for entry_id, footprint in self.footprints)

    def to_json(self) -> bytes:
        # ASCII escapes: a path that is not valid UTF-8 (surrogate escapes) still round-trips
        footprints = [[e, fp.to_data() if fp is not None else None] for e, fp in self.footprints]
        return json.dumps({"model": self.model_id, "blocks": self.blocks, "members": self.members,
                           "files": self.files, "footprints": footprints,
                           "sections": [s.to_json() for s in self.sections], "skips": self.skips,
                           "conflicts": self.conflicts, "start_errors": self.start_errors,
                           "left_out": self.left_out, "internal_error": self.internal_error}, sort_keys=True).encode()

    @classmethod
    def load(cls, path: str) -> Fragment:
        """The fragment of `to_json`; KeyError or ValueError on a fragment of an older swapgen (its
        task then runs again)."""
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        footprints = tuple((e, Footprint.from_data(fp) if fp is not None else None) for e, fp in data["footprints"])
        pairs = {key: tuple((str(a), str(b)) for a, b in data[key]) for key in ("skips", "start_errors", "left_out")}
        return cls(model_id=data["model"], blocks=tuple(tuple(b) for b in data["blocks"]),
                   members=tuple(tuple(m) for m in data["members"]),
                   files=tuple(tuple(f) for f in data["files"]), footprints=footprints,
                   sections=tuple(Section.from_json(s) for s in data["sections"]),
                   conflicts=tuple(str(c) for c in data["conflicts"]), internal_error=str(data["internal_error"]),
                   **pairs)


def header(settings: Settings) -> str:
    """The comment naming the settings file; in `output_mode: full` also `healthCheckTimeout`.
    A `-config-dir` fragment leaves every top-level value to the user's main file (llama-swap
    refuses two files that set one differently: `internal/config/merge.go`)."""
    source = comment_text(os.path.basename(settings.source) or "swapgen.yaml")
    mark = CONFIG_MARK  # the first line says the file is swapgen's to replace (`settings.owned`)
    if settings.output_mode == "fragment":
        routing = "the routing matrix" if settings.routing == "auto" else "groups"
        parts = f"models, {routing}, peers and selectors" if settings.hosts else f"models and {routing}"
        return (f"{mark.prefix}{source}: its part of a llama-swap -config-dir ({parts}); "
                f"edit that file and {mark.suffix}\n")
    return (
        f"{mark.prefix}{source}: edit that file and {mark.suffix}\n"
        f"healthCheckTimeout: {settings.health_check_timeout}\n"
    )


@frozen
class ConfigGroup:
    """A group as the config writes it: a configured one (`groups:`) or a coexistence group of the
    speech and segmentation servers, which stays loaded beside any other (`persistent`)."""

    name: str
    #: One member at a time (llama-swap's `swap`).
    swap: bool
    #: Loading a member unloads the other groups' models (but the persistent ones).
    exclusive: bool
    persistent: bool
    members: tuple[str, ...]


def config_groups(settings: Settings, members: list[tuple[str, str | None, str]]) -> list[ConfigGroup]:
    """Configured groups, then coexistence groups. `members` = (entry id, coexist group, model id):
    an entry joins the first group matching its model's id, so a model's profiles (`<id>-64k`)
    stay in its group."""
    configured: dict[str, list[str]] = {g.name: [] for g in settings.groups}
    coexist: dict[str, list[str]] = {}
    for entry_id, group, model_id in sorted(members):
        if group is not None:
            coexist.setdefault(group, []).append(entry_id)
            continue
        for g in settings.groups:
            if any(glob_pattern(pattern).match(model_id) for pattern in g.match):
                configured[g.name].append(entry_id)
                break
    taken = {name.lower() for name in configured}
    groups = [ConfigGroup(g.name, swap=not g.coexist, exclusive=True, persistent=False,
                          members=tuple(configured[g.name])) for g in settings.groups]
    groups += [ConfigGroup(name if name.lower() not in taken else f"{name}-auto", **COEXIST_GROUP,
                           members=tuple(coexist[name])) for name in sorted(coexist)]
    return groups


def _groups(settings: Settings, members: list[tuple[str, str | None, str]]) -> list[str]:
    """The `groups:` lines: a configured group's `swap` and `exclusive`, a coexistence group's
    `persistent` too."""
    lines = []
    for g in config_groups(settings, members):
        flags = {"swap": g.swap, "exclusive": g.exclusive, **({"persistent": True} if g.persistent else {})}
        lines.append(f"  {quote(g.name)}:")
        lines.extend(f"    {k}: {'true' if v else 'false'}" for k, v in flags.items())
        lines.append("    members:" + ("" if g.members else " []"))
        lines.extend(f"      - {quote(m)}" for m in g.members)
    return lines


def render_top_level(block: dict[str, Any]) -> str:
    """The settings' top-level `llama_swap:` keys, in their order, as YAML text."""
    return "".join(line + "\n" for key, value in block.items() for line in render_data(key, value, ""))


def passthrough_hint(settings: Settings, problems: Sequence[str] = ()) -> str:
    """The last lines of an invalid config's error when the settings carry llama-swap keys: for
    each problem at a top-level key the settings' `llama_swap:` wrote (`selectors.a.targets[0]`),
    where that key is in the settings file."""
    if not settings.llama_swap and not any(ov.llama_swap for ov in settings.overrides):
        return ""
    source = settings.source or "the settings"
    ours = [f"llama_swap.{place}: " for place in map(_problem_place, problems)
            if place and place.split(".")[0].split("[")[0] in settings.llama_swap]
    located = ""
    if ours and settings.source:
        from autogen.settings.structure import settings_error  # noqa: PLC0415 - lazy: only on an error

        error = settings_error(settings.source, ours)
        located = "".join(f"\n  {source}:{line}: {place.rstrip(': ')}" if line else f"\n  {place.rstrip(': ')}"
                          for place, line in zip(ours, error.lines, strict=True))
    return (f"\n(the `llama_swap:` keys of {source} are written as given; a name they use must be a model, "
            f"an alias or a peer model of this config){located}")


def _problem_place(problem: str) -> str:
    """`selectors.a.targets[0]` of `selectors.a.targets[0] references unknown model 'x'`."""
    return problem.split(" ", 1)[0].rstrip(":")


def assemble(settings: Settings, fragments: list[Fragment], warn: Callable[[str], None] | None = None) -> Assembled:
    """The whole config, models sorted by id (skips in their sorted place), as its head, blocks
    and tail (`checked_blocks.Assembled`). `warn` receives what the routing planner has to say
    (`routing: auto`)."""
    blocks = tuple(sorted((b for f in fragments for b in f.blocks), key=lambda b: (b[0], b[1])))
    members = [(*m, f.model_id) for f in fragments for m in f.members]
    auto = settings.routing == "auto"
    top = {k: v for k, v in settings.llama_swap.items() if not (auto and k == "routing")}
    head = header(settings) + render_top_level(top) + ("models:\n" if members else "models: {}\n")
    if auto:
        routing = _routing(settings, fragments, warn or (lambda _: None))
        return Assembled(head, blocks, with_user_routing(routing, settings.llama_swap.get("routing") or {}))
    group_lines = _groups(settings, members)
    return Assembled(head, blocks, "groups:\n" + "\n".join(group_lines) + "\n" if group_lines else "")


def assemble_preset(settings: Settings, fragments: list[Fragment], router_exe: str) -> Preset:
    """The models preset of `target: llama-server` (`router.preset.render_preset`), planned
    against the same cards as `routing: auto`. Its start command names the preset where the
    router reads it: through `path_map` when a container serves it."""
    source = comment_text(os.path.basename(settings.source) or "swapgen.yaml")
    head = f"{PRESET_MARK.prefix}{source}: edit that file and {PRESET_MARK.suffix}\n"
    path_map = PathMap.of(settings)
    output = (path_map.serve(settings.output) if path_map is not None else None) or settings.output
    try:
        return render_preset(head, [s for f in fragments for s in f.sections], [b for f in fragments for b in f.blocks],
                             settings.llama_swap, [x for f in fragments for x in f.loads], cards(settings), router_exe,
                             output)
    except PresetSettingsError as exc:  # shown at their lines of the settings file
        from autogen.settings.structure import settings_error  # noqa: PLC0415 - lazy: only on an error

        raise settings_error(settings.source, exc.problems) from None


def cards(settings: Settings):
    """The cards a plan across models is made for (`matrix_plan.host_devices`)."""
    return host_devices(eligible(inventory(settings)), card_vram_gb(settings), settings.vram_budget_gb)


# --- routing: auto -----------------------------------------------------------------------


def with_user_routing(block: str, user: dict[str, Any]) -> str:
    """The planned `routing:` block with the user's own `routing` keys (the scheduler: the
    router is swapgen's) under the same key: a config has one `routing:` mapping."""
    if not user:
        return block
    lines = block.splitlines(keepends=True)
    at = next((i for i, line in enumerate(lines) if line == "routing:\n"), None)
    if at is None:  # nothing planned: the user's keys alone
        return block + render_top_level({"routing": user})
    ours = [line + "\n" for key, value in user.items() for line in render_data(key, value, "  ")]
    return "".join(lines[: at + 1] + ours + lines[at + 1:])


def _routing(settings: Settings, fragments: list[Fragment], warn: Callable[[str], None]) -> str:
    """The matrix router block (no groups: llama-swap takes one or the other; CPU-only engines
    that would join a coexistence group are in every set instead). The planned sets are checked
    against the cards as written, before the config is validated and written."""
    loads, devices = with_sleepers([load for f in fragments for load in f.loads], cards(settings))
    plan = plan_matrix(loads, devices)
    if plan is None:
        return ""
    lines = render_matrix(plan)
    problems = check_plan(plan, loads, devices, _written_sets(plan, lines))
    if problems:
        raise SwapgenError("the planned routing matrix does not fit the cards (please report it):\n"
                           + "\n".join(f"  {p}" for p in problems[:20]))
    for message in plan.warnings:
        warn(f"routing: {message}")
    written = len(lines) - lines.index("        sets:") - 1
    notes = [f"# routing: auto: {counted(len(plan.sets), 'set')} of models that fit together on "
             + ", ".join(f"{d.label} ({d.vram_gb:g} GiB" + (f", {d.shared_gb:g} GiB shared" if d.shared_gb
                                                          and d.shared_gb < d.vram_gb else "") + ")" for d in devices)
             + ("" if written == len(plan.sets) else f", written as {written} (one per group differing in one model)")
             + ("" if plan.exact else "; a pair cover (see the warnings)")]
    notes += [f"# routing: {comment_text(m)}" for m in plan.warnings]
    asleep = sorted(load.entry_id for load in loads if load.asleep_gb > 0)
    if asleep:
        notes.append(f"# routing: sleeping vLLM models keep part of their cards in every set ({', '.join(asleep)}); "
                     "the cards above are what they leave")
    return "\n".join(notes + lines) + "\n"


def _written_sets(plan, lines: list[str]) -> list[frozenset[str]]:
    """The concrete sets the rendered `sets:` lines allow, read back through the DSL."""
    variables = dict(plan.vars)
    sets = []
    for line in lines[lines.index("        sets:") + 1:]:
        name, _, rest = line.strip().partition(": ")
        sets.append((name, json.loads(rest.split("  #")[0])))
    roots = compile_sets(sets, variables.get)
    return [members for name, _ in sets for members in expand(roots[name], roots)]


#: How to go on when `output` holds a file swapgen did not write, per target.
_HAND_WRITTEN = {
    LLAMA_SWAP: "move it away and run again; if it is your own llama-swap config, put its top-level keys under "
                "`llama_swap:` in the settings (docs/llama-swap-settings.md), or keep it as llama-swap's main file and "
                "let swapgen write its part beside it with `output_mode: fragment` and llama-swap's -config-dir",
    LLAMA_SERVER: "move it away and run again: swapgen writes the whole preset from the settings "
                  "(docs/llama-server-router.md)",
}


def output_problem(settings: Settings) -> str | None:
    """Why the config cannot be written at `output` now (`settings.owned.replace_problem`):
    a hand-written file, a folder, a device, a FIFO, a socket, a path that cannot be created."""
    return replace_problem("output", settings.output, OUTPUT_MARKS, _HAND_WRITTEN[settings.target])


def kept_config(settings: Settings, fragments: Sequence[Fragment], preset: bool) -> str | None:
    """A run that serves nothing because models failed inside swapgen (an exception while
    planning, not a skip the settings ask for) must not replace a config that serves models:
    the reason the old one is kept, or None. The same code would fail the same way again, so
    only a fixed swapgen (or a changed input) writes the config again."""
    failed = [f for f in fragments if f.internal_error]
    if not failed or any(f.members for f in fragments):
        return None
    # lazy: a run that writes nothing reads nothing
    from autogen.router.preset_check import section_count  # noqa: PLC0415
    from autogen.router.validate import model_count, read_config  # noqa: PLC0415

    text, _ = read_config(settings.output)
    serving = (section_count(text) if preset else model_count(text)) if text else 0
    if not serving:
        return None
    first = failed[0]
    return (f"{settings.output}: kept as it is (it serves {counted(serving, 'model')}): every model of this run failed "
            f"inside swapgen, {counted(len(failed), 'internal error')}, the first for {first.model_id!r} "
            f"({first.internal_error}); please report it, with the traceback above")


def write_config(path: str, config: Assembled | str, hint: Callable[[list[str]], str] | None = None,
                 router_exe: str | None = None, cache_dir: str | None = None) -> bool:
    """Validate, then write atomically only when the bytes differ. True = written. `config`: the
    assembled config (validated at the cost of what changed, `checked_blocks`, with `cache_dir`)
    or its text. `hint` ends the error, given the problems' messages (where the keys written as
    the user gave them come from). `router_exe`: the text is a models preset for that
    llama-server's router mode, checked against its own `--help` when it runs (`router.preset_check`)."""
    text = config.text if isinstance(config, Assembled) else config
    if router_exe is None:
        problems, reader = [p for p in _llama_swap_problems(config, path, cache_dir) if p.fatal], "llama-swap"
    else:
        from autogen.router.preset_check import build_keys, check_preset_text  # noqa: PLC0415 (lazy, as above)

        keys = build_keys(router_exe)
        problems = [p for p in check_preset_text(text, path, keys) if p.fatal]
        reader = f"llama.cpp's router (keys of {keys.source})"
    if problems:
        listing = "\n".join(f"  {p.where}: {p.message}" for p in problems[:50])  # all refused here: no label
        ending = hint([p.message for p in problems[:50]]) if hint else ""
        kept = "the previous file is kept" if os.path.exists(path) else "nothing was written"
        raise SwapgenError(f"{path}: the generated config is not valid for {reader}; {kept}.\n{listing}{ending}")
    try:
        return write_if_changed(path, text.encode("utf-8"))
    except OSError as exc:
        raise SwapgenError(f"{path}: cannot write the config ({exc.strerror or exc}); "
                           "check `output` in the settings file") from None


def _llama_swap_problems(config: Assembled | str, path: str, cache_dir: str | None):
    """What llama-swap's rules find in the config: by blocks when it is assembled and a cache
    folder keeps the blocks found valid, else over the whole text."""
    if isinstance(config, Assembled) and cache_dir is not None:
        from autogen.router.checked_blocks import check_generated  # noqa: PLC0415 (lazy: a no-op run writes nothing)

        return check_generated(config, path, cache_dir)
    from autogen.router.validate import validate_text  # noqa: PLC0415 (lazy, as above)

    return validate_text(config.text if isinstance(config, Assembled) else config, path)
