"""The plan page: `report_records.PlanReport` as one self-contained HTML file (docs/plan-page.md).

Nothing is fetched: the style is inline (`page_style`), fonts are the system's, bars are CSS
boxes and charts inline SVG, and there is no script, so it reads from `file://`, in print and
with JavaScript off. Every figure is printed by `_fig` from a value of the record, marked with
where it is in the record's JSON (`data-f`, a dotted path) and the value itself (`data-v`), so a
test can check each against `swapgen report --json` and `swapgen show --json`. The page computes
no figure: it only turns values into GiB text, percentages of a bar and coordinates of a chart.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from html import escape

from autogen.commands.page_charts import context_chart
from autogen.commands.page_style import STYLE
from autogen.commands.report_records import (
    PARTS,
    DeviceFigures,
    EntryReport,
    Gpu,
    Host,
    ModelReport,
    PlanReport,
    Residency,
    ResidentSet,
    SourceFigures,
    Unserved,
)
from autogen.numfmt import GIB

#: What each part is called on the page.
PART_NAMES = {"weights": "weights", "kv_state": "KV and state", "compute": "compute", "projector": "projector",
              "runtime": "runtime", "base": "base", "draft": "draft", "other": "other", "margin": "margin"}


def _fig(path: str, value: object, text: str) -> str:
    """One figure: its text, where it is in the report's JSON and its value there (a string's
    value is its text)."""
    if isinstance(value, str) and value == text:
        return f'<span data-f="{path}">{escape(text)}</span>'
    return f'<span data-f="{path}" data-v="{escape(json.dumps(value))}">{escape(text)}</span>'


def gib(path: str, n: int) -> str:
    """Bytes as GiB to two decimals."""
    return _fig(path, n, f"{n / GIB:.2f}")


def gb(path: str, x: float) -> str:
    """A GiB figure the planner holds as such (a card, a budget, a demand)."""
    return _fig(path, x, f"{x:g}")


def count(path: str, n: int) -> str:
    return _fig(path, n, f"{n:,}")


def text(path: str, value: str) -> str:
    return _fig(path, value, value)


def file_path(path: str, base: str) -> str:
    """A file as the page shows it: relative to the settings file's folder when it is inside it (the
    whole path on hover), so the page reads the same wherever the library lives."""
    shown = os.path.relpath(path, base) if base and path.startswith(base.rstrip("/") + "/") else path
    return f'<span class="path" title="{escape(path)}">{escape(shown)}</span>'


def page(report: PlanReport) -> str:
    base = os.path.dirname(report.settings)
    hosts = "".join(_host(h, f"hosts.{i}", base) for i, h in enumerate(report.hosts))
    residency = "".join(_residency(h, f"hosts.{i}") for i, h in enumerate(report.hosts))
    models = "".join(_model(m, f"models.{i}", base) for i, m in enumerate(report.models))
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta name="color-scheme" content="light dark">\n'
        f"<title>swapgen plan: {escape(report.settings)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
        f'<header><h1>swapgen plan</h1><p class="muted">{file_path(report.settings, base)} · swapgen '
        f'{text("version", report.version)} · {count("served", report.served)} served, '
        f'{count("skipped", report.skipped)} not served, {count("other_files", report.other_files)} other files</p>\n'
        '<nav><a href="#hosts">Hosts and GPUs</a><a href="#together">Loaded together</a>'
        '<a href="#models">Models</a><a href="#unserved">Not served</a></nav></header>\n<main>\n'
        f'<h2 id="hosts">Hosts and GPUs</h2>\n{_legend()}{hosts}\n'
        f'<h2 id="together">What stays loaded together</h2>\n{residency}\n'
        f'<h2 id="models">Models</h2>\n{models}\n'
        f'<h2 id="unserved">Not served</h2>\n{_unserved(report.unserved, base)}\n'
        "</main>\n</body>\n</html>\n")


def _legend() -> str:
    return ('<div class="legend">' + "".join(f'<span style="--swatch:var(--{p})">{PART_NAMES[p]}</span>'
                                             for p in PARTS) + "</div>\n")


def _host_name(host: Host) -> str:
    return escape(host.name) if host.name else "This host"


# --- hosts and GPUs ------------------------------------------------------------------------------


def _host(host: Host, path: str, base: str) -> str:
    budget = f"budget {gb(f'{path}.budget_gb', host.budget_gb)} GiB per model" if host.budget_gb else "no budget set"
    card = f"card reading {gb(f'{path}.card_gb', host.card_gb)} GiB" if host.card_gb else "no card reading"
    cpu = ", ".join(text(f"{path}.cpu_only.{i}", e) for i, e in enumerate(host.cpu_only))
    cpu = f'<p class="muted">On the CPU: {cpu}</p>' if cpu else ""
    gpus = "".join(_gpu(g, f"{path}.gpus.{k}") for k, g in enumerate(host.gpus))
    return (f'<h3 id="host-{escape(host.name or "")}">{_host_name(host)}</h3>\n'
            f'<p class="muted">{file_path(host.settings, base)} → {file_path(host.config, base)} · '
            f"{budget} · {card}</p>\n{gpus}{cpu}")


def _gpu(gpu: Gpu, path: str) -> str:
    scale = max([gpu.card_gb * GIB, *(load.figures.total for load in gpu.loads)])
    name = f" · {escape(gpu.name)}" if gpu.name else ""
    rows = "".join(_bar_row(load.entry, load.figures, f"{path}.loads.{i}.figures", scale, gpu.budget_gb * GIB)
                   for i, load in enumerate(gpu.loads))
    return (f'<div class="gpu"><h4>{escape(gpu.label)}{name} · card {gb(f"{path}.card_gb", gpu.card_gb)} GiB · '
            f'budget {gb(f"{path}.budget_gb", gpu.budget_gb)} GiB</h4>\n'
            f"{rows or '<p class=muted>No model loads here.</p>'}</div>\n")


def _bar_row(label: str, figures: DeviceFigures, path: str, scale: float, budget: float) -> str:
    """A labelled stacked bar of one device's parts, on a scale of `scale` bytes, the budget marked."""
    return (f'<div class="row"><span class="label" title="{escape(label)}">{escape(label)}</span>'
            f"{_bar(figures, path, scale, budget)}"
            f'<span class="total">{gib(f"{path}.total", figures.total)} GiB</span></div>\n')


def _bar(figures: DeviceFigures, path: str, scale: float, budget: float) -> str:
    segments = "".join(
        f'<i class="p-{p}" style="width:{getattr(figures, p) / scale * 100:.3f}%" '
        f'title="{PART_NAMES[p]} {getattr(figures, p) / GIB:.2f} GiB"></i>' for p in PARTS if getattr(figures, p))
    mark = f'<b style="left:{budget / scale * 100:.3f}%" title="budget"></b>' if budget else ""
    return f'<span class="bar">{segments}{mark}</span>'


# --- co-residency ---------------------------------------------------------------------------------


def _residency(host: Host, path: str) -> str:
    r = host.residency
    path = f"{path}.residency"
    head = {"groups": "The config's groups, as llama-swap runs them: a coexisting group's models stay loaded "
                      "together, a swapping group's one at a time, and loading a model of one group unloads the "
                      "others (but the persistent groups').",
            "matrix": "The config's routing matrix (routing: auto): the sets of models that fit together on the cards.",
            "models-max": "A llama.cpp router preset."}[r.mode]
    notes = "".join(f'<p class="muted">{text(f"{path}.notes.{i}", n)}</p>' for i, n in enumerate(r.notes))
    sets = "".join(_set(s, f"{path}.sets.{k}") for k, s in enumerate(r.sets))
    return (f"<h3>{_host_name(host)}</h3>\n<p>{head}</p>{notes}{_groups(r, path)}{sets}{_apart(r, path)}")


def _groups(r: Residency, path: str) -> str:
    if not r.groups:
        return ""
    rows = "".join(
        f"<tr><td>{text(f'{path}.groups.{i}.name', g.name)}</td><td>{'one at a time' if g.swap else 'together'}</td>"
        f"<td>{'yes' if g.exclusive else 'no'}</td><td>{'yes' if g.persistent else 'no'}</td>"
        f"<td>{', '.join(text(f'{path}.groups.{i}.members.{j}', m) for j, m in enumerate(g.members)) or '–'}</td></tr>"
        for i, g in enumerate(r.groups))
    return ("<table><tr><th>group</th><th>its models</th><th>exclusive</th><th>persistent</th><th>members</th></tr>"
            f"{rows}</table>\n")


def _set(s: ResidentSet, path: str) -> str:
    """One set: its members, each with the colour of its part of the bars, and a bar per card."""
    colour = {m: f"m{j % 6}" for j, m in enumerate((*s.members, *s.alternatives))}
    members = ", ".join(f'<span class="sw {colour[m]}"></span>{text(f"{path}.members.{j}", m)}'
                        for j, m in enumerate(s.members))
    if s.alternatives:
        one_of = " | ".join(f'<span class="sw {colour[m]}"></span>{text(f"{path}.alternatives.{j}", m)}'
                            for j, m in enumerate(s.alternatives))
        members = f"{members} and one of {one_of}" if members else f"one of {one_of}"
    rows = []
    for k, u in enumerate(s.usage):
        at = f"{path}.usage.{k}"
        scale = max(u.card_gb, u.used_gb)
        segments = "".join(f'<i class="{colour[share.entry]}" style="width:{share.gb / scale * 100:.3f}%"></i>'
                           for share in u.shares)
        flag = '<span class="over">over</span>' if u.over else '<span class="ok">fits</span>'
        rows.append(f'<div class="row"><span class="label">{text(f"{at}.gpu", u.gpu)}</span><span class="bar">'
                    f'{segments}<b style="left:{u.shared_gb / scale * 100:.3f}%" title="shared"></b></span>'
                    f'<span class="total">{"up to " if s.alternatives else ""}'
                    f'{gb(f"{at}.used_gb", u.used_gb)} of {gb(f"{at}.shared_gb", u.shared_gb)} '
                    f"GiB {flag}</span></div>\n")
    body = "".join(rows) or '<p class="muted">No GPU: CPU-only engines.</p>'
    return f'<div class="set"><h4>{text(f"{path}.name", s.name)}: {members}</h4>\n{body}</div>\n'


def _apart(r: Residency, path: str) -> str:
    """Every pair never loaded together, under the entry that sorts first, by reason."""
    if not r.apart:
        return ""
    items = "".join(f'<li><b>{text(f"{path}.apart.{i}.first", a.first)}</b> not with '
                    f'{escape(", ".join(a.others))}: {text(f"{path}.apart.{i}.why", a.why)}</li>'
                    for i, a in enumerate(r.apart))
    return (f"<details><summary>Pairs never loaded together ({count(f'{path}.pairs_apart', r.pairs_apart)})</summary>"
            f'<ul class="apart">{items}</ul></details>\n')


# --- models ---------------------------------------------------------------------------------------


def _model(m: ModelReport, path: str, base: str) -> str:
    files = [("model", m.files.model), ("manifest", m.files.manifest), ("projector", m.files.projector),
             ("draft", m.files.draft), ("draft profile", m.files.speculative_draft)]
    rows = [(name, file_path(value, base)) for name, value in files if value]
    if len(m.files.shards) > 1:
        rows.append(("shards", f"{len(m.files.shards)} files"))
    rows += [("LoRA", f'{text(f"{path}.files.loras.{i}.name", lora.name)} ({escape(lora.kind)})')
             for i, lora in enumerate(m.files.loras)]
    engine = text(f"{path}.backend.engine", m.backend.engine)
    rows += [("backend", f'{text(f"{path}.backend.id", m.backend.id)} (engine {engine}; '
                         f'{text(f"{path}.backend.why", m.backend.why)})'),
             ("budget", text(f"{path}.budget", m.budget))]
    if m.devices:
        rows.append(("devices", f'{text(f"{path}.devices.ids", m.devices.ids)} ({escape(m.devices.why)})'))
    if m.override:
        rows.append(("override", text(f"{path}.override", m.override)))
    host = f'<span class="badge">{escape(m.host)}</span>' if m.host else ""
    entries = "".join(_entry(e, f"{path}.entries.{i}", chart=i == 0) for i, e in enumerate(m.entries))
    skips = "".join(f'<p class="over">Skipped {text(f"{path}.skips.{i}.id", s.id)}: '
                    f'{text(f"{path}.skips.{i}.reason", s.reason)}</p>' for i, s in enumerate(m.skips))
    dl = "".join(f"<dt>{escape(name)}</dt><dd>{value}</dd>" for name, value in rows)
    return (f'<article id="m-{escape(m.id)}"><h3>{text(f"{path}.id", m.id)}'
            f'<span class="badge">{text(f"{path}.role", m.role.value)}</span>{host}</h3>\n'
            f"<dl>{dl}</dl>\n{entries}{skips}</article>\n")


def _entry(e: EntryReport, path: str, chart: bool) -> str:
    rows = []
    if e.engine:
        rows.append(("engine", text(f"{path}.engine", e.engine)))
    if e.reason:
        rows.append(("reason", text(f"{path}.reason.0", e.reason[0])))
    if e.context is not None:
        c, at = e.context, f"{path}.context"
        trained = count(f"{at}.trained", c.trained) if c.trained else "not in the header"
        rows += [("context", f"{count(f'{at}.chosen', c.chosen)} of {trained} trained"),
                 ("KV type", text(f"{at}.kv_type", c.kv_type))]
        if c.slots is not None:
            rows.append(("slots", count(f"{at}.slots", c.slots)))
    rows.append(("takes", f"{gib(f'{path}.vram', e.vram)} GiB on the GPUs, "
                          f"{gib(f'{path}.host_ram', e.host_ram)} GiB RAM, {gib(f'{path}.disk', e.disk)} GiB on disk"))
    dl = "".join(f"<dt>{escape(name)}</dt><dd>{value}</dd>" for name, value in rows)
    figure = context_chart(e, path) if chart and e.context is not None and e.context.curves else ""
    return (f'<h4>{text(f"{path}.id", e.id)}</h4>\n<div class="cols"><div><dl>{dl}</dl>'
            f"{_memory(e.memory, f'{path}.memory')}</div>{figure}</div>\n")


def _memory(sources: Sequence[SourceFigures], path: str) -> str:
    """The memory table: a row per source and device, each part any of them has in GiB, and the
    difference from the estimate; then why a source has no figures."""
    devices = [(f"{path}.{i}", s, f"{path}.{i}.devices.{k}", d) for i, s in enumerate(sources)
               for k, d in enumerate(s.devices)]
    devices += [(f"{path}.{i}", s, f"{path}.{i}.host", s.host) for i, s in enumerate(sources) if s.host is not None]
    parts = [p for p in PARTS if any(getattr(d, p) for *_, d in devices)]
    rows = "".join(_memory_row(at, s, where, d, parts) for at, s, where, d in devices)
    missing = "".join(f"<li>{text(f'{path}.{i}.source', s.source.value)}: {text(f'{path}.{i}.missing', s.missing)}</li>"
                      for i, s in enumerate(sources) if s.missing)
    head = "".join(f'<th class="n">{PART_NAMES[p]}</th>' for p in parts)
    table = (f"<table><tr><th>device</th><th>source</th>{head}<th class=n>total</th><th class=n>vs estimate</th></tr>"
             f'{rows}</table><p class="muted">GiB; ★ = the figures the entry uses.</p>') if rows else ""
    return table + (f'<ul class="muted">{missing}</ul>' if missing else "")


def _memory_row(at: str, s: SourceFigures, where: str, d: DeviceFigures, parts: Sequence[str]) -> str:
    vs = _fig(f"{where}.vs_estimate", d.vs_estimate, f"{d.vs_estimate / GIB:+.2f}") if d.vs_estimate is not None else ""
    cells = "".join(f'<td class="n">{gib(f"{where}.{p}", getattr(d, p)) if getattr(d, p) else ""}</td>' for p in parts)
    return (f"<tr><td>{text(f'{where}.device', d.device)}</td><td>{text(f'{at}.source', s.source.value)}"
            f"{' ★' if s.used else ''}</td>{cells}<td class=n>{gib(f'{where}.total', d.total)}</td>"
            f"<td class=n>{vs}</td></tr>")


# --- files not served -----------------------------------------------------------------------------


def _unserved(items: Iterable[Unserved], base: str) -> str:
    rows = "".join(
        f"<tr><td>{text(f'unserved.{i}.kind', u.kind)}</td>"
        f"<td>{text(f'unserved.{i}.id', u.id) if u.id else ''}{' on ' + escape(u.host) if u.host else ''}"
        f"<div>{file_path(u.path, base)}</div></td>"
        f"<td>{text(f'unserved.{i}.reason', u.reason)}</td><td>{text(f'unserved.{i}.hint', u.hint)}</td></tr>"
        for i, u in enumerate(items))
    if not rows:
        return "<p>Every file found is served.</p>"
    return f"<table><tr><th>what</th><th>id / file</th><th>why</th><th>what you can do</th></tr>{rows}</table>"
