"""The one input every emitter takes: a discovered model with everything resolved for it.

Built by `plan.py` (the dispatcher); emitters are pure functions `EmitContext -> Plan`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from attrs import frozen

from autogen.metadata import ModelMeta
from autogen.rows import ModelRow
from autogen.settings import Override, Settings

if TYPE_CHECKING:
    from autogen.backends import Resolved
    from autogen.kvcost import KvCost


@frozen
class EmitContext:
    row: ModelRow
    #: None for rows that carry no readable metadata (e.g. SAM .ggml files).
    meta: ModelMeta | None
    #: KV cost of `meta` (None when there is no metadata).
    kv: "KvCost | None"
    #: The first matching override row, or None.
    override: Override | None
    settings: Settings
    backend: "Resolved"
    #: The model's VRAM budget in GiB (override `vram_budget_gb`, else settings, else card, else 8).
    budget_gb: float
    #: Total VRAM of the eligible GPUs in GiB; None = no reading (vLLM then falls back to 0.90).
    card_vram_gb: float | None
    #: `ttl` to write (settings.ttl).
    ttl: int
