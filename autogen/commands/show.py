"""`swapgen show ID`: one model's paths, class, backend and why, metadata, KV derivation,
the devices it runs on and why, every sizing note, the env and argv one flag per line and the
YAML fragment (with `target: llama-server`, its preset sections)."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence

import attrs

from autogen.commands import fit_params
from autogen.commands.library import Library
from autogen.emit.dispatch import Job
from autogen.metadata.kvcost import kv_cost
from autogen.resolve.backends import llama_router_exe
from autogen.router.fragments import render_plan
from autogen.router.preset import LLAMA_SERVER, preset_plan, render_section, render_skip


def _find(library: Library, model_id: str):
    for job in library.jobs:
        if job.row.id == model_id:
            return job
    for job in library.jobs:  # a profile id such as <id>-64k
        if model_id.startswith(job.row.id + "-") and any(e.id == model_id for e in library.plan(job).entries):
            return job
    return None


def report(library: Library, job: Job) -> dict:
    meta = library.metas.get(job.row.id)
    plan = library.plan(job)
    kv = kv_cost(meta) if meta is not None else None
    return {
        "id": job.row.id,
        "paths": {"model": job.row.path, "shards": list(job.row.shards), "mmproj": job.row.mmproj,
                  "draft": job.row.draft, "manifest": job.row.manifest, "inputs": list(job.row.inputs)},
        "class": job.model_class,
        "role": job.role.value,
        "backend": {"id": job.backend_id, "engine": job.engine, "why": job.backend.why if job.backend else "",
                    "exe": job.backend.exe if job.backend else None},
        "override": job.override.match if job.override else None,
        "budget_gb": job.budget_gb,
        "card_vram_gb": job.card_vram_gb,
        "devices": {"ids": job.placement.label, "why": job.placement.why, "env": list(job.placement.env)}
        if job.placement.gpus else None,
        "metadata": attrs.asdict(meta) if meta is not None else None,
        "kv": {"bytes_per_token": kv.bytes_per_token, "note": kv.note, "derivation": list(kv.derivation)}
        if kv is not None else None,
        "notes": list(plan.notes),
        "entries": [{"id": e.id, "argv": list(e.argv), "env": list(e.env), "memory": dict(e.memory),
                     # with a path_map the backend and the paths are the container's: nothing to run here
                     "engine_estimate": None if library.path_map else _engine_estimate(job, e)}
                    for e in plan.entries],
        "skips": [{"id": s.id, "reason": s.reason} for s in plan.skips],
        "fragment": _fragment(library, job, plan),
    }


def _fragment(library: Library, job: Job, plan) -> str:
    """The model's part of the output: YAML blocks, or with `target: llama-server` its preset
    sections (every key, before `[*]` takes the shared ones) and skip lines."""
    if library.settings.target != LLAMA_SERVER:
        return "".join(text for _, text in sorted(render_plan(plan)))
    served, sections, _ = preset_plan(plan, job.engine, llama_router_exe(library.settings))
    blocks = [(s.id, render_section(s)) for s in sections] + [(k.id, render_skip(k)) for k in served.skips]
    return "".join(text for _, text in sorted(blocks))


def _engine_estimate(job: Job, entry) -> dict | None:
    """llama.cpp's own figures for this entry when the backend row's build ships its estimator."""
    estimator = fit_params.estimator_beside(job.backend.exe if job.backend else None) if entry.memory else None
    if estimator is None:
        return None
    figures, error = fit_params.run(estimator, entry.argv)
    totals = {part: sum(getattr(f, part) for f in figures) for part in ("model", "context", "compute")}
    return {"estimator": estimator, "devices": [attrs.asdict(f) for f in figures], "total_mib": totals,
            "error": error}


def _memory_lines(entry: dict) -> list[str]:
    """swapgen's parts in MiB, and llama-fit-params' beside them with the difference."""
    mib = 1 << 20
    ours = entry["memory"]
    if not ours:
        return []
    estimate = entry["engine_estimate"]
    if estimate is None:
        return ["    memory (MiB): " + ", ".join(f"{part} {value / mib:.0f}" for part, value in ours.items())]
    if estimate["error"]:
        return ["    memory (MiB): " + ", ".join(f"{part} {value / mib:.0f}" for part, value in ours.items()),
                f"    llama-fit-params: {estimate['error']}"]
    lines = ["    memory (MiB)   swapgen   llama-fit-params   difference"]
    for part, value in ours.items():
        theirs = estimate["total_mib"][part]
        lines.append(f"      {part:<12} {value / mib:>8.0f}   {theirs:>16}   {value / mib - theirs:>+10.0f}")
    return lines


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
        print(json.dumps(data, indent=2, ensure_ascii=False, default=list))
        return 0
    out = [f"{data['id']}  ({data['class']})", f"  path     {data['paths']['model']}"]
    for key in ("manifest", "shards", "mmproj", "draft"):
        value = data["paths"][key]
        for i, path in enumerate(value if isinstance(value, list) else [value] if value else []):
            out.append(f"  {key if i == 0 else '':<8} {path}")
    b = data["backend"]
    out.append(f"  backend  {b['id']} (engine {b['engine']}; {b['why']})" + (f" → {b['exe']}" if b["exe"] else ""))
    out.append(f"  budget   {data['budget_gb']:g} GiB; card {data['card_vram_gb'] or 'no reading'}")
    if data["devices"]:
        d = data["devices"]
        out.append(f"  devices  {d['ids']} ({d['why']})" + (f": {' '.join(d['env'])}" if d["env"] else ""))
    if data["override"]:
        out.append(f"  override match {data['override']!r}")
    if data["kv"]:
        out.append(f"  kv       {data['kv']['bytes_per_token']} bytes/token: {data['kv']['note']}")
        out.extend(f"           {line}" for line in data["kv"]["derivation"])
    if data["notes"]:
        out.append("  sizing")
        out.extend(f"    {n}" for n in data["notes"])
    for entry in data["entries"]:
        out.append(f"  argv of {entry['id']}")
        argv = entry["argv"]
        out.extend(_memory_lines(entry))
        out.extend(f"    {e}" for e in entry["env"])
        out.append(f"    {argv[0]}")
        i = 1
        while i < len(argv):
            if argv[i].startswith("-") and i + 1 < len(argv) and not argv[i + 1].startswith("-"):
                out.append(f"      {argv[i]} {argv[i + 1]}")
                i += 2
            else:
                out.append(f"      {argv[i]}")
                i += 1
    for skip in data["skips"]:
        out.append(f"  SKIPPED {skip['id']}: {skip['reason']}")
    out.append("  fragment")
    out.extend(f"  {line}" for line in data["fragment"].splitlines())
    print("\n".join(out))
    return 0
