"""From a discovered row to its plan: override, class, backend, budget → the right emitter.

This is the only module that knows every class and engine; emitters stay pure and small.
`model_inputs` is the plain-data key doit stores per model: when it (or one of the model's
files) changes, that model alone is re-emitted.
"""

from __future__ import annotations

import fnmatch
import re
from functools import lru_cache
from typing import Any

import attrs
from attrs import frozen

from autogen import GENERATOR_VERSION
from autogen.backends import Resolved, resolution_key, resolve_backend, resolve_backend_preferring, resolve_embedder
from autogen.cmdline import unsafe_arg_reason
from autogen.emitcontext import EmitContext
from autogen.entry import Plan, Skip
from autogen.errors import ModelError
from autogen.kvcost import kv_cost
from autogen.metadata import ModelMeta
from autogen.rows import ModelRow
from autogen.settings import Override, Settings, unstructure

DEFAULT_BUDGET_GB = 8.0

#: Model roles, each served by its own emitter. Embedding is class llm served differently.
LLM, EMBEDDING, IMAGE, TTS, ASR, SEGMENT = "llm", "embedding", "image", "tts", "asr", "segment"

#: GGUF architectures of encoder-only embedding models (pooling may be absent in old files).
EMBEDDING_ARCHS = frozenset({"bert", "nomic-bert", "nomic-bert-moe", "jina-bert-v2", "jina-bert-v3", "modern-bert", "neo-bert", "t5encoder"})


@lru_cache(maxsize=1024)
def _glob(pattern: str) -> re.Pattern[str]:
    return re.compile(fnmatch.translate(pattern.replace("\\", "/")), re.IGNORECASE | re.DOTALL)


def match_override(settings: Settings, row: ModelRow) -> Override | None:
    """First override whose glob matches the full path (and quant, when set) wins."""
    subject = row.path.replace("\\", "/")
    for ov in settings.overrides:
        if ov.quant and ov.quant.strip().lower() != row.quant.lower():
            continue
        if _glob(ov.match).match(subject):
            return ov
    return None


def model_role(row: ModelRow, meta: ModelMeta | None) -> str:
    if row.format == "hf":
        return LLM
    if row.format == "sam":
        return SEGMENT
    if meta is None:
        return LLM
    if meta.pooling_type > 0 or meta.arch in EMBEDDING_ARCHS:
        return EMBEDDING
    if meta.diffusion_kind or meta.general_type == "diffusion":
        return IMAGE
    return LLM


def resolve_for(settings: Settings, override: Override | None, row: ModelRow, role: str) -> Resolved:
    """Which backend serves this model (raises ModelError for a pin to another class)."""
    if row.format == "hf":
        return resolve_backend_preferring(settings, override, "llm", "vllm")
    if role == EMBEDDING:
        return resolve_embedder(settings, override)
    if role == SEGMENT:
        return resolve_backend(settings, override, "segment")
    if role == IMAGE:
        return resolve_backend(settings, override, "image")
    return resolve_backend(settings, override, "llm")


def budget_for(settings: Settings, override: Override | None, card_vram_gb: float | None) -> float:
    if override is not None and override.vram_budget_gb:
        return override.vram_budget_gb
    if settings.vram_budget_gb:
        return settings.vram_budget_gb
    return card_vram_gb if card_vram_gb else DEFAULT_BUDGET_GB


@frozen
class Job:
    """One model as the task graph sees it: everything its fragment depends on, resolved."""

    row: ModelRow
    override: Override | None
    role: str
    #: Resolved backend, or None with `error` set.
    backend: Resolved | None
    #: A reason known before emitting (unreadable header, missing shard, refused pin…).
    error: str | None
    budget_gb: float
    card_vram_gb: float | None

    @property
    def engine(self) -> str:
        return self.backend.kind if self.backend else "-"

    @property
    def backend_id(self) -> str:
        return self.backend.backend_id if self.backend else "-"


def make_job(settings: Settings, row: ModelRow, meta: ModelMeta | None, error: str | None,
             card_vram_gb: float | None) -> Job:
    override = match_override(settings, row)
    role = model_role(row, meta)
    backend = None
    if error is None:
        try:
            backend = resolve_for(settings, override, row, role)
        except ModelError as exc:
            error = str(exc)
    return Job(row=row, override=override, role=role, backend=backend, error=error,
               budget_gb=budget_for(settings, override, card_vram_gb), card_vram_gb=card_vram_gb)


def global_inputs(settings: Settings) -> dict[str, Any]:
    """Settings every fragment may read (not the per-model ones: overrides, registry, roots)."""
    data = unstructure(settings)
    for key in ("roots", "output", "cache_dir", "backends", "backends_file", "overrides", "groups",
                "health_check_timeout", "source", "vram_budget_gb", "card_vram_gb"):
        data.pop(key, None)
    data["generator"] = GENERATOR_VERSION
    return data


def model_inputs(job: Job, settings_key: str) -> dict[str, Any]:
    """The doit up-to-date key of one model (its files are `file_dep`s, not part of this)."""
    return {
        "settings": settings_key,
        "row": unstructure(job.row),
        "override": unstructure(job.override) if job.override else None,
        "role": job.role,
        "backend": resolution_key(job.backend) if job.backend else None,
        "error": job.error,
        "budget_gb": job.budget_gb,
        "card_vram_gb": job.card_vram_gb if job.engine == "vllm" else None,
    }


def _path_problem(row: ModelRow) -> str | None:
    for path in (row.path, row.mmproj, row.draft, row.codec):
        if path:
            reason = unsafe_arg_reason(path)
            if reason:
                return f"path {path!r} cannot be passed safely: {reason}"
    return None


def build_plan(job: Job, meta: ModelMeta | None, settings: Settings) -> Plan:
    """Run the emitter for one job. Per-model problems become a Skip, never an exception."""
    row = job.row
    if job.error is not None:
        return Plan(model_id=row.id, skips=(Skip(row.id, job.error),))
    problem = _path_problem(row)
    if problem:
        return Plan(model_id=row.id, skips=(Skip(row.id, problem),))
    ctx = EmitContext(row=row, meta=meta, kv=kv_cost(meta) if meta is not None else None,
                      override=job.override, settings=settings, backend=job.backend,
                      budget_gb=job.budget_gb, card_vram_gb=job.card_vram_gb, ttl=settings.ttl)
    try:
        return _dispatch(job, ctx)
    except ModelError as exc:
        return Plan(model_id=row.id, skips=(Skip(row.id, str(exc)),))


def _dispatch(job: Job, ctx: EmitContext) -> Plan:
    row, engine = job.row, job.engine
    if row.format == "hf" and engine != "vllm":
        raise ModelError("safetensors model folder needs a vllm backend; llama.cpp loads gguf only. "
                         "Add a row of kind vllm to `backends` in swapgen.yaml")
    if job.role in (LLM, EMBEDDING) and engine == "vllm":
        from autogen.emit_vllm import emit_vllm

        return emit_vllm(ctx)
    if job.role in (LLM, EMBEDDING) and engine == "llama":
        from autogen.emit_llama import emit_llama

        return emit_llama(ctx)
    raise ModelError(f"no emitter for {job.role} models on engine {engine!r} yet")


def with_id(plan: Plan, model_id: str) -> Plan:
    return attrs.evolve(plan, model_id=model_id)
