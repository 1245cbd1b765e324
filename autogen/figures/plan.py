"""The engine's own figures in the plan: for each entry, `swapgen calibrate`'s measurement of
its exact command, else (llama-server chat entries) llama-fit-params' estimate of it; and the
bounded search that lets sizing follow them (docs/maintainers/sizing.md#exact-numbers-for-your-machine).

The search: plan with swapgen's model; ask the engine about each entry's command; plan again
with those readings (sizing corrects its model with them, `sizing.correction`); ask about any
command that changed; at most `MAX_ROUNDS` rounds, so at most that many engine calls per entry
(two when the first correction lands, as it does when the engine's figures grow with the
context as swapgen's do). An entry whose final command was asked about reports the engine's
figures; one whose command changed in the last round keeps the corrected estimate.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from autogen.emit.entry import Entry, Plan
from autogen.figures import fit_params
from autogen.figures.binaries import estimator_for, identity, which
from autogen.figures.measurements import Measurement, Measurements
from autogen.footprint import MemoryRecord, Reading, Source, margin, with_gap
from autogen.resolve.job import Job
from autogen.settings.schema import Settings

#: Rounds of asking: the engine is called at most this many times per entry of a model.
MAX_ROUNDS = 3


class EngineFigures:
    """Measurements and llama-fit-params answers for one library (`cache_dir`)."""

    def __init__(self, settings: Settings, stamps: dict[str, str]):
        self.settings = settings
        self.stamps = stamps
        self.measurements = Measurements(settings.cache_dir)
        self.answers = fit_params.AnswerCache(settings.cache_dir)
        self._estimators: dict[tuple[str, str], str | None] = {}
        self._identities: dict[str, str] = {}

    # -- identities ------------------------------------------------------------------------------

    def estimator(self, job: Job) -> str | None:
        """The estimator of the model's engine build (llama-server's llama-fit-params), if it has one."""
        name = job.served_by.estimator
        if job.backend is None or not name:
            return None
        setting = job.backend.row.fit_params if job.backend.row is not None else ""
        key = (job.backend.exe, setting)
        if key not in self._estimators:
            self._estimators[key] = estimator_for(name, which(job.backend.exe), setting)
        return self._estimators[key]

    def engine_identity(self, exe: str) -> str:
        """The engine binary's identity (resolved on PATH like a shell would)."""
        if exe not in self._identities:
            self._identities[exe] = identity(which(exe))
        return self._identities[exe]

    def key(self, job: Job) -> str:
        """What of the engine side a model's fragment depends on: the estimator's and the engine's
        identities and the measurements of its files."""
        if job.backend is None or not job.served_by.measured:
            return ""
        stamp = self.stamps.get(job.row.id, "")
        return repr((identity(self.estimator(job)), self.engine_identity(job.backend.exe),
                     self.measurements.of_model(stamp)))

    # -- figures ---------------------------------------------------------------------------------

    def measurement(self, job: Job, entry: Entry) -> Measurement | None:
        """The calibration of this exact command, if any (failed starts included)."""
        if job.backend is None or not job.served_by.measured:
            return None
        return self.measurements.get(self.stamps.get(job.row.id, ""), entry.argv, entry.env,
                                     self.engine_identity(entry.argv[0]))

    def estimate(self, job: Job, entry: Entry) -> tuple[MemoryRecord | None, str]:
        """llama-fit-params' figures for the entry's command (with the estimator's gap and the
        charges it does not see), or (None, why not)."""
        estimator = self.estimator(job)
        if estimator is None or entry.estimate is None or "--embeddings" in entry.argv:
            return None, ""
        call = fit_params.estimator_call(estimator, entry.argv, entry.env)
        figures, error = self.answers.answer(estimator, call, self.stamps.get(job.row.id, ""))
        if figures is None:
            return None, error
        figures = with_gap(figures, entry.estimator_gap if call.unified_slots else None)
        return _with_unseen(figures, entry.estimate), ""

    def reading(self, job: Job, entry: Entry) -> Reading | None:
        """The engine's figures for the entry's command: measured, else llama-fit-params'."""
        if entry.estimate is None:
            return None
        measured = self.measurement(job, entry)
        kv_tokens = 0
        if measured is not None and measured.record is not None:
            engine, kv_tokens = measured_record(measured, entry.estimate), measured.kv_tokens
        else:
            engine, _ = self.estimate(job, entry)
        if engine is None:
            return None
        return Reading(argv=entry.argv, env=entry.env, engine=engine, estimate=entry.estimate, kv_tokens=kv_tokens)


def measured_record(measured: Measurement, estimate: MemoryRecord) -> MemoryRecord:
    """A measurement as the budget sees it: the parts the engine reported, what the driver's
    per-process table showed beyond them (else swapgen's charges for what the engine does not
    see), and the margin on every device."""
    assert measured.record is not None
    figures = measured.record
    if measured.per_process and len(measured.per_process) == len(figures.devices):
        unseen = tuple(max(0, held - d.total) for held, d in zip(measured.per_process, figures.devices, strict=True))
        figures = attrs.evolve(figures, unseen=unseen)
    else:
        figures = _with_unseen(figures, estimate)
    margins = tuple(margin(figures.device_bytes(i)) for i in range(len(figures.devices)))
    return attrs.evolve(figures, source=Source.MEASURED, margin=margins)


def _with_unseen(figures: MemoryRecord, estimate: MemoryRecord) -> MemoryRecord:
    """The engine's figures with swapgen's charges for what its report does not show (runtime,
    base, projector): device by device when the counts agree, else all on the first device."""
    if len(figures.devices) == len(estimate.devices) and estimate.unseen:
        return attrs.evolve(figures, unseen=estimate.unseen)
    return attrs.evolve(figures, unseen=(sum(estimate.unseen),))


def plan_with_engine(build: Callable[[tuple[Reading, ...]], Plan], job: Job, figures: EngineFigures) -> Plan:
    """The module docstring's search."""
    plan = build(())
    readings: list[Reading] = []
    asked: set[tuple[tuple[str, ...], tuple[str, ...]]] = set()
    for _ in range(MAX_ROUNDS):
        fresh = [e for e in plan.entries if (e.argv, e.env) not in asked]
        found = []
        for entry in fresh:
            asked.add((entry.argv, entry.env))
            reading = figures.reading(job, entry)
            if reading is not None:
                found.append(reading)
        if not found:
            break
        readings += found
        plan = build(tuple(readings))
    return plan


def start_errors(plan: Plan, job: Job, figures: EngineFigures) -> dict[str, str]:
    """Entry id → the engine's own line, for entries whose exact command failed to start under
    `swapgen calibrate`."""
    out = {}
    for entry in plan.entries:
        measured = figures.measurement(job, entry)
        if measured is not None and measured.error:
            out[entry.id] = measured.error
    return out


