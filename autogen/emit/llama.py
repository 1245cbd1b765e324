"""The llama-server emitter: one entry per GGUF chat or embedding model, sized from the budget,
for a llama.cpp row or an ik_llama.cpp one (docs/maintainers/backends.md#ik_llamacpp-a-row-of-its-own).
Each row's vocabulary (`EngineRow.flags`, `sizing.llama_args.vocabulary`) decides the words that
differ: ik_llama.cpp's command has no `-fit off` (its fit is off unless asked), `--log-disable`
after `-ngl` (else it writes "llama.log" where llama-swap starts it), then its own options
(`-mla` of an MLA model, `-no-fmoe`, `-rtr`) after `-t`, and its draft lengths as `--draft-max 16
--draft-min 0`; its allocations are `EngineRow.memory`'s. What follows is llama.cpp's.

Only flags llama-server b11434 accepts (its `--help`; llama.cpp tools/server/README.md): `-fa` always takes a
value, no `--no-mmap`/`--mlock`. Chat argv order (the flags we size or the user sets):

    <exe> -m <path> --host 127.0.0.1 --port ${PORT} [-sm layer -ts <GiB of each device>]
      -c <ctx × slots> -ngl <n> [--n-cpu-moe <n>] -fit off
      [-fa on|off|auto] [-ctk <t> -ctv <t>] [--parallel <n>] [-t <n>]
      [--mmproj <file> [--no-mmproj-offload]]
      [-md <draft> -ngld <all> --spec-type draft-simple --spec-draft-n-max 3 --spec-draft-n-min 0
       [-ctkd <t> -ctvd <t>]]
      <extra_args>

Embedding argv (docs/maintainers/classes.md#embeddings; `--pooling auto` no longer exists, so the header's
pooling type is named; batch and ubatch equal the context because a non-causal model must see a
whole input in one ubatch):

    <exe> -m <path> --host 127.0.0.1 --port ${PORT} --embeddings [--pooling <type>]
      -c <ctx> -b <ctx> -ub <ctx> -ngl <all> -fit off [-t <n>] <extra_args>

`extra_args` are appended verbatim, except that `--flag=value` of a known flag becomes two
arguments (llama-server rejects the `=` form); a flag there (any spelling) removes our flag of the
same meaning, and its value pins the sizing (`-c`, `-ngl`, `--n-cpu-moe`, `-np`,
`-fa`, `-ctk`/`-ctv`), so the estimates describe the command that really runs. Each value read
back is checked against what b11434 accepts (a bad one skips the model, naming flag, value and
the allowed values); `-c 0` is the trained window, `-np -1` the auto slots, `-ngl auto` (fit to
free memory) is refused. `-fit off` follows the placement: llama.cpp never re-fits what swapgen
sized (a `-fit` in `extra_args` replaces it).

`--parallel` is emitted only when the user chose a slot count (1 included). Without it
llama-server runs its auto 4 slots over one shared KV pool of -c tokens: the same KV cost as one
slot and more concurrency, and the 4 sequences of recurrent state are charged (`AUTO_SLOTS`).
A scanned chat template that never mentions `tools` gives no `tools` capability.

Profiles: ctx tiers, named profiles, the vision profile, LoRA adapters and the draft profile of
a chat model, each sized here as its own entry; their names, clashes and inheritance are
`llama_profiles`'s. The draft profile runs llama.cpp's standalone draft (`--spec-type
draft-simple`: a draft model alone sets no type in b11434, common/arg.cpp), with llama.cpp's
own default draft lengths written out (`common_params_speculative_draft`: n_max 3, n_min 0) so
they can be seen and changed, and the draft's cache at the main cache's type.
"""

from __future__ import annotations

import os

import attrs

from autogen.cmdline import HOST
from autogen.emit.entry import Capabilities, Entry, MetaValue, Plan, Skip
from autogen.emit.llama_profiles import (
    ProfileOf,
    note_profiles_ignored,
    profile_context,
    profiles,
    refused_before_sizing,
)
from autogen.engines import ENGINES, Engine, engine_row, imported
from autogen.errors import ModelError
from autogen.flags.llama import LlamaFlags
from autogen.footprint import Footprint, MemoryRecord
from autogen.metadata.chat_template import TOOLS_VAR
from autogen.metadata.kvcost import kv_bytes, kv_cost
from autogen.numfmt import GIB, format_g, gib_figure, gib_text
from autogen.resolve.context import DraftModel, EmitContext
from autogen.resolve.devices import tensor_split
from autogen.resolve.roles import is_embedding_model
from autogen.settings.schema import MMPROJ_MODES
from autogen.sizing.correction import EngineCorrection
from autogen.sizing.ik_llama_memory import DEFAULT_MLA, latent
from autogen.sizing.llama import (
    BASE_OVERHEAD,
    DraftLoad,
    LlamaSizing,
    Weights,
    estimator_gap,
    fixed_charges,
    memory_record,
    runtime_bytes,
    size_llama,
)
from autogen.sizing.llama_args import LlamaChoices, checked_path, extra_flags, resolve_choices, vocabulary
from autogen.sizing.llama_memory import Launch
from autogen.sizing.projector import projector_charge

#: GGUF `{arch}.pooling_type` → `--pooling` value (llama.h `enum llama_pooling_type`).
POOLING = {1: "mean", 2: "cls", 3: "last", 4: "rank"}
#: Embedding context: the trained window (512 when absent), capped (docs/maintainers/classes.md#embeddings).
EMBED_CTX_FALLBACK = 512
EMBED_CTX_CAP = 8192

def emit_llama(ctx: EmitContext) -> Plan:
    """The llama-server entries of one model (chat: + its profiles; embedding), or Skips; for a
    llama.cpp row or an ik_llama.cpp one, each in its own vocabulary (`EngineRow.flags`)."""
    row = ctx.row
    try:
        if ctx.meta is None:
            raise ModelError("no readable GGUF metadata: cannot size llama-server flags")
        _check_loaded(ctx)
        if is_embedding_model(ctx.meta):
            return note_profiles_ignored(emit_llama_embedding(ctx), ctx.override, "embedding models have none")
        entry, notes = _chat_entry(ctx)
    except ModelError as exc:
        return Plan.skip(row.id, str(exc))
    entries, skips, all_notes = [entry], [], list(notes)
    for profile in profiles(row, ctx.override, ctx.settings):
        reason = profile.refused or refused_before_sizing(ctx, profile)
        if reason is None:
            try:
                draft = ctx.draft if profile.of == ProfileOf.DRAFT else None
                entry, notes = _chat_entry(profile_context(ctx, profile), draft)
            except ModelError as exc:
                reason = str(exc)
        if reason is not None:
            skips.append(Skip(profile.id, reason))
            all_notes.append(f"profile {profile.id}: SKIPPED: {reason}")
            continue
        line = f"profile of {row.id}: {profile.describe}"
        entries.append(attrs.evolve(entry, id=profile.id, comment=(*entry.comment, line)))
        all_notes += [f"profile {profile.id} ({profile.describe}):", *(f"  {n}" for n in notes)]
    return Plan(model_id=row.id, entries=tuple(entries), skips=tuple(skips), notes=tuple(all_notes))


def _check_loaded(ctx: EmitContext) -> None:
    """ModelError for an architecture the row's build has no loader for (ik_llama.cpp's list)."""
    words = vocabulary(ctx)
    arch = ctx.meta.arch if ctx.meta is not None else ""
    if words.archs and arch not in words.archs:
        raise ModelError(f"architecture {arch or '?'}: {words.table.build} has no loader for it "
                         "(pin the model to a llama.cpp row)")


def _engine(ctx: EmitContext) -> str:
    """The engine of the row: llama.cpp's unless the row is ik_llama.cpp's."""
    return Engine.IK_LLAMA if ctx.backend.engine == Engine.IK_LLAMA else Engine.LLAMA


def _finish(generated: list[tuple[str, ...]], choices: LlamaChoices, words: LlamaFlags) -> tuple[str, ...]:
    """Drop generated flag groups whose meaning `extra_args` sets, then append `extra_args`."""
    kept = [group for group in generated if words.flag_knobs.get(group[0]) not in choices.replaced]
    return tuple(token for group in kept for token in group) + choices.extra_args


def _head(ctx: EmitContext) -> list[tuple[str, ...]]:
    """Program, model, address; over several devices layers split in proportion to
    each card's VRAM, in the order the device variables list them."""
    exe = ctx.backend.exe or ENGINES[_engine(ctx)].exe
    head = [(exe,), ("-m", ctx.row.path), ("--host", HOST), ("--port", "${PORT}")]
    if len(ctx.devices) > 1:
        head += [("-sm", "layer"), ("-ts", tensor_split(ctx.devices))]
    return head


def _variant(ctx: EmitContext) -> str:
    row = ctx.backend.row
    return row.build if row is not None else ""


def _projector(ctx: EmitContext, choices: LlamaChoices) -> tuple[str | None, str]:
    """(projector path or None, placement "auto" | "cpu" | "gpu")."""
    mode = choices.mmproj
    if mode == "none" or "mmproj" in choices.replaced:
        return None, "auto"
    if mode in MMPROJ_MODES:
        return ctx.row.mmproj, mode
    return checked_path(os.path.expanduser(mode)), "auto"


def size_chat(ctx: EmitContext, choices: LlamaChoices,
              draft: DraftModel | None = None) -> tuple[LlamaSizing, str | None, bool]:
    """(sizing, projector path, projector on GPU). `auto` keeps the projector on the GPU only
    when that costs no layers, experts or context below what the CPU placement gets."""
    meta = ctx.meta
    assert meta is not None
    projector, placement = _projector(ctx, choices)
    load = None
    if draft is not None and draft.meta is not None:
        load = DraftLoad(meta=draft.meta, cost=kv_cost(draft.meta), weights=draft.size_bytes)
    common = dict(size=ctx.row.size_bytes or meta.tensor_bytes, budget=int(ctx.budget_gb * GIB),
                  knobs=choices.knobs, runtime=runtime_bytes(_variant(ctx)), draft=load,
                  correction=EngineCorrection.from_readings(ctx.readings), rules=_rules(ctx))
    if projector is None or placement == "cpu":
        return size_llama(meta, ctx.kv, **common), projector, False
    own = projector == ctx.row.mmproj
    charge = projector_charge(ctx.row.mmproj_bytes if own else 0, ctx.row.mmproj_tower if own else None,
                              choices.knobs.flash_attn, choices.image_max_tokens)
    if placement == "gpu":
        return size_llama(meta, ctx.kv, projector=charge, **common), projector, True
    on_cpu = size_llama(meta, ctx.kv, **common)
    try:
        on_gpu = size_llama(meta, ctx.kv, projector=charge, **common)
    except ModelError:
        return on_cpu, projector, False
    keeps = on_gpu.full_gpu and on_gpu.ctx >= on_cpu.ctx
    return (on_gpu, projector, True) if keeps else (on_cpu, projector, False)


def _rules(ctx: EmitContext):
    """What the row's llama-server allocates for a launch (`EngineRow.memory`)."""
    return imported(engine_row(_engine(ctx)).memory)


def _ik_groups(ctx: EmitContext, choices: LlamaChoices, words: LlamaFlags) -> list[tuple[str, ...]]:
    """ik_llama.cpp's own options (docs/ik-llama.md): `-mla` of an MLA model, always written so
    the command says which cache it sizes, `-no-fmoe`, `-rtr`; none on a llama.cpp row."""
    if "mla" not in words.knobs:
        return []
    meta = ctx.meta
    groups = []
    if meta is not None and latent(meta)[0]:
        mla = DEFAULT_MLA if choices.knobs.mla is None else choices.knobs.mla
        groups.append((words.spelling("mla"), str(mla)))
    if not choices.fused_moe:
        groups.append((words.spelling("fused_moe"),))
    if choices.knobs.run_time_repack:
        groups.append((words.spelling("run_time_repack"),))
    return groups


def _draft_groups(draft: DraftModel, kv_type: str, words: LlamaFlags) -> list[tuple[str, ...]]:
    """Speculative decoding with a draft model, all its layers on the GPU, its lengths written
    out (the build's own defaults: `LlamaFlags.draft_lengths`)."""
    assert draft.meta is not None
    n_max, n_min = words.draft_lengths
    groups = [("-md", draft.path), ("-ngld", str(draft.meta.block_count + 1))]
    groups += [words.draft_type] if words.draft_type else []
    groups += [(words.spelling("draft_max"), str(n_max)), (words.spelling("draft_min"), str(n_min))]
    if kv_type != "f16":
        groups += [("-ctkd", kv_type), ("-ctvd", kv_type)]
    return groups


def chat_argv(ctx: EmitContext, choices: LlamaChoices, sizing: LlamaSizing, projector: str | None,
              projector_on_gpu: bool, draft: DraftModel | None = None) -> tuple[str, ...]:
    """The command line, in the order of the module docstring."""
    words = vocabulary(ctx)
    groups = _head(ctx)
    groups += [("-c", str(sizing.ctx_total)), ("-ngl", str(sizing.ngl))]
    if sizing.n_cpu_moe:
        groups.append(("--n-cpu-moe", str(sizing.n_cpu_moe)))
    groups += words.fit_off + words.log_off
    if choices.knobs.flash_attn:
        groups.append(("-fa", choices.knobs.flash_attn))
    if sizing.kv_type != "f16":
        groups += [("-ctk", sizing.kv_type), ("-ctv", sizing.kv_type)]
    if choices.slots_chosen:
        groups.append(("--parallel", str(sizing.parallel)))
    if choices.threads:
        groups.append(("-t", str(choices.threads)))
    groups += _ik_groups(ctx, choices, words)
    if projector:
        groups.append(("--mmproj", projector))
        if not projector_on_gpu:
            groups.append(("--no-mmproj-offload",))
    if draft is not None and draft.meta is not None:
        groups += _draft_groups(draft, sizing.kv_type, words)
    return _finish(groups, choices, words)


def _chat_entry(ctx: EmitContext, draft: DraftModel | None = None) -> tuple[Entry, tuple[str, ...]]:
    meta, row, ov = ctx.meta, ctx.row, ctx.override
    assert meta is not None
    choices = resolve_choices(ctx)
    sizing, projector, on_gpu = size_chat(ctx, choices, draft)
    argv = chat_argv(ctx, choices, sizing, projector, on_gpu, draft)
    assert sizing.estimate is not None and sizing.decided is not None
    used, estimate = footprints(ctx, argv, sizing.decided, sizing.estimate)
    ngl_text = f"ngl {sizing.ngl}" + (f", n-cpu-moe {sizing.n_cpu_moe}" if sizing.n_cpu_moe else "")
    footprint = Footprint(engine=ENGINES[_engine(ctx)].label, vram=used.vram, host=_host(used), disk=row.size_bytes,
                          results=(("ctx", sizing.ctx), ("ngl", sizing.ngl), ("n_cpu_moe", sizing.n_cpu_moe),
                                   ("kv_type", sizing.kv_type)), memory=used)
    comment = [f"{_engine(ctx)} · {meta.arch or '?'} · {format_g(footprint.disk_gb)} GiB · ctx {sizing.ctx}, "
               f"{ngl_text} ({sizing.why})",
               f"est VRAM {format_g(footprint.vram_gb)} GiB of "
               f"{format_g(ctx.budget_gb)} GiB, RAM {format_g(footprint.host_gb)} GiB, "
               f"KV {sizing.kv_type}" + (f", {sizing.parallel} slots" if sizing.parallel > 1 else "")
               + ("" if used.source == "estimate" else f" ({used.source})")]
    if projector:
        comment.append(f"projector {os.path.basename(projector)} on the {'GPU' if on_gpu else 'CPU'}")
    if draft is not None:
        comment.append(f"draft {os.path.basename(draft.path)}: {draft.why}")
    if choices.replaced:
        comment.append("extra_args set: " + ", ".join(sorted(choices.replaced)))
    tools = meta.has_chat_template and (TOOLS_VAR in meta.chat_template_markers or not meta.chat_template_scanned)
    if meta.has_chat_template and not tools:
        comment.append("no tools capability: the chat template never mentions tools")
    images = projector is not None or _extra_attaches_projector(choices, vocabulary(ctx))
    metadata = [*_metadata(ctx, sizing, footprint), ("n_cpu_moe", sizing.n_cpu_moe), ("kv_type", sizing.kv_type)]
    caps = Capabilities(inputs=("text", "image") if images else ("text",), outputs=("text",),
                        tools=True if tools else None, context=sizing.ctx)
    entry = Entry(id=row.id, argv=argv, comment=tuple(comment), metadata=tuple(metadata),
                  capabilities=caps, ttl=ctx.ttl, unlisted=bool(ov and ov.unlisted), footprint=footprint,
                  estimate=estimate, estimator_gap=_estimator_gap(ctx, choices, sizing),
                  charges=sizing.charges, context=sizing.context)
    notes = [*sizing.notes, *choices.notes, fit_note(ctx, choices)]
    if projector and not on_gpu:  # on the GPU, the sizing's charge line says so and what it costs
        notes.append("projector on the CPU (--no-mmproj-offload), not charged")
    return entry, tuple(notes)


def footprints(ctx: EmitContext, argv: tuple[str, ...], decided: MemoryRecord,
               estimate: MemoryRecord) -> tuple[MemoryRecord, MemoryRecord]:
    """(the entry's footprint, swapgen's own estimate), over the entry's devices: the engine's
    figures when it was asked about this very command, else the figures the decision used."""
    names = [f"GPU{g.index}" for g in ctx.devices]
    shares = [g.vram_gb for g in ctx.devices]
    estimate = estimate.spread(names, shares)
    for reading in ctx.readings:
        if reading.argv == argv:
            return reading.engine, estimate
    return decided.spread(names, shares), estimate


def _host(used: MemoryRecord) -> int:
    return used.host.total if used.host is not None else 0


def _estimator_gap(ctx: EmitContext, choices: LlamaChoices, sizing: LlamaSizing):
    """What llama-fit-params cannot be asked about (`sizing.llama.estimator_gap`); None for a
    build without an estimator (ik_llama.cpp)."""
    if not ENGINES[_engine(ctx)].estimator:
        return None
    assert ctx.meta is not None
    return estimator_gap(ctx.meta, ctx.kv, choices.knobs, sizing.ctx, sizing.kv_type)


def fit_note(ctx: EmitContext, choices: LlamaChoices) -> str:
    """Who decides the launch: swapgen (`-fit off`, the default) or llama.cpp's fit."""
    words = vocabulary(ctx)
    if not words.fit_off:
        return "fit: ik_llama.cpp fits nothing without --fit: swapgen's sizing decides -c and -ngl"
    flag, value = extra_flags(choices.extra_args, words).get("fit", ("", "off"))
    if value == "off":
        return "fit: -fit off, swapgen's sizing decides: llama-server loads exactly this -c and -ngl"
    return (f"fit: {flag} {value} from extra_args: with -c and -ngl given, llama.cpp's fit changes neither "
            "(common/fit.cpp stops at a user-set n_gpu_layers); it only adds a dry-run load at start")


def _extra_attaches_projector(choices: LlamaChoices, words: LlamaFlags) -> bool:
    flag, _ = extra_flags(choices.extra_args, words).get("mmproj", ("", None))
    return flag in ("-mm", "--mmproj", "-mmu", "--mmproj-url")


def _metadata(ctx: EmitContext, sizing: LlamaSizing, footprint: Footprint) -> list[tuple[str, MetaValue]]:
    """`kv_bytes_per_token` is the model's own cost at f16, the same figure every engine's entry
    reports for one model; the cache type actually used is `kv_type`."""
    meta = ctx.meta
    assert meta is not None
    per_token = ctx.kv.bytes_per_token if ctx.kv is not None and ctx.kv.bytes_per_token else sizing.kv_bytes_per_token
    return [("backend", ctx.backend.backend_id), ("engine", footprint.engine), ("arch", meta.arch),
            ("size_gb", footprint.disk_gb), ("est_vram_gb", footprint.vram_gb), ("est_ram_gb", footprint.host_gb),
            ("kv_bytes_per_token", per_token), ("ctx", sizing.ctx), ("ngl", sizing.ngl)]


def emit_llama_embedding(ctx: EmitContext) -> Plan:
    """A `--embeddings` entry: whole model on the GPU, batch = ubatch = context."""
    meta, row, ov = ctx.meta, ctx.row, ctx.override
    if meta is None or meta.block_count <= 0:
        reason = "GGUF header has no block_count: cannot place layers on the GPU"
        return Plan.skip(row.id, reason)
    choices = resolve_choices(ctx)
    trained = meta.context_length or EMBED_CTX_FALLBACK
    ctx_len = choices.knobs.ctx or min(trained, EMBED_CTX_CAP)
    ngl = meta.block_count + 1
    pooling = POOLING.get(meta.pooling_type)
    known_kv = ctx.kv is not None and ctx.kv.bytes_per_token is not None
    runtime = runtime_bytes(_variant(ctx))
    words = vocabulary(ctx)
    memory = _rules(ctx)(meta, Launch(ctx=ctx_len, slots=words.auto_slots, unified=True,
                                      ubatch=ctx_len, batch=ctx_len, flash_attn=choices.knobs.flash_attn != "off"),
                         ctx.kv.state_bytes_per_seq if known_kv else 0)
    kv = memory.kv_total if known_kv else 0
    size = row.size_bytes or meta.tensor_bytes
    overhead = BASE_OVERHEAD + runtime + memory.compute + memory.state
    vram = size + kv + overhead
    sizing = LlamaSizing(ctx=ctx_len, parallel=1, ngl=ngl, n_cpu_moe=0, kv_type="f16",
                         kv_bytes_per_token=kv_bytes(ctx.kv, 1) if known_kv else 0, kv_total=kv,
                         weights=size, compute=memory.compute, projector=0, overhead=overhead,
                         est_vram=vram, est_ram=0, budget=int(ctx.budget_gb * GIB),
                         blocks=meta.block_count, why="embedding, whole model on the GPU", state=memory.state,
                         runtime=runtime, memory=memory)
    estimate = memory_record(Weights(size=size, blocks=meta.block_count), kv=kv, state=memory.state,
                         compute=memory.compute, unseen=BASE_OVERHEAD + runtime, ngl=ngl, ncm=0)
    groups = [*_head(ctx), ("--embeddings",)]
    if pooling:
        groups.append(("--pooling", pooling))
    groups += [("-c", str(ctx_len)), ("-b", str(ctx_len)), ("-ub", str(ctx_len)), ("-ngl", str(ngl)),
               *words.fit_off, *words.log_off]
    if choices.threads:
        groups.append(("-t", str(choices.threads)))
    argv = _finish(groups, choices, words)
    used, estimate = footprints(ctx, argv, estimate, estimate)
    footprint = Footprint(engine=ENGINES[_engine(ctx)].label, vram=used.vram, host=_host(used), disk=row.size_bytes,
                          results=(("ctx", ctx_len), ("ngl", ngl)), memory=used)
    kind = "reranker" if pooling == "rank" else "text embedder"
    comment = [f"{_engine(ctx)} · {meta.arch or '?'} · {format_g(footprint.disk_gb)} GiB · ctx {ctx_len}, ngl {ngl} "
               f"({kind}, pooling {pooling or 'model default'})"]
    if used.vram > sizing.budget:
        comment.append(f"est VRAM {gib_text(used.vram)} is above the {format_g(ctx.budget_gb)} GiB budget")
    metadata = [*_metadata(ctx, sizing, footprint), ("pooling", pooling or "default")]
    caps = Capabilities(inputs=("text",), reranker=True if pooling == "rank" else None, context=ctx_len)
    entry = Entry(id=row.id, argv=argv, comment=tuple(comment), metadata=tuple(metadata),
                  capabilities=caps, ttl=ctx.ttl, unlisted=bool(ov and ov.unlisted), footprint=footprint,
                  estimate=estimate, charges=tuple(fixed_charges(runtime)))
    notes = (f"ctx {ctx_len}: " + ("pinned" if choices.knobs.ctx else
                                  f"trained {meta.context_length or 'unknown'}, capped at {EMBED_CTX_CAP}"),
             "batch = ubatch = ctx: a non-causal embedder must see a whole input in one ubatch",
             *(memory.rules if known_kv else (f"KV cost unknown, not charged; {memory.rules[-1]}",)),
             fit_note(ctx, choices),
             f"estimate: VRAM {gib_text(vram)} = weights {gib_figure(size)} + KV + state + compute"
             f" + runtime {gib_figure(runtime)} + base {gib_figure(BASE_OVERHEAD)}")
    return Plan(model_id=row.id, entries=(entry,), notes=notes)

