"""`swapgen report [PATH]`: the whole plan as one typed record (`report_records.PlanReport`) and
the self-contained page that renders it (`page_html`), written beside the config unless a path is
given (docs/plan-page.md).

The record is made of the same parts as `swapgen show` (`show.model_report` for every model), the
listing's files that are not models (`discovery`'s ignored ones), and per host its cards
(`router.assemble.cards`) and what may stay loaded together: the config's groups under
llama-swap's rules, or its routing matrix (`router.matrix_plan`, planned from the same
footprints as the config). Every figure on the page is a value of this record; `--json` prints it.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
from collections.abc import Iterable, Sequence

import attrs

from autogen import __version__
from autogen.commands.breakdown import spread_figures
from autogen.commands.hints import ATTACHED, IGNORED, hint_for
from autogen.commands.library import Library
from autogen.commands.report_records import (
    PARTS,
    Apart,
    DeviceFigures,
    EntryReport,
    Gpu,
    GpuLoad,
    Group,
    Host,
    ModelReport,
    PlanReport,
    Residency,
    ResidentSet,
    SetShare,
    SetUsage,
    Unserved,
)
from autogen.commands.show import model_report
from autogen.commands.tasks import TaskGraph
from autogen.emit.dispatch import SKIPPED_BY_OVERRIDE
from autogen.errors import SwapgenError
from autogen.fsutil import write_if_changed
from autogen.numfmt import size_gb
from autogen.resolve.gpus import eligible, inventory
from autogen.router.assemble import ConfigGroup, cards, config_groups
from autogen.router.matrix_plan import (
    Device,
    Load,
    capacity,
    card_problems,
    demand,
    named_sets,
    plan_matrix,
    shared_capacity,
    with_sleepers,
)
from autogen.settings.owned import PAGE_MARK, place_problems, replace_problem
from autogen.settings.schema import LLAMA_SERVER, Settings

#: The page's file name beside the config when neither the command nor the settings name one.
PAGE_NAME = "report.html"


def page_path(settings: Settings, given: str | None = None) -> str:
    """Where the page goes: the path given, else the settings' `report`, else `PAGE_NAME` beside
    the config."""
    if given:
        return os.path.abspath(os.path.expanduser(given))
    return settings.report or os.path.join(os.path.dirname(settings.output), PAGE_NAME)


def plan_report(graph: TaskGraph) -> PlanReport:
    """Every host of the graph (a fleet front's with its own models, then each host's), every
    model, and every file not served."""
    hosts, models, unserved = [], [], []
    for g in graph.graphs:
        name = g.host.name if g.host is not None else None
        if g.hosts and not g.library.models:  # a fleet front with no models of its own
            continue
        reports = [model_report(g.library, job, name) for job in g.library.jobs]
        models += reports
        hosts.append(host_report(g.library, name, reports))
        unserved += unserved_files(g.library, name, reports)
    skipped = sum(1 for u in unserved if u.kind == "skipped")
    return PlanReport(version=__version__, settings=graph.library.settings.source, hosts=tuple(hosts),
                      models=tuple(models), unserved=tuple(unserved), served=sum(1 for m in models if m.entries),
                      skipped=skipped, other_files=len(unserved) - skipped)


def _loads(reports: Sequence[ModelReport]) -> list[tuple[Load, EntryReport]]:
    """What each served entry asks of the cards, as the config's routing reads its footprint."""
    return [(Load(entry_id=e.id, model_id=m.id, est_vram_gb=size_gb(e.vram), devices=e.gpus or None,
                  size_gb=size_gb(e.disk), engine=e.engine, asleep_gb=size_gb(e.asleep)), e)
            for m in reports for e in m.entries]


def host_report(library: Library, name: str | None, reports: Sequence[ModelReport]) -> Host:
    settings = library.settings
    devices = cards(settings)
    loads = _loads(reports)
    named = {g.index: g.name for g in eligible(inventory(settings))}
    gpus = tuple(Gpu(index=d.index, label=d.label, name=named.get(d.index, ""), card_gb=d.vram_gb,
                     budget_gb=d.shared_gb or d.vram_gb, loads=tuple(_gpu_loads(k, devices, loads)))
                 for k, d in enumerate(devices))
    return Host(name=name, settings=settings.source, config=settings.output, budget_gb=settings.vram_budget_gb,
                card_gb=library.card_vram_gb, gpus=gpus, residency=residency(settings, devices, loads),
                cpu_only=tuple(load.entry_id for load, _ in loads if load.est_vram_gb <= 0))


def _gpu_loads(k: int, devices: Sequence[Device], loads: Sequence[tuple[Load, EntryReport]]) -> Iterable[GpuLoad]:
    """Each entry's bytes on card `k`, part by part: its used figures' device in the same place
    among the cards it uses, or its one device spread over them as the planner spreads it."""
    for load, entry in loads:
        need = demand(load, devices)
        if not need[k]:
            continue
        on = [i for i, n in enumerate(need) if n]
        figures = _used_devices(entry)
        if len(figures) != len(on):
            figures = spread_figures(_whole(figures, entry), [devices[i].vram_gb for i in on])
        yield GpuLoad(entry=entry.id, model=load.model_id, figures=figures[on.index(k)])


def _used_devices(entry: EntryReport) -> tuple[DeviceFigures, ...]:
    used = next((m for m in entry.memory if m.used), None)
    return used.devices if used is not None else ()


def _whole(figures: Sequence[DeviceFigures], entry: EntryReport) -> DeviceFigures:
    """The entry's devices as one (an entry whose figures name another number of devices than the
    cards it uses); without figures, its whole footprint as `other`."""
    if len(figures) == 1:
        return figures[0]
    if not figures:
        return DeviceFigures(device="GPU", weights=0, kv_state=0, compute=0, projector=0, runtime=0, base=0, draft=0,
                             other=entry.vram, margin=0, total=entry.vram, vs_estimate=None)
    sums = {p: sum(getattr(f, p) for f in figures) for p in (*PARTS, "total")}
    return DeviceFigures(device="+".join(f.device for f in figures), **sums, vs_estimate=None)


# --- co-residency ------------------------------------------------------------------------------


def residency(settings: Settings, devices: Sequence[Device], loads: Sequence[tuple[Load, EntryReport]]) -> Residency:
    """What the config lets stay loaded together: its matrix (`routing: auto`), its groups, or a
    llama.cpp router's `--models-max`; drawn, as the planner sees them, on the cards less what
    sleeping vLLM models keep there in every set (`matrix_plan.with_sleepers`)."""
    plain, devices = with_sleepers([load for load, _ in loads], devices)
    loads = list(zip(plain, [entry for _, entry in loads], strict=True))
    if settings.target == LLAMA_SERVER:
        return Residency(mode="models-max", groups=(), sets=(), apart=(), pairs_apart=0,
                         notes=("llama.cpp's router keeps up to --models-max models loaded, any of them together; "
                                "the preset's first lines say how many fit the cards",))
    found = _matrix(plain, devices) if settings.routing == "auto" else _groups(settings, loads, devices)
    asleep = sorted(load.entry_id for load in plain if load.asleep_gb > 0)
    if not asleep:
        return found
    return attrs.evolve(found, notes=(*found.notes, f"sleeping vLLM models keep part of their cards in every set "
                                                    f"({', '.join(asleep)}); the cards drawn are what they leave"))


def _matrix(loads: Sequence[Load], devices: Sequence[Device]) -> Residency:
    plan = plan_matrix(loads, devices)
    if plan is None:
        return Residency(mode="matrix", groups=(), sets=(), apart=(), pairs_apart=0, notes=())
    by_id = {load.entry_id: load for load in loads}
    sets = tuple(ResidentSet(name=name, members=key if len(alts) > 1 else tuple(sorted((*key, *alts))),
                             alternatives=alts if len(alts) > 1 else (),
                             usage=_most([usage([by_id[e] for e in (*key, alt)], devices) for alt in alts]))
                 for name, key, alts in named_sets(plan))
    apart = _apart([load for load in loads if load.est_vram_gb > 0], sets, devices, _why_matrix)
    return Residency(mode="matrix", groups=(), sets=sets, apart=apart, pairs_apart=sum(len(a.others) for a in apart),
                     notes=plan.warnings)


def _groups(settings: Settings, entries: Sequence[tuple[Load, EntryReport]], devices: Sequence[Device]) -> Residency:
    """llama-swap's groups: a coexisting group's members together, a swapping group's one at a
    time, every group exclusive of the others but the persistent ones, which stay beside any;
    a model in no group is in llama-swap's default group, one at a time."""
    groups = config_groups(settings, [(load.entry_id, entry.group, load.model_id) for load, entry in entries])
    loads = [load for load, _ in entries]
    by_id = {load.entry_id: load for load in loads}
    always = {m for g in groups if g.persistent for m in g.members}
    sets = tuple(ResidentSet(name=name, members=tuple(sorted({*members, *always})), alternatives=(),
                             usage=usage([by_id[e] for e in sorted({*members, *always})], devices))
                 for name, members in _alone_or_together(groups, loads, always))
    group_of = {m: g.name for g in groups for m in g.members}
    rivals = [load for load in loads if load.entry_id not in always]
    apart = _apart(rivals, sets, devices, lambda a, b, _devices: _why_groups(group_of, a, b))
    return Residency(mode="groups", groups=tuple(Group(g.name, g.swap, g.exclusive, g.persistent, g.members)
                                                  for g in groups), sets=sets, apart=apart,
                     pairs_apart=sum(len(a.others) for a in apart), notes=())


def _alone_or_together(groups: Sequence[ConfigGroup], loads: Sequence[Load],
                       always: set[str]) -> list[tuple[str, tuple[str, ...]]]:
    """(name, entries) that llama-swap loads at once besides the persistent groups: a coexisting
    group's members, each member of a swapping group, each model in no group; the persistent
    groups alone when nothing else is served."""
    grouped = {m for g in groups for m in g.members}
    together = [(g.name, g.members) for g in groups if not g.persistent and not g.swap and g.members]
    alone = [m for g in groups if not g.persistent and g.swap for m in g.members]
    alone += [load.entry_id for load in loads if load.entry_id not in grouped]
    found = together + [(m, (m,)) for m in alone]
    return found or ([("persistent", tuple(sorted(always)))] if always else [])


def _most(usages: Sequence[tuple[SetUsage, ...]]) -> tuple[SetUsage, ...]:
    """Per card, the usage of the alternative that takes the most of it (over when any is)."""
    cards: dict[str, SetUsage] = {}
    for each in usages:
        for u in each:
            known = cards.get(u.gpu)
            if known is None or u.used_gb > known.used_gb:
                cards[u.gpu] = attrs.evolve(u, over=u.over or (known is not None and known.over))
            elif u.over:
                cards[u.gpu] = attrs.evolve(known, over=True)
    return tuple(cards.values())


def usage(members: Sequence[Load], devices: Sequence[Device]) -> tuple[SetUsage, ...]:
    """What the members take of each card they use, in the planner's figures, and whether that is
    more than the card allows (`matrix_plan.card_problems`)."""
    needs = {m.entry_id: demand(m, devices) for m in members}
    over = set(card_problems(needs.values(), devices))
    out = []
    for k, d in enumerate(devices):
        shares = tuple(SetShare(entry=e, gb=need[k] / 100) for e, need in sorted(needs.items()) if need[k])
        if shares:
            out.append(SetUsage(gpu=d.label, card_gb=d.vram_gb, shared_gb=d.shared_gb or d.vram_gb,
                                used_gb=sum(need[k] for need in needs.values()) / 100, shares=shares, over=k in over))
    return tuple(out)


def _apart(loads: Sequence[Load], sets: Sequence[ResidentSet], devices: Sequence[Device],
           why) -> tuple[Apart, ...]:
    """Every two of `loads` that share no set, with why, grouped under the first by reason."""
    together: dict[str, set[tuple[int, str]]] = {}
    for k, s in enumerate(sets):  # each set of a line: the members with one alternative
        for alt in s.alternatives or ("",):
            for m in (*s.members, alt) if alt else s.members:
                together.setdefault(m, set()).add((k, alt))
    grouped: dict[tuple[str, str], list[str]] = {}
    for a, b in itertools.combinations(sorted(loads, key=lambda x: x.entry_id), 2):
        if not together.get(a.entry_id, set()) & together.get(b.entry_id, set()):
            grouped.setdefault((a.entry_id, why(a, b, devices)), []).append(b.entry_id)
    return tuple(Apart(first=first, others=tuple(others), why=reason) for (first, reason), others in grouped.items())


def _why_matrix(a: Load, b: Load, devices: Sequence[Device]) -> str:
    """Why the matrix keeps two entries apart (`a` sorts first): one model's entries, an entry that
    needs a card to itself, or the cards the two would overfill together (each entry's share of a
    card is on its bars)."""
    if a.model_id == b.model_id:
        return "entries of one model: the same weights twice"
    need_a, need_b = demand(a, devices), demand(b, devices)
    if any(n > capacity(d) for n, d in zip(need_a, devices, strict=True)):
        return "it needs more than a card: it runs alone"
    if any(n > capacity(d) for n, d in zip(need_b, devices, strict=True)):
        return "each needs more than a card: it runs alone"
    full = [f"{d.label}'s {d.shared_gb or d.vram_gb:g} GiB" for k, d in enumerate(devices)
            if need_a[k] and need_b[k] and need_a[k] + need_b[k] > shared_capacity(d)]
    if full:
        return f"together more than models may share of {' and '.join(full)}"
    return "in no common set (a pair cover: see the planner's note)"


def _why_groups(group_of: dict[str, str], a: Load, b: Load) -> str:
    ga, gb = group_of.get(a.entry_id), group_of.get(b.entry_id)
    if ga is None and gb is None:
        return "neither is in a group: llama-swap's default group runs one model at a time"
    if ga == gb:
        return f"group {ga} swaps: one of its models at a time"
    named = " and ".join(f"group {g}" if g else "llama-swap's default group" for g in (ga, gb))
    return f"{named} are exclusive: a model of one loading unloads the other's"


# --- files not served ----------------------------------------------------------------------------


def unserved_files(library: Library, host: str | None, reports: Sequence[ModelReport]) -> list[Unserved]:
    """Every skip the config writes (a model's or a profile's), every model an override leaves out,
    every file that is not a model of its own: its reason and what to do."""
    out = []
    skipped_on_purpose = {job.row.id for job in library.jobs if job.override is not None and job.override.skip}
    for report in reports:
        if report.id in skipped_on_purpose:
            out.append(Unserved(id=report.id, host=host, kind="skipped", path=report.files.model,
                                reason=SKIPPED_BY_OVERRIDE, hint=hint_for(SKIPPED_BY_OVERRIDE)))
        out += [Unserved(id=s.id, host=host, kind="skipped", path=report.files.model, reason=s.reason, hint=s.hint)
                for s in report.skips]
    out += [Unserved(id=None, host=host, kind="attached" if item.attached else "ignored", path=item.path,
                     reason=item.reason, hint=ATTACHED if item.attached else IGNORED)
            for item in library.discovery.ignored]
    return out


# --- the command ---------------------------------------------------------------------------------


def render(report: PlanReport) -> bytes:
    """The page's bytes (`page_html`)."""
    from autogen.commands.page_html import page  # noqa: PLC0415 - lazy: `--json` renders no page

    return page(report).encode("utf-8")


#: What to do when a file swapgen did not write is where the page goes.
_NOT_OURS = "move it away, or give the page another path (swapgen report PATH, or `report` in the settings)"


def write_page(settings: Settings, path: str, data: bytes, key: str = "report") -> bool:
    """The page written through the one crash-safe writer, only when its bytes change, and only
    where swapgen may write (`settings.owned`): never the settings, the backends file or the config,
    never inside a root, never over a file it did not write. True = written. `key`: what names
    the path in a message."""
    reads = {"the settings file itself": settings.source, "the backends file": settings.backends_file,
             "the config (`output`)": settings.output}
    problems = place_problems(key, path, reads, settings.roots)
    problem = problems[0] if problems else replace_problem(key, path, (PAGE_MARK,), _NOT_OURS)
    if problem is not None:
        raise SwapgenError(f"{problem}. Nothing was written.")
    try:
        return write_if_changed(path, data)
    except OSError as exc:
        raise SwapgenError(f"{path}: cannot write the plan page ({exc.strerror or exc}); give another path "
                           "(swapgen report PATH) or set `report` in the settings file") from None


def main(graph: TaskGraph, path: str | None, as_json: bool) -> int:
    report = plan_report(graph)
    if as_json:
        from autogen.records import CONVERTER  # noqa: PLC0415 - lazy: only `--json` serialises

        print(json.dumps(CONVERTER.unstructure(report), indent=2, ensure_ascii=False))
        return 0
    settings = graph.library.settings
    target = page_path(settings, path)
    key = "swapgen report PATH" if path else "report" if settings.report else "swapgen report"
    written = write_page(settings, target, render(report), key)
    print(f"swapgen: {target} {'written' if written else 'unchanged'}", file=sys.stderr)
    return 0
