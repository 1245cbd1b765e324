"""What a run after a change reuses of the last (`commands.library`): the last walk's folder
records and each model as it was resolved, and what from. Read only when the run memo is out of
date, so a no-op run imports none of it.
"""

from __future__ import annotations

from attrs import field, frozen

from autogen.discovery.walk_memo import WalkMemo
from autogen.emit.openai_names import Candidate
from autogen.resolve.sleep import Asker, Sleeper


@frozen
class ModelRecord:
    """One model as the last run resolved it, and what from (`LibraryMemo`)."""

    #: Digest of what its job, files and doc line were made from (`Library._source`).
    source: str
    #: Its files as resolved (a draft pinned by path is one of them): its task's `file_dep`.
    inputs: tuple[str, ...]
    #: The size and head hash of each of its input files (`_inputs_stamp`).
    stamp: str
    #: Its llama profiles' ids (none when it has no profiles): what clashes across models read.
    profile_ids: tuple[str, ...]
    #: (profile id, who takes it: "" another model's id, else the model whose profile keeps it).
    clashes: tuple[tuple[str, str], ...]
    key: str
    doc: str
    sides: tuple[str, ...] = ()
    #: An image model's key reads the sizes of the settings' encoder files too: made again each run.
    image: bool = False
    #: What the run's sleep plan needs of it when it asks to sleep (`resolve.job.sleep_asker`).
    asker: Asker | None = None
    #: The GPU indices it is placed on: what other models' sleepers keep there is charged to it.
    devices: tuple[int, ...] = ()
    #: Its part of the sleep plan its key was made with (`Library.job`): its own sleeper, and
    #: what the other sleepers keep on its cards.
    sleeper: Sleeper | None = None
    held: tuple[int, int, str] = (0, 0, "")
    #: What choosing OpenAI's default model names reads of it (`emit.openai_names.candidate`).
    candidate: Candidate | None = None
    #: The OpenAI names it answered when its key was made (`emit.openai_names.openai_owners`).
    answers: tuple[str, ...] = ()


@frozen
class LibraryMemo:
    """What the last run found and resolved, for a run after a change (module docstring). The
    discovery itself is not kept: replaying the walk's records gives it again."""

    walk: WalkMemo
    models: dict[str, ModelRecord] = field(factory=dict)
