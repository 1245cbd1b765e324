"""`swapgen show ID`: one model's plan as a report, each fact once, sizes in GiB.

Paths, class, backend and why; the budget (per GPU where there are several); the KV cost with
its derivation; the sizing notes; then per entry the memory table (the three sources side by
side, in the style of llama.cpp's `llama_memory_breakdown_print`: device first, one unit, each
part once), the env and argv one flag per line, and the YAML fragment (with
`target: llama-server`, its preset sections).

All of it is one typed record (`report_records.ModelReport`, built by `model_report`), which the
text renders and `--json` serialises through the one converter (`records.CONVERTER`); the plan
page (`swapgen report`) holds the same record for every model.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence

from autogen.commands.breakdown import source_figures
from autogen.commands.library import Library
from autogen.commands.report_records import (
    Backend,
    Devices,
    EntryReport,
    Files,
    KvCost,
    Lora,
    ModelReport,
    Skip,
    SourceFigures,
)
from autogen.emit.entry import Entry, Plan
from autogen.figures.plan import measured_record
from autogen.footprint import Footprint, MemoryRecord, Source
from autogen.metadata.kvcost import kv_cost
from autogen.numfmt import GIB, gib_figure, gib_text
from autogen.records import CONVERTER
from autogen.resolve.backends import llama_router_exe
from autogen.resolve.gpus import eligible, inventory
from autogen.resolve.job import Job
from autogen.router.fragments import render_plan
from autogen.router.preset import preset_plan, render_section, render_skip
from autogen.settings.schema import LLAMA_SERVER, Gpu

#: The memory table's columns: llama.cpp's three parts, then the rest of a device's bytes.
COLUMNS = ("model", "context", "compute", "other", "total", "vs estimate")


def find(library: Library, model_id: str) -> Job | None:
    """The job of `model_id`, or of the model a profile id belongs to."""
    for job in library.jobs:
        if job.row.id == model_id:
            return job
    for job in library.jobs:  # a profile id such as <id>-64k, <id>-draft or <id>+<LoRA adapter>
        if model_id.startswith((job.row.id + "-", job.row.id + "+")) \
                and any(e.id == model_id for e in library.plan(job).entries):
            return job
    return None


def sources(library: Library, job: Job, entry: Entry) -> list[tuple[Source, MemoryRecord | None, str]]:
    """(source, its figures for the entry or None, why none) for each source the entry has or could have."""
    out: list[tuple[Source, MemoryRecord | None, str]] = []
    if entry.estimate is not None:
        out.append((Source.ESTIMATE, entry.estimate, ""))
    if job.served_by.estimator:
        figures, error = library.engine.estimate(job, entry)
        why = error or (f"no {Source.FIT_PARAMS} beside {job.backend.exe}" if library.engine.estimator(job) is None
                        else f"not asked ({'an embedding entry' if '--embeddings' in entry.argv else 'no estimate'})")
        out.append((Source.FIT_PARAMS, figures, "" if figures is not None else why))
    measured = library.engine.measurement(job, entry)
    if measured is not None and measured.record is not None and entry.estimate is not None:
        out.append((Source.MEASURED, measured_record(measured, entry.estimate), ""))
    elif measured is not None and measured.error:
        out.append((Source.MEASURED, None, f"failed to start: {measured.error}"))
    elif job.served_by.measured:
        out.append((Source.MEASURED, None, f"not measured (swapgen calibrate {entry.id})"))
    return out


def budget_text(job: Job, seen: tuple[Gpu, ...] = ()) -> str:
    """The budget as each GPU sees it, and what it adds up to over several, less what sleeping
    vLLM models keep on its cards. `seen`: the host's eligible GPUs, whose total is the card
    reading of a model placed on none of them."""
    held = (f", after {gib_text(job.held[0])} that sleeping vLLM models keep on its cards ({job.held[2]})"
            if job.held[0] else "")
    return _budget(job, seen) + held


def _budget(job: Job, seen: tuple[Gpu, ...]) -> str:
    card = f"card {job.card_vram_gb:g} GiB" if job.card_vram_gb else "no card reading"
    if len(seen) > 1 and job.card_vram_gb == sum(g.vram_gb for g in seen):
        card = (f"card reading {job.card_vram_gb:g} GiB: {len(seen)} GPUs of "
                f"{' + '.join(f'{g.vram_gb:g}' for g in seen)} GiB together")
    gpus = job.nodes.gpus if job.nodes is not None else job.placement.gpus
    if len(gpus) <= 1:
        where = f" on GPU {gpus[0].index} ({gpus[0].vram_gb:g} GiB card)" if gpus else f" ({card})"
        return f"{job.budget_gb:g} GiB{where}"
    each = job.budget_gb / len(gpus)
    hosts = f" on {len(job.nodes.nodes)} nodes" if job.nodes is not None else ""
    cards = ", ".join(f"{g.vram_gb:g}" for g in gpus)
    return (f"{each:g} GiB per GPU × {len(gpus)} GPUs{hosts} ({cards} GiB cards), "
            f"{job.budget_gb:g} GiB in all")


def model_report(library: Library, job: Job, host: str | None = None) -> ModelReport:
    """The model's plan as a typed report (`host`: the fleet host it belongs to)."""
    meta = library.metas.get(job.row.id)
    # the engine's figures are for the commands as they run here (before `path_map`)
    host_plan = library.host_plan(job)
    plan = library.served(job, host_plan)
    on_host = {e.id: e for e in host_plan.entries}
    # a whisper.cpp model's caches are fixed windows its sizer lists among the notes, not a cost per token
    kv = kv_cost(meta) if meta is not None and meta.whisper is None else None
    row, backend = job.row, job.backend
    draft = library.drafts.get(row.id)
    files = Files(model=row.path, manifest=row.manifest, shards=row.shards, projector=row.mmproj, draft=row.draft,
                  vad=row.vad,
                  speculative_draft=draft.path if draft is not None else None,
                  loras=tuple(Lora(name=a.name, path=a.path, kind=str(a.kind)) for a in row.loras), inputs=row.inputs)
    return ModelReport(
        id=row.id, host=host, role=job.role,
        backend=Backend(id=job.backend_id, engine=str(job.engine), why=backend.why if backend else "",
                        exe=backend.exe if backend else None),
        files=files, override=job.override.match if job.override else None, budget_gb=job.budget_gb,
        budget=budget_text(job, eligible(inventory(library.settings))), card_vram_gb=job.card_vram_gb,
        devices=Devices(ids=job.placement.label, why=job.placement.why, env=job.placement.env)
        if job.placement.gpus else None,
        metadata=meta,
        kv=KvCost(bytes_per_token=kv.bytes_per_token, note=kv.note, derivation=kv.derivation)
        if kv is not None else None,
        notes=plan.notes,
        entries=tuple(entry_report(library, job, e, on_host.get(e.id, e)) for e in plan.entries),
        skips=tuple(Skip(id=k.id, reason=k.reason, hint=hint(k.reason)) for k in plan.skips),
        fragment=_fragment(library, job, plan))


def entry_report(library: Library, job: Job, entry: Entry, on_host: Entry) -> EntryReport:
    """One entry as served (`entry`) with the figures of its command as it runs here (`on_host`)."""
    fp = entry.footprint
    used = fp.memory.source if fp is not None and fp.memory is not None else None
    memory = tuple(source_figures(source, record, why, source == used, on_host.charges, on_host.estimate)
                   for source, record, why in sources(library, job, on_host))
    fp = fp if fp is not None else Footprint(engine="")
    return EntryReport(id=entry.id, engine=str(fp.engine), argv=entry.argv, env=entry.env, reason=entry.comment,
                       vram=fp.vram, host_ram=fp.host, disk=fp.disk, asleep=fp.asleep, gpus=fp.gpus,
                       group=entry.coexist_group, context=entry.context.plan() if entry.context is not None else None,
                       memory=memory)


def hint(reason: str) -> str:
    """What a user can do about a skip reason (docs/troubleshooting.md#a-model-is-missing-from-the-config)."""
    # lazy: only reports that show skips read the table
    from autogen.commands.hints import hint_for  # noqa: PLC0415

    return hint_for(reason)


def memory_table(figures: Sequence[SourceFigures]) -> list[str]:
    """One row per device and source, GiB, each part once, and each device's difference from
    the estimate (the sources' total for the device in the same position)."""
    rows = [("device", "source", *COLUMNS)]
    notes = []
    for fig in figures:
        if fig.missing:
            notes.append(f"{fig.source}: {fig.missing}")
            continue
        mark = " *" if fig.used else ""
        for d in fig.devices:
            other = d.total - d.weights - d.kv_state - d.compute
            diff = f"{d.vs_estimate / GIB:+.2f}" if d.vs_estimate is not None else ""
            rows.append((d.device, f"{fig.source}{mark}", gib_figure(d.weights), gib_figure(d.kv_state),
                         gib_figure(d.compute), gib_figure(other), gib_figure(d.total), diff))
        if fig.host is not None:
            h = fig.host
            rows.append((h.device, f"{fig.source}{mark}", gib_figure(h.weights), gib_figure(h.kv_state),
                         gib_figure(h.compute), "", gib_figure(h.total), ""))
        if fig.note:
            notes.append(f"{fig.source}: {fig.note}")
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
             .rstrip() for r in rows]
    legend = ("GiB; other = what the engine's report does not show (runtime, base, projector) and the margin "
              "on measured figures; * = the figures this entry uses")
    return [*lines, legend, *notes]


def _fragment(library: Library, job: Job, plan: Plan) -> str:
    """The model's part of the output: YAML blocks, or with `target: llama-server` its preset
    sections (every key, before `[*]` takes the shared ones) and skip lines."""
    if library.settings.target != LLAMA_SERVER:
        return "".join(text for _, text in sorted(render_plan(plan)))
    served, sections, _ = preset_plan(plan, job.engine, llama_router_exe(library.settings))
    blocks = [(s.id, render_section(s)) for s in sections] + [(k.id, render_skip(k)) for k in served.skips]
    return "".join(text for _, text in sorted(blocks))


def main(library: Library, model_id: str, as_json: bool, hosts: Sequence[tuple[str, Library]] = (),
         host: str | None = None) -> int:
    """`hosts`: a fleet front's (prefix, library) per host, to name the hosts that serve a bare id;
    `host`: the fleet host `library` is."""
    job = find(library, model_id)
    if job is None:
        named = [prefix + model_id for prefix, lib in hosts if find(lib, model_id) is not None]
        where = f"; the fleet's hosts have {', '.join(named)}" if named else "; `swapgen list` shows the ids"
        print(f"swapgen: no model {model_id!r}{where}", file=sys.stderr)
        return 1
    report = model_report(library, job, host)
    if as_json:
        print(json.dumps(CONVERTER.unstructure(report), indent=2, ensure_ascii=False))
        return 0
    print("\n".join(_text(report)))
    return 0


def _text(report: ModelReport) -> list[str]:
    out = _head_lines(report)
    if report.notes:
        out.append("  sizing")
        out.extend(f"    {n}" for n in report.notes)
    for entry in report.entries:
        if entry.memory:
            out.append(f"  memory of {entry.id}")
            out.extend(f"    {line}" for line in memory_table(entry.memory))
        out.append(f"  argv of {entry.id}")
        out.extend(f"    {e}" for e in entry.env)
        out.extend(_argv_lines(entry.argv))
    for skip in report.skips:
        out.append(f"  SKIPPED {skip.id}: {skip.reason}")
    out.append("  fragment")
    out.extend(f"  {line}" for line in report.fragment.splitlines())
    return out


def _head_lines(report: ModelReport) -> list[str]:
    """Paths, backend, budget, devices, override and the KV cost."""
    files = report.files
    out = [f"{report.id}  ({report.role.value})", f"  path      {files.model}"]
    for key, paths in (("manifest", (files.manifest,)), ("shards", files.shards), ("mmproj", (files.projector,)),
                       ("draft", (files.draft,)), ("vad", (files.vad,))):
        for i, path in enumerate(p for p in paths if p):
            out.append(f"  {key if i == 0 else '':<9} {path}")
    b = report.backend
    out.append(f"  backend   {b.id} (engine {b.engine}; {b.why})" + (f" → {b.exe}" if b.exe else ""))
    out.append(f"  budget    {report.budget}")
    if report.devices:
        d = report.devices
        out.append(f"  devices   {d.ids} ({d.why})" + (f": {' '.join(d.env)}" if d.env else ""))
    if report.override:
        out.append(f"  override  match {report.override!r}")
    if report.kv and report.kv.bytes_per_token is not None:
        # the size once, in KiB; the derivation under it ends in the exact bytes (or says why none)
        size = f"{report.kv.note} at f16" if report.kv.bytes_per_token else "none"
        out.append(f"  KV cost   {size}")
        out.extend(f"            {line}" for line in report.kv.derivation)
    elif report.kv:
        out.append(f"  KV cost   unknown: {report.kv.note}")
    return out


def _argv_lines(argv: Sequence[str]) -> list[str]:
    out = [f"    {argv[0]}"]
    i = 1
    while i < len(argv):
        if argv[i].startswith("-") and i + 1 < len(argv) and not argv[i + 1].startswith("-"):
            out.append(f"      {argv[i]} {argv[i + 1]}")
            i += 2
        else:
            out.append(f"      {argv[i]}")
            i += 1
    return out
