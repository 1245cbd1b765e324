"""What an emitter produces for one model: router entries or a skip reason.

Emitters are pure: (model, metadata, settings, resolved backend) → `Plan`. The fragment
renderer turns a plan into YAML text; `swapgen show` prints it; the validator checks the
assembled file. Keys mirror llama-swap's model object (only upstream keys).
"""

from __future__ import annotations

from typing import Any

from attrs import field, frozen

from autogen.footprint import Fact, Footprint, Gap, MemoryRecord
from autogen.sizing.curves import ContextSizer

#: A metadata value llama-swap passes through to /v1/models.
MetaValue = str | int | float | bool


@frozen
class Capabilities:
    """llama-swap's closed `capabilities` object; None / () = key not written."""

    #: Input modalities, values from {"text", "image", "audio"}.
    inputs: tuple[str, ...] = ()
    #: Output modalities, values from {"text", "image", "audio"}.
    outputs: tuple[str, ...] = ()
    tools: bool | None = None
    reranker: bool | None = None
    context: int | None = None


@frozen
class Entry:
    """One `models.<id>` block of the router config."""

    id: str
    #: Program and arguments, exactly as the process should receive them; `${PORT}` is the
    #: only macro and appears verbatim as an argument or inside one.
    argv: tuple[str, ...]
    #: Comment lines written above the entry (no leading "#"); the first says arch/size/why.
    comment: tuple[str, ...] = ()
    #: Ordered `metadata` key/values (backend, engine, arch, size_gb, est_vram_gb, …).
    metadata: tuple[tuple[str, MetaValue], ...] = ()
    capabilities: Capabilities | None = None
    #: `NAME=value` strings (upper-case names).
    env: tuple[str, ...] = ()
    ttl: int | None = None
    #: `checkEndpoint`; None = llama-swap's default (/health).
    check_endpoint: str | None = None
    use_model_name: str | None = None
    unlisted: bool = False
    aliases: tuple[str, ...] = ()
    #: Coexistence group this entry joins ("sam", "tts", "asr"); None = the swap group.
    coexist_group: str | None = None
    #: What the entry takes, typed (engine, bytes on the devices and in RAM, files, GPUs, sizing
    #: results, the memory record): `metadata`, the comment, routing and `swapgen show` render it.
    #: None = takes nothing swapgen knows of (routing counts it as CPU-only).
    footprint: Footprint | None = None
    #: swapgen's own estimate for this exact command (the footprint when no engine was asked),
    #: for `swapgen show` and for correcting the model with the engine's figures.
    estimate: MemoryRecord | None = None
    #: What this command holds that llama-fit-params cannot be asked about (llama-server's
    #: unified slot pool), priced by swapgen's rules; None = nothing.
    estimator_gap: Gap | None = None
    #: What the estimate's `unseen` bytes are made of (runtime, base, projector, draft: the
    #: device-side charges beside the engine's own parts), for the report's memory bars.
    charges: tuple[Fact, ...] = ()
    #: An LLM entry's context as sized and at every other length (`sizing.curves`), for
    #: `swapgen show` and the report; None = not an LLM, or an engine that sizes no context.
    context: ContextSizer | None = field(default=None, eq=False)
    #: `proxy`: where llama-swap reaches the engine (`emit.llama_swap_keys.bind_proxy`); None =
    #: llama-swap's default.
    proxy: str | None = None
    #: `concurrencyLimit`: the engine's slots where the command sets them, or the user's value.
    concurrency_limit: int | None = None
    #: `cmdStop`: the program and arguments llama-swap runs to stop it (`${PID}` = the process it
    #: started); () = llama-swap's SIGTERM.
    cmd_stop: tuple[str, ...] = ()
    #: `unloadTimeout` in seconds; None = llama-swap's global one.
    unload_timeout: int | None = None
    #: The override's other `llama_swap:` keys, in the user's order, as plain YAML data
    #: (`metadata` holds only the user's additions to ours).
    llama_swap: tuple[tuple[str, Any], ...] = field(default=(), hash=False)


@frozen
class Skip:
    """A model that cannot be served: rendered as `# SKIPPED "<id>": <reason>`."""

    id: str
    reason: str


@frozen
class Plan:
    """Everything one model contributes: entries (several for profiles) and/or skips."""

    model_id: str
    entries: tuple[Entry, ...] = ()
    skips: tuple[Skip, ...] = ()
    #: Human notes on the derivation, for `swapgen show` (one line each).
    notes: tuple[str, ...] = ()
    #: Side files the model task writes with the fragment: (absolute path, text). Example:
    #: audio.cpp's server JSON, which its `cmd` names with `--config` (no `--model` flag).
    files: tuple[tuple[str, str], ...] = ()
    #: Settings problems found while planning (`place: message`, e.g. an override's
    #: `llama_swap.metadata` key that swapgen writes too, a file outside every `path_map`
    #: folder): the run stops on them.
    conflicts: tuple[str, ...] = ()

    @classmethod
    def skip(cls, model_id: str, reason: str) -> Plan:
        """The plan of a model that cannot be served: one `# SKIPPED` line, no entries."""
        return cls(model_id=model_id, skips=(Skip(model_id, reason),))
