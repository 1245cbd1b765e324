"""swapgen's model of an engine, corrected by what the engine itself said about launches of the
same model (docs/maintainers/sizing.md#exact-numbers-for-your-machine).

A `Reading` holds the engine's figures (llama-fit-params' estimate or a measurement) for one
command beside swapgen's estimate for the same command. Each part gets one correction: weights
and context scale (they grow with what is placed and with the cells), the compute buffer shifts
(a backend reserves its own graph buffers, a constant beside the context's growth). Over several
readings each correction is the largest seen, so every launch the engine was asked about is
priced at least as the engine priced it: a search that settles on such a launch settles on one
the engine says fits.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from attrs import frozen

from autogen.footprint import MemoryRecord, Reading


@frozen
class EngineCorrection:
    """Factors and offsets that turn swapgen's parts into the engine's.

    Example: EngineCorrection(model_scale=0.98, context_scale=1.0, compute_delta=125_829_120,
    readings=2, source="llama-fit-params").
    """

    model_scale: float = 1.0
    context_scale: float = 1.0
    compute_delta: int = 0
    #: What the engine's figures hold beyond the three parts (a measurement's margin, a driver's
    #: per-process reading beyond the parts) against swapgen's charges for the same (runtime,
    #: base, projector): added to those charges.
    other_delta: int = 0
    #: How many engine readings it rests on (0 = swapgen's model as it is).
    readings: int = 0
    #: Whose figures ("llama-fit-params", "measured"; both joined by " and ").
    source: str = ""

    @classmethod
    def from_readings(cls, readings: Sequence[Reading]) -> EngineCorrection:
        if not readings:
            return NO_CORRECTION
        pairs = [(r.engine, _comparable(r.engine, r.estimate)) for r in readings]
        return cls(model_scale=max(_ratio(e.part("model"), ours["model"]) for e, ours in pairs),
                   context_scale=max(_ratio(e.part("context"), ours["context"]) for e, ours in pairs),
                   compute_delta=max(e.part("compute") - ours["compute"] for e, ours in pairs),
                   other_delta=max(0, *(_other(e) - _other(r.estimate) for (e, _), r in zip(pairs, readings,
                                                                                           strict=True))),
                   readings=len(readings),
                   source=" and ".join(sorted({r.engine.source.value for r in readings})))

    def model(self, n: int) -> int:
        return math.ceil(n * self.model_scale)

    def context(self, n: int) -> int:
        return math.ceil(n * self.context_scale)

    def compute(self, n: int) -> int:
        return max(0, n + self.compute_delta)

    def fixed(self, n: int) -> int:
        return n + self.other_delta

    def describe(self) -> str:
        """One line for `swapgen show`."""
        if not self.readings:
            return "swapgen's model, uncorrected"
        sign = "+" if self.compute_delta >= 0 else "−"
        return (f"{self.source} at {self.readings} launch{'es' if self.readings > 1 else ''}: weights "
                f"×{self.model_scale:.3f}, context ×{self.context_scale:.3f}, compute {sign}"
                f"{abs(self.compute_delta) / (1 << 20):.0f} MiB"
                + (f", other +{self.other_delta / (1 << 20):.0f} MiB" if self.other_delta else "")
                + " against swapgen's model")


NO_CORRECTION = EngineCorrection()


def _comparable(engine: MemoryRecord, estimate: MemoryRecord) -> dict[str, int]:
    """swapgen's parts where the engine reported its own: the devices, or everything when the
    engine reported no accelerator (a CPU build holds the whole model in host memory)."""
    get = estimate.whole if engine.host_only else estimate.part
    return {name: get(name) for name in ("model", "context", "compute")}


def _other(footprint: MemoryRecord) -> int:
    return sum(footprint.other(i) for i in range(len(footprint.devices)))


def _ratio(theirs: int, ours: int) -> float:
    return theirs / ours if ours > 0 and theirs > 0 else 1.0
