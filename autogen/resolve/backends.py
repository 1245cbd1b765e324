"""Backend registry and resolution: which installed engine serves a model of a given role.

The registry is `Settings.backends` (already replaced by the `backends_file` rows when that
file has any). Each row's kind names an engine, and the engine's row in `engines.ENGINES` says
which roles it serves. Resolution order (docs/maintainers/backends.md#resolution-order,
docs/maintainers/backends.md#preferring):

1. the override's `backend:` pin, by id, whatever the row's role — but a row whose kind
   serves other roles only is refused (`ModelError`); a stale id falls through;
2. with `prefer`: the ★ row, else the first row, of the preferred engine;
3. the role's ★ row, else its first row;
4. no row: the legacy exe of the role (`legacy_exes`).

An exclusive engine's rows (audio.cpp: `EngineRow.exclusive`) are seen only by the models that
prefer it, and those models see only them (docs/maintainers/backends.md#audiocpp-filters). What each model
resolves (`resolve.job.resolve_for`, docs/maintainers/backends.md#what-each-emitter-resolves):

    chat gguf   resolve_backend(s, ov, llm)                    engine vllm → vllm emitter
    HF folder   resolve_backend(s, ov, llm, prefer="vllm")     not vllm → skip the model
    embedder    resolve_embedder(s, ov)                        never an engine that cannot embed
    image       resolve_backend(s, ov, image)
    segment     resolve_backend(s, ov, segment)
    TTS         resolve_backend(s, ov, tts, prefer="ttscpp" | "tts")
    ASR         resolve_backend(s, ov, asr)
    audio.cpp   resolve_backend(s, ov, tts | asr, prefer="audiocpp")   row None → none installed
    upscale     registry-only: no emitter resolves it, so its rows never change the YAML
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs
from attrs import frozen

from autogen.engines import CUSTOM, ENGINES, SERVED_AS, Engine, Role, engine_of, engine_row, kind_roles, role_label
from autogen.errors import ModelError
from autogen.settings.schema import BackendRow, Override, Settings


def serves(kind: str, role: str) -> bool:
    """Membership, never equality with the first role: audio.cpp serves tts AND asr."""
    return Role(role) in kind_roles(kind)


def role_taken(rows: Iterable[BackendRow], kind: str) -> bool:
    """True when some row already serves any role `kind` would serve.

    Decides whether a newly registered backend may take the ★ ("an install never steals ★"):
    an installed parakeet row makes audio.cpp's roles taken even with no tts row.
    """
    wanted = set(kind_roles(kind))
    return any(wanted.intersection(kind_roles(row.kind)) for row in rows)


def candidates(rows: tuple[BackendRow, ...], role: Role, prefer: str | None) -> tuple[BackendRow, ...]:
    """The rows a model of `role` may resolve to: an exclusive engine's rows only, when it
    prefers that engine; else every row but those of exclusive engines serving `role`.

    Filtering BEFORE resolving lets an audio.cpp ★ degrade to the next installed engine of the
    role (e.g. a parakeet row) instead of all the way to the legacy exe, and makes a pin at
    another engine's row a no-op for an audio.cpp model (docs/maintainers/backends.md#audiocpp-filters).
    """
    if prefer and engine_row(prefer).exclusive:
        return tuple(r for r in rows if engine_of(r.kind) == prefer)
    return tuple(r for r in rows if not (engine_row(engine_of(r.kind)).exclusive and role in kind_roles(r.kind)))


# ---------------------------------------------------------------------------------------------
# legacy single-exe fallbacks

#: Legacy slot → the engine whose exe it holds (docs/maintainers/backends.md#legacy-exes).
_SLOTS: dict[str, Engine] = {row.legacy_slot: engine for engine, row in ENGINES.items() if row.legacy_slot}
#: The slots a settings key names; the registry's rows of their engine fill them too (the others
#: are always siblings of `server_exe`).
_KEYED_SLOTS = tuple(slot for slot in _SLOTS if slot in attrs.fields_dict(Settings))
#: Role → the engine whose legacy slot serves it when no row does.
_LEGACY_OF_ROLE: dict[Role, Engine] = {role: engine for engine, row in ENGINES.items() if row.legacy_slot
                                       for role in row.roles}


def _derived_slots(rows: Iterable[BackendRow]) -> dict[str, str]:
    """`deriveBackendExes`: first row per slot; a later ★ replaces it unless a ★ filled it."""
    found: dict[str, str] = {}
    starred: set[str] = set()
    for row in rows:
        slot = engine_row(engine_of(row.kind)).legacy_slot
        path = row.path.strip()
        if slot not in _KEYED_SLOTS or not path or slot in starred:
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


def legacy_exes(settings: Settings) -> dict[str, str]:
    """Slot → the exe a role runs when no registry row resolves: the settings value, else
    derived from the registry, else the engine's exe (beside `server_exe` but for that one).

    Example: {"server_exe": "/opt/llama/llama-server", "sd_server_exe": "/opt/llama/sd-server", …}.
    """
    derived = _derived_slots(settings.backends)

    def pick(slot: str) -> str:
        explicit = (getattr(settings, slot) or "").strip() if slot in _KEYED_SLOTS else ""
        return explicit or derived.get(slot, "")

    server = pick("server_exe") or ENGINES[_SLOTS["server_exe"]].exe
    return {slot: server if slot == "server_exe" else pick(slot) or sibling(server, ENGINES[engine].exe)
            for slot, engine in _SLOTS.items()}


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
    #: The registry row; None = the role's legacy exe.
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


def _refuse_other_role(row: BackendRow, role: Role) -> None:
    roles = kind_roles(row.kind)
    if roles and role not in roles:
        # "class": the word `swapgen list` shows a role under
        raise ModelError(f"backend '{row.id}' (kind {row.kind.strip()}, class {role_label(roles)}) cannot serve "
                         f"a {role} model")


def resolve_backend(settings: Settings, override: Override | None, role: str, prefer: str | None = None) -> Resolved:
    """Pin → (the ★ row, else the first, of `prefer`'s engine) → the role's ★ row → its first
    row → the legacy exe. Raises ModelError for a pin to a row of another role (a custom-kind row
    may be pinned by any role).

    `prefer` (a kind) is for roles whose engines read different formats: an HF folder prefers
    vllm (llama.cpp cannot read safetensors), a TTS.cpp model prefers ttscpp, an audio.cpp model
    audiocpp. A pin still beats it.
    """
    role = Role(role)
    prefer = engine_of(prefer) if prefer else None
    rows = candidates(settings.backends, role, prefer)
    pin = (override.backend or "").strip() if override is not None else ""
    stale = ""
    if pin:
        for row in rows:
            if row.id.strip() == pin:
                _refuse_other_role(row, role)
                return _from_row(row, "pinned")
        stale = f"pin '{pin}' not in registry; "
    of_role = [row for row in rows if role in kind_roles(row.kind)]
    found = None
    if prefer:
        preferred = [row for row in of_role if engine_of(row.kind) == prefer]
        found = _star_or_first(preferred, f"{prefer} of class {role}")
    found = found or _star_or_first(of_role, f"of class {role}")
    if found is None:
        engine = _LEGACY_OF_ROLE[role]
        slot = ENGINES[engine].legacy_slot
        exe = legacy_exes(attrs.evolve(settings, backends=rows))[slot]
        found = Resolved(engine=engine.value, exe=exe, row=None, why=f"legacy {slot}")
    return attrs.evolve(found, why=stale + found.why) if stale else found


def resolve_embedder(settings: Settings, override: Override | None) -> Resolved:
    """Resolution as for an llm (`SERVED_AS`) that never lands on an engine that cannot embed
    (vLLM: there is no vLLM embedding emitter).

    A vllm pin (or a vllm ★) keeps the llm rows' llama-side default: the ★ / first llm row of an
    engine that embeds, else the legacy `server_exe` (docs/maintainers/backends.md#embedder-dead-end).
    """
    served_as = SERVED_AS[Role.EMBEDDING]
    resolved = resolve_backend(settings, override, served_as)
    if _embeds(resolved.engine):
        return resolved
    embedders = attrs.evolve(settings, backends=tuple(r for r in settings.backends if _embeds(engine_of(r.kind))))
    fallback = resolve_backend(embedders, None, served_as)
    return attrs.evolve(fallback, why=f"{resolved.engine} '{resolved.backend_id}' cannot embed; {fallback.why}")


def _embeds(engine: str) -> bool:
    """A custom engine is taken at its word."""
    row = engine_row(engine)
    return row is CUSTOM or Role.EMBEDDING in row.roles


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
        "build": row.build.strip() if row is not None else "",
    }
