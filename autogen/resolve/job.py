"""One model as the task graph sees it (`Job`): its row, override, role, resolved backend,
placement and budget, everything its fragment depends on before the emitter runs.

Built by `make_job`: the first matching override, the model's role, the backend that serves it
(`resolve_for`), where it runs and its budget. Not kept between runs: a run makes a model's job
when it plans or lists it (`commands.library.Library.job`), so a run that plans nothing
resolves nothing.
"""

from __future__ import annotations

from attrs import frozen

from autogen.discovery.rows import ModelRow
from autogen.engines import CUSTOM, EngineRow, Role, engine_row
from autogen.errors import ModelError
from autogen.flags.vllm import vllm_tensor_parallel
from autogen.metadata.model_meta import ModelMeta
from autogen.resolve.backends import Resolved, resolve_backend, resolve_embedder
from autogen.resolve.devices import NO_PLACEMENT, Placement, budget_gb, place, requested
from autogen.resolve.gpus import inventory
from autogen.resolve.nodes import Fleet, MultiNode, plan_nodes
from autogen.resolve.roles import model_role, preferred_engine
from autogen.resolve.sleep import Asker, Sleeper, asks_to_sleep
from autogen.settings.globs import glob_pattern
from autogen.settings.schema import DEFAULT_BUDGET_GB, Gpu, Override, Settings


@frozen
class Job:
    """One model as the task graph sees it: everything its fragment depends on, resolved."""

    row: ModelRow
    override: Override | None
    role: Role
    #: The engine the model's format asks for first (`roles.preferred_engine`), e.g. "audiocpp".
    prefer: str | None
    #: Resolved backend, or None with `error` set.
    backend: Resolved | None
    #: A reason known before emitting (unreadable header, missing shard, refused pin…).
    error: str | None
    budget_gb: float
    card_vram_gb: float | None
    #: The GPUs it runs on and their vendor variables (`devices.place`); empty = driver default.
    placement: Placement = NO_PLACEMENT
    #: The hosts a multi-node vLLM model spans (`vllm_nodes`); None = this host alone.
    nodes: MultiNode | None = None
    #: Its part of the run's sleep plan when it asked to sleep (`resolve.sleep`); None = it did not.
    sleeper: Sleeper | None = None
    #: GPU bytes other models' sleeping vLLM daemons keep on its cards (already taken off
    #: `budget_gb`), the most on one card, and whose they are.
    held: tuple[int, int, str] = (0, 0, "")

    @property
    def engine(self) -> str:
        return self.backend.engine if self.backend else "-"

    @property
    def backend_id(self) -> str:
        return self.backend.backend_id if self.backend else "-"

    @property
    def served_by(self) -> EngineRow:
        """The resolved engine's row (`CUSTOM` for an engine swapgen does not know)."""
        return engine_row(self.engine)

    @property
    def foreign_unserved(self) -> bool:
        """Weights no engine swapgen knows loads (`row.foreign_format`), resolved to such an engine
        rather than claimed by a `custom` backend row: skipped, and `list` names no engine."""
        return bool(self.row.foreign_format) and self.served_by is not CUSTOM


def match_override(settings: Settings, row: ModelRow) -> Override | None:
    """First override whose glob matches the full path (and quant, when set) wins."""
    subject = row.match_path
    for ov in settings.overrides:
        if ov.quant and ov.quant.strip().lower() != row.quant.lower():
            continue
        if glob_pattern(ov.match).match(subject):
            return ov
    return None


def resolve_for(settings: Settings, override: Override | None, row: ModelRow, role: Role,
                meta: ModelMeta | None = None) -> Resolved:
    """Which backend serves this model (raises ModelError for a pin to another role)."""
    if role == Role.EMBEDDING:
        return resolve_embedder(settings, override)
    return resolve_backend(settings, override, role, preferred_engine(row, role, meta))


def engine_for(settings: Settings, row: ModelRow, meta: ModelMeta | None) -> str | None:
    """The engine that will serve the row, or None when its backend pin is refused."""
    try:
        return resolve_for(settings, match_override(settings, row), row, model_role(row, meta), meta).engine
    except ModelError:
        return None


def budget_for(settings: Settings, override: Override | None, card_vram_gb: float | None,
               devices: tuple[Gpu, ...] = ()) -> float:
    """Override budget, else the VRAM of the model's devices (`devices.budget_gb`), else the
    settings budget, else the card reading, else 8."""
    if override is not None and override.vram_budget_gb:
        return override.vram_budget_gb
    if devices:
        return budget_gb(devices, settings.vram_budget_gb)
    if settings.vram_budget_gb:
        return settings.vram_budget_gb
    return card_vram_gb if card_vram_gb else DEFAULT_BUDGET_GB


def make_job(settings: Settings, row: ModelRow, meta: ModelMeta | None, error: str | None,
             card_vram_gb: float | None, gpus: tuple[Gpu, ...] | None = None, fleet: Fleet | None = None) -> Job:
    """`gpus`: the inventory; None = declared or probed (`gpus.inventory`) when a placement needs it.
    `fleet`: the hosts a run from a fleet front knows (`vllm_nodes` needs them)."""
    override = match_override(settings, row)
    role = model_role(row, meta)
    prefer = preferred_engine(row, role, meta)
    backend = None
    placement = NO_PLACEMENT
    nodes = None
    if error is None:
        try:
            backend = resolve_for(settings, override, row, role, meta)
            if override is not None and override.vllm_nodes:
                nodes = _nodes(override, backend, fleet)
            else:
                placement = _placement(settings, override, backend, gpus)
        except ModelError as exc:
            error = str(exc)
    budget = budget_for(settings, override, card_vram_gb, placement.gpus)
    if nodes is not None and not (override is not None and override.vram_budget_gb):
        budget = nodes.budget_gb
    return Job(row=row, override=override, role=role, prefer=prefer, backend=backend, error=error,
               budget_gb=budget, card_vram_gb=card_vram_gb, placement=placement, nodes=nodes)


def _nodes(override: Override, backend: Resolved, fleet: Fleet | None) -> MultiNode:
    """The multi-node layout of `vllm_nodes` (vLLM only: llama-server has no such mode here)."""
    if not engine_row(backend.engine).per_card:
        raise ModelError(f"vllm_nodes needs a vllm backend; this model resolves to {backend.backend_id} "
                         f"({backend.engine}); pin a vllm row with `backend:`")
    tp, source = vllm_tensor_parallel(override)
    return plan_nodes(override, fleet, tp if source else None)


def _placement(settings: Settings, override: Override | None, backend: Resolved,
               gpus: tuple[Gpu, ...] | None) -> Placement:
    """Devices asked for, or vLLM's default card; the inventory is read only then, and not for
    vLLM when `card_vram_gb` is declared without `gpus` (that reading stands for one card)."""
    wanted, _ = requested(settings, override)
    per_card = engine_row(backend.engine).per_card
    if not wanted and (not per_card or (settings.card_vram_gb is not None and settings.gpus is None)):
        return NO_PLACEMENT
    if gpus is None:
        gpus = inventory(settings)
    return place(settings, override, backend.row, backend.engine, gpus, vllm_tensor_parallel(override))


def sleep_asker(job: Job) -> Asker | None:
    """What the sleep plan needs of a job that asks to sleep (`resolve.sleep`), else None."""
    row = job.backend.row if job.backend is not None else None
    override = job.override
    if job.error is not None or (override is not None and override.skip) or not asks_to_sleep(
            job.engine, row is not None and row.sleep, override.vllm_sleep if override is not None else None):
        return None
    devices = tuple(g.index for g in job.placement.gpus)
    tp, source = vllm_tensor_parallel(override)
    refused = ("a multi-node model's workers run on other hosts, and vllm-wrapper puts one daemon to sleep: "
               "it stops instead") if job.nodes is not None else ""
    return Asker(model_id=job.row.id, weights=job.row.size_bytes, devices=devices,
                 tensor_parallel=(tp if source else None) or max(1, len(devices)), refused=refused)
