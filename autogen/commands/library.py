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

from autogen import GENERATOR_VERSION, __version__
from autogen.commands.checks import check_roots, check_vanished, no_budget, unmatched_settings
from autogen.commands.engine_binaries import engine_state
from autogen.discovery.naming import Ledger, load_ledger, save_ledger
from autogen.discovery.pairing import pair_adapters, pair_drafts
from autogen.discovery.walk import Discovery, discover, walk_signature
from autogen.emit.dispatch import Job, build_plan, engine_for, global_inputs, make_job, model_inputs, profile_owners
from autogen.emit.entry import Plan
from autogen.emit.llama_profiles import draft_path
from autogen.emit.served_paths import PathMap, plan_files, serve_plan
from autogen.errors import ModelError
from autogen.fsutil import code_stamp, write_if_changed
from autogen.metadata.cache import MetaCache
from autogen.metadata.model_meta import ModelMeta
from autogen.resolve.context import DraftModel
from autogen.resolve.gpus import card_vram_gb, inventory
from autogen.resolve.nodes import Fleet
from autogen.settings.schema import Settings

if TYPE_CHECKING:
    from autogen.commands.engine_figures import EngineFigures


def digest(text: str) -> str:
    return xxhash.xxh3_128_hexdigest(text.encode("utf-8", "surrogatepass"))


class LoadMemo:
    """What loading produced (discovered rows, metadata, resolved jobs), kept in `cache_dir`
    and reused while nothing it was computed from has changed: the settings, every entry
    discovery can see (`discovery.walk.walk_signature`), the card reading and GPU inventory, and
    swapgen's own code, and what the engines' own figures depend on (`engine_state`). A no-op run
    then costs a walk of `stat` calls, not a rediscovery."""

    FILE = "load-memo.pickle"

    def __init__(self, settings: Settings, card: float | None, fleet: Fleet | None = None):
        self.path = os.path.join(settings.cache_dir, self.FILE)
        self.key = digest(repr((GENERATOR_VERSION, __version__, code_stamp(), settings, card, inventory(settings),
                                 fleet, walk_signature(settings.roots), PathMap.of(settings),
                                 engine_state(settings))))

    def load(self) -> tuple | None:
        try:
            with open(self.path, "rb") as f:
                key, value = pickle.load(f)
        except Exception:
            return None
        return value if key == self.key else None

    def store(self, *value) -> None:
        with contextlib.suppress(OSError, pickle.PicklingError):
            write_if_changed(self.path, pickle.dumps((self.key, value), protocol=pickle.HIGHEST_PROTOCOL),
                             durable=False)


class Library:
    """The discovered models of one settings file, each resolved to a `Job`, with what planning
    needs: metadata per model, the run-wide settings key and the profile ids' owners."""

    def __init__(self, settings: Settings, card: float | None, discovery: Discovery,
                 metas: dict[str, ModelMeta | None], jobs: list[Job], stamps: dict[str, str],
                 keys: dict[str, str] | None = None, cache: MetaCache | None = None,
                 drafts: dict[str, DraftModel] | None = None):
        self.settings = settings
        self.card_vram_gb = card
        self.discovery = discovery
        self.metas = metas
        self.jobs = jobs
        #: id → the draft of its speculative-decoding profile, header read.
        self.drafts = drafts or {}
        #: id → the size and head hash of each of its input files (`_inputs_stamp`).
        self.stamps = stamps
        #: id → `model_key`, computed once per load and kept in the memo with what it is made of.
        self._keys = {} if keys is None else keys
        self._cache = cache
        #: `path_map` with this run's links resolved; None = paths are served as they are.
        self.path_map = PathMap.of(settings)
        # the map (its resolved links included) is part of every fragment's key
        self.settings_key = digest(global_inputs(settings) + repr(self.path_map))
        #: Profile ids several models make → the model that keeps it (cross-model profile clashes).
        self.profile_owners = profile_owners(jobs, settings)

    @classmethod
    def load(cls, settings: Settings, fleet: Fleet | None = None) -> Library:
        """From the memo when nothing it was computed from changed, else by discovery; the
        warnings of discovery are printed either way. `fleet`: the hosts a run from a fleet
        front knows (multi-node models need them)."""
        check_roots(settings)
        card = card_vram_gb(settings)
        memo = LoadMemo(settings, card, fleet)
        loaded = memo.load()
        ledger, id_changes = None, ()
        if loaded is None:
            library = cls.discover(settings, card, fleet)
            ledger, id_changes = library.discovery.ledger, library.discovery.id_changes
            library.discovery = attrs.evolve(library.discovery, ledger=Ledger(), id_changes=())  # not memoised
            keys = {job.row.id: library.model_key(job) for job in library.jobs}
            memo.store(library.discovery, library.metas, library.jobs, library.stamps, keys, None, library.drafts)
        else:
            library = cls(settings, card, *loaded)
        where = f"{fleet.host}: " if fleet is not None else ""
        if (budget := no_budget(settings, card)) is not None:
            print(f"swapgen: warning: {where}{budget}", file=sys.stderr)
        for problem in library.discovery.problems:
            print(f"swapgen: warning: {where}{problem}", file=sys.stderr)
        check_vanished(settings, library.discovery)
        if ledger is not None:  # after the vanished check: a refused run keeps the ids the live config has
            save_ledger(settings.cache_dir, ledger)
            for line in id_changes:  # said once, by the run that gives the new id
                print(f"swapgen: warning: {line}", file=sys.stderr)
        for problem in unmatched_settings(settings, library.discovery.models):
            print(f"swapgen: warning: {where}{problem}", file=sys.stderr)
        return library

    @classmethod
    def discover(cls, settings: Settings, card: float | None, fleet: Fleet | None = None) -> Library:
        """Walk the roots, read metadata through the cache, pair adapters and drafts, and
        resolve every model (no memo, no checks, nothing printed: `load` adds those for a run,
        and saves the ids given, saying which changed)."""
        cache = MetaCache(settings.cache_dir)
        previous = load_ledger(settings.cache_dir)
        discovery = discover(settings.roots, cache.gguf, cache.config, cache.head, cache.safetensors, previous)
        metas: dict[str, ModelMeta | None] = {}
        errors: dict[str, str] = {}
        for row in discovery.models:
            error = discovery.row_errors.get(row.id)
            meta = None
            if error is None and row.format in ("gguf", "hf"):
                try:
                    meta = cache.meta(row.path, hf=row.format == "hf")
                except ModelError as exc:
                    error = str(exc)
            metas[row.id] = meta
            if error is not None:
                errors[row.id] = error
        discovery = pair_adapters(discovery, metas, lambda path: _meta_or_none(cache, path),
                                  lambda row: None if row.id in errors else engine_for(settings, row, metas[row.id]))
        discovery = pair_drafts(discovery, metas)
        jobs: list[Job] = []
        drafts: dict[str, DraftModel] = {}
        for row in discovery.models:
            job = make_job(settings, row, metas[row.id], errors.get(row.id), card, fleet=fleet)
            found = draft_path(row, job.override)
            if found is not None:
                drafts[row.id], job = _draft(cache, job, metas, *found)
            jobs.append(job)
        cache.save()
        stamps = {job.row.id: _inputs_stamp(cache, job) for job in jobs}
        return cls(settings, card, discovery, metas, jobs, stamps, cache=cache, drafts=drafts)

    @functools.cached_property
    def engine(self) -> EngineFigures:
        """The engines' own figures (measurements, llama-fit-params' answers), read on first use."""
        # lazy: a run served from the load memo plans nothing
        from autogen.commands.engine_figures import EngineFigures  # noqa: PLC0415

        return EngineFigures(self.settings, self.stamps)

    @property
    def cache(self) -> MetaCache:
        """The metadata cache, loaded on first use (a run served from the load memo needs it
        only if the doit checker meets a changed file)."""
        if self._cache is None:
            self._cache = MetaCache(self.settings.cache_dir)
        return self._cache

    def plan(self, job: Job) -> Plan:
        """The model's plan with its paths as the engine will see them (`path_map`)."""
        return self.served(job, self.host_plan(job))

    def host_plan(self, job: Job) -> Plan:
        """The model's plan with this host's paths, sized with the engine's own figures where it
        has them: llama-fit-params and `swapgen calibrate` run its commands here."""
        from autogen.commands.engine_figures import plan_with_engine  # noqa: PLC0415 - lazy, as `engine`

        def build(readings):
            return build_plan(job, self.metas.get(job.row.id), self.settings, self.metas.keys(),  # keys: every id
                              self.profile_owners, self.drafts.get(job.row.id), readings)
        return plan_with_engine(build, job, self.engine)

    def served(self, job: Job, plan: Plan) -> Plan:
        """`plan` with the paths the engine sees (`path_map`)."""
        if self.path_map is None:
            return plan
        return serve_plan(plan, self.path_map, plan_files(job.row, job.override, self.settings, plan), job.row.inputs)

    def model_key(self, job: Job) -> str:
        """Digest of everything the model's fragment depends on besides its files."""
        key = self._keys.get(job.row.id)
        if key is None:
            key = self._keys[job.row.id] = digest(
                model_inputs(job, self.settings, self.settings_key, self.metas.keys(), self.profile_owners)
                + self.stamps[job.row.id] + self.engine.key(job))
        return key


def _meta_or_none(cache: MetaCache, path: str) -> ModelMeta | None:
    try:
        return cache.meta(path)
    except ModelError:
        return None


def _draft(cache: MetaCache, job: Job, metas: dict[str, ModelMeta | None], path: str,
           why: str) -> tuple[DraftModel, Job]:
    """The draft of a model's `-draft` profile with its header read; a draft pinned by path
    becomes an input of the model (paired drafts already are)."""
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
