"""llama profiles: names, clashes (docs/maintainers/discovery.md#id-clashes) and inheritance of the extra
entries of one chat model, each sized on its own by `emit_llama`.

In this order: ctx tiers `<id>-64k` (`Override.ctx_profiles`, settings key `ctx_profiles`), named
profiles `<id>-<slug(name)>` (`Override.profiles`, key `profiles`, then `Settings.default_profiles`,
key `default_profiles`, not shadowed by a model's profile of the same name), `<id>-vision` (a
profile named `vision`: the projector on the GPU, `in: [text, image]`), one `<id>+<adapter>` per
LoRA adapter whose base the model is (`--lora`, sized with the adapter's bytes), and
`<id>-draft` (speculative decoding with a draft of the same vocabulary: `-md`, its layers and
context charged; the override's `draft` pins one or, `none`, turns it off). A tier is the model's
override with its context pinned. A named profile is the model's override with every field the
profile sets replaced: an unset field inherits (override, then settings), the budget too (the Go
original fell back to the global one); `unlisted` is the profile's own; its `extra_args` are
appended, and a flag there or a field it sets drops the inherited flag of the same meaning (the
field's `knobs`: `settings.fields`). Embedding models and vLLM rows get no profiles.

A profile whose id is already taken is a `# SKIPPED` line: by another model's id, by an earlier
profile of the same model, or by another model's profile — then the model whose id sorts first
keeps it (`profile_owners`, once per run). Ownership is decided from names alone, before
sizing: a profile the owner later refuses (a tier above its trained context, a sizing error)
is not handed to the other model.

Names and clashes (`profile_ids`, `profile_clashes`, `profile_owners`) need no metadata and do
not import the emitter: the task graph computes them for every model on every run.
"""

from __future__ import annotations

import os
from collections.abc import Container, Iterable, Mapping, Sequence
from enum import StrEnum
from functools import lru_cache

import attrs
from attrs import frozen

from autogen.discovery.pairing import same_vocabulary, vocabulary_text
from autogen.discovery.rows import Adapter, ModelRow
from autogen.emit.entry import Plan
from autogen.flags.llama import LlamaFlags
from autogen.ids import slugify
from autogen.resolve.context import EmitContext
from autogen.settings.schema import MMPROJ_MODES, Override, Profile, Settings
from autogen.sizing.llama_args import checked_path, extra_flags, split_equals, vocabulary

#: The profile name that makes the `-vision` profile (reserved, as in the Go original).
VISION = "vision"
#: The suffix of the speculative-decoding draft profile's id (`<id>-draft`).
DRAFT = "draft"
#: The override's `draft` that turns the draft profile off.
NO_DRAFT = "none"
#: Profile field → the flag meanings (`flags.llama.FLAG_KNOBS` values) it takes over from
#: inherited extra_args, as each field declares them.
PROFILE_KNOBS: dict[str, tuple[str, ...]] = {a.name: a.metadata["knobs"] for a in attrs.fields(Profile)
                                             if a.metadata.get("knobs")}


@lru_cache(maxsize=1024)  # the same few profile names, for every model on every run (doit list, keys)
def ctx_tag(tokens: int) -> str:
    """Tier suffix: 65536 → `64k`, 1048576 → `1m`, 100000 → `100000`."""
    if tokens % (1 << 20) == 0:
        return f"{tokens >> 20}m"
    if tokens % 1024 == 0:
        return f"{tokens >> 10}k"
    return str(tokens)


class ProfileOf(StrEnum):
    """What makes a profile entry."""

    TIER = "ctx tier"
    #: A named profile (`Override.profiles`, `Settings.default_profiles`).
    NAMED = "named"
    VISION = VISION
    LORA = "lora"
    DRAFT = DRAFT


@frozen
class ProfileEntry:
    """One extra entry of a chat model, before sizing."""

    id: str
    of: ProfileOf
    #: The tier's per-slot context (tiers only).
    ctx: int | None = None
    #: The named profile that makes it (named profiles and the vision profile).
    profile: Profile | None = None
    #: Why it is not emitted (a name clash, no projector), or None.
    refused: str | None = None
    #: The LoRA adapter it applies (LoRA profiles).
    adapter: Adapter | None = None

    @property
    def describe(self) -> str:
        if self.of == ProfileOf.VISION:
            return "vision profile (projector on the GPU)"
        if self.of == ProfileOf.LORA:
            return f"LoRA adapter {self.adapter.name}"
        if self.of == ProfileOf.DRAFT:
            return "speculative-decoding draft profile"
        return f"ctx tier {self.ctx}" if self.profile is None else f"profile {self.profile.name!r}"


def vision_projector(row: ModelRow, override: Override | None, profile: Profile) -> tuple[str, str] | None:
    """(projector file, placement) of the vision profile: the profile's `mmproj` (a keyword or a
    file), else the GPU; the file is the profile's, else the model's pinned one, else the one beside
    it. None when nothing would be attached (`none` on the profile or the model, no file)."""
    model_pin = override.mmproj if override is not None else None
    mode = profile.mmproj or ("none" if model_pin == "none" else "gpu")
    if mode == "none":
        return None
    if mode not in MMPROJ_MODES:
        return os.path.expanduser(mode), "gpu"
    path = os.path.expanduser(model_pin) if model_pin and model_pin not in MMPROJ_MODES else row.mmproj
    return (path, mode) if path else None


def draft_path(row: ModelRow, override: Override | None) -> tuple[str, str] | None:
    """(file, why) of the draft the model's `-draft` profile runs: the override's `draft` (a
    path; `none` turns drafts off), else the one discovery paired; None = no draft profile."""
    pin = (override.draft or "").strip() if override is not None else ""
    if pin == NO_DRAFT:
        return None
    if pin:
        return os.path.expanduser(pin), "pinned by the override's draft"
    return (row.spec_draft.path, row.spec_draft.why) if row.spec_draft is not None else None


def profiles(row: ModelRow, override: Override | None, settings: Settings) -> list[ProfileEntry]:
    """Candidate profiles in emit order; within the model the first of an id wins."""
    tiers = override.ctx_profiles if override is not None else ()
    own = override.profiles if override is not None else ()
    draft = draft_path(row, override)
    if not tiers and not own and not settings.default_profiles and not row.loras and draft is None:
        return []
    own_slugs = {slugify(p.name) for p in own}
    named = [(p, True) for p in own] + [(p, False) for p in settings.default_profiles
                                        if slugify(p.name) not in own_slugs]
    out = [ProfileEntry(id=f"{row.id}-{ctx_tag(t)}", of=ProfileOf.TIER, ctx=t) for t in dict.fromkeys(tiers)]
    vision: tuple[Profile, bool] | None = None
    for profile, is_own in named:
        slug = slugify(profile.name)
        if slug == VISION:
            vision = vision or (profile, is_own)
            continue
        refused = None if slug else f"profile name {profile.name!r} has no letter or digit to make an id of"
        out.append(ProfileEntry(id=f"{row.id}-{slug or profile.name}", of=ProfileOf.NAMED, profile=profile,
                                refused=refused))
    if vision is not None:
        profile, is_own = vision
        refused = None if vision_projector(row, override, profile) else "no projector to put on the GPU"
        if refused is None or is_own:  # a default `vision` profile passes text-only models silently
            out.append(ProfileEntry(id=f"{row.id}-{VISION}", of=ProfileOf.VISION, profile=profile, refused=refused))
    out += [ProfileEntry(id=f"{row.id}+{a.name}", of=ProfileOf.LORA, adapter=a) for a in row.loras if a.kind == "gguf"]
    if draft is not None:
        out.append(ProfileEntry(id=f"{row.id}-{DRAFT}", of=ProfileOf.DRAFT))
    first: dict[str, str] = {}
    for i, p in enumerate(out):
        if p.refused is None and p.id in first:
            out[i] = attrs.evolve(p, refused=f"{p.describe} clashes with {first[p.id]} of this model (same id)")
        first.setdefault(p.id, p.describe)
    return out


def profile_ids(row: ModelRow, override: Override | None, settings: Settings) -> list[str]:
    """Ids of the profiles a chat model on llama-server gets, before clashes with other models.
    Pure and cheap, no metadata: the caller checks that the model is a chat model on
    llama-server (embeddings and vLLM rows have none)."""
    return [p.id for p in profiles(row, override, settings) if p.refused is None]


def profile_owners(models: Iterable[tuple[ModelRow, Override | None]], settings: Settings) -> dict[str, str]:
    """Profile id → the model that keeps it, for ids several models' profiles make
    (`shared_profile_ids`)."""
    return shared_profile_ids({row.id: profile_ids(row, override, settings) for row, override in models})


def shared_profile_ids(made: Mapping[str, Sequence[str]]) -> dict[str, str]:
    """Profile id → the model that keeps it, for ids several models' profiles make (model `a` +
    profile `b-long` and model `a-b` + profile `long`): the model whose id sorts first. Ids of one
    model only are left out, so the map stays as small as the clashes. `made`: model id → the
    ids of its profiles."""
    owners: dict[str, str] = {}
    shared: set[str] = set()
    for model_id in sorted(made):
        for pid in made[model_id]:
            if owners.setdefault(pid, model_id) != model_id:
                shared.add(pid)
    return {pid: owners[pid] for pid in shared}


def profile_clashes(row: ModelRow, override: Override | None, settings: Settings, taken_ids: Container[str],
                    owners: Mapping[str, str] | None = None) -> dict[str, str]:
    """This model's profile ids that are taken → "" for another model's id (`taken_ids`: every
    model's id), else the model whose profile keeps it (`owners`, from `profile_owners`). What
    `EmitContext.taken_ids` / `taken_by` need, and all of the id set its up-to-date key depends on."""
    clashes: dict[str, str] = {}
    owners = owners or {}
    for pid in profile_ids(row, override, settings):
        if pid in taken_ids:
            clashes[pid] = ""
        elif owners.get(pid, row.id) != row.id:
            clashes[pid] = owners[pid]
    return clashes


def refused_before_sizing(ctx: EmitContext, profile: ProfileEntry) -> str | None:
    """A reason known before sizing: the id belongs to another model or another model's profile,
    or a tier above the trained window (llama-server would run it, past what the model was
    trained for)."""
    if profile.id in ctx.taken_ids:
        owner = dict(ctx.taken_by).get(profile.id)
        whose = f"a profile of model {owner!r}" if owner else "another model's id"
        return f"{profile.describe} clashes with {whose}"
    trained = ctx.meta.context_length if ctx.meta is not None else 0
    if profile.ctx and trained and profile.ctx > trained:
        return f"ctx tier {profile.ctx} is above the trained context {trained}"
    if profile.of == ProfileOf.DRAFT:
        return _draft_refused(ctx)
    return None


def _draft_refused(ctx: EmitContext) -> str | None:
    """A draft whose header is unknown, or whose vocabulary is not the model's: llama-server
    would refuse it ("draft model vocab type must match target model"), or draft useless tokens."""
    draft = ctx.draft
    if draft is None or draft.meta is None:
        where = draft.path if draft is not None else "the draft"
        return f"the header of {where} cannot be read"
    if ctx.meta is None or not same_vocabulary(ctx.meta, draft.meta):
        theirs = vocabulary_text(draft.meta)
        ours = vocabulary_text(ctx.meta) if ctx.meta is not None else "unknown"
        return (f"draft {os.path.basename(draft.path)} has another vocabulary ({theirs}) than the model ({ours}): "
                "speculative decoding needs the very same token list")
    return None


def _drop_knobs(args: Sequence[str], knobs: set[str], words: LlamaFlags) -> tuple[str, ...]:
    """`args` (split at `=` already) without the flags of these meanings and their values, in
    the row's vocabulary."""
    out, skip = [], False
    for arg in args:
        if skip:
            skip = False
        elif words.flag_knobs.get(arg) in knobs:
            skip = arg not in words.switches
        else:
            out.append(arg)
    return tuple(out)


def lora_value(path: str) -> str:
    """`--lora`'s value for one adapter file. llama-server splits the value at commas unless a
    field is quoted (common/arg.cpp `parse_csv_row`), so a file name with a comma, or starting with
    a double quote, is written as one quoted field (`"/m/style,v2.gguf"`)."""
    if "," in path or path.startswith('"'):
        return '"' + path.replace('"', '""') + '"'
    return path


def profile_context(ctx: EmitContext, profile: ProfileEntry) -> EmitContext:
    """The model's context with the profile's effective override (module docstring)."""
    ov = ctx.override or Override(match="*")
    words = vocabulary(ctx)
    inherited = split_equals(ov.extra_args, words)
    if profile.of == ProfileOf.LORA:
        lora = attrs.evolve(ov, extra_args=(*inherited, "--lora", lora_value(profile.adapter.path)))
        row = attrs.evolve(ctx.row, size_bytes=ctx.row.size_bytes + profile.adapter.size_bytes)
        return attrs.evolve(ctx, row=row, override=lora)
    if profile.of == ProfileOf.DRAFT:
        return ctx
    if profile.profile is None:
        tier = attrs.evolve(ov, ctx=profile.ctx, extra_args=_drop_knobs(inherited, set(PROFILE_KNOBS["ctx"]), words))
        return attrs.evolve(ctx, override=tier)
    v, row = profile.profile, ctx.row
    sets = {name: getattr(v, name) for name in PROFILE_KNOBS if getattr(v, name) is not None}
    if profile.of == ProfileOf.VISION:  # the file becomes the row's projector, so a keyword can place it
        found = vision_projector(row, ctx.override, v)
        assert found is not None, "refused in profiles()"
        path, sets["mmproj"] = found
        if path != row.mmproj:
            row = attrs.evolve(row, mmproj=checked_path(path), mmproj_bytes=0, mmproj_tower=None)
    own = split_equals(v.extra_args, words)
    dropped = {knob for name in sets for knob in PROFILE_KNOBS[name]} | set(extra_flags(own, words))
    effective = attrs.evolve(ov, **sets, extra_args=_drop_knobs(inherited, dropped, words) + own, unlisted=v.unlisted,
                             vram_budget_gb=v.vram_budget_gb or ov.vram_budget_gb)
    return attrs.evolve(ctx, row=row, override=effective, budget_gb=v.vram_budget_gb or ctx.budget_gb)


def note_profiles_ignored(plan: Plan, override: Override | None, why: str) -> Plan:
    """A comment line on the entry when its override asks for profiles it cannot have (vLLM
    rows, embedding models)."""
    if override is None or not (override.ctx_profiles or override.profiles) or not plan.entries:
        return plan
    first = plan.entries[0]
    line = f"ctx_profiles and profiles of the override are ignored: {why}"
    return attrs.evolve(plan, entries=(attrs.evolve(first, comment=(*first.comment, line)), *plan.entries[1:]))
