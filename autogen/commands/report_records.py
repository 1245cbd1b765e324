"""The typed reports `swapgen show`, `swapgen list` and `swapgen report` render: one model's plan
(`ModelReport`), one row of the listing (`ListRow`), and the whole plan of a host or a fleet
(`PlanReport`: hosts and GPUs, co-residency, every model, every file not served).

The text of `show` and `list`, their `--json` forms and the plan page are renderings of these
records, and nothing renders a figure the records do not hold: the JSON is
`records.CONVERTER.unstructure` of them (every field written: none has a default), and the page
prints their values as they are (docs/plan-page.md). Bytes are integers; GiB figures are the
ones the planner itself compares (two decimals, `numfmt.size_gb`).
"""

from __future__ import annotations

from attrs import field, frozen

from autogen.engines import Role
from autogen.footprint import Source
from autogen.metadata.model_meta import ModelMeta
from autogen.sizing.curves import ContextPlan

#: The parts of a device's bytes, in the order the memory table sums them and the page stacks them.
PARTS = ("weights", "kv_state", "compute", "projector", "runtime", "base", "draft", "other", "margin")


@frozen
class DeviceFigures:
    """One device's bytes by one source, part by part: a row of `swapgen show`'s memory table and
    a bar of the plan page.

    Example: DeviceFigures(device="GPU0", weights=7_290_940_416, kv_state=10_099_883_008,
    compute=272_629_760, projector=986_128_960, runtime=322_122_547, base=536_870_912, draft=0,
    other=0, margin=0, total=19_508_575_603, vs_estimate=None).
    """

    #: The engine's name for it ("CUDA0", "Host"); an estimate's "GPU0", "GPU1", … in the order
    #: the command lists its devices.
    device: str
    #: The weights on the device (llama.cpp's "model").
    weights: int
    #: KV cache and recurrent state (llama.cpp's "context"; vLLM's KV-cache pool).
    kv_state: int
    #: Graph buffers (vLLM: activations, CUDA graphs and its runtime).
    compute: int
    #: What the engine's own report does not show, as swapgen charges it: a projector on the
    #: GPU, the device runtime, the base (driver context, workspaces), a speculative draft, and
    #: the rest (`other`). The engine's figures carry the same bytes, split in the same proportions.
    projector: int
    runtime: int
    base: int
    draft: int
    other: int
    #: The margin added to measured figures.
    margin: int
    total: int
    #: Bytes more (negative: fewer) than the estimate's device in the same place; None for the
    #: estimate itself and for host memory.
    vs_estimate: int | None


@frozen
class SourceFigures:
    """One source's figures for an entry, or why it has none.

    Example: SourceFigures(source=Source.FIT_PARAMS, used=False, devices=(), host=None, note="",
    missing="no llama-fit-params beside /opt/llama/llama-server").
    """

    source: Source
    #: These are the figures the entry's sizing and `metadata.memory` use.
    used: bool
    devices: tuple[DeviceFigures, ...]
    #: Host memory beside the devices (weights kept on the CPU); None = none.
    host: DeviceFigures | None
    #: How the figures were obtained ("" = nothing to add).
    note: str
    #: Why the source has no figures ("" = it has).
    missing: str


@frozen
class EntryReport:
    """One entry of a model: a `models.<id>` block of the config (the model itself, or a profile).

    Example: EntryReport(id="gemma-3-12b-it-q4_k_m", engine="llama.cpp", argv=("llama-server", …), env=(),
    reason=("llama · gemma3 · 6.79 GiB · ctx 131072, ngl 49 (trained length fits on the GPU)", …),
    vram=19_508_575_603, host_ram=0, disk=7_290_940_416, gpus=None, group=None,
    context=ContextPlan(…), memory=(SourceFigures(…), …)).
    """

    id: str
    #: The engine as the entry's `metadata.engine` names it (its footprint's); "" = none known.
    engine: str
    argv: tuple[str, ...]
    env: tuple[str, ...]
    #: The comment lines above the entry in the config: the first says arch, size and why.
    reason: tuple[str, ...]
    #: Bytes on the devices together (`est_vram_gb`), in host RAM (`est_ram_gb`), on disk (`size_gb`).
    vram: int
    host_ram: int
    disk: int
    #: Bytes it keeps on each of its GPUs while its vLLM daemon sleeps (0 = it stops and keeps nothing).
    asleep: int
    #: The GPUs it is pinned to; None = the engine's default devices.
    gpus: tuple[int, ...] | None
    #: The coexistence group it joins (speech and segmentation servers); None = the swap group.
    group: str | None
    #: An LLM's context as sized and at every other length; None = not an LLM.
    context: ContextPlan | None
    #: Each source's figures: the estimate, llama-fit-params, measured.
    memory: tuple[SourceFigures, ...]


@frozen
class Skip:
    """A model or profile that is not served, its reason as the config's `# SKIPPED` line gives it,
    and what the user can do about it."""

    id: str
    reason: str
    hint: str


@frozen
class Backend:
    """The backend row a model resolved to. Example: Backend(id="llama-cuda", engine="llama",
    why="★ of class llm", exe="/opt/llama/bin/llama-server")."""

    id: str
    #: The engine's word ("llama", "vllm", …; `engines.Engine`); "-" = none.
    engine: str
    why: str
    exe: str | None


@frozen
class Lora:
    """A LoRA adapter offered on the model. Example: Lora(name="llama-3.1-8b-sql-lora",
    path="/m/loras/sql-lora.gguf", kind="gguf")."""

    name: str
    path: str
    kind: str


@frozen
class Files:
    """Every file a model is served from."""

    model: str
    #: The Ollama manifest it comes from; None elsewhere.
    manifest: str | None
    shards: tuple[str, ...]
    #: The vision projector beside it (`--mmproj`).
    projector: str | None
    #: A draft found beside it, and the draft its speculative-decoding profile runs (paired or pinned).
    draft: str | None
    speculative_draft: str | None
    #: The voice-activity model a speech model runs with (whisper.cpp's Silero VAD).
    vad: str | None
    loras: tuple[Lora, ...]
    #: Every file whose bytes feed its entries (what a run re-reads when it changes).
    inputs: tuple[str, ...]


@frozen
class Devices:
    """A GPU pin: the indices, why, and the variables that set it."""

    ids: str
    why: str
    env: tuple[str, ...]


@frozen
class KvCost:
    """The KV cache's cost per token at f16, with its derivation (None bytes = unknown, the note says why)."""

    bytes_per_token: int | None
    note: str
    derivation: tuple[str, ...]


@frozen
class ModelReport:
    """One model's plan (`swapgen show ID`): each fact once."""

    id: str
    #: The fleet host whose model it is; None on a single host or the front.
    host: str | None
    role: Role
    backend: Backend
    files: Files
    #: The `match` of the override that applies; None = none.
    override: str | None
    budget_gb: float
    #: The budget as each GPU sees it, in words (`show.budget_text`).
    budget: str
    card_vram_gb: float | None
    devices: Devices | None
    metadata: ModelMeta | None
    kv: KvCost | None
    #: Every sizing number with its reason, one line each.
    notes: tuple[str, ...]
    entries: tuple[EntryReport, ...]
    skips: tuple[Skip, ...]
    #: The model's part of the output (YAML blocks, or preset sections).
    fragment: str


@frozen
class Download:
    """How far an incomplete download has come: {"have_gb": 1.86, "expected_gb": 4.69}."""

    have_gb: float
    #: None while the size to expect is unknown.
    expected_gb: float | None


@frozen
class ListRow:
    """One line of `swapgen list`: a model, or a file that is not a model of its own (`ignored`,
    `attached`), whose id, task, role, engine and backend are then None."""

    id: str | None
    host: str | None
    task: str | None
    #: The model's role, or for a file that is not a model "ignored" / "attached".
    kind: str = field(metadata={"json": "class"})
    role: Role | None
    engine: str | None
    backend: str | None
    why: str
    path: str
    manifest: str | None
    size_gb: float | None
    #: The ids it serves (its profiles included).
    entries: tuple[str, ...]
    #: Why it is not served; None = it is.
    skipped: str | None
    download: Download | None
    #: Entry id → the source of its memory record.
    memory: dict[str, str]
    #: Entry id → the engine's own line, for an entry that failed to start under `swapgen calibrate`.
    start_errors: dict[str, str]


@frozen
class GpuLoad:
    """One entry's bytes on one GPU, part by part, as its used figures place them there."""

    entry: str
    model: str
    figures: DeviceFigures


@frozen
class Gpu:
    """A card of a host, what a model and models together may take of it, and what each entry
    takes of it when it loads.

    Example: Gpu(index=0, name="RTX 4090", card_gb=24.0, budget_gb=22.0, loads=(GpuLoad(…), …)).
    """

    #: None = the card reading, no inventory (or the budget, with no reading either).
    index: int | None
    label: str
    name: str
    card_gb: float
    #: What models loaded together may take (`vram_budget_gb` capped by the card); one model
    #: alone may take the card.
    budget_gb: float
    loads: tuple[GpuLoad, ...]


@frozen
class SetShare:
    """One member's demand on a card, in the planner's own figures (GiB, two decimals, rounded up)."""

    entry: str
    gb: float


@frozen
class SetUsage:
    """What a co-resident set takes of one card, against the card and what models may share of it."""

    gpu: str
    card_gb: float
    shared_gb: float
    used_gb: float
    shares: tuple[SetShare, ...]
    #: The set takes more than the card allows (a group that coexists is not checked by llama-swap).
    over: bool


@frozen
class ResidentSet:
    """Entries that may stay loaded together: `members` with any one of `alternatives` (none: the
    members alone), as one line of the config's matrix writes them. Example: ResidentSet(name="s01",
    members=("a", "b"), alternatives=("c", "d"), usage=(SetUsage("GPU 0", 24.0, 22.0, 19.5, (…), False),))."""

    #: The matrix's set name as written (`s01`…), or the group (or entry) it comes from.
    name: str
    members: tuple[str, ...]
    alternatives: tuple[str, ...]
    #: Per card, what the set takes, with the alternative that takes the most.
    usage: tuple[SetUsage, ...]


@frozen
class Apart:
    """Entries never loaded together with one entry, for one reason: every pair is in exactly one
    `Apart`, under the entry whose id sorts first. Example: Apart(first="gemma-3-12b-it-q4_k_m",
    others=("qwen3-30b-a3b-q4_k_m",), why="together more than the 22 GiB models may share of GPU 0")."""

    first: str
    others: tuple[str, ...]
    why: str


@frozen
class Group:
    """A llama-swap group as the config writes it."""

    name: str
    swap: bool
    exclusive: bool
    persistent: bool
    members: tuple[str, ...]


@frozen
class Residency:
    """What may stay loaded together on a host: the config's groups (llama-swap's rules) or its
    routing matrix (`routing: auto`), as sets drawn against the cards, and the pairs kept apart."""

    #: "groups", "matrix", or "models-max" (a llama.cpp router preset: `--models-max` models at once).
    mode: str
    groups: tuple[Group, ...]
    sets: tuple[ResidentSet, ...]
    apart: tuple[Apart, ...]
    #: How many pairs `apart` holds.
    pairs_apart: int
    #: What the planner said (a model too big to share, a pair cover), one line each.
    notes: tuple[str, ...]


@frozen
class Host:
    """One host: its settings, config, cards and co-residency."""

    #: The fleet host's name; None = the host (or the fleet front) the settings file describes.
    name: str | None
    settings: str
    config: str
    #: `vram_budget_gb` and the card reading (None = not set / no reading).
    budget_gb: float | None
    card_gb: float | None
    gpus: tuple[Gpu, ...]
    residency: Residency
    #: Entries that use no GPU (CPU-only engines).
    cpu_only: tuple[str, ...]


@frozen
class Unserved:
    """A file or model that is not served: skipped (with a `# SKIPPED` line), or a file that is not
    a model of its own (ignored, or attached to one), with what the user can do about it."""

    id: str | None
    host: str | None
    #: "skipped", "ignored" or "attached".
    kind: str
    path: str
    reason: str
    hint: str


@frozen
class PlanReport:
    """Everything `swapgen report` puts on its page: one host, or every host of a fleet."""

    version: str
    #: The settings file the run read.
    settings: str
    hosts: tuple[Host, ...]
    models: tuple[ModelReport, ...]
    unserved: tuple[Unserved, ...]
    #: Models with an entry in a config; models and profiles skipped; files that are no model.
    served: int
    skipped: int
    other_files: int
