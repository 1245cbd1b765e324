"""Backend registry and resolution: which installed engine serves a model of a given class.

The registry is `Settings.backends` (already replaced by the `backends_file` rows when that
file has any). Each row's kind maps to an engine and to the model classes it serves (`KINDS`).
Resolution order (docs/maintainers/backends.md#resolution-order, docs/maintainers/backends.md#preferring):

1. the override's `backend:` pin, by id, whatever the row's class — but a row whose kind
   serves other classes only is refused (`ModelError`); a stale id falls through;
2. (`resolve_backend_preferring` only) the ★ row, else the first row, of the preferred engine;
3. the class's ★ row, else its first row;
4. no row: the legacy exe of the class (`legacy_exes`).

What each emitter calls (docs/maintainers/backends.md#what-each-emitter-resolves):

    chat gguf   resolve_backend(s, ov, LLM)                 engine vllm → vllm emitter
    HF folder   resolve_backend_preferring(s, ov, LLM, "vllm")  not vllm → skip the model
    embedder    resolve_embedder(s, ov)                     never vllm
    image       resolve_backend(s, ov, IMAGE)
    segment     resolve_backend(s, ov, SEGMENT)
    TTS         resolve_backend_preferring(without_audiocpp(s), ov, TTS, "ttscpp" | "tts")
    ASR         resolve_backend(without_audiocpp(s), ov, ASR)
    audio.cpp   resolve_backend_preferring(only_audiocpp(s), ov, TTS | ASR, "audiocpp")
                                                            row None → no audio.cpp installed
    upscale     registry-only: no emitter resolves it, so its rows never change the YAML
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

import attrs
from attrs import frozen

from autogen.errors import ModelError
from autogen.settings.schema import BACKEND_KINDS, BackendRow, Override, Settings


class ModelClass(StrEnum):
    """What a model is for; a registry row serves one or more classes."""

    LLM = "llm"
    IMAGE = "image"
    TTS = "tts"
    ASR = "asr"
    SEGMENT = "segment"
    UPSCALE = "upscale"
    THREE_D = "3d"


class Engine(StrEnum):
    """The one spelling emitters dispatch on; a kind outside `KINDS` is its own engine."""

    LLAMA = "llama"
    VLLM = "vllm"
    SD = "sd"
    #: qwentts.cpp tts-server.
    TTS = "tts"
    #: TTS.cpp (Kokoro, Parler, Dia, Orpheus).
    TTSCPP = "ttscpp"
    #: parakeet.cpp parakeet-server.
    ASR = "asr"
    AUDIOCPP = "audiocpp"
    SAM = "sam"
    UPSCALE = "upscale"
    TRELLIS = "trellis"


@frozen
class Kind:
    """What a kind spelling means: its engine and the classes it serves (first = label)."""

    engine: Engine
    classes: tuple[ModelClass, ...]


_LLAMA = Kind(Engine.LLAMA, (ModelClass.LLM,))
_VLLM = Kind(Engine.VLLM, (ModelClass.LLM,))
_SD = Kind(Engine.SD, (ModelClass.IMAGE,))
_TTS = Kind(Engine.TTS, (ModelClass.TTS,))
_TTSCPP = Kind(Engine.TTSCPP, (ModelClass.TTS,))
_ASR = Kind(Engine.ASR, (ModelClass.ASR,))
_AUDIOCPP = Kind(Engine.AUDIOCPP, (ModelClass.TTS, ModelClass.ASR))
_SAM = Kind(Engine.SAM, (ModelClass.SEGMENT,))
_UPSCALE = Kind(Engine.UPSCALE, (ModelClass.UPSCALE,))
_TRELLIS = Kind(Engine.TRELLIS, (ModelClass.THREE_D,))

_KIND_OF_ENGINE = {kind.engine: kind for kind in (_LLAMA, _VLLM, _SD, _TTS, _TTSCPP, _ASR, _AUDIOCPP, _SAM,
                                                   _UPSCALE, _TRELLIS)}

#: Every kind spelling, lower case (`settings.schema.BACKEND_KINDS`) → what it means. The kind
#: `custom` serves no class: it is never auto-picked, only reachable by a pin.
KINDS: dict[str, Kind] = {spelling: _KIND_OF_ENGINE[Engine(engine)]
                          for engine, spellings in BACKEND_KINDS.items() for spelling in spellings}


def _norm(kind: str) -> str:
    return kind.strip().lower()


def kind_classes(kind: str) -> tuple[ModelClass, ...]:
    """Classes a kind serves, matched case-insensitively after trimming; () for a custom kind."""
    known = KINDS.get(_norm(kind))
    return known.classes if known else ()


def engine_of(kind: str) -> str:
    """Canonical engine name of a kind ("llama.cpp" → "llama"); a custom kind, normalised."""
    known = KINDS.get(_norm(kind))
    return known.engine.value if known else _norm(kind)


def serves(kind: str, cls: str) -> bool:
    """Membership, never equality with the label class: audio.cpp serves tts AND asr."""
    return ModelClass(cls) in kind_classes(kind)


def class_taken(rows: Iterable[BackendRow], kind: str) -> bool:
    """True when some row already serves any class `kind` would serve.

    Decides whether a newly registered backend may take the ★ ("an install never steals ★"):
    an installed parakeet row makes audio.cpp's classes taken even with no tts row.
    """
    wanted = set(kind_classes(kind))
    return any(wanted.intersection(kind_classes(row.kind)) for row in rows)


def is_audiocpp(kind: str) -> bool:
    return engine_of(kind) == Engine.AUDIOCPP


def without_audiocpp(settings: Settings) -> Settings:
    """The registry minus audio.cpp rows, for the TTS and ASR engines' own resolution.

    Filtering BEFORE resolving lets an audio.cpp ★ degrade to the next installed engine of the
    class (e.g. a parakeet row) instead of all the way to the legacy exe
    (docs/maintainers/backends.md#audiocpp-filters).
    """
    return attrs.evolve(settings, backends=tuple(r for r in settings.backends if not is_audiocpp(r.kind)))


def only_audiocpp(settings: Settings) -> Settings:
    """Only audio.cpp rows: a pin at another engine's row is a no-op, a pin at a build wins."""
    return attrs.evolve(settings, backends=tuple(r for r in settings.backends if is_audiocpp(r.kind)))


# ---------------------------------------------------------------------------------------------
# legacy single-exe fallbacks


@frozen
class LegacyExes:
    """The exe each class runs when no registry row resolves (docs/maintainers/backends.md#legacy-exes).

    Example: LegacyExes(server_exe="/opt/llama/llama-server", sd_server_exe="/opt/llama/sd-server",
    ...). The last three have no settings key: always siblings of `server_exe`.
    """

    server_exe: str
    sd_server_exe: str
    tts_server_exe: str
    asr_server_exe: str
    sam_server_exe: str
    trellis_server_exe: str
    upscale_exe: str


#: Engine → the legacy slot its rows fill (first per kind, a ★ row wins). Other engines (vllm,
#: ttscpp, audiocpp, sam, …) feed no slot.
_SLOT_OF_ENGINE: dict[str, str] = {
    Engine.LLAMA: "server_exe",
    Engine.SD: "sd_server_exe",
    Engine.TTS: "tts_server_exe",
    Engine.ASR: "asr_server_exe",
}

#: Slot → the bare name used when neither the settings nor the registry fill it.
_DEFAULT_NAMES: dict[str, str] = {
    "sd_server_exe": "sd-server",
    "tts_server_exe": "tts-server",
    "asr_server_exe": "parakeet-server",
    "sam_server_exe": "sam3_server",
    "trellis_server_exe": "trellis2-server",
    "upscale_exe": "realesrgan-ncnn-vulkan",
}

#: Class → (legacy slot, engine that slot runs) (docs/maintainers/backends.md#legacy-exes).
_LEGACY_OF_CLASS: dict[ModelClass, tuple[str, Engine]] = {
    ModelClass.LLM: ("server_exe", Engine.LLAMA),
    ModelClass.IMAGE: ("sd_server_exe", Engine.SD),
    ModelClass.TTS: ("tts_server_exe", Engine.TTS),
    ModelClass.ASR: ("asr_server_exe", Engine.ASR),
    ModelClass.SEGMENT: ("sam_server_exe", Engine.SAM),
    ModelClass.THREE_D: ("trellis_server_exe", Engine.TRELLIS),
    ModelClass.UPSCALE: ("upscale_exe", Engine.UPSCALE),
}


def _derived_slots(rows: Iterable[BackendRow]) -> dict[str, str]:
    """`deriveBackendExes`: first row per slot; a later ★ replaces it unless a ★ filled it."""
    found: dict[str, str] = {}
    starred: set[str] = set()
    for row in rows:
        slot = _SLOT_OF_ENGINE.get(engine_of(row.kind))
        path = row.path.strip()
        if slot is None or not path or slot in starred:
            continue
        if slot not in found or row.default:
            found[slot] = path
            if row.default:
                starred.add(slot)
    return found


def sibling(server_exe: str, name: str) -> str:
    """`name` in `server_exe`'s folder (either separator), or bare when it has none."""
    cut = max(server_exe.rfind("/"), server_exe.rfind("\\"))
    return server_exe[: cut + 1] + name if cut >= 0 else name


def legacy_exes(settings: Settings) -> LegacyExes:
    """Settings value, else derived from the registry, else the (sibling) default."""
    derived = _derived_slots(settings.backends)
    explicit = {slot: (getattr(settings, slot) or "").strip() for slot in _SLOT_OF_ENGINE.values()}

    def pick(slot: str) -> str:
        return explicit.get(slot) or derived.get(slot, "")

    server = pick("server_exe") or "llama-server"
    exes = {slot: pick(slot) or sibling(server, name) for slot, name in _DEFAULT_NAMES.items()}
    return LegacyExes(server_exe=server, **exes)


# ---------------------------------------------------------------------------------------------
# resolution


@frozen
class Resolved:
    """Which engine serves one model, and why (`metadata.backend` / `metadata.engine`).

    Example: Resolved(engine="vllm", exe="/opt/vllm/bin/vllm", row=BackendRow(id="vllm-1", ...),
    why="★ of class llm").
    """

    #: Canonical engine name (`engine_of`), e.g. "llama", "vllm", or a custom kind as written.
    engine: str
    #: Trimmed path to run.
    exe: str
    #: The registry row; None = the class's legacy exe.
    row: BackendRow | None
    #: "pinned", "★ of class llm", "first of class llm", "★ vllm of class llm",
    #: "first vllm of class llm" or "legacy server_exe", after "pin 'x' not in registry; "
    #: when a stale pin fell back to automatic resolution.
    why: str

    @property
    def backend_id(self) -> str:
        return self.row.id if self.row is not None else "legacy"


def _from_row(row: BackendRow, why: str) -> Resolved:
    return Resolved(engine=engine_of(row.kind), exe=row.path.strip(), row=row, why=why)


def _star_or_first(rows: list[BackendRow], label: str) -> Resolved | None:
    for row in rows:
        if row.default:
            return _from_row(row, f"★ {label}")
    return _from_row(rows[0], f"first {label}") if rows else None


def _refuse_other_class(row: BackendRow, cls: ModelClass) -> None:
    classes = kind_classes(row.kind)
    if classes and cls not in classes:
        label = "/".join(classes)
        raise ModelError(f"backend '{row.id}' (kind {row.kind.strip()}, class {label}) cannot serve a {cls} model")


def _resolve(settings: Settings, override: Override | None, cls: str, prefer: str | None) -> Resolved:
    cls = ModelClass(cls)
    pin = (override.backend or "").strip() if override is not None else ""
    stale = ""
    if pin:
        for row in settings.backends:
            if row.id.strip() == pin:
                _refuse_other_class(row, cls)
                return _from_row(row, "pinned")
        stale = f"pin '{pin}' not in registry; "
    of_class = [row for row in settings.backends if cls in kind_classes(row.kind)]
    found = None
    if prefer:
        preferred = [row for row in of_class if engine_of(row.kind) == prefer]
        found = _star_or_first(preferred, f"{prefer} of class {cls}")
    found = found or _star_or_first(of_class, f"of class {cls}")
    if found is None:
        slot, engine = _LEGACY_OF_CLASS[cls]
        exe = getattr(legacy_exes(settings), slot)
        found = Resolved(engine=engine.value, exe=exe, row=None, why=f"legacy {slot}")
    return attrs.evolve(found, why=stale + found.why) if stale else found


def resolve_backend(settings: Settings, override: Override | None, cls: str) -> Resolved:
    """Pin → the class's ★ row → its first row → the legacy exe. Raises ModelError for a pin
    to a row of another class (a custom-kind row may be pinned by any class)."""
    return _resolve(settings, override, cls, None)


def resolve_backend_preferring(
    settings: Settings, override: Override | None, cls: str, prefer_kind: str
) -> Resolved:
    """Like `resolve_backend`, but rows of `prefer_kind`'s engine beat the class ★.

    For classes whose engines read different formats: an HF folder prefers vllm (llama.cpp
    cannot read safetensors), a TTS.cpp model prefers ttscpp. A pin still beats both.
    """
    return _resolve(settings, override, cls, engine_of(prefer_kind))


def resolve_embedder(settings: Settings, override: Override | None) -> Resolved:
    """LLM resolution that never lands on vLLM: there is no vLLM embedding emitter.

    A vllm pin (or a vllm ★) keeps the class's llama-side default: the ★ / first non-vllm llm
    row, else the legacy `server_exe` (docs/maintainers/backends.md#embedder-dead-end).
    """
    resolved = resolve_backend(settings, override, ModelClass.LLM)
    if resolved.engine != Engine.VLLM:
        return resolved
    no_vllm = attrs.evolve(
        settings, backends=tuple(r for r in settings.backends if engine_of(r.kind) != Engine.VLLM)
    )
    fallback = resolve_backend(no_vllm, None, ModelClass.LLM)
    return attrs.evolve(fallback, why=f"vllm '{resolved.backend_id}' cannot embed; {fallback.why}")


def llama_router_exe(settings: Settings) -> str:
    """The llama-server llama.cpp's router mode starts every model with (`target: llama-server`):
    the build a GGUF chat model gets without a pin, never vLLM."""
    return resolve_embedder(settings, None).exe


def resolution_key(resolved: Resolved) -> dict[str, str]:
    """What a model's fragment depends on from its backend (doit `config_changed` input).

    Leaves out `why` and the row's ★ flag, so a ★ switch re-emits only the auto models whose
    backend actually changed, never a model pinned to either row.
    """
    row = resolved.row
    return {
        "id": resolved.backend_id,
        "engine": resolved.engine,
        "exe": resolved.exe,
        "version": row.version.strip() if row is not None else "",
        "variant": row.variant.strip() if row is not None else "",
    }
