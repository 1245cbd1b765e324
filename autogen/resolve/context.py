"""The one input every emitter takes: a discovered model with everything resolved for it.

Built by `emit.dispatch`; emitters are pure functions `EmitContext -> Plan`.
"""

from __future__ import annotations

from attrs import frozen

from autogen.discovery.rows import ModelRow
from autogen.footprint import Reading
from autogen.metadata.kvcost import KvCost
from autogen.metadata.model_meta import ModelMeta
from autogen.resolve.backends import Resolved
from autogen.resolve.nodes import MultiNode
from autogen.resolve.sleep import Sleeper
from autogen.settings.schema import Gpu, Override, Settings


@frozen
class DraftModel:
    """The speculative-decoding draft a model's `-draft` profile runs: pinned by the override's
    `draft`, else paired by discovery (`ModelRow.spec_draft`), with its header read.

    Example: DraftModel(path="/m/Qwen3-0.6B-Q8_0.gguf", meta=ModelMeta(...), size_bytes=639_447_040,
    why="same vocabulary (gpt2/qwen2, 151936 tokens, identical token list), same folder").
    """

    path: str
    #: None: its header could not be read (the profile is refused, saying so).
    meta: ModelMeta | None
    size_bytes: int
    why: str


@frozen
class EmitContext:
    row: ModelRow
    #: None for rows that carry no readable metadata (e.g. SAM .ggml files).
    meta: ModelMeta | None
    #: KV cost of `meta` (None when there is no metadata).
    kv: KvCost | None
    #: The first matching override row, or None.
    override: Override | None
    settings: Settings
    backend: Resolved
    #: The model's VRAM budget in GiB (override `vram_budget_gb`, else settings, else card, else 8).
    budget_gb: float
    #: Total VRAM of the eligible GPUs in GiB; None = no reading (vLLM then falls back to 0.90).
    card_vram_gb: float | None
    #: `ttl` to write (settings.ttl).
    ttl: int
    #: Ids of other models, or of profiles other models keep, that equal one of this model's llama
    #: profile ids (such a profile is refused with a reason); filled by `emit.dispatch.build_plan`.
    #: Example: frozenset({"qwen3-8b-64k"}).
    taken_ids: frozenset[str] = frozenset()
    #: The GPUs the model runs on (`devices.Placement.gpus`, filled by `emit.dispatch.build_plan`); () = the
    #: driver's default. vLLM sizes per device and sets its tensor parallelism from them; llama
    #: splits layers over several. Example: (Gpu(index=0, vram_gb=24.0), Gpu(index=1, vram_gb=12.0)).
    devices: tuple[Gpu, ...] = ()
    #: (id, model) for the ids of `taken_ids` that another model's profile keeps (cross-model
    #: profile clashes, `llama_profiles.profile_owners`); the others are model ids. Example:
    #: (("a-b-long", "a"),).
    taken_by: tuple[tuple[str, str], ...] = ()
    #: The hosts a multi-node vLLM model spans (`resolve.nodes.plan_nodes`); None = one host.
    nodes: MultiNode | None = None
    #: The draft of the model's speculative-decoding profile; None = no such profile.
    draft: DraftModel | None = None
    #: What the engine itself said about commands of this model (llama-fit-params' estimates,
    #: `swapgen calibrate`'s measurements), beside swapgen's estimate for each: sizing corrects its
    #: model with them, and an entry whose command was read reports the engine's figures.
    readings: tuple[Reading, ...] = ()
    #: Its part of the run's sleep plan (`resolve.sleep`); None = it does not ask to sleep.
    sleeper: Sleeper | None = None
    #: Bytes on one of its cards that other models' sleeping vLLM daemons keep (the most on one
    #: card), and whose they are: its budget is already that much less.
    held: tuple[int, int, str] = (0, 0, "")
