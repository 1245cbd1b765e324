"""The plan page's context charts: an LLM entry's memory against its context, one line per KV-cache
type it may use (`sizing.curves`), the budget drawn across and the chosen context marked, as
inline SVG (docs/plan-page.md#context-against-memory). Only coordinates are computed here."""

from __future__ import annotations

import json
from html import escape

from autogen.commands.report_records import EntryReport
from autogen.numfmt import GIB

#: The chart's size and its plot area, in SVG units.
WIDTH, HEIGHT = 340, 190
LEFT, RIGHT, TOP, BOTTOM = 44, 330, 10, 150


def _attr(path: str, value: object) -> str:
    return f'data-f="{path}" data-v="{escape(json.dumps(value))}"'


def context_chart(entry: EntryReport, path: str) -> str:
    """The chart of `entry`'s context plan (at `path` in the report's JSON)."""
    plan = entry.context
    assert plan is not None and plan.curves
    at = f"{path}.context"
    xmax = max(max(x for x, _ in c.points) for c in plan.curves) or 1
    ymax = max([plan.budget, entry.vram, *(y for c in plan.curves for _, y in c.points)]) * 1.05 or 1

    def xy(x: float, y: float) -> str:
        return f"{LEFT + x / xmax * (RIGHT - LEFT):.1f},{BOTTOM - y / ymax * (BOTTOM - TOP):.1f}"

    lines = []
    for k, c in enumerate(plan.curves):
        points = " ".join(xy(x, y) for x, y in c.points)
        lines.append(f'<polyline class="k{k % 4}" points="{points}"><title>{escape(c.kv_type)}</title></polyline>')
    budget_y = xy(0, plan.budget).split(",")[1]
    chosen_x, chosen_y = xy(plan.chosen, entry.vram).split(",")
    last = len(plan.curves[0].points) - 1
    legend = "".join(
        f'<line class="k{k % 4} key" x1="{LEFT + 150 * (k % 2)}" x2="{LEFT + 150 * (k % 2) + 14}" '
        f'y1="{BOTTOM + 27 + 12 * (k // 2)}" y2="{BOTTOM + 27 + 12 * (k // 2)}"/>'
        f'<text x="{LEFT + 150 * (k % 2) + 18}" y="{BOTTOM + 30 + 12 * (k // 2)}">{escape(c.kv_type)}: fits -c '
        f'<tspan {_attr(f"{at}.curves.{k}.fits", c.fits)}>{c.fits:,}</tspan></text>'
        for k, c in enumerate(plan.curves))
    return (
        f'<figure><svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT + 12 * ((len(plan.curves) - 1) // 2)}" role="img" '
        f'aria-label="memory against context of {escape(entry.id)}">'
        f'<line class="axis" x1="{LEFT}" y1="{BOTTOM}" x2="{RIGHT}" y2="{BOTTOM}"/>'
        f'<line class="axis" x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{BOTTOM}"/>'
        f'<line class="budget" x1="{LEFT}" y1="{budget_y}" x2="{RIGHT}" y2="{budget_y}"/>'
        f'<text x="{LEFT - 4}" y="{float(budget_y) + 3:.1f}" text-anchor="end" {_attr(f"{at}.budget", plan.budget)}>'
        f"{plan.budget / GIB:.2f}</text>"
        f'<text x="{LEFT - 4}" y="{BOTTOM + 3}" text-anchor="end">0</text>'
        f'<text x="{RIGHT}" y="{BOTTOM + 13}" text-anchor="end" '
        f'{_attr(f"{at}.curves.0.points.{last}.0", plan.curves[0].points[last][0])}>{plan.curves[0].points[last][0]:,}'
        f"</text>"
        f'<text x="{(LEFT + RIGHT) / 2}" y="{BOTTOM + 13}" text-anchor="middle">context (-c) →</text>'
        f'<text x="{LEFT - 4}" y="{TOP + 3}" text-anchor="end">GiB</text>'
        f"{''.join(lines)}"
        f'<circle cx="{chosen_x}" cy="{chosen_y}" r="4" {_attr(f"{at}.chosen", plan.chosen)}>'
        f"<title>chosen: -c {plan.chosen:,}, {entry.vram / GIB:.2f} GiB</title></circle>"
        f'<text x="{chosen_x}" y="{float(chosen_y) - 8:.1f}" text-anchor="middle" {_attr(f"{path}.vram", entry.vram)}>'
        f"{entry.vram / GIB:.2f}</text>"
        f"{legend}</svg>"
        f'<figcaption class="muted">GiB on the GPUs against the context, every layer on the GPU; dashed: the budget; '
        f"dot: the context chosen and what the entry takes</figcaption></figure>")
