"""One model as the task graph sees it (`Job`): its row, override, role, resolved backend,
placement and budget, everything its fragment depends on before the emitter runs.

Built by `emit.dispatch.make_job`; kept in the load memo (`commands.library.LoadMemo`), so a run
that plans nothing reads jobs without importing an emitter or a sizer.
"""

from __future__ import annotations

from attrs import frozen

from autogen.discovery.rows import ModelRow
from autogen.engines import CUSTOM, EngineRow, Role, engine_row
from autogen.resolve.backends import Resolved
from autogen.resolve.devices import NO_PLACEMENT, Placement
from autogen.resolve.nodes import MultiNode
from autogen.settings.schema import Override


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
