"""The doit task graph: `model:<id>` per discovered model, then `config`.

Loading (what `dodo.py` does) = settings → discovery (headers through the metadata cache) →
backend resolution. A model task's `file_dep`s are its files, judged by `SwapgenFileChecker`
(size, mtime, xxhash of the first MiB: never a whole weight file); its `uptodate` is a digest of
everything else its fragment depends on (`plan.model_inputs`). The config task concatenates the
fragments, validates the result and writes it only when the bytes differ.
"""

from __future__ import annotations

import json
import os
import pickle
import sys
import traceback
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import xxhash
from doit.dependency import FileChangedChecker
from doit.exceptions import TaskFailed
from doit.reporter import ConsoleReporter
from doit.tools import config_changed

from autogen import GENERATOR_VERSION
from autogen import __version__
from autogen.discovery.walk import discover, walk_signature
from autogen.emit.entry import Plan, Skip
from autogen.errors import ModelError, SwapgenError
from autogen.fsutil import code_stamp, read_bytes, run_lock, write_if_changed
from autogen.resolve.gpus import card_vram_gb, inventory
from autogen.metadata.cache import MetaCache, head_hash
from autogen.metadata.model_meta import ModelMeta
from autogen.emit.dispatch import AUDIOCPP, Job, build_plan, global_inputs, make_job, model_inputs, profile_owners
from autogen.router.assemble import Fragment, assemble, write_config
from autogen.commands.sample import ensure_for_settings
from autogen.settings.load import find_settings, load_settings
from autogen.settings.schema import Settings

FRAGMENTS = "fragments"
DOIT_STATE = "doit-state.sqlite3"
#: id → digest of the inputs each model's current fragment was emitted from.
EMITTED_KEYS = "emitted-keys.json"
SUMMARY = "summary.json"


class SwapgenFileChecker(FileChangedChecker):
    """Size + mtime, and on an mtime-only change an xxhash of the first MiB (never the whole
    file: doit's md5 checker would read terabytes after a `touch`). Heads come from the loaded
    pipeline's metadata cache (`_ACTIVE.cache.head`), where discovery has recorded every model
    input: doit keeps no new state for an up-to-date task, so without it a touched file would
    be hashed again on every later run. Without a loaded pipeline it hashes the file itself.
    Keep the class name stable: doit stores it per task and a rename re-runs every task."""

    @staticmethod
    def _head(path: str, size: int, mtime_ns: int) -> str:
        if _ACTIVE is not None:
            return _ACTIVE.cache.head(path, size, mtime_ns)
        return head_hash(path)

    def check_modified(self, file_path, file_stat, state):
        size, mtime_ns, head = state
        if file_stat.st_size != size:
            return True
        if file_stat.st_mtime_ns == mtime_ns:
            return False
        return head != self._head(file_path, file_stat.st_size, file_stat.st_mtime_ns)

    def get_state(self, dep, current_state):
        st = os.stat(dep)
        if current_state and current_state[0] == st.st_size and current_state[1] == st.st_mtime_ns:
            return None
        return [st.st_size, st.st_mtime_ns, self._head(dep, st.st_size, st.st_mtime_ns)]


def _digest(text: str) -> str:
    return xxhash.xxh3_128_hexdigest(text.encode("utf-8", "surrogatepass"))


def fragment_path(cache_dir: str, model_id: str) -> str:
    return os.path.join(cache_dir, FRAGMENTS, xxhash.xxh3_64_hexdigest(model_id.encode()) + ".json")


def side_files(settings: Settings, job: Job) -> list[str]:
    """Files a model task writes beside its fragment (a missing one re-runs the task)."""
    if job.role == AUDIOCPP and job.error is None:
        from autogen.emit.audio import audiocpp_config_path

        return [audiocpp_config_path(settings.cache_dir, job.row.id)]
    return []


def check_roots(settings: Settings) -> None:
    """A root that is missing or cannot be listed (a typo, an unmounted disk) stops the run:
    writing a config without its models would unload them all from llama-swap."""
    for i, root in enumerate(settings.roots):
        try:
            with os.scandir(root):
                pass
        except OSError as exc:
            raise SwapgenError(f"roots[{i}]: cannot list {root} ({exc.strerror or exc}); nothing was written") from None


class LoadMemo:
    """What loading produced (discovered rows, metadata, resolved jobs), kept in `cache_dir`
    and reused while nothing it was computed from has changed: the settings, every entry
    discovery can see (`discovery.walk_signature`), the card reading and GPU inventory, and
    swapgen's own code. A no-op run then costs a walk of `stat` calls, not a rediscovery."""

    FILE = "load-memo.pickle"

    def __init__(self, settings: Settings, card: float | None):
        self.path = os.path.join(settings.cache_dir, self.FILE)
        self.key = _digest(repr((GENERATOR_VERSION, __version__, code_stamp(), settings, card, inventory(settings),
                                 walk_signature(settings.roots))))

    def load(self) -> tuple | None:
        try:
            with open(self.path, "rb") as f:
                key, value = pickle.load(f)
        except Exception:  # noqa: BLE001 - a missing, stale or foreign memo is just a miss
            return None
        return value if key == self.key else None

    def store(self, *value) -> None:
        try:
            write_if_changed(self.path, pickle.dumps((self.key, value), protocol=pickle.HIGHEST_PROTOCOL),
                             durable=False)
        except (OSError, pickle.PicklingError):
            pass


class Pipeline:
    """One run's loaded state: settings, discovered models and their resolved jobs."""

    def __init__(self, settings: Settings, *, lock: bool = True, notify=None):
        self.settings = settings
        check_roots(settings)
        self._lock = run_lock(settings.cache_dir, notify=notify or (lambda m: print(m, file=sys.stderr)))
        if lock:
            try:
                self._lock.__enter__()
            except OSError as exc:
                raise SwapgenError(f"{settings.cache_dir}: cannot use the cache folder ({exc.strerror or exc}); "
                                   "check `cache_dir` in the settings file") from None
        self._locked = lock
        try:
            self._load(settings)
        except BaseException:
            self.close()  # a failed load must not keep the lock (an in-process caller may retry)
            raise

    def _load(self, settings: Settings) -> None:
        self.new_keys: dict[str, str] = {}
        self._cache: MetaCache | None = None
        self.card_vram_gb = card_vram_gb(settings)
        memo = LoadMemo(settings, self.card_vram_gb)
        loaded = memo.load()
        if loaded is None:
            self._discover(settings)
            memo.store(self.discovery, self.metas, self.jobs, self.stamps)
        else:
            self.discovery, self.metas, self.jobs, self.stamps = loaded
        for problem in self.discovery.problems:
            print(f"swapgen: warning: {problem}", file=sys.stderr)
        self.settings_key = _digest(global_inputs(settings))
        #: Profile ids several models make → the model that keeps it (cross-model profile clashes).
        self.profile_owners = profile_owners(self.jobs, settings)
        self.keys_path = os.path.join(settings.cache_dir, EMITTED_KEYS)
        try:
            with open(self.keys_path, encoding="utf-8") as f:
                self.keys: dict[str, str] = json.load(f)
        except (OSError, ValueError):
            self.keys = {}
        self.stats = {"emitted": 0, "written": 0}

    def _discover(self, settings: Settings) -> None:
        """Walk the roots, read metadata through the cache and resolve every model."""
        cache = self.cache
        self.discovery = discover(settings.roots, cache.gguf, cache.config, cache.head)
        self.metas: dict[str, ModelMeta | None] = {}
        self.jobs: list[Job] = []
        for row in self.discovery.models:
            error = self.discovery.row_errors.get(row.id)
            meta = None
            if error is None and row.format in ("gguf", "hf"):
                try:
                    meta = cache.meta(row.path, hf=row.format == "hf")
                except ModelError as exc:
                    error = str(exc)
            self.metas[row.id] = meta
            self.jobs.append(make_job(settings, row, meta, error, self.card_vram_gb))
        cache.save()
        self.stamps = {job.row.id: self._meta_stamp(job) for job in self.jobs}

    @property
    def cache(self) -> MetaCache:
        """The metadata cache, loaded on first use (a run served from the load memo needs it
        only if the doit checker meets a changed file)."""
        if self._cache is None:
            self._cache = MetaCache(self.settings.cache_dir)
        return self._cache

    def save_keys(self) -> None:
        """Record the inputs of the fragments emitted this run (kept: those of current models)."""
        if not self.new_keys:
            return
        current = {job.row.id for job in self.jobs}
        keys = {k: v for k, v in self.keys.items() if k in current}
        keys.update(self.new_keys)
        write_if_changed(self.keys_path, json.dumps(keys, sort_keys=True).encode(), durable=False)
        self.keys, self.new_keys = keys, {}

    def close(self) -> None:
        self.save_keys()
        if self._locked:
            self._lock.__exit__(None, None, None)
            self._locked = False

    # -- actions ------------------------------------------------------------------------------

    def plan(self, job: Job) -> Plan:
        return build_plan(job, self.metas.get(job.row.id), self.settings, self.metas.keys(),  # keys: every model id
                          self.profile_owners)

    def emit_model(self, job: Job, key: str) -> bool:
        try:
            plan = self.plan(job)
        except Exception as exc:  # noqa: BLE001 - a bug in one emitter must not cost the whole config
            traceback.print_exc(file=sys.stderr)
            plan = Plan(model_id=job.row.id, skips=(Skip(job.row.id, f"internal error while planning "
                                                               f"({type(exc).__name__}: {exc}); please report it"),))
        summary = {"role": job.role, "engine": job.engine, "backend": job.backend_id,
                   "why": job.backend.why if job.backend else "", "path": job.row.path,
                   "entries": [e.id for e in plan.entries],
                   "skips": [[s.id, s.reason] for s in plan.skips]}
        for path, text in plan.files:  # e.g. audio.cpp's server config, named by its cmd
            write_if_changed(path, text.encode("utf-8"))
        fragment = Fragment.from_plan(plan, summary)
        self.stats["emitted"] += 1
        if write_if_changed(fragment_path(self.settings.cache_dir, job.row.id), fragment.to_json(), durable=False):
            self.stats["written"] += 1
        self.new_keys[job.row.id] = key
        return True

    def assemble(self) -> dict[str, str] | TaskFailed:
        paths = [fragment_path(self.settings.cache_dir, job.row.id) for job in self.jobs]
        fragments = []
        for job, path in zip(self.jobs, paths):
            try:
                fragments.append(Fragment.load(path))
            except (OSError, ValueError, KeyError, TypeError) as exc:
                try:
                    os.unlink(path)  # its model task re-runs next time (its target is gone)
                except OSError:
                    pass
                return TaskFailed(f"{path}: unreadable fragment of model {job.row.id!r} ({exc}); removed, "
                                  "run swapgen again")
        text = assemble(self.settings, fragments)
        try:
            written = write_config(self.settings.output, text)
        except SwapgenError as exc:
            return TaskFailed(str(exc))
        self.stats["config"] = "written" if written else "unchanged"
        served = sum(1 for f in fragments if f.members)
        write_if_changed(os.path.join(self.settings.cache_dir, SUMMARY),
                         json.dumps({"served": served, "skipped": len(fragments) - served}).encode(), durable=False)
        self._prune_fragments(set(paths))
        return {"digest": xxhash.xxh3_128_hexdigest(text.encode())}

    def _prune_fragments(self, keep: set[str]) -> None:
        folder = os.path.join(self.settings.cache_dir, FRAGMENTS)
        for name in os.listdir(folder):
            path = os.path.join(folder, name)
            if path not in keep and name.endswith(".json"):
                os.unlink(path)

    def output_intact(self, task, values) -> bool:
        """The config task is up to date only while the output still holds what we wrote."""
        data = read_bytes(self.settings.output)
        return data is not None and values.get("digest") == xxhash.xxh3_128_hexdigest(data)

    def summary_line(self) -> str:
        """`swapgen: 9 models (7 served, 2 skipped); 1 re-emitted, 8 unchanged; config.yaml written`"""
        try:
            with open(os.path.join(self.settings.cache_dir, SUMMARY), encoding="utf-8") as f:
                counts = json.load(f)
            served = f"{counts['served']} served, {counts['skipped']} skipped"
        except (OSError, ValueError, KeyError):
            served = "not assembled"
        total, emitted = len(self.jobs), self.stats["emitted"]
        return (f"swapgen: {total} models ({served}); {emitted} re-emitted, {total - emitted} unchanged; "
                f"{os.path.basename(self.settings.output)} {self.stats.get('config', 'unchanged')}")

    # -- tasks --------------------------------------------------------------------------------

    def doc(self, job: Job) -> str:
        where = job.row.path
        if job.error:
            return f"SKIPPED  {job.error}  ({where})"
        doc = f"{job.role:<9} {job.engine:<6} {job.backend_id} ({job.backend.why})  {where}"
        from autogen.emit.dispatch import LLM
        from autogen.emit.llama_profiles import profile_ids

        if job.role == LLM and job.engine == "llama" and (ids := profile_ids(job.row, job.override, self.settings)):
            doc += "  (+ profiles: " + ", ".join(i[len(job.row.id):] for i in ids) + ")"
        return doc

    def _meta_stamp(self, job: Job) -> str:
        """The size and head hash the model's metadata was read from: a file changed between
        loading and the task's run is recorded by doit as seen, so the key must say what the
        fragment used (the head, not the mtime: a `touch` alone re-emits nothing)."""
        path = os.path.join(job.row.path, "config.json") if job.row.format == "hf" else job.row.path
        entry = self.cache.entries.get(path) or {}
        return f"|{entry.get('size')},{entry.get('head')}"

    def model_key(self, job: Job) -> str:
        """Digest of everything the model's fragment depends on besides its files."""
        return _digest(model_inputs(job, self.settings, self.settings_key, self.metas.keys(), self.profile_owners)
                       + self.stamps[job.row.id])

    def task_model(self):
        """One router fragment per discovered model (class, engine, backend, path)."""
        for job in self.jobs:
            # A plain bool, not doit's config_changed: doit inspects the signature of every
            # callable uptodate on every run, a third of a 1,000-model no-op.
            key = self.model_key(job)
            yield {
                "name": job.row.id,
                "doc": self.doc(job),
                "file_dep": list(job.row.inputs),
                "targets": [fragment_path(self.settings.cache_dir, job.row.id), *side_files(self.settings, job)],
                "actions": [(self.emit_model, [job, key])],
                "uptodate": [self.keys.get(job.row.id) == key],
                "clean": True,
            }

    def task_config(self):
        """Assemble, validate and write the llama-swap config (only when its bytes change)."""
        router_key = repr((self.settings_key, self.settings.health_check_timeout, self.settings.groups,
                           self.settings.source, self.settings.output))
        return {
            "actions": [self.assemble],
            "file_dep": [fragment_path(self.settings.cache_dir, job.row.id) for job in self.jobs],
            "targets": [self.settings.output],
            "uptodate": [config_changed(_digest(router_key)), self.output_intact],
            "clean": True,
        }

    def namespace(self) -> dict[str, Any]:
        """What a dodo file exposes: DOIT_CONFIG and the task creators."""
        os.makedirs(os.path.join(self.settings.cache_dir, FRAGMENTS), exist_ok=True)
        return {
            "DOIT_CONFIG": {
                "backend": "sqlite3",
                "dep_file": os.path.join(self.settings.cache_dir, DOIT_STATE),
                "check_file_uptodate": SwapgenFileChecker,
                "default_tasks": ["model", "config"],
                "reporter": SummaryReporter,
                # doit's default is the sys.stdout of the moment doit was imported
                "outfile": sys.stdout,
                "verbosity": 1,
                # `-n N` runs tasks in threads: actions update this pipeline's keys and stats
                "par_type": "thread",
                "subtasks": True,
            },
            "task_model": self.task_model,
            "task_config": self.task_config,
        }


class SummaryReporter(ConsoleReporter):
    """doit's console reporter without a line per up-to-date task, our own failures as one
    clear message on stderr (tracebacks only for bugs), and one summary line."""

    def skip_uptodate(self, task):
        pass

    @contextmanager
    def _to_stderr(self):
        self.outstream, stdout = sys.stderr, self.outstream
        try:
            yield
        finally:
            self.outstream = stdout

    def add_failure(self, task, fail):
        if isinstance(fail, TaskFailed):
            sys.stderr.write(f"swapgen: {fail.message}\n")
            self.failures.append({"task": task, "exception": fail, "shown": True})
        else:
            super().add_failure(task, fail)

    def _write_failure(self, result, write_exception=True):
        with self._to_stderr():
            super()._write_failure(result, write_exception)

    def complete_run(self):
        shown = [f for f in self.failures if f.get("shown")]
        self.failures = [f for f in self.failures if not f.get("shown")]
        with self._to_stderr():
            super().complete_run()
        if _ACTIVE is not None:
            _ACTIVE.save_keys()
        if _ACTIVE is not None and not self.failures and not shown:
            self.write(_ACTIVE.summary_line() + "\n")


_ACTIVE: Pipeline | None = None


def load(settings_path: str | None = None, **kwargs) -> Pipeline:
    """Settings → pipeline (the bundled sample library is built on first use of its settings)."""
    global _ACTIVE
    for stream in (sys.stdout, sys.stderr):  # paths that are not valid UTF-8 print escaped
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    path = find_settings(settings_path)
    ensure_for_settings(path, Path(__file__).resolve().parents[2])
    _ACTIVE = Pipeline(load_settings(path), **kwargs)
    return _ACTIVE
