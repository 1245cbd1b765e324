"""What pairs models of a library with each other once their headers are read: projectors with
the models of their folder, LoRA adapters with their bases, and speculative-decoding drafts with
the models they speed up.

- A projector feeds a text model exactly as wide as its output (llama-server refuses another:
  tools/mtmd/mtmd.cpp, "mismatch between text model (n_embd = …) and mmproj"), so of the
  projectors of a model's folder only those of its width, or of a width not known, are its
  candidates; of these, the one whose name shares the longest start with the model's (a folder
  of several vision models, `mmproj-gemma-3-4b-it-F16.gguf` beside `gemma-3-4b-it-Q4_K_M.gguf`),
  then the last in name order. A projector whose type llama.cpp converts only with text models
  of certain architectures (`projector_archs`: a qwen2.5vl merger's is qwen2vl) feeds only a
  model of one of them, never a text model of another that happens to be as wide.

- A LoRA GGUF goes to the models llama.cpp would accept it on (src/llama-adapter.cpp refuses
  another architecture, and tensors of another shape): the same architecture, its `lora_a`
  input as wide as the model's embedding, no block beyond the model's. Among those, the
  models its header names as base (`general.base_model.*`); an adapter that names none goes
  to the models of its own folder. It becomes a profile of each base (`<base>+<adapter>`).
- A PEFT folder goes to the Hugging Face folder its `base_model_name_or_path` names (vLLM
  serves it with `--lora-modules` on that entry).
- A draft shares the model's vocabulary exactly: the same tokenizer model and pre-tokenizer,
  token count and token list (its digest; never the width alone), is at most a quarter of
  its size in parameters, is one file, and sits in the same folder, family or a related one
  (a word in common: Llama 3.2 for Llama 3.1). Never another. The model it speeds up may be
  a split set.

Everything not paired is listed with the reason.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence

import attrs
import xxhash
from attrs import frozen

from autogen.discovery.ledger import Ledger, id_changes
from autogen.discovery.naming import clean_id, quant_from_name, repo_name
from autogen.discovery.projector_archs import serves, text_archs
from autogen.discovery.rows import Adapter, ModelRow, SpecDraft
from autogen.discovery.tree import AdapterFile, Discovery, Ignored
from autogen.engines import Engine, engine_row
from autogen.ids import path_tag, settle_names, slugify
from autogen.metadata.model_meta import ModelMeta
from autogen.vision_tower import VisionTower


@attrs.frozen
class FolderProjector:
    """A projector file of a folder, in name order among its folder's.

    Example: FolderProjector(path="/m/g/mmproj-F16.gguf", size_bytes=851_000_000, width=2560).
    """

    path: str
    size_bytes: int
    #: `ModelMeta.projector_width`: the text model width it feeds; 0 = not known.
    width: int
    #: `ModelMeta.vision_tower`, handed on to the model row for sizing; None = not known.
    tower: VisionTower | None = None


def _projector_key(path: str) -> str:
    """A projector's name without the word mmproj, as a name key: what it says of its model."""
    return name_key(re.sub(r"(?i)mmproj", "", os.path.basename(path).rpartition(".")[0]))


def _shared_start(a: str, b: str) -> int:
    """How many characters `a` and `b` share from their start."""
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


def _feeds(projector: FolderProjector, width: int, arch: str) -> bool:
    """Whether `projector` may feed a model `width` wide of architecture `arch` (0, "": not known)."""
    return ((not projector.width or not width or projector.width == width)
            and (projector.tower is None or serves(projector.tower.projector_type, arch)))


def choose_projector(model_path: str, width: int, projectors: Sequence[FolderProjector],
                     arch: str = "") -> FolderProjector | None:
    """The projector of the model at `model_path` (`width`: its embedding length, 0 when not
    known; `arch`: its architecture, "" when not known) among the projectors of its folder, in
    name order (module docstring)."""
    key = name_key(os.path.basename(model_path).rpartition(".")[0])
    fitting = [(i, p) for i, p in enumerate(projectors) if _feeds(p, width, arch)]
    if not fitting:
        return None
    return max(fitting, key=lambda ip: (_shared_start(key, _projector_key(ip[1].path)), ip[0]))[1]


def unpaired_projector(projector: FolderProjector, models: Sequence[tuple[int, str]]) -> str:
    """Why a projector of a folder serves none of its models (`models`: their (width, arch))."""
    if not models:
        return "with no model beside it, not served"
    widths = [w for w, _ in models]
    if projector.width and all(w and w != projector.width for w in widths):
        return (f"for a text model {projector.width} wide (its projection_dim), and no model beside it has that "
                f"embedding length ({', '.join(map(str, sorted(set(widths))))}), not served")
    if not any(_feeds(projector, w, a) for w, a in models):
        kind = projector.tower.projector_type  # only a typed projector refuses a width-fitting model
        archs = " or ".join(sorted(text_archs(kind)))
        beside = ", ".join(sorted({a for _, a in models if a}))
        return (f"of a {archs} model ({kind.replace('_', ' ')}); no model of that architecture beside it "
                f"({beside}), not served")
    return "not paired: each model beside it takes another projector (the name closest to its own, else the last " \
           "in name order)"


#: A draft has at most this share of its target's parameters (block_count × embedding²).
DRAFT_SHARE = 4
#: A size part of a name: `8b`, `0.6b`, `135m` (the family is what comes before it).
SIZE_PART = re.compile(r"(?i)^\d+(\.\d+)?[bm]$")


def name_key(text: str) -> str:
    """Letters and digits only, lower case: `Meta Llama 3.1 8B Instruct` → `metallama318binstruct`."""
    return re.sub(r"[^a-z0-9]", "", text.lower())


def family(model_id: str) -> str:
    """The parts of an id before its size part: `qwen2.5-coder-32b-instruct-q4_k_m` →
    `qwen2.5-coder`; "" when the id has no size part."""
    parts = model_id.split("-")
    for i, part in enumerate(parts):
        if i and SIZE_PART.match(part):
            return "-".join(parts[:i])
    return ""


def lineage(fam: str) -> frozenset[str]:
    """The words of a family, with a publisher's `Org_` prefix gone: `qwen_qwen3` → {qwen},
    `meta-llama-3.1` → {meta, llama}. Two families that share one are related: Llama 3.2 1B
    drafts for Llama 3.1 8B, bartowski's `Qwen_Qwen3-0.6B` for Qwen's own `Qwen3-4B`."""
    return frozenset(re.findall(r"[a-z]{3,}", fam.rpartition("_")[2]))


def adapter_name(path: str) -> str:
    """An adapter's name for clients: its file or folder name, without extension and quant."""
    stem = os.path.basename(path.rstrip("/"))
    stem, dot, ext = stem.rpartition(".")
    stem = stem if dot and ext.lower() == "gguf" else os.path.basename(path.rstrip("/"))
    quant = quant_from_name(stem + ".gguf")
    if quant and stem.lower().endswith(quant.lower()):
        stem = stem[: -len(quant)].rstrip("-_.")
    return clean_id(stem)


def _model_keys(row: ModelRow, meta: ModelMeta) -> list[str]:
    texts = [row.repo, repo_name(row.repo), os.path.basename(row.path), meta.name, meta.full_name]
    return [k for k in map(name_key, texts) if k]


def _base_keys(names: Sequence[str]) -> list[str]:
    """Keys of the base models an adapter names: each name, and a repo's own name."""
    keys = []
    for name in names:
        keys.append(name_key(name))
        tail = name.rstrip("/").rsplit("/", 1)[-1]
        keys.append(name_key(tail))
    return [k for k in dict.fromkeys(keys) if len(k) >= 3]


def _fits_lora(meta: ModelMeta, lora: ModelMeta) -> bool:
    """What llama.cpp checks when it loads a LoRA onto a model: architecture and shapes."""
    return (meta.arch == lora.arch and meta.pooling_type == 0
            and (not lora.lora_width or lora.lora_width == meta.embedding_length)
            and lora.lora_layers <= meta.block_count)


def _lora_bases(adapter: AdapterFile, lora: ModelMeta, models: list[tuple[ModelRow, ModelMeta]],
                engine_of: Callable[[ModelRow], str | None]) -> tuple[list[ModelRow], str]:
    """(bases, why not when none) of a LoRA GGUF: only llama-server loads one (`--lora`)."""
    shaped = [(row, meta) for row, meta in models if row.format == "gguf" and _fits_lora(meta, lora)]
    keys = _base_keys(lora.base_models)
    shape = f"arch {lora.arch or '?'}" + (f", width {lora.lora_width}" if lora.lora_width else "")
    if keys:
        found = [row for row, meta in shaped if any(k in m for k in keys for m in _model_keys(row, meta))]
        missing = (f"its base {lora.base_models[0]} ({shape}) is not in the library"
                   + (f"; {len(shaped)} other models have its shape" if shaped else ""))
    else:
        folder = os.path.dirname(adapter.path)
        found = [row for row, _ in shaped if os.path.dirname(row.path) == folder]
        missing = f"it names no base model, and no model of its shape ({shape}) sits beside it"
    if not found:
        return [], missing
    served = [row for row in found if _loads_gguf_lora(engine_of(row))]
    if served:
        return served, ""
    others = ", ".join(f"{row.id} ({engine_of(row) or 'not served'})" for row in found)
    return [], (f"its base {others} is not served by llama-server, the one engine that loads a GGUF LoRA "
                "(vLLM takes PEFT adapter folders)")


def _loads_gguf_lora(engine: str | None) -> bool:
    return engine is not None and "gguf" in engine_row(engine).lora_formats


def _peft_bases(adapter: AdapterFile, rows: Sequence[ModelRow]) -> tuple[list[ModelRow], str]:
    """(bases, why not when none) of a PEFT folder: the HF folders its base names."""
    base = adapter.base_name
    if not base:
        return [], "adapter_config.json names no base_model_name_or_path"
    owner, _, repo = base.rstrip("/").rpartition("/")
    want = name_key(repo)
    found = [r for r in rows if r.format == "hf" and not r.foreign_format and name_key(r.repo) == want]
    owned = [r for r in found if name_key(os.path.basename(owner)) == name_key(r.publisher)]
    if owned or found:
        return (owned or found)[:1], ""
    return [], f"its base {base} is not in the library as a Hugging Face folder (vLLM serves it on that base)"


@attrs.frozen
class _Claim:
    """An adapter that found its bases, before it is named: what it is, its record, its bases, and
    where its name must be unique (each base's profiles for a GGUF LoRA, every module alias for
    PEFT, which llama-swap routes library-wide)."""

    what: str
    record: Adapter
    bases: tuple[ModelRow, ...]
    scopes: tuple[str, ...]
    candidates: tuple[str, ...]


def name_candidates(path: str, name: str, base_id: str = "") -> tuple[str, ...]:
    """The names an adapter may take, each made from its own path: its name, then (a PEFT
    module) qualified by its base as a GGUF LoRA's profile is, then with its folder's name, then
    with a hash of its path; never a counter that depends on which other adapters exist."""
    folder = slugify(os.path.basename(os.path.dirname(path.rstrip("/"))))
    out = [name, *([f"{base_id}+{name}"] if base_id else []), *([f"{name}-{folder}"] if folder else [])]
    out.append(f"{name}-{path_tag(path)}")
    return tuple(dict.fromkeys(out))


def _assign_names(claims: Sequence[_Claim], previous: Mapping[str, str]) -> list[str]:
    """Each claim's name, unique in its scopes: the name it had on the previous run (`previous`:
    path → name) while still one of its candidates, else its first free candidate, in path
    order. So an adapter that arrives never takes or moves another's name."""
    order = sorted(range(len(claims)), key=lambda i: claims[i].record.path)
    names = settle_names([claims[i].candidates for i in order], [previous.get(claims[i].record.path) for i in order],
                         [claims[i].scopes for i in order])
    by_claim = dict(zip(order, names, strict=True))
    return [by_claim[i] for i in range(len(claims))]


def pair_adapters(discovery: Discovery, metas: Mapping[str, ModelMeta | None],
                  adapter_meta: Callable[[str], ModelMeta | None],
                  engine_of: Callable[[ModelRow], str | None] = lambda row: Engine.LLAMA,
                  previous: Ledger | None = None) -> Discovery:
    """Each adapter on its bases (`ModelRow.loras`), or listed with why not. `engine_of`: the
    engine that serves a model (None: none does), for a GGUF LoRA, which only llama-server loads.
    `previous`: the last run's id ledger, where each adapter's name is kept as a model's id is
    (`_assign_names`); the ledger handed on records the names given, and which ids changed."""
    rows = {row.id: row for row in discovery.models}
    models = [(row, meta) for row in discovery.models if (meta := metas.get(row.id)) is not None
              and row.id not in discovery.row_errors]
    ignored = list(discovery.ignored)
    claims: list[_Claim] = []
    keys: dict[str, tuple[int, int, int]] = {}
    for adapter in discovery.adapters:
        name = adapter_name(adapter.path)
        if adapter.kind == "peft":
            bases, why = _peft_bases(adapter, [r for r, _ in models])
            what = f"PEFT LoRA adapter (rank {adapter.rank or '?'})"
            record = Adapter(path=adapter.path, name=name, kind="peft", size_bytes=adapter.size_bytes,
                             rank=adapter.rank)
        else:
            lora = adapter_meta(adapter.path)
            if lora is None:
                ignored.append(Ignored(adapter.path, "LoRA adapter whose header cannot be read, not served"))
                continue
            bases, why = _lora_bases(adapter, lora, models, engine_of)
            what = f"LoRA adapter (rank {lora.lora_rank or '?'}, alpha {lora.lora_alpha:g})"
            record = Adapter(path=adapter.path, name=name, kind="gguf", size_bytes=adapter.size_bytes,
                             rank=lora.lora_rank, alpha=lora.lora_alpha)
        if not bases:
            ignored.append(Ignored(adapter.path, f"{what}: {why}; llama-server and vLLM load an adapter only with "
                                                 "its base model"))
            continue
        peft = record.kind == "peft"
        scopes = ("lora modules",) if peft else tuple(f"profiles of {b.id}" for b in bases)
        claims.append(_Claim(what, record, tuple(bases), scopes,
                             name_candidates(adapter.path, name, bases[0].id if peft else "")))
        keys[adapter.path] = adapter.key
    names = _assign_names(claims, previous.ids if previous is not None else {})
    for claim, name in zip(claims, names, strict=True):
        record = attrs.evolve(claim.record, name=name)
        for base in claim.bases:
            rows[base.id] = _with_adapter(rows[base.id], record)
        if record.kind == "peft":
            base = claim.bases[0]
            said = f"served as LoRA module {name} of {base.id}"
        else:
            said = "offered as " + ", ".join(f"{b.id}+{name}" for b in claim.bases)
        ignored.append(Ignored(record.path, f"{claim.what} for {', '.join(b.id for b in claim.bases)}: {said}",
                               attached=True))
    ledger = Ledger({**discovery.ledger.entries,
                     **{c.record.path: (name, *keys[c.record.path]) for c, name in zip(claims, names, strict=True)}})
    changes = tuple(id_changes(previous, ledger)) if previous is not None and previous.entries \
        else discovery.id_changes
    return attrs.evolve(discovery, models=tuple(rows[r.id] for r in discovery.models), ignored=tuple(ignored),
                        ledger=ledger, id_changes=changes)


def _with_adapter(row: ModelRow, adapter: Adapter) -> ModelRow:
    return attrs.evolve(row, loras=(*row.loras, adapter), inputs=(*row.inputs, *_adapter_inputs(adapter)))


def _adapter_inputs(adapter: Adapter) -> tuple[str, ...]:
    """The files of an adapter its base's fragment depends on."""
    if adapter.kind == "gguf":
        return (adapter.path,)
    return tuple(os.path.join(adapter.path, n) for n in ("adapter_config.json", "adapter_model.safetensors")
                 if os.path.exists(os.path.join(adapter.path, n)))


# -- drafts --------------------------------------------------------------------------------------

def same_vocabulary(a: ModelMeta, b: ModelMeta) -> bool:
    """The same tokenizer: model, pre-tokenizer, token count and token list (the digest of its
    bytes), and the same added BOS and EOS, which llama-server checks too before it drafts.
    Files without a token list never match."""
    return bool(a.vocab_digest) and _vocabulary_key(a) == _vocabulary_key(b)


def vocabulary_text(meta: ModelMeta) -> str:
    """"gpt2/qwen2, 151936 tokens", then what the header says of BOS and EOS: "adds BOS 128000",
    "adds no EOS"."""
    tokenizer = "/".join(p for p in (meta.tokenizer_model, meta.tokenizer_pre) if p) or "unnamed tokenizer"
    parts = [tokenizer, f"{meta.vocab_size} tokens"]
    for name, (added, token) in zip(("BOS", "EOS"), (meta.special_tokens[:2], meta.special_tokens[2:]),
                                    strict=False) if meta.special_tokens else ():
        if added is not None:
            parts.append(f"adds {name} {token}" if added else f"adds no {name}")
    return ", ".join(parts)


@frozen
class DraftFacts:
    """What draft pairing reads of a model's header (`discovery.pairing.pair_drafts`), kept with
    its folder's record so that pairing a library needs no model's metadata.

    Example: DraftFacts(vocabulary="3f1c…", params=4_294_967_296,
    text="gpt2/qwen2, 151936 tokens, adds no BOS").
    """

    #: Digest of the tokenizer (model, pre-tokenizer, token count and list, BOS and EOS);
    #: "" = it cannot draft or be drafted for (no token list, an embedding model, an adapter).
    vocabulary: str
    #: Layers × width²: what "a quarter of its parameters" compares.
    params: int
    #: The vocabulary as a reason says it (`pairing.vocabulary_text`).
    text: str


def draft_facts(meta: ModelMeta) -> DraftFacts:
    """What draft pairing reads of a model's metadata."""
    vocabulary = xxhash.xxh3_64_hexdigest(repr(_vocabulary_key(meta)).encode()) if _can_draft(meta) else ""
    return DraftFacts(vocabulary=vocabulary, params=_params(meta), text=vocabulary_text(meta))


def _params(meta: ModelMeta) -> int:
    return meta.block_count * meta.embedding_length ** 2


def _can_draft(meta: ModelMeta) -> bool:
    return bool(meta.vocab_digest) and meta.pooling_type == 0 and meta.block_count > 0 and not meta.adapter_type


@frozen
class _Draftable:
    """A single-file GGUF model that could draft for the others of its vocabulary."""

    row: ModelRow
    params: int
    folder: str
    family: str

    @property
    def order(self) -> tuple[int, int, str]:
        """Within a tier: the fewest parameters, then the largest file (the better quant), then the path."""
        return self.params, -self.row.size_bytes, self.row.path


class _Drafts:
    """The drafts of one vocabulary, indexed by folder, family and lineage word, each list in
    `_Draftable.order`: a target's draft is the first fitting one of its best tier, so a
    vocabulary shared by hundreds of models costs a few lookups per model, not a pass over all."""

    def __init__(self, members: Sequence[tuple[ModelRow, DraftFacts]]):
        self.by_folder: dict[str, list[_Draftable]] = {}
        self.by_family: dict[str, list[_Draftable]] = {}
        self.by_word: dict[str, list[_Draftable]] = {}
        found = sorted((_Draftable(row, facts.params, os.path.dirname(row.path), family(row.id))
                        for row, facts in members if row.format == "gguf" and not row.shards),
                       key=lambda d: d.order)
        for d in found:
            self.by_folder.setdefault(d.folder, []).append(d)
            if d.family:
                self.by_family.setdefault(d.family, []).append(d)
            for word in lineage(d.family):
                self.by_word.setdefault(word, []).append(d)

    def choose(self, target: ModelRow, facts: DraftFacts) -> SpecDraft | None:
        """The draft of `target`: a quarter of its parameters at most, one file (a split set is
        never a draft), in its folder, its family or a related one (`lineage`); the same folder
        first, then the same family, then the fewest parameters, the largest file, the path."""
        fam = family(target.id)
        tiers = ((self.by_folder.get(os.path.dirname(target.path), ()),),
                 (self.by_family.get(fam, ()),) if fam else (),
                 tuple(self.by_word.get(word, ()) for word in sorted(lineage(fam))))
        for rank, lists in enumerate(tiers):
            fitting = [d for d in (_first_fitting(found, target, facts.params) for found in lists) if d is not None]
            if fitting:
                row = min(fitting, key=lambda d: d.order).row
                where = ("same folder", f"family {fam}", f"related family {family(row.id)}")[rank]
                return SpecDraft(path=row.path, model_id=row.id, size_bytes=row.size_bytes,
                                 why=f"same vocabulary ({facts.text}, identical token list), {where}")
        return None


def _first_fitting(found: Sequence[_Draftable], target: ModelRow, most: int) -> _Draftable | None:
    """The first of `found` (in order, fewest parameters first) small enough to draft for a model
    of `most` parameters, other than the target itself."""
    for d in found:
        if d.params * DRAFT_SHARE > most:
            return None
        if d.row.path != target.path:
            return d
    return None


def _vocabulary_key(meta: ModelMeta) -> tuple:
    return meta.vocab_digest, meta.vocab_size, meta.tokenizer_model, meta.tokenizer_pre, meta.special_tokens


def pair_drafts(discovery: Discovery, facts: Mapping[str, DraftFacts]) -> Discovery:
    """Each GGUF model's draft (`ModelRow.spec_draft`); its file becomes an input of the model.
    `facts`: row path → what its header says (`draft_facts`). Models are grouped by
    vocabulary, and each group indexed once (`_Drafts`)."""
    members: dict[str, list[tuple[ModelRow, DraftFacts]]] = {}
    for row in discovery.models:
        found = facts.get(row.path)
        if found is not None and found.vocabulary and row.id not in discovery.row_errors and not row.shards:
            members.setdefault(found.vocabulary, []).append((row, found))  # the drafts a model may take
    groups = {key: _Drafts(found) for key, found in members.items()}
    out = []
    for row in discovery.models:
        found = facts.get(row.path)
        group = groups.get(found.vocabulary) if found is not None and found.vocabulary else None
        draft = group.choose(row, found) if group is not None and row.id not in discovery.row_errors else None
        if draft is not None:
            row = attrs.evolve(row, spec_draft=draft, inputs=(*row.inputs, draft.path))
        out.append(row)
    return attrs.evolve(discovery, models=tuple(out))
