"""`swapgen show ID`: one model's plan as a report, each fact once, sizes in GiB.

Paths, class, backend and why; the budget (per GPU where there are several); the KV cost with
its derivation; the sizing notes; then per entry the memory table (the three sources side by
side, in the style of llama.cpp's `llama_memory_breakdown_print`: device first, one unit, each
part once), the env and argv one flag per line, and the YAML fragment (with
`target: llama-server`, its preset sections).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence

import attrs

from autogen.commands.library import Library
from autogen.emit.entry import Entry
from autogen.figures.plan import measured_record
from autogen.footprint import MemoryRecord, Source, record_to_data
from autogen.metadata.kvcost import kv_cost
from autogen.numfmt import GIB, gib_figure, gib_text
from autogen.resolve.backends import llama_router_exe
from autogen.resolve.gpus import eligible, inventory
from autogen.resolve.job import Job
from autogen.router.fragments import render_plan
from autogen.router.preset import preset_plan, render_section, render_skip
from autogen.settings.schema import LLAMA_SERVER, Gpu

PARTS = ("model", "context", "compute")


def _find(library: Library, model_id: str):
    for job in library.jobs:
        if job.row.id == model_id:
            return job
    for job in library.jobs:  # a profile id such as <id>-64k, <id>-draft or <id>+<LoRA adapter>
        if model_id.startswith((job.row.id + "-", job.row.id + "+")) \
                and any(e.id == model_id for e in library.plan(job).entries):
            return job
    return None


def sources(library: Library, job: Job, entry: Entry) -> dict[str, MemoryRecord | str]:
    """The entry's figures from each source, or why a source has none."""
    out: dict[str, MemoryRecord | str] = {}
    if entry.estimate is not None:
        out[Source.ESTIMATE] = entry.estimate
    if job.served_by.estimator:
        figures, error = library.engine.estimate(job, entry)
        why = error or (f"no {Source.FIT_PARAMS} beside {job.backend.exe}" if library.engine.estimator(job) is None
                        else f"not asked ({'an embedding entry' if '--embeddings' in entry.argv else 'no estimate'})")
        out[Source.FIT_PARAMS] = figures if figures is not None else why
    measured = library.engine.measurement(job, entry)
    if measured is not None and measured.record is not None and entry.estimate is not None:
        out[Source.MEASURED] = measured_record(measured, entry.estimate)
    elif measured is not None and measured.error:
        out[Source.MEASURED] = f"failed to start: {measured.error}"
    elif job.served_by.measured:
        out[Source.MEASURED] = f"not measured (swapgen calibrate {entry.id})"
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


def report(library: Library, job: Job) -> dict:
    meta = library.metas.get(job.row.id)
    plan = library.plan(job)
    # the engine's figures are for the commands as they run here (before `path_map`)
    host = {e.id: e for e in library.host_plan(job).entries}
    # a whisper.cpp model's caches are fixed windows its sizer lists among the notes, not a cost per token
    kv = kv_cost(meta) if meta is not None and meta.whisper is None else None
    return {
        "id": job.row.id,
        "paths": {"model": job.row.path, "shards": list(job.row.shards), "mmproj": job.row.mmproj,
                  "draft": job.row.draft, "vad": job.row.vad, "manifest": job.row.manifest,
                  "inputs": list(job.row.inputs)},
        "class": job.role.value,
        "role": job.role.value,
        "backend": {"id": job.backend_id, "engine": job.engine, "why": job.backend.why if job.backend else "",
                    "exe": job.backend.exe if job.backend else None},
        "override": job.override.match if job.override else None,
        "budget_gb": job.budget_gb,
        "budget": budget_text(job, eligible(inventory(library.settings))),
        "card_vram_gb": job.card_vram_gb,
        "devices": {"ids": job.placement.label, "why": job.placement.why, "env": list(job.placement.env)}
        if job.placement.gpus else None,
        "metadata": attrs.asdict(meta) if meta is not None else None,
        "kv": {"bytes_per_token": kv.bytes_per_token, "note": kv.note, "derivation": list(kv.derivation)}
        if kv is not None else None,
        "notes": list(plan.notes),
        "entries": [{"id": e.id, "argv": list(e.argv), "env": list(e.env),
                     "memory": {"used": e.footprint.memory.source.value
                                if e.footprint is not None and e.footprint.memory is not None else None,
                                **{str(k): record_to_data(v) if isinstance(v, MemoryRecord) else v
                                   for k, v in sources(library, job, host.get(e.id, e)).items()}}}
                    for e in plan.entries],
        "skips": [{"id": s.id, "reason": s.reason} for s in plan.skips],
        "fragment": _fragment(library, job, plan),
    }


def memory_table(used: str | None, figures: dict) -> list[str]:
    """One row per device and source, GiB, each part once, and each device's difference from
    the estimate (the sources' total for the device in the same position)."""
    rows = [("device", "source", *PARTS, "other", "total", "vs estimate")]
    estimate = figures.get(Source.ESTIMATE)
    notes = []
    for source, value in figures.items():
        if not isinstance(value, dict):
            notes.append(f"{source}: {value}")
            continue
        fp = value
        mark = " *" if source == used else ""
        for i, device in enumerate(fp["devices"]):
            other = _at(fp["unseen"], i) + _at(fp["margin"], i)
            total = sum(device[p] for p in PARTS) + other
            diff = ""
            if estimate is not None and source != Source.ESTIMATE and i < len(estimate["devices"]):
                base = estimate["devices"][i]
                diff = f"{(total - sum(base[p] for p in PARTS) - _at(estimate['unseen'], i)) / GIB:+.2f}"
            rows.append((device["name"], f"{source}{mark}", *(gib_figure(device[p]) for p in PARTS), gib_figure(other),
                         gib_figure(total), diff))
        if fp["host"]:
            host = fp["host"]
            rows.append((host["name"], f"{source}{mark}", *(gib_figure(host[p]) for p in PARTS), "", gib_figure(
                sum(host[p] for p in PARTS)), ""))
        if fp["note"]:
            notes.append(f"{source}: {fp['note']}")
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
             .rstrip() for r in rows]
    legend = ("GiB; other = what the engine's report does not show (runtime, base, projector) and the margin "
              "on measured figures; * = the figures this entry uses")
    return [*lines, legend, *notes]


def _fragment(library: Library, job: Job, plan) -> str:
    """The model's part of the output: YAML blocks, or with `target: llama-server` its preset
    sections (every key, before `[*]` takes the shared ones) and skip lines."""
    if library.settings.target != LLAMA_SERVER:
        return "".join(text for _, text in sorted(render_plan(plan)))
    served, sections, _ = preset_plan(plan, job.engine, llama_router_exe(library.settings))
    blocks = [(s.id, render_section(s)) for s in sections] + [(k.id, render_skip(k)) for k in served.skips]
    return "".join(text for _, text in sorted(blocks))


def _at(values: Sequence[int], i: int) -> int:
    return values[i] if i < len(values) else 0


def main(library: Library, model_id: str, as_json: bool, hosts: Sequence[tuple[str, Library]] = ()) -> int:
    """`hosts`: a fleet front's (prefix, library) per host, to name the hosts that serve a bare id."""
    job = _find(library, model_id)
    if job is None:
        named = [prefix + model_id for prefix, lib in hosts if _find(lib, model_id) is not None]
        where = f"; the fleet's hosts have {', '.join(named)}" if named else "; `swapgen list` shows the ids"
        print(f"swapgen: no model {model_id!r}{where}", file=sys.stderr)
        return 1
    data = report(library, job)
    if as_json:
        print(json.dumps(data, indent=2, ensure_ascii=False, default=str))
        return 0
    print("\n".join(_text(data)))
    return 0


def _text(data: dict) -> list[str]:
    out = _head_lines(data)
    if data["notes"]:
        out.append("  sizing")
        out.extend(f"    {n}" for n in data["notes"])
    for entry in data["entries"]:
        memory = {k: v for k, v in entry["memory"].items() if k != "used"}
        if memory:
            out.append(f"  memory of {entry['id']}")
            out.extend(f"    {line}" for line in memory_table(entry["memory"]["used"], memory))
        out.append(f"  argv of {entry['id']}")
        out.extend(f"    {e}" for e in entry["env"])
        out.extend(_argv_lines(entry["argv"]))
    for skip in data["skips"]:
        out.append(f"  SKIPPED {skip['id']}: {skip['reason']}")
    out.append("  fragment")
    out.extend(f"  {line}" for line in data["fragment"].splitlines())
    return out


def _head_lines(data: dict) -> list[str]:
    """Paths, backend, budget, devices, override and the KV cost."""
    out = [f"{data['id']}  ({data['class']})", f"  path      {data['paths']['model']}"]
    for key in ("manifest", "shards", "mmproj", "draft", "vad"):
        value = data["paths"][key]
        for i, path in enumerate(value if isinstance(value, list) else [value] if value else []):
            out.append(f"  {key if i == 0 else '':<9} {path}")
    b = data["backend"]
    out.append(f"  backend   {b['id']} (engine {b['engine']}; {b['why']})" + (f" → {b['exe']}" if b["exe"] else ""))
    out.append(f"  budget    {data['budget']}")
    if data["devices"]:
        d = data["devices"]
        out.append(f"  devices   {d['ids']} ({d['why']})" + (f": {' '.join(d['env'])}" if d["env"] else ""))
    if data["override"]:
        out.append(f"  override  match {data['override']!r}")
    if data["kv"] and data["kv"]["bytes_per_token"] is not None:
        # the size once, in KiB; the derivation under it ends in the exact bytes (or says why none)
        size = f"{data['kv']['note']} at f16" if data["kv"]["bytes_per_token"] else "none"
        out.append(f"  KV cost   {size}")
        out.extend(f"            {line}" for line in data["kv"]["derivation"])
    elif data["kv"]:
        out.append(f"  KV cost   unknown: {data['kv']['note']}")
    return out


def _argv_lines(argv: list[str]) -> list[str]:
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
