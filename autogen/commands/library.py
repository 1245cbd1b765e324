"""One run's library: settings → discovery (headers through the metadata cache) → resolved
jobs, and the plan of each job.

Loading is memoised in `cache_dir` (`LoadMemo`): a run where no file discovery can see, no
setting, card reading or module of swapgen changed costs a walk of `stat` calls. Planning is
pure (`emit.dispatch.build_plan`); this module only hands it the loaded records.
"""

from __future__ import annotations

import contextlib
import functools
import os
import pickle
import sys
from typing import TYPE_CHECKING

import attrs
import xxhash
from attrs import frozen

from autogen import GENERATOR_VERSION, __version__
from autogen.commands.checks import check_roots, check_vanished, no_budget, unmatched_settings
from autogen.discovery.ledger import Ledger, load_ledger, save_ledger
from autogen.discovery.rows import ModelRow
from autogen.discovery.tree import Discovery, walk_signature
from autogen.emit.served_paths import PathMap
from autogen.errors import ModelError
from autogen.figures.binaries import engine_state
from autogen.fsutil import code_stamp, write_if_changed
from autogen.resolve.gpus import card_vram_gb, inventory
from autogen.resolve.sleep import SleepPlan, host_ram_bytes, load_ports, save_ports
from autogen.settings.schema import Settings

if TYPE_CHECKING:  # what planning and discovery use: a run served from the load memo imports none
    from autogen.emit.entry import Plan
    from autogen.figures.plan import EngineFigures
    from autogen.metadata.cache import MetaCache
    from autogen.metadata.model_meta import ModelMeta
    from autogen.resolve.context import DraftModel
    from autogen.resolve.job import Job
    from autogen.resolve.nodes import Fleet


def digest(text: str) -> str:
    return xxhash.xxh3_128_hexdigest(text.encode("utf-8", "surrogatepass"))


@frozen
class Loaded:
    """What loading produced, as the load memo keeps it: what a no-op run reads (the models and
    their tasks' keys, docs and side files) and, pickled until a plan, a listing or a new key asks
    for them, the resolved jobs and what planning reads (metadata, stamps, drafts), so a no-op run
    neither unpickles nor imports them."""

    discovery: Discovery
    #: Each model's row as resolved (a draft pinned by path is one of its inputs), in task order.
    rows: tuple[ModelRow, ...]
    #: id → `Library.model_key`.
    keys: dict[str, str]
    #: id → the line `doit list` shows (`report.task_doc`).
    docs: dict[str, str]
    #: id → the files its task writes beside its fragment (`side_files`), for the models with any.
    sides: dict[str, tuple[str, ...]]
    #: Digest of the settings every fragment reads (`emit.dispatch.global_inputs`) and `path_map`.
    settings_key: str
    #: pickle of the `Resolution`.
    resolved: bytes


@frozen
class Resolution:
    """Every model resolved, and what planning reads besides."""

    #: In task order.
    jobs: list[Job]
    #: id → the model's metadata (None: none readable).
    metas: dict[str, ModelMeta | None]
    #: id → the size and head hash of each of its input files (`_inputs_stamp`).
    stamps: dict[str, str]
    #: id → the draft of its speculative-decoding profile, header read.
    drafts: dict[str, DraftModel]


class LoadMemo:
    """What loading produced (`Loaded`), kept in `cache_dir` and reused while nothing it was
    computed from has changed: the settings, every entry discovery can see
    (`discovery.tree.walk_signature`), the card reading and GPU inventory, `path_map` with its
    links resolved, swapgen's own code, and what the engines' own figures depend on
    (`engine_state`). A no-op run then costs a walk of `stat` calls, not a rediscovery."""

    FILE = "load-memo.pickle"

    def __init__(self, settings: Settings, card: float | None, path_map: PathMap | None, fleet: Fleet | None = None):
        self.path = os.path.join(settings.cache_dir, self.FILE)
        self.key = digest(repr((GENERATOR_VERSION, __version__, code_stamp(), settings, card, inventory(settings),
                                 fleet, walk_signature(settings.roots), path_map, engine_state(settings),
                                 host_ram_bytes(settings.host_ram_gb))))

    def load(self) -> Loaded | None:
        try:
            with open(self.path, "rb") as f:
                key, value = pickle.load(f)
        except Exception:
            return None
        return value if key == self.key and isinstance(value, Loaded) else None

    def store(self, loaded: Loaded) -> None:
        with contextlib.suppress(OSError, pickle.PicklingError):
            write_if_changed(self.path, pickle.dumps((self.key, loaded), protocol=pickle.HIGHEST_PROTOCOL),
                             durable=False)


class Library:
    """The discovered models of one settings file, each resolved to a `Job`, with what their
    tasks need (keys, docs) and, on demand, what planning needs: metadata per model, drafts, the
    run-wide settings key and the profile ids' owners."""

    def __init__(self, settings: Settings, card: float | None, path_map: PathMap | None, loaded: Loaded,
                 resolution: Resolution | None = None, cache: MetaCache | None = None):
        self.settings = settings
        self.card_vram_gb = card
        #: `path_map` with this run's links resolved; None = paths are served as they are.
        self.path_map = path_map
        self.discovery = loaded.discovery
        self.settings_key = loaded.settings_key
        self._loaded = loaded
        self._resolution = resolution
        self._cache = cache
        #: (the port ledger read, the run's sleep plan) when this library was discovered, for
        #: `load` to save; None when served from the memo (nothing changed).
        self.sleep: tuple[dict[str, int], SleepPlan] | None = None

    @property
    def models(self) -> tuple[ModelRow, ...]:
        """Each model's row as resolved, in the order of their tasks."""
        return self._loaded.rows

    @classmethod
    def load(cls, settings: Settings, fleet: Fleet | None = None) -> Library:
        """From the memo when nothing it was computed from changed, else by discovery; the
        warnings of discovery are printed either way. `fleet`: the hosts a run from a fleet
        front knows (multi-node models need them)."""
        check_roots(settings)
        card = card_vram_gb(settings)
        path_map = PathMap.of(settings)
        memo = LoadMemo(settings, card, path_map, fleet)
        loaded = memo.load()
        ledger, id_changes, sleep = None, (), None
        if loaded is None:
            library = cls.discover(settings, card, fleet, path_map)
            ledger, id_changes, sleep = library.discovery.ledger, library.discovery.id_changes, library.sleep
            library.discovery = attrs.evolve(library.discovery, ledger=Ledger(), id_changes=())  # not memoised
            memo.store(library.memo_record())
        else:
            library = cls(settings, card, path_map, loaded)
        where = f"{fleet.host}: " if fleet is not None else ""
        if (budget := no_budget(settings, card)) is not None:
            print(f"swapgen: warning: {where}{budget}", file=sys.stderr)
        for problem in library.discovery.problems:
            print(f"swapgen: warning: {where}{problem}", file=sys.stderr)
        check_vanished(settings, library.discovery)
        if ledger is not None:  # after the vanished check: a refused run keeps the ids the live config has
            save_ledger(settings.cache_dir, ledger)
            if sleep is not None:
                save_ports(settings.cache_dir, *sleep)
            for line in id_changes:  # said once, by the run that gives the new id
                print(f"swapgen: warning: {line}", file=sys.stderr)
        for problem in unmatched_settings(settings, library.discovery.models):
            print(f"swapgen: warning: {where}{problem}", file=sys.stderr)
        return library

    @classmethod
    def discover(cls, settings: Settings, card: float | None, fleet: Fleet | None = None,
                 path_map: PathMap | None = None) -> Library:
        """Walk the roots, read metadata through the cache, pair adapters and drafts, and
        resolve every model (no memo, no checks, nothing printed: `load` adds those for a run,
        and saves the ids given, saying which changed). `path_map`: as `PathMap.of` resolves it."""
        # deliberate lazy imports: a run served from the load memo walks, resolves and reads nothing
        from autogen.discovery.pairing import pair_adapters, pair_drafts  # noqa: PLC0415
        from autogen.discovery.walk import discover  # noqa: PLC0415
        from autogen.emit.dispatch import global_inputs  # noqa: PLC0415
        from autogen.emit.llama_profiles import draft_path  # noqa: PLC0415
        from autogen.metadata.cache import MetaCache  # noqa: PLC0415
        from autogen.resolve.job import engine_for, make_job, with_sleep  # noqa: PLC0415

        path_map = path_map if path_map is not None else PathMap.of(settings)
        cache = MetaCache(settings.cache_dir)
        previous = load_ledger(settings.cache_dir)
        opens = (lambda path: path_map.unreachable(path) is None) if path_map is not None else None
        discovery = discover(settings.roots, cache.gguf, cache.config, cache.head, cache.safetensors, previous,
                             cache.hf_meta, prefer=opens)
        # the walk read each model's metadata and hands it on (a row it could not read has an error)
        errors = dict(discovery.row_errors)
        metas: dict[str, ModelMeta | None] = {row.id: discovery.metas.get(row.path) if row.id not in errors else None
                                              for row in discovery.models}
        discovery = attrs.evolve(discovery, metas={})  # handed on; the load memo keeps the resolution's
        discovery = pair_adapters(discovery, metas, lambda path: _meta_or_none(cache, path),
                                  lambda row: None if row.id in errors else engine_for(settings, row, metas[row.id]),
                                  previous)
        discovery = pair_drafts(discovery, metas)
        jobs: list[Job] = []
        drafts: dict[str, DraftModel] = {}
        for row in discovery.models:
            job = make_job(settings, row, metas[row.id], errors.get(row.id), card, fleet=fleet)
            found = draft_path(row, job.override)
            if found is not None:
                drafts[row.id], job = _draft(cache, job, metas, *found)
            jobs.append(job)
        ports = load_ports(settings.cache_dir)
        jobs, sleep = with_sleep(settings, jobs, ports, host_ram_bytes(settings.host_ram_gb))
        cache.save()
        stamps = {job.row.id: _inputs_stamp(cache, job) for job in jobs}
        # the map (its resolved links included) is part of every fragment's key
        settings_key = digest(global_inputs(settings) + repr(path_map))
        loaded = Loaded(discovery, rows=tuple(job.row for job in jobs), keys={}, docs={}, sides={},
                        settings_key=settings_key, resolved=b"")
        library = cls(settings, card, path_map, loaded, Resolution(jobs, metas, stamps, drafts), cache)
        library.sleep = (ports, sleep)
        return library

    def memo_record(self) -> Loaded:
        """What the load memo keeps of this library: every model's key, doc and side files
        computed now, so a run served from it computes none."""
        from autogen.commands.report import task_doc  # noqa: PLC0415 - lazy: only when the memo is written

        for job in self.jobs:
            self.model_key(job.row.id)
            self._loaded.docs[job.row.id] = task_doc(self, job)
            if sides := side_files(self.settings, job):
                self._loaded.sides[job.row.id] = sides
        resolved = pickle.dumps(self._resolved(), protocol=pickle.HIGHEST_PROTOCOL)
        return attrs.evolve(self._loaded, discovery=self.discovery, resolved=resolved)

    def _resolved(self) -> Resolution:
        if self._resolution is None:
            self._resolution = pickle.loads(self._loaded.resolved)
        return self._resolution

    @property
    def jobs(self) -> list[Job]:
        """Every model resolved, in task order."""
        return self._resolved().jobs

    def job(self, model_id: str) -> Job:
        return self._jobs_by_id[model_id]

    @functools.cached_property
    def _jobs_by_id(self) -> dict[str, Job]:
        return {job.row.id: job for job in self.jobs}

    @property
    def metas(self) -> dict[str, ModelMeta | None]:
        """id → the model's metadata (None: none readable)."""
        return self._resolved().metas

    @property
    def stamps(self) -> dict[str, str]:
        """id → the size and head hash of each of its input files (`_inputs_stamp`)."""
        return self._resolved().stamps

    @property
    def drafts(self) -> dict[str, DraftModel]:
        """id → the draft of its speculative-decoding profile, header read."""
        return self._resolved().drafts

    @functools.cached_property
    def profile_owners(self) -> dict[str, str]:
        """Profile ids several models make → the model that keeps it (cross-model profile clashes)."""
        from autogen.emit.dispatch import profile_owners  # noqa: PLC0415 - lazy: only planning needs it

        return profile_owners(self.jobs, self.settings)

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
            return build_plan(job, self.metas.get(job.row.id), self.settings, self.metas.keys(),  # keys: every id
                              self.profile_owners, self.drafts.get(job.row.id), readings)
        return plan_with_engine(build, job, self.engine)

    def served(self, job: Job, plan: Plan) -> Plan:
        """`plan` with the paths the engine sees (`path_map`)."""
        if self.path_map is None:
            return plan
        from autogen.emit.served_paths import plan_files, serve_plan  # noqa: PLC0415 - lazy, as `host_plan`

        return serve_plan(plan, self.path_map, plan_files(job.row, job.override, self.settings, plan), job.row.inputs)

    def model_key(self, model_id: str) -> str:
        """Digest of everything the model's fragment depends on besides its files."""
        key = self._loaded.keys.get(model_id)
        if key is None:
            from autogen.emit.dispatch import model_inputs  # noqa: PLC0415 - lazy: keys are in the memo

            job = self.job(model_id)
            key = self._loaded.keys[model_id] = digest(
                model_inputs(job, self.settings, self.settings_key, self.metas.keys(), self.profile_owners)
                + self.stamps[model_id] + self.engine.key(job))
        return key

    def doc(self, model_id: str) -> str:
        """The model task's line in `doit list` (`report.task_doc`)."""
        doc = self._loaded.docs.get(model_id)
        if doc is None:
            from autogen.commands.report import task_doc  # noqa: PLC0415 - lazy: docs are in the memo

            doc = self._loaded.docs[model_id] = task_doc(self, self.job(model_id))
        return doc

    def side_files(self, model_id: str) -> tuple[str, ...]:
        """Files the model's task writes beside its fragment (a missing one re-runs the task)."""
        if self._loaded.resolved:  # from the memo: its record
            return self._loaded.sides.get(model_id, ())
        return side_files(self.settings, self.job(model_id))


def side_files(settings: Settings, job: Job) -> tuple[str, ...]:
    """Files a model's task writes beside its fragment: the server config of the engine its
    format asks for, when that engine's emitter writes one (audio.cpp's: `EngineRow.config_file`)."""
    from autogen.engines import engine_row, imported  # noqa: PLC0415 - lazy: read when the memo is written

    config_file = engine_row(job.prefer).config_file if job.prefer else ""
    if config_file and job.error is None:
        return (imported(config_file)(settings.cache_dir, job.row.id),)  # its emitter's module: those models only
    return ()


def _meta_or_none(cache: MetaCache, path: str) -> ModelMeta | None:
    try:
        return cache.meta(path)
    except ModelError:
        return None


def _draft(cache: MetaCache, job: Job, metas: dict[str, ModelMeta | None], path: str,
           why: str) -> tuple[DraftModel, Job]:
    """The draft of a model's `-draft` profile with its header read; a draft pinned by path
    becomes an input of the model (paired drafts already are)."""
    from autogen.resolve.context import DraftModel  # noqa: PLC0415 - lazy: only discovery reads drafts

    paired = job.row.spec_draft
    if paired is not None and paired.path == path:
        return DraftModel(path=path, meta=metas.get(paired.model_id), size_bytes=paired.size_bytes, why=why), job
    try:
        size = os.path.getsize(path)
    except OSError:
        return DraftModel(path=path, meta=None, size_bytes=0, why=why), job
    job = attrs.evolve(job, row=attrs.evolve(job.row, inputs=(*job.row.inputs, path)))
    return DraftModel(path=path, meta=_meta_or_none(cache, path), size_bytes=size, why=why), job


def _inputs_stamp(cache: MetaCache, job: Job) -> str:
    """The size and head hash of every input file, as discovery signed them: the fragment's
    name carries them, so a file changed between loading and the task's run, or changed and
    changed back while a run was interrupted, names another fragment (the head, not the mtime:
    a `touch` alone re-emits nothing)."""
    stamps = []
    for path in job.row.inputs:
        entry = cache.entries.get(path) or {}
        stamps.append(f"|{entry.get('size')},{entry.get('head')}")
    return "".join(stamps)
