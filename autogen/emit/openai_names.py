"""The model names OpenAI's clients ask for by default, answered by the library's default model of
their class (docs/whisper.md#whisper-1): an OpenAI client transcribes with `model: whisper-1`
unless told otherwise, so the default ASR model takes that alias.

The class's default model is the one its default engine serves: the engine of the ★ row of the
class, else of its first row (the registry's rules, docs/engines.md#which-row-serves-a-model);
of several such models the largest (most parameters, where the header says; else the most
bytes), and when that engine serves none of the library's models, the largest of the class.
A name the user gave an entry in an override's `llama_swap: {aliases: […]}`, or a model's id,
is theirs: no model takes it by default.

Each model's `Candidate` is made when the model is resolved and kept with its record
(`commands.library_memo.ModelRecord`), so choosing reads no model again.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from attrs import frozen

from autogen.engines import Role, engine_of, engine_row, kind_roles
from autogen.metadata.model_meta import ModelMeta
from autogen.resolve.job import Job
from autogen.settings.schema import Settings

#: OpenAI's model name → the class whose default model answers it.
OPENAI_NAMES: dict[str, Role] = {"whisper-1": Role.ASR}


@frozen
class Candidate:
    """What choosing a class's default model reads of one model.

    Example: Candidate(role="asr", engine="whisper", size=808_878_080).
    """

    role: str
    #: The engine whose command its entry runs (`serving_engine`).
    engine: str
    #: Its parameters where its header gives them (a whisper.cpp model), else its bytes on disk.
    size: int


def serving_engine(job: Job) -> str:
    """The engine whose command the job's entry runs: the one its format asks for when that engine
    is exclusive (a whisper model on a legacy exe still runs whisper-server), else the resolved one."""
    return job.prefer if job.prefer and engine_row(job.prefer).exclusive else job.engine


def candidate(job: Job, meta: ModelMeta | None) -> Candidate | None:
    """The job as a candidate for its class's OpenAI names; None when it answers none (another
    class, or not served)."""
    if job.role not in OPENAI_NAMES.values() or job.error is not None or (job.override and job.override.skip):
        return None
    size = meta.whisper.parameters if meta is not None and meta.whisper is not None else job.row.size_bytes
    return Candidate(role=job.role.value, engine=serving_engine(job), size=size)


def _user_aliases(settings: Settings) -> set[str]:
    names: set[str] = set()
    for override in settings.overrides:
        aliases = override.llama_swap.get("aliases")
        if isinstance(aliases, list):
            names.update(a for a in aliases if isinstance(a, str))
    return names


def default_engine(settings: Settings, role: Role) -> str | None:
    """The engine of the class's ★ row, else of its first row; None without a row."""
    rows = [row for row in settings.backends if role in kind_roles(row.kind)]
    chosen = next((row for row in rows if row.default), rows[0] if rows else None)
    return engine_of(chosen.kind) if chosen is not None else None


def openai_owners(candidates: Mapping[str, Candidate | None], settings: Settings,
                  ids: Collection[str]) -> dict[str, str]:
    """OpenAI name → the model (id) that answers it (module docstring). `ids`: every model's id."""
    taken = _user_aliases(settings) | set(ids)
    owners: dict[str, str] = {}
    for name, role in OPENAI_NAMES.items():
        served = sorted((model_id, c) for model_id, c in candidates.items() if c is not None and c.role == role)
        if name in taken or not served:
            continue
        engine = default_engine(settings, role)
        preferred = [(model_id, c) for model_id, c in served if c.engine == engine] or served
        owners[name] = max(preferred, key=lambda item: item[1].size)[0]
    return owners
