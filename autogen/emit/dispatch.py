"""From a resolved job (`resolve.job.make_job`) to its plan: the right emitter for its role and engine.

Which emitter serves a model is read from the engine's row (`engines.ENGINES`); emitters stay
pure and small. `model_inputs` is the plain-data key doit stores per model: when it (or one of
the model's files) changes, that model alone is re-emitted.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Mapping

import attrs

from autogen import GENERATOR_VERSION
from autogen.cmdline import unsafe_arg_reason
from autogen.discovery.rows import ModelRow
from autogen.emit.entry import Plan
from autogen.emit.llama_profiles import note_profiles_ignored, profile_clashes
from autogen.emit.llama_profiles import profile_owners as llama_profile_owners
from autogen.emit.llama_swap_keys import finish_plan
from autogen.emit.openai_names import OPENAI_NAMES
from autogen.emit.placement import place_plan, prefer_one_card
from autogen.engines import ENGINES, EngineRow, Role, engine_row, imported
from autogen.errors import ModelError
from autogen.footprint import Reading
from autogen.fsutil import file_size
from autogen.metadata.formats import foreign_reason
from autogen.metadata.kvcost import kv_cost
from autogen.metadata.model_meta import ModelMeta
from autogen.resolve.backends import llama_router_exe, resolution_key
from autogen.resolve.context import DraftModel, EmitContext
from autogen.resolve.devices import Placement
from autogen.resolve.devices import key as placement_key
from autogen.resolve.job import Job, budget_for
from autogen.settings.fields import EVERY_FRAGMENT, inputs_of
from autogen.settings.schema import SD_COMPONENT_FIELDS, Override, Settings

SKIPPED_BY_OVERRIDE = "skip: true in the matching override"



def global_inputs(settings: Settings) -> str:
    """The settings every fragment may read, as a stable text: the keys declared to invalidate
    every fragment (`settings.fields`). The per-model ones (overrides, registry, roots, budget,
    GPUs and devices) are left out: each model's own key carries what it uses, so a new card
    re-emits only the models placed on or sized against it."""
    # a models preset leaves out the entries of another build than the router's
    router = f"|{llama_router_exe(settings)}" if settings.target == "llama-server" else ""
    return f"{GENERATOR_VERSION}|{inputs_of(settings, EVERY_FRAGMENT)!r}{router}"


def component_state(settings: Settings, override: Override | None) -> dict[str, int | None]:
    """Size (None = absent) of every declared image component: downloading a missing T5 later
    re-emits the image models that warned about it."""
    paths = [v for v in attrs.astuple(settings.encoders) if v]
    if override is not None:
        paths += [getattr(override, name) for name in SD_COMPONENT_FIELDS if getattr(override, name)]
    return {path: file_size(path) for path in paths}


def has_profiles(job: Job) -> bool:
    """A chat model on llama-server that will be emitted: the models llama profiles belong to."""
    return (job.role == Role.LLM and job.served_by.profiles and job.error is None
            and not (job.override is not None and job.override.skip))


def profile_owners(jobs: Iterable[Job], settings: Settings) -> dict[str, str]:
    """Profile ids several models make → the model that keeps it (`llama_profiles.profile_owners`);
    computed once per run for `model_inputs` and `build_plan` (cross-model profile clashes)."""
    return llama_profile_owners(((job.row, job.override) for job in jobs if has_profiles(job)), settings)


def _openai_aliases(job: Job, owners: Mapping[str, str] | None) -> tuple[str, ...]:
    """The OpenAI names this model answers to (`openai_names`, kept with the profile owners)."""
    return tuple(name for name in OPENAI_NAMES if (owners or {}).get(name) == job.row.id)


def _profile_clashes(job: Job, settings: Settings, taken_ids: Container[str],
                     owners: Mapping[str, str] | None) -> dict[str, str]:
    """This model's llama profile ids that another model's id ("") or profile (its model) takes."""
    if not has_profiles(job):
        return {}
    return profile_clashes(job.row, job.override, settings, taken_ids, owners)


def model_inputs(job: Job, settings: Settings, settings_key: str, taken_ids: Container[str] = frozenset(),
                 owners: Mapping[str, str] | None = None) -> str:
    """The doit up-to-date key of one model (its files are `file_dep`s, not part of this).

    A repr of frozen records: stable across runs and far cheaper than unstructuring them.
    `taken_ids` = every model's id, `owners` = `profile_owners`; the key holds only the ids its
    profiles would clash with, and who has them."""
    return repr((
        tuple(sorted(_profile_clashes(job, settings, taken_ids, owners).items())),
        _openai_aliases(job, owners),
        settings_key,
        job.row,
        job.override,
        job.role,
        job.prefer,
        resolution_key(job.backend) if job.backend else None,
        job.error,
        job.budget_gb,
        job.card_vram_gb if job.served_by.per_card else None,
        component_state(settings, job.override) if job.role == Role.IMAGE else None,
        placement_key(job.placement),
        job.nodes,
        job.sleeper,
        job.held,
    ))


def _path_problem(row: ModelRow, draft: DraftModel | None) -> str | None:
    extra = (a.path for a in row.loras)
    for path in (row.path, row.mmproj, row.draft, row.codec, row.vad, draft.path if draft else None, *extra):
        if path and not _is_utf8(path):
            return f"path {path!r} is not valid UTF-8, which a YAML config cannot carry; rename the file"
        if path:
            reason = unsafe_arg_reason(path)
            if reason:
                return f"path {path!r} cannot be passed safely: {reason}"
    return None


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # undecodable bytes of a file name arrive as surrogate escapes
        return False
    return True


def build_plan(job: Job, meta: ModelMeta | None, settings: Settings, taken_ids: Container[str] = frozenset(),
               owners: Mapping[str, str] | None = None, draft: DraftModel | None = None,
               readings: tuple[Reading, ...] = ()) -> Plan:
    """Run the emitter for one job (`taken_ids`: every model's id, `owners`: `profile_owners`,
    for profile names; `draft`: the draft of its speculative-decoding profile, header read;
    `readings`: the engine's own figures for earlier commands of this model).
    Per-model problems become a Skip, never an exception."""
    row = job.row
    if job.override is not None and job.override.skip:
        return Plan(model_id=row.id, notes=(f"{SKIPPED_BY_OVERRIDE}; not written",))
    if job.error is not None:
        return Plan.skip(row.id, job.error)
    problem = _path_problem(row, draft)
    if problem:
        return Plan.skip(row.id, problem)
    clashes = _profile_clashes(job, settings, taken_ids, owners)
    ctx = EmitContext(row=row, meta=meta, kv=kv_cost(meta) if meta is not None else None,
                      override=job.override, settings=settings, backend=job.backend,
                      budget_gb=job.budget_gb, card_vram_gb=job.card_vram_gb, ttl=settings.ttl,
                      taken_ids=frozenset(clashes), devices=job.placement.gpus, nodes=job.nodes,
                      taken_by=tuple(sorted((pid, model) for pid, model in clashes.items() if model)), draft=draft,
                      readings=readings, sleeper=job.sleeper, held=job.held)
    try:
        placement = _placement(job)
        if placement is not job.placement:  # one card of several: sized for that card
            ctx = attrs.evolve(ctx, devices=placement.gpus,
                               budget_gb=budget_for(settings, job.override, None, placement.gpus))
        plan = _placed(job, ctx, _dispatch(job, ctx))
        if job.served_by.no_profiles_note:
            plan = note_profiles_ignored(plan, job.override, job.served_by.no_profiles_note)
        plan = _with_openai_aliases(plan, _openai_aliases(job, owners))
        return _with_llama_swap_keys(job, settings, _free_aliases(plan, taken_ids))
    except ModelError as exc:
        return Plan.skip(row.id, str(exc))


def _with_openai_aliases(plan: Plan, names: tuple[str, ...]) -> Plan:
    """The model's main entry answers the OpenAI names it owns (`openai_names`)."""
    if not names or not plan.entries:
        return plan
    first, *rest = plan.entries
    line = f"alias {', '.join(names)}: the default model of its class, which OpenAI clients ask for"
    first = attrs.evolve(first, aliases=(*first.aliases, *names), comment=(*first.comment, line))
    return attrs.evolve(plan, entries=(first, *rest))


def _free_aliases(plan: Plan, taken_ids: Container[str]) -> Plan:
    """An alias an emitter gave (a LoRA module's name) that is another model's id is dropped,
    saying so: llama-swap refuses an alias that names a model."""
    entries = []
    for entry in plan.entries:
        taken = [a for a in entry.aliases if a in taken_ids]
        if taken:
            line = f"alias {', '.join(taken)} left out: another model has that id"
            entry = attrs.evolve(entry, aliases=tuple(a for a in entry.aliases if a not in taken),
                                 comment=(*entry.comment, line))
        entries.append(entry)
    return attrs.evolve(plan, entries=tuple(entries))


def _with_llama_swap_keys(job: Job, settings: Settings, plan: Plan) -> Plan:
    """The entries' proxy and concurrency limit, and the override's own `llama_swap:` keys."""
    override = job.override
    if override is None or not override.llama_swap:
        return finish_plan(plan, job.engine)
    where = f"overrides[{settings.overrides.index(override)}].llama_swap"
    return finish_plan(plan, job.engine, override.llama_swap, where)


def _placement(job: Job) -> Placement:
    """Where the job's entries run: its placement, but for an engine that runs on one GPU
    (`EngineRow.one_gpu`) pinned to several, the largest of them."""
    placement = job.placement
    serving = emitting_engine(job.role, job.engine, job.prefer)
    if serving is None or not serving.one_gpu or len(placement.gpus) < 2:
        return placement
    card = max(placement.gpus, key=lambda g: g.vram_gb)
    return placement.only(card, f"{placement.why}; {serving.component} runs on one GPU: the largest")


def _placed(job: Job, ctx: EmitContext, plan: Plan) -> Plan:
    """The plan with its device pin, for every class; a llama entry that loses nothing on the
    largest of its cards alone runs there, the others split layers over all."""
    placement = _placement(job)
    if not job.served_by.splits_layers or len(placement.gpus) < 2:
        return place_plan(plan, placement)
    card = max(placement.gpus, key=lambda g: g.vram_gb)
    one = placement.only(card, f"{placement.why}; fits card {card.index} alone")
    single = _dispatch(job, attrs.evolve(ctx, devices=one.gpus,
                                         budget_gb=budget_for(ctx.settings, job.override, None, one.gpus)))
    return prefer_one_card(plan, single, placement, one)


def emitting_engine(role: Role, engine: str, prefer: str | None = None) -> EngineRow | None:
    """The engine whose emitter serves a model of `role` resolved to `engine`: the preferred
    engine when it is exclusive (an audio.cpp model on a legacy exe still speaks audio.cpp's
    argv), the resolved engine when it serves the role, else (a custom engine) the one emitter of
    the role's engines that serve custom rows, exclusive ones aside; None when there is none (a
    custom llm: several engines' flags, so no guess)."""
    own = engine_row(prefer) if prefer and engine_row(prefer).exclusive else engine_row(engine)
    if role in own.roles:
        return own
    hosts = {row.emitter: row for row in ENGINES.values()
             if row.serves_custom_rows and not row.exclusive and role in row.roles}
    return next(iter(hosts.values())) if len(hosts) == 1 else None


def emitter_for(role: Role, engine: str, prefer: str | None = None) -> Callable[[EmitContext], Plan] | None:
    """The registered emitter of a role on an engine (`emitting_engine`), or None."""
    row = emitting_engine(role, engine, prefer)
    if row is None or row.emitter is None:
        return None
    return imported(row.emitter)  # on first use: a run served from the load memo plans nothing


def folder_unloadable(job: Job) -> bool:
    """An HF (safetensors) folder resolved to an engine that loads none (`EngineRow.hf_folders`):
    llama.cpp loads GGUF only."""
    return job.row.format == "hf" and job.backend is not None and not job.served_by.hf_folders


def emitter_for_custom() -> Callable[[EmitContext], Plan]:
    """The emitter of a row pinned to a `custom` backend (formats no known engine loads)."""
    return imported("emit.custom:emit_custom")  # on first use, as `emitter_for`


def _dispatch(job: Job, ctx: EmitContext) -> Plan:
    row, engine = job.row, job.engine
    if job.foreign_unserved:  # a format no engine swapgen knows loads: a custom backend row alone may claim it
        raise ModelError(foreign_reason(row.foreign_format, row.foreign_evidence))
    if row.foreign_format:
        return emitter_for_custom()(ctx)
    if folder_unloadable(job):
        raise ModelError("safetensors model folder needs a vllm backend; llama.cpp loads gguf only. "
                         "Add a row of kind vllm to `backends` in swapgen.yaml")
    serving = emitting_engine(job.role, engine, job.prefer)
    arch = ctx.meta.arch if ctx.meta else "?"
    if serving is not None and arch in serving.unserved_archs:
        raise ModelError(serving.unserved_reason.format(arch=arch))
    emit = emitter_for(job.role, engine, job.prefer)
    if emit is None:
        raise ModelError(f"no emitter for {job.role} models on engine {engine!r} yet")
    return emit(ctx)
