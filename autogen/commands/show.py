"""`swapgen show ID`: one model's paths, class, backend and why, metadata, KV derivation,
the devices it runs on and why, every sizing note, the env and argv one flag per line and the
YAML fragment."""

from __future__ import annotations

import json
import sys

import attrs

from autogen.commands.library import Library
from autogen.emit.dispatch import Job
from autogen.router.fragments import render_plan
from autogen.metadata.kvcost import kv_cost


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
                  "draft": job.row.draft, "inputs": list(job.row.inputs)},
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
        "entries": [{"id": e.id, "argv": list(e.argv), "env": list(e.env)} for e in plan.entries],
        "skips": [{"id": s.id, "reason": s.reason} for s in plan.skips],
        "fragment": "".join(text for _, text in sorted(render_plan(plan))),
    }


def main(library: Library, model_id: str, as_json: bool) -> int:
    job = _find(library, model_id)
    if job is None:
        print(f"swapgen: no model {model_id!r}; `swapgen list` shows the ids", file=sys.stderr)
        return 1
    data = report(library, job)
    if as_json:
        print(json.dumps(data, indent=2, ensure_ascii=False, default=list))
        return 0
    out = [f"{data['id']}  ({data['class']})", f"  path     {data['paths']['model']}"]
    for key in ("shards", "mmproj", "draft"):
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
