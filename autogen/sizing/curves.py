"""Memory against context length: what an LLM entry would take at each context it could have, for
each KV-cache type it may use, drawn against its budget (`swapgen report`'s context charts,
docs/plan-page.md#context-against-memory).

The figures come from the same sizing functions and inputs the entry's own decision used (its
engine's allocations at each context, the fixed charges, the engine's corrections), so the
curve passes through what the decision compared with the budget. They are computed only when a
report asks (`ContextSizer.plan`): generating a config never pays for them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from attrs import frozen

#: Evenly spaced contexts a curve is sampled at, besides its own marks (the chosen context and
#: the largest that fits): the memory grows almost linearly with the context, a sliding-window
#: cache's cap being the one bend, so eight points draw it.
CURVE_POINTS = 8


@frozen
class ContextCurve:
    """One KV-cache type's curve.

    Example: ContextCurve(kv_type="q8_0", points=((10922, 9_126_805_504), …, (131072, 15_938_355_200)),
    fits=131072).
    """

    #: The cache type (llama-server's `-ctk`/`-ctv`; vLLM: "auto", the model's own dtype).
    kv_type: str
    #: (context as the command sets it, bytes on the devices together) in ascending context: what
    #: the entry would take with that context and every layer on the GPU.
    points: tuple[tuple[int, int], ...]
    #: The largest context up to the trained length whose bytes fit the budget; 0 = none.
    fits: int


@frozen
class ContextPlan:
    """An LLM entry's context as sized, and what else it could have been.

    Example: ContextPlan(chosen=131072, trained=131072, slots=4, kv_type="f16",
    budget=23_622_320_128, curves=(ContextCurve("f16", …), ContextCurve("q8_0", …))).
    """

    #: The context the command sets (llama-server's `-c`, every slot together; vLLM's
    #: `--max-model-len`).
    chosen: int
    #: The model's trained context; 0 = its header does not say.
    trained: int
    #: Sequences served at once (llama-server's `--parallel`, or its auto 4 over one shared
    #: pool); None = the engine schedules its own.
    slots: int | None
    #: The KV-cache type the command uses.
    kv_type: str
    #: The bytes the curves are drawn against: the entry's VRAM budget over its devices.
    budget: int
    curves: tuple[ContextCurve, ...]


class ContextSizer(Protocol):
    """What an emitter hands on with an LLM entry so a report can draw its context (`plan`)."""

    def plan(self) -> ContextPlan: ...


def sample_contexts(top: int, marks: Iterable[int]) -> tuple[int, ...]:
    """`CURVE_POINTS` contexts evenly spaced up to `top`, and the `marks` (each at most `top`),
    ascending, each once, none under 1."""
    step = max(1, top // CURVE_POINTS)
    evenly = {min(top, step * k) for k in range(1, CURVE_POINTS + 1)} | {top}
    return tuple(sorted(evenly | {m for m in marks if 0 < m <= top}))
