"""One run's library: settings → discovery (headers through the metadata cache) → resolved
jobs, and the plan of each job.

What loading produced is kept in `cache_dir` (docs/maintainers/performance.md), as data through
the one converter (`records`):

- `RunMemo` (`load-memo.json`): each model's task (id, files, key, doc line, side files) and
  the lines a run prints, under a key of everything they were computed from: the settings,
  every entry discovery can see, the card reading, the GPU inventory, `path_map`, the engines'
  own figures and swapgen's own code. A run where none changed (a no-op) reads this alone.
- `LibraryMemo` (`library-memo.json`): what the last walk found in each folder
  (`discovery.walk_memo`) and what each model was resolved from (`ModelRecord`). A run after a
  change reads a folder again only when its entries changed, and resolves, keys and describes
  again only the models whose inputs changed: its row, its files, its error, the override it
  matches, or a setting every model reads (`settings.fields`: `PER_MATCH` keys re-resolve the
  models they match, `EVERY_FRAGMENT` and `PER_MODEL` keys every model). So its cost follows
  the change, not the library; after any sequence of changes it is what a cold run gives.

Planning is pure (`emit.dispatch.build_plan`); this module only hands it the loaded records.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

import attrs
import xxhash
from attrs import frozen

from autogen import GENERATOR_VERSION, __version__
from autogen.commands.checks import backend_warnings, check_roots, check_vanished, no_budget, unmatched_patterns
from autogen.discovery.ledger import load_ledger, save_ledger
from autogen.discovery.rows import ModelRow
from autogen.discovery.tree import Discovery, walk_signature
from autogen.emit.served_paths import PathMap
from autogen.errors import ModelError
from autogen.figures.binaries import engine_state
from autogen.fsutil import code_stamp, file_size
from autogen.numfmt import GIB
from autogen.records import read_record, write_record
from autogen.resolve.gpus import card_vram_gb, inventory
from autogen.resolve.sleep import host_ram_bytes
from autogen.settings.schema import Settings

if TYPE_CHECKING:  # what planning and discovery use: a run served from the load memo imports none
    from autogen.commands.library_memo import LibraryMemo, ModelRecord
    from autogen.discovery.walk import Walked
    from autogen.emit.entry import Plan
    from autogen.figures.plan import EngineFigures
    from autogen.metadata.cache import MetaCache
    from autogen.metadata.model_meta import ModelMeta
    from autogen.resolve.context import DraftModel
    from autogen.resolve.job import Job
    from autogen.resolve.nodes import Fleet
    from autogen.resolve.sleep import Sleeper, SleepPlan


def digest(text: str) -> str:
    return xxhash.xxh3_128_hexdigest(text.encode("utf-8", "surrogatepass"))


@frozen
class ModelTask:
    """What a model's doit task needs: its id, path and files, its key, its doc line and the
    files it writes beside its fragment.

    Example: ModelTask(id="qwen3-8b-q4_k_m", path="/m/Qwen3-8B-Q4_K_M.gguf",
    inputs=("/m/Qwen3-8B-Q4_K_M.gguf",), key="5b0e…", doc="llm  llama  llama-cuda (★ of class llm)  /m/…").
    """

    id: str
    path: str
    #: The files its fragment is made from (doit `file_dep`).
    inputs: tuple[str, ...]
    #: Digest of everything else it is made from (`Library.model_key`).
    key: str
    #: Its line in `doit list` (`report.task_doc`).
    doc: str
    #: Files it writes beside its fragment (`side_files`).
    sides: tuple[str, ...] = ()


@frozen
class RunMemo:
    """What a run served from the memo reads (module docstring)."""

    #: Digest of everything the rest was computed from.
    key: str
    #: Digest of the settings every fragment reads (`emit.dispatch.global_inputs`) and `path_map`.
    settings_key: str
    tasks: tuple[ModelTask, ...]
    #: What discovery had to say (unreadable folders, symlink loops, …), printed by every run.
    problems: tuple[str, ...] = ()
    #: Overrides and group patterns that match no model.
    unmatched: tuple[str, ...] = ()
    #: (folder, why) per folder that could not be listed.
    unreadable: tuple[tuple[str, str], ...] = ()


RUN_MEMO = "load-memo.json"
LIBRARY_MEMO = "library-memo.json"


def _stamp_parts() -> tuple:
    """What every stored library record depends on: which swapgen computed it."""
    return GENERATOR_VERSION, __version__, code_stamp()


def run_key(settings: Settings, card: float | None, path_map: PathMap | None, fleet: Fleet | None) -> str:
    """Digest of everything a `RunMemo` is computed from (module docstring)."""
    return digest(repr((_stamp_parts(), settings, card, inventory(settings), fleet, walk_signature(settings.roots),
                        path_map, engine_state(settings), host_ram_bytes(settings.host_ram_gb))))


def load_run_memo(cache_dir: str, key: str) -> RunMemo | None:
    memo = read_record(os.path.join(cache_dir, RUN_MEMO), "run-memo", RunMemo)
    return memo if memo is not None and memo.key == key else None


def load_library_memo(cache_dir: str) -> LibraryMemo | None:
    # lazy: the walk's records are read only when the run memo is out of date
    from autogen.commands.library_memo import LibraryMemo  # noqa: PLC0415

    return read_record(os.path.join(cache_dir, LIBRARY_MEMO), "library-memo", LibraryMemo, *_stamp_parts())


def _store(cache_dir: str, name: str, kind: str, record, cls: type, *depends: object) -> None:
    # a memo that cannot be kept costs the next run a rediscovery, nothing else
    with contextlib.suppress(OSError):
        write_record(os.path.join(cache_dir, name), kind, record, cls, *depends)


class Library:
    """The discovered models of one settings file, each resolved to a `Job`, with what their
    tasks need (`ModelTask`) and, on demand, what planning needs: metadata per model, drafts,
    the run-wide settings key and the profile ids' owners."""

    def __init__(self, settings: Settings, card: float | None, path_map: PathMap | None,
                 tasks: tuple[ModelTask, ...], settings_key: str, *, discovery: Discovery | None = None,
                 records: dict[str, ModelRecord] | None = None, walked: Walked | None = None,
                 meta_kinds: dict[str, bool] | None = None, cache: MetaCache | None = None,
                 fleet: Fleet | None = None):
        self.settings = settings
        self.card_vram_gb = card
        #: `path_map` with this run's links resolved; None = paths are served as they are.
        self.path_map = path_map
        self.settings_key = settings_key
        self.fleet = fleet
        self._tasks = tasks
        self._by_id = {task.id: task for task in tasks}
        self._discovery = discovery
        self._records = records
        self._walked = walked
        self._meta_kinds = meta_kinds
        #: The run memo's key: everything loading read (settings, the roots' walk, the cards, the
        #: engines' state, swapgen's code); set by `load`, None for a library made otherwise.
        self.load_key: str | None = None
        self._cache = cache
        #: id → its job, made on first use (`job`).
        self._jobs: dict[str, Job] = {}

    @property
    def models(self) -> tuple[ModelTask, ...]:
        """Each model's task, in task order."""
        return self._tasks

    # -- loading --------------------------------------------------------------------------------

    @classmethod
    def load(cls, settings: Settings, fleet: Fleet | None = None) -> Library:
        """From the run memo when nothing it was computed from changed, else by discovery (reusing
        what did not change); the warnings of discovery are printed either way. `fleet`: the
        hosts a run from a fleet front knows (multi-node models need them)."""
        check_roots(settings)
        card = card_vram_gb(settings)
        path_map = PathMap.of(settings)
        key = run_key(settings, card, path_map, fleet)
        memo = load_run_memo(settings.cache_dir, key)
        ledger, id_changes = None, ()
        if memo is None:
            library = cls.discover(settings, card, fleet, path_map, load_library_memo(settings.cache_dir))
            ledger, id_changes = library.discovery.ledger, library.discovery.id_changes
            memo = library.remember(key)
        else:
            library = cls(settings, card, path_map, memo.tasks, memo.settings_key, fleet=fleet)
        library.load_key = key
        where = f"{fleet.host}: " if fleet is not None else ""
        if (budget := no_budget(settings, card)) is not None:
            print(f"swapgen: warning: {where}{budget}", file=sys.stderr)
        for problem in memo.problems:
            print(f"swapgen: warning: {where}{problem}", file=sys.stderr)
        check_vanished(settings, [task.path for task in memo.tasks], memo.unreadable)
        if ledger is not None:  # after the vanished check: a refused run keeps the ids the live config has
            save_ledger(settings.cache_dir, ledger)
            if library.sleep_plan.sleepers:
                from autogen.resolve.sleep import save_ports  # noqa: PLC0415 - lazy: only with sleeping models

                save_ports(settings.cache_dir, library.sleep_ports, library.sleep_plan)
            for line in id_changes:  # said once, by the run that gives the new id
                print(f"swapgen: warning: {line}", file=sys.stderr)
        for problem in (*memo.unmatched, *backend_warnings(settings)):
            print(f"swapgen: warning: {where}{problem}", file=sys.stderr)
        return library

    @classmethod
    def discover(cls, settings: Settings, card: float | None, fleet: Fleet | None = None,
                 path_map: PathMap | None = None, previous: LibraryMemo | None = None) -> Library:
        """Walk the roots, read metadata through the cache, pair adapters and drafts, and
        resolve every model (no memo is written, no check made, nothing printed: `load` adds
        those for a run, and saves the ids given, saying which changed). `previous`: the last
        run's records, reused where nothing they were made from changed. `path_map`: as
        `PathMap.of` resolves it."""
        # deliberate lazy imports: a run served from the load memo walks, resolves and reads nothing
        from autogen.discovery.pairing import pair_adapters, pair_drafts  # noqa: PLC0415
        from autogen.discovery.walk import walk_roots  # noqa: PLC0415
        from autogen.emit.dispatch import global_inputs  # noqa: PLC0415
        from autogen.metadata.cache import MetaCache  # noqa: PLC0415
        from autogen.resolve.job import engine_for  # noqa: PLC0415

        path_map = path_map if path_map is not None else PathMap.of(settings)
        cache = MetaCache(settings.cache_dir)
        ledger = load_ledger(settings.cache_dir)
        opens = (lambda path: path_map.unreachable(path) is None) if path_map is not None else None
        walked = walk_roots(settings.roots, cache.gguf, cache.config, cache.head, cache.safetensors, ledger,
                            cache.hf_meta, prefer=opens, memo=previous.walk if previous is not None else None,
                            whisper=cache.whisper)
        cache.keep(walked.replayed)
        library = cls(settings, card, path_map, (), digest(global_inputs(settings) + repr(path_map)),
                      walked=walked, meta_kinds=walked.meta_kinds, cache=cache, fleet=fleet)
        discovery = walked.discovery
        if discovery.adapters:  # the bases' metadata, read only for a library with adapters
            metas = {row.id: library.meta_of(row) for row in discovery.models}
            discovery = pair_adapters(discovery, metas, lambda path: _meta_or_none(cache, path),
                                      lambda row: None if row.id in discovery.row_errors
                                      else engine_for(settings, row, metas[row.id]), ledger)
        library._discovery = pair_drafts(discovery, walked.facts)
        library._resolve(previous.models if previous is not None else {})
        cache.save()
        return library

    def _resolve(self, previous: Mapping[str, ModelRecord]) -> None:
        """Every model's record, reused from `previous` where what it was made from is the same,
        then its key (which reads the clashes of its profiles' ids with other models')."""
        from autogen.emit.openai_names import OPENAI_NAMES  # noqa: PLC0415 - lazy, as `discover`

        context = self._context()
        records: dict[str, ModelRecord] = {}
        for row in self.discovery.models:
            source = self._source(row, context)
            known = previous.get(row.id)
            records[row.id] = known if known is not None and known.source == source else self._record(row, source)
        self._records = records
        owners = self.profile_owners
        taken = frozenset(records)
        for model_id, record in records.items():
            clashes = tuple(sorted(_clashes(model_id, record.profile_ids, taken, owners).items()))
            sleeper, held = self.sleep_part(model_id, record.devices)
            answers = tuple(name for name in OPENAI_NAMES if owners.get(name) == model_id)
            if record.key and (clashes, sleeper, held, answers) == (record.clashes, record.sleeper, record.held,
                                                                    record.answers) and not record.image:
                continue
            records[model_id] = attrs.evolve(record, clashes=clashes, sleeper=sleeper, held=held, answers=answers,
                                             key=self._key(model_id, record, owners))
        paths = {row.id: row.path for row in self.discovery.models}
        self._tasks = tuple(ModelTask(id=model_id, path=paths[model_id], inputs=r.inputs, key=r.key, doc=r.doc,
                                      sides=r.sides) for model_id, r in records.items())
        self._by_id = {task.id: task for task in self._tasks}

    def _context(self) -> str:
        """Digest of what every model's job reads besides its row, files and override: the
        settings every model reads (`settings.fields`: `EVERY_FRAGMENT` and `PER_MODEL`, but the
        overrides, which each model's own source carries), the card, the GPUs, the fleet,
        `path_map` and the engines' own figures."""
        from autogen.settings.fields import EVERY_FRAGMENT, PER_MODEL, inputs_of  # noqa: PLC0415

        settings = self.settings
        return digest(repr((self.settings_key, inputs_of(settings, PER_MODEL), inputs_of(settings, EVERY_FRAGMENT),
                            self.card_vram_gb, inventory(settings), self.fleet, self.path_map,
                            engine_state(settings))))

    def _source(self, row: ModelRow, context: str) -> str:
        """Digest of what a model's job, files and doc line are made from: its row and the
        size and time of each of its files, its error, the override it matches (and where it
        is), and `context`."""
        from autogen.emit.llama_profiles import draft_path  # noqa: PLC0415 - lazy, as `discover`
        from autogen.resolve.job import match_override  # noqa: PLC0415

        override = match_override(self.settings, row)
        pinned = draft_path(row, override) if override is not None and override.draft else None
        files = [*row.inputs, *((pinned[0],) if pinned else ())]
        where = self.settings.overrides.index(override) if override is not None else None
        return digest(repr((row, [self._file_state(path) for path in files], self.discovery.row_errors.get(row.id),
                            where, override, context)))

    def _file_state(self, path: str) -> tuple[int, int] | None:
        """(size, mtime) of a file, as the walk saw it (else asked)."""
        found = self._walked.stats.get(path) if self._walked is not None else None
        if found is not None:
            return found
        try:
            st = os.stat(path)
        except (OSError, ValueError):
            return None
        return st.st_size, st.st_mtime_ns

    def _record(self, row: ModelRow, source: str) -> ModelRecord:
        """A model resolved anew: its job, draft, files' stamp, profiles' ids, doc and side files."""
        from autogen.commands.library_memo import ModelRecord  # noqa: PLC0415 - lazy, as `discover`
        from autogen.commands.report import task_doc  # noqa: PLC0415
        from autogen.emit.dispatch import has_profiles  # noqa: PLC0415
        from autogen.emit.llama_profiles import profile_ids  # noqa: PLC0415
        from autogen.emit.openai_names import candidate  # noqa: PLC0415
        from autogen.engines import Role  # noqa: PLC0415
        from autogen.resolve.job import sleep_asker  # noqa: PLC0415

        job = self._unplanned_job(row)
        pids = tuple(profile_ids(job.row, job.override, self.settings)) if has_profiles(job) else ()
        return ModelRecord(source=source, inputs=job.row.inputs, stamp=_inputs_stamp(self.cache, job), profile_ids=pids,
                           clashes=(), key="", doc=task_doc(self, job), sides=side_files(self.settings, job),
                           image=job.role == Role.IMAGE, asker=sleep_asker(job),
                           devices=tuple(g.index for g in job.placement.gpus),
                           candidate=candidate(job, self.meta_of(row) if job.error is None else None))

    def _key(self, model_id: str, record: ModelRecord, owners: Mapping[str, str]) -> str:
        """Digest of everything the model's fragment depends on besides its files."""
        from autogen.emit.dispatch import model_inputs  # noqa: PLC0415 - lazy, as `discover`

        job = self.job(model_id)
        return digest(model_inputs(job, self.settings, self.settings_key, self._records_ids(), owners)
                      + record.stamp + self.engine.key(job))

    def _records_ids(self) -> frozenset[str]:
        return frozenset(row.id for row in self.discovery.models)

    def remember(self, key: str) -> RunMemo:
        """Keep this library for the next run (both memos) and return the run memo."""
        from autogen.commands.library_memo import LibraryMemo  # noqa: PLC0415 - lazy: only after a discovery

        discovery = self.discovery
        memo = RunMemo(key=key, settings_key=self.settings_key, tasks=self._tasks, problems=discovery.problems,
                       unmatched=tuple(unmatched_patterns(self.settings, discovery.models)),
                       unreadable=discovery.unreadable)
        assert self._walked is not None and self._records is not None
        library = LibraryMemo(walk=self._walked.memo, models=self._records)
        _store(self.settings.cache_dir, LIBRARY_MEMO, "library-memo", library, LibraryMemo, *_stamp_parts())
        _store(self.settings.cache_dir, RUN_MEMO, "run-memo", memo, RunMemo)
        return memo

    # -- what planning and listing read, on first use ------------------------------------------

    @functools.cached_property
    def _memo(self) -> LibraryMemo | None:
        """The library memo of a run served from the run memo (written with it)."""
        return load_library_memo(self.settings.cache_dir)

    @property
    def discovery(self) -> Discovery:
        """What discovery found and paired; in a run served from the run memo, found again on
        first use by replaying the last walk's records."""
        if self._discovery is None:
            found = Library.discover(self.settings, self.card_vram_gb, self.fleet, self.path_map, self._memo)
            self._discovery, self._walked, self._meta_kinds = found.discovery, found._walked, found._meta_kinds
            self._cache = found._cache
            if self._records is None:
                self._records = found._records
        return self._discovery

    @property
    def records(self) -> dict[str, ModelRecord]:
        if self._records is None:
            memo = self._memo
            if memo is None:
                self.discovery  # noqa: B018 - found again, records and all
            else:
                self._records = memo.models
        assert self._records is not None
        return self._records

    @functools.cached_property
    def _rows(self) -> dict[str, ModelRow]:
        """id → each model's row as resolved (its files as its record says)."""
        return {row.id: attrs.evolve(row, inputs=self.records[row.id].inputs) for row in self.discovery.models
                if row.id in self.records}

    @property
    def rows(self) -> Iterator[ModelRow]:
        """Each model's row as resolved, in task order."""
        return (self._rows[task.id] for task in self._tasks)

    @property
    def jobs(self) -> list[Job]:
        """Every model resolved, in task order."""
        return [self.job(task.id) for task in self._tasks]

    def job(self, model_id: str) -> Job:
        """The model's job, made on first use from its row and metadata, with its part of the
        run's sleep plan (`sleep_part`)."""
        job = self._jobs.get(model_id)
        if job is None:
            job = self._unplanned_job(self._rows[model_id])
            sleeper, held = self.sleep_part(model_id, tuple(g.index for g in job.placement.gpus))
            if sleeper is not None or held[0]:
                job = attrs.evolve(job, sleeper=sleeper, held=held, budget_gb=max(0.0, job.budget_gb - held[0] / GIB))
            self._jobs[model_id] = job
        return job

    def _unplanned_job(self, row: ModelRow) -> Job:
        """The job of a discovered row, before the run-wide sleep plan (`sleep_part`) has its say."""
        from autogen.resolve.job import make_job  # noqa: PLC0415 - lazy: a no-op run resolves nothing

        error = self.discovery.row_errors.get(row.id)
        job = make_job(self.settings, row, None if error else self.meta_of(row), error, self.card_vram_gb,
                       fleet=self.fleet)
        if _pins_a_draft_file(job):  # a draft pinned by path is an input of the model
            job = attrs.evolve(job, row=attrs.evolve(job.row, inputs=(*job.row.inputs, self.draft_of(job).path)))
        return job

    @functools.cached_property
    def sleep_plan(self) -> SleepPlan:
        """Which vLLM models sleep, on which ports, at which level (`resolve.sleep.plan_sleep`),
        from every model's recorded ask: run-wide, as ports and host RAM are."""
        from autogen.resolve.sleep import SleepPlan, plan_sleep, start_port_range  # noqa: PLC0415 - lazy, as `job`

        askers = [r.asker for r in self.records.values() if r.asker is not None]
        if not askers:
            return SleepPlan()
        return plan_sleep(askers, self.sleep_ports, host_ram_bytes(self.settings.host_ram_gb),
                          start_port_range(self.settings.llama_swap))

    @functools.cached_property
    def sleep_ports(self) -> dict[str, int]:
        """The ports earlier runs gave sleeping models (`resolve.sleep.PORT_LEDGER`)."""
        from autogen.resolve.sleep import load_ports  # noqa: PLC0415 - lazy, as `job`

        return load_ports(self.settings.cache_dir)

    def sleep_part(self, model_id: str, devices: tuple[int, ...]) -> tuple[Sleeper | None, tuple[int, int, str]]:
        """A model's part of the sleep plan: its own sleeper (None: it does not ask to sleep), and
        what the other sleepers keep on its cards (bytes on them all, the most on one, whose)."""
        plan = self.sleep_plan
        return plan.sleepers.get(model_id), plan.held(model_id, devices)

    def meta_of(self, row: ModelRow) -> ModelMeta | None:
        """A model's metadata: as the walk read it, else from the metadata cache (no file read
        while the file is as the walk saw it); None when it has none."""
        if self._walked is not None and row.path in self._walked.metas:
            return self._walked.metas[row.path]
        if self._meta_kinds is None:
            self.discovery  # noqa: B018 - the walk's kinds come with it
        kinds = self._meta_kinds
        if row.path not in kinds:
            return None
        return _meta_or_none(self.cache, row.path, hf=kinds[row.path], whisper=row.format == "whisper")

    @functools.cached_property
    def metas(self) -> _Metas:
        """id → the model's metadata (None: none readable)."""
        return _Metas(self)

    @property
    def stamps(self) -> dict[str, str]:
        """id → the size and head hash of each of its input files (`_inputs_stamp`)."""
        return {model_id: record.stamp for model_id, record in self.records.items()}

    @functools.cached_property
    def drafts(self) -> dict[str, DraftModel]:
        """id → the draft of its speculative-decoding profile, header read."""
        found = {}
        for task in self._tasks:
            draft = self.draft_of(self.job(task.id))
            if draft is not None:
                found[task.id] = draft
        return found

    def draft_of(self, job: Job) -> DraftModel | None:
        """The draft of the job's `-draft` profile with its header read (`_draft`), or None."""
        from autogen.emit.llama_profiles import draft_path  # noqa: PLC0415 - lazy: only planning reads drafts

        found = draft_path(job.row, job.override)
        return _draft(self.cache, job.row, self.metas, *found) if found is not None else None

    @functools.cached_property
    def profile_owners(self) -> dict[str, str]:
        """Names several models could take → the model that keeps it: profile ids several models
        make (cross-model profile clashes), and OpenAI's default model names (`emit.openai_names`)."""
        from autogen.emit.llama_profiles import shared_profile_ids  # noqa: PLC0415 - lazy: only planning needs it
        from autogen.emit.openai_names import openai_owners  # noqa: PLC0415

        records = self.records
        owners = shared_profile_ids({model_id: r.profile_ids for model_id, r in records.items()})
        return owners | openai_owners({model_id: r.candidate for model_id, r in records.items()}, self.settings,
                                      records)

    @functools.cached_property
    def engine(self) -> EngineFigures:
        """The engines' own figures (measurements, llama-fit-params' answers), read on first use."""
        # lazy: a run served from the load memo plans nothing
        from autogen.figures.plan import EngineFigures  # noqa: PLC0415

        return EngineFigures(self.settings, self.stamps)

    @property
    def cache(self) -> MetaCache:
        """The metadata cache, loaded on first use (a run served from the load memo needs it
        only if the doit checker meets a changed file)."""
        if self._cache is None:
            from autogen.metadata.cache import MetaCache  # noqa: PLC0415 - lazy: as the docstring says

            self._cache = MetaCache(self.settings.cache_dir)
        return self._cache

    def plan(self, job: Job) -> Plan:
        """The model's plan with its paths as the engine will see them (`path_map`)."""
        return self.served(job, self.host_plan(job))

    def host_plan(self, job: Job) -> Plan:
        """The model's plan with this host's paths, sized with the engine's own figures where it
        has them: llama-fit-params and `swapgen calibrate` run its commands here."""
        from autogen.emit.dispatch import build_plan  # noqa: PLC0415 - lazy: a no-op run plans nothing
        from autogen.figures.plan import plan_with_engine  # noqa: PLC0415 - lazy, as `engine`

        def build(readings):
            return build_plan(job, self.metas.get(job.row.id), self.settings, self._records_ids(),
                              self.profile_owners, self.draft_of(job), readings)
        return plan_with_engine(build, job, self.engine)

    def served(self, job: Job, plan: Plan) -> Plan:
        """`plan` with the paths the engine sees (`path_map`)."""
        if self.path_map is None:
            return plan
        from autogen.emit.served_paths import plan_files, serve_plan  # noqa: PLC0415 - lazy, as `host_plan`

        return serve_plan(plan, self.path_map, plan_files(job.row, job.override, self.settings, plan), job.row.inputs)

    def model_key(self, model_id: str) -> str:
        """Digest of everything the model's fragment depends on besides its files."""
        return self._by_id[model_id].key

    def doc(self, model_id: str) -> str:
        """The model task's line in `doit list` (`report.task_doc`)."""
        return self._by_id[model_id].doc

    def side_files(self, model_id: str) -> tuple[str, ...]:
        """Files the model's task writes beside its fragment (a missing one re-runs the task)."""
        return self._by_id[model_id].sides


class _Metas(Mapping):
    """id → a model's metadata, read on first use (`Library.meta_of`)."""

    def __init__(self, library: Library):
        self._library = library
        self._rows = {row.id: row for row in library.discovery.models}

    def __getitem__(self, model_id: str) -> ModelMeta | None:
        return self._library.meta_of(self._rows[model_id])

    def __iter__(self):
        return iter(self._rows)

    def __len__(self) -> int:
        return len(self._rows)


def _pins_a_draft_file(job: Job) -> bool:
    """The job's `-draft` profile runs a file the override pins by path, one that exists (a
    paired draft is an input of its model already)."""
    from autogen.emit.llama_profiles import draft_path  # noqa: PLC0415 - lazy: only planning reads drafts

    found = draft_path(job.row, job.override)
    paired = job.row.spec_draft
    if found is None or (paired is not None and paired.path == found[0]):
        return False
    return file_size(found[0]) is not None


def _clashes(model_id: str, pids: tuple[str, ...], taken, owners: Mapping[str, str]) -> dict[str, str]:
    """This model's profile ids that another model's id ("") or another model's profile takes
    (`llama_profiles.profile_clashes`, from the recorded ids)."""
    clashes = {}
    for pid in pids:
        if pid in taken:
            clashes[pid] = ""
        elif owners.get(pid, model_id) != model_id:
            clashes[pid] = owners[pid]
    return clashes


def side_files(settings: Settings, job: Job) -> tuple[str, ...]:
    """Files a model's task writes beside its fragment: the server config of the engine its
    format asks for, when that engine's emitter writes one (audio.cpp's: `EngineRow.config_file`)."""
    from autogen.engines import engine_row, imported  # noqa: PLC0415 - lazy: read when the memo is written

    config_file = engine_row(job.prefer).config_file if job.prefer else ""
    if config_file and job.error is None:
        return (imported(config_file)(settings.cache_dir, job.row.id),)  # its emitter's module: those models only
    return ()


def _meta_or_none(cache: MetaCache, path: str, *, hf: bool = False, whisper: bool = False) -> ModelMeta | None:
    try:
        return cache.meta(path, hf=hf, whisper=whisper)
    except ModelError:
        return None


def _draft(cache: MetaCache, row: ModelRow, metas: Mapping[str, ModelMeta | None], path: str,
           why: str) -> DraftModel:
    """The draft of a model's `-draft` profile with its header read."""
    from autogen.resolve.context import DraftModel  # noqa: PLC0415 - lazy: only planning reads drafts

    paired = row.spec_draft
    if paired is not None and paired.path == path:
        return DraftModel(path=path, meta=metas.get(paired.model_id), size_bytes=paired.size_bytes, why=why)
    try:
        size = os.path.getsize(path)
    except OSError:
        return DraftModel(path=path, meta=None, size_bytes=0, why=why)
    return DraftModel(path=path, meta=_meta_or_none(cache, path), size_bytes=size, why=why)


def _inputs_stamp(cache: MetaCache, job: Job) -> str:
    """The size and head hash of every input file, as discovery signed them: the fragment's
    name carries them, so a file changed between loading and the task's run, or changed and
    changed back while a run was interrupted, names another fragment (the head, not the mtime:
    a `touch` alone re-emits nothing)."""
    return "".join(f"|{size},{head}" for size, head in (cache.signature(path) for path in job.row.inputs))
