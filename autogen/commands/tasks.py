"""The doit task graph: `model:<id>` per discovered model, then `config`.

A model task's `file_dep`s are its files, judged by `SwapgenFileChecker` (size, mtime, xxhash
of the first MiB: never a whole weight file); its `uptodate` is a digest of everything else its
fragment depends on (`Library.model_key`). The config task concatenates the fragments,
validates the result and writes it only when the bytes differ. `load` is what `dodo.py` and
`swapgen` call: settings → lock → `Library` → `TaskGraph`.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import xxhash
from doit.cmd_base import ModuleTaskLoader
from doit.dependency import FileChangedChecker
from doit.doit_cmd import DoitMain
from doit.exceptions import TaskFailed
from doit.tools import config_changed

from autogen.commands.library import Library, digest
from autogen.commands.report import SUMMARY, SummaryReporter, task_doc
from autogen.commands.sample import ensure_for_settings
from autogen.emit.audio import audiocpp_config_path
from autogen.emit.dispatch import Job
from autogen.emit.entry import Plan
from autogen.errors import SwapgenError
from autogen.fsutil import read_bytes, run_lock, write_if_changed
from autogen.metadata.cache import head_hash
from autogen.resolve.roles import Role
from autogen.router.assemble import Fragment, assemble, write_config
from autogen.settings.load import find_settings, load_settings
from autogen.settings.schema import Settings

FRAGMENTS = "fragments"
DOIT_STATE = "doit-state.sqlite3"
#: id → digest of the inputs each model's current fragment was emitted from.
EMITTED_KEYS = "emitted-keys.json"


class SwapgenFileChecker(FileChangedChecker):
    """Size + mtime, and on an mtime-only change an xxhash of the first MiB (never the whole
    file: doit's md5 checker would read terabytes after a `touch`). `TaskGraph.checker` binds
    `heads` to the library's metadata cache, where discovery has recorded every model input:
    doit keeps no new state for an up-to-date task, so without it a touched file would be
    hashed again on every later run. Unbound, it hashes the file itself. Keep the class name
    stable: doit stores it per task and a rename re-runs every task."""

    #: (path, size, mtime_ns) → head hash; None = hash the file.
    heads: Callable[[str, int, int], str] | None = None

    def _head(self, path: str, size: int, mtime_ns: int) -> str:
        return self.heads(path, size, mtime_ns) if self.heads is not None else head_hash(path)

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


def fragment_path(cache_dir: str, model_id: str) -> str:
    return os.path.join(cache_dir, FRAGMENTS, xxhash.xxh3_64_hexdigest(model_id.encode()) + ".json")


def side_files(settings: Settings, job: Job) -> list[str]:
    """Files a model task writes beside its fragment (a missing one re-runs the task)."""
    if job.role == Role.AUDIOCPP and job.error is None:
        return [audiocpp_config_path(settings.cache_dir, job.row.id)]
    return []


class TaskGraph:
    """The doit side of one run: the task creators, their actions and the record of which
    inputs each fragment was emitted from. Holds the run lock until `close`."""

    def __init__(self, library: Library, lock=None):
        self.library = library
        self._lock = lock
        self.keys_path = os.path.join(library.settings.cache_dir, EMITTED_KEYS)
        try:
            with open(self.keys_path, encoding="utf-8") as f:
                self.keys: dict[str, str] = json.load(f)
        except (OSError, ValueError):
            self.keys = {}
        self.new_keys: dict[str, str] = {}
        self.stats: dict[str, Any] = {"emitted": 0, "written": 0}
        # doit instantiates these itself: subclasses carry this graph (same class names, which doit stores)
        self.checker = type("SwapgenFileChecker", (SwapgenFileChecker,), {"heads": staticmethod(self._head)})
        self.reporter = type("SummaryReporter", (SummaryReporter,), {"graph": self})

    def _head(self, path: str, size: int, mtime_ns: int) -> str:
        return self.library.cache.head(path, size, mtime_ns)

    def save_keys(self) -> None:
        """Record the inputs of the fragments emitted this run (kept: those of current models)."""
        if not self.new_keys:
            return
        current = {job.row.id for job in self.library.jobs}
        keys = {k: v for k, v in self.keys.items() if k in current}
        keys.update(self.new_keys)
        write_if_changed(self.keys_path, json.dumps(keys, sort_keys=True).encode(), durable=False)
        self.keys, self.new_keys = keys, {}

    def close(self) -> None:
        self.save_keys()
        if self._lock is not None:
            self._lock.__exit__(None, None, None)
            self._lock = None

    def fragment_is_current(self, job: Job) -> bool:
        """The model's fragment was emitted from today's inputs."""
        return self.keys.get(job.row.id) == self.library.model_key(job)

    # -- actions ------------------------------------------------------------------------------

    def emit_model(self, job: Job, key: str) -> bool:
        try:
            plan = self.library.plan(job)
        except Exception as exc:  # noqa: BLE001 - a bug in one emitter must not cost the whole config
            traceback.print_exc(file=sys.stderr)
            plan = Plan.skip(job.row.id, f"internal error while planning ({type(exc).__name__}: {exc}); "
                                         "please report it")
        summary = {"role": job.role, "engine": job.engine, "backend": job.backend_id,
                   "why": job.backend.why if job.backend else "", "path": job.row.path,
                   "entries": [e.id for e in plan.entries],
                   "skips": [[s.id, s.reason] for s in plan.skips]}
        for path, text in plan.files:  # e.g. audio.cpp's server config, named by its cmd
            write_if_changed(path, text.encode("utf-8"))
        fragment = Fragment.from_plan(plan, summary)
        self.stats["emitted"] += 1
        if write_if_changed(fragment_path(self.library.settings.cache_dir, job.row.id), fragment.to_json(), durable=False):
            self.stats["written"] += 1
        self.new_keys[job.row.id] = key
        return True

    def assemble(self) -> dict[str, str] | TaskFailed:
        paths = [fragment_path(self.library.settings.cache_dir, job.row.id) for job in self.library.jobs]
        fragments = []
        for job, path in zip(self.library.jobs, paths):
            try:
                fragments.append(Fragment.load(path))
            except (OSError, ValueError, KeyError, TypeError) as exc:
                try:
                    os.unlink(path)  # its model task re-runs next time (its target is gone)
                except OSError:
                    pass
                return TaskFailed(f"{path}: unreadable fragment of model {job.row.id!r} ({exc}); removed, "
                                  "run swapgen again")
        text = assemble(self.library.settings, fragments)
        try:
            written = write_config(self.library.settings.output, text)
        except SwapgenError as exc:
            return TaskFailed(str(exc))
        self.stats["config"] = "written" if written else "unchanged"
        served = sum(1 for f in fragments if f.members)
        write_if_changed(os.path.join(self.library.settings.cache_dir, SUMMARY),
                         json.dumps({"served": served, "skipped": len(fragments) - served}).encode(), durable=False)
        self._prune_fragments(set(paths))
        return {"digest": xxhash.xxh3_128_hexdigest(text.encode())}

    def _prune_fragments(self, keep: set[str]) -> None:
        folder = os.path.join(self.library.settings.cache_dir, FRAGMENTS)
        for name in os.listdir(folder):
            path = os.path.join(folder, name)
            if path not in keep and name.endswith(".json"):
                os.unlink(path)

    def output_intact(self, task, values) -> bool:
        """The config task is up to date only while the output still holds what we wrote."""
        data = read_bytes(self.library.settings.output)
        return data is not None and values.get("digest") == xxhash.xxh3_128_hexdigest(data)

    # -- tasks --------------------------------------------------------------------------------

    def task_model(self):
        """One router fragment per discovered model (class, engine, backend, path)."""
        for job in self.library.jobs:
            # A plain bool, not doit's config_changed: doit inspects the signature of every
            # callable uptodate on every run, a third of a 1,000-model no-op.
            key = self.library.model_key(job)
            yield {
                "name": job.row.id,
                "doc": task_doc(self.library, job),
                "file_dep": list(job.row.inputs),
                "targets": [fragment_path(self.library.settings.cache_dir, job.row.id), *side_files(self.library.settings, job)],
                "actions": [(self.emit_model, [job, key])],
                "uptodate": [self.keys.get(job.row.id) == key],
                "clean": True,
            }

    def task_config(self):
        """Assemble, validate and write the llama-swap config (only when its bytes change)."""
        router_key = repr((self.library.settings_key, self.library.settings.health_check_timeout, self.library.settings.groups,
                           self.library.settings.source, self.library.settings.output))
        return {
            "actions": [self.assemble],
            "file_dep": [fragment_path(self.library.settings.cache_dir, job.row.id) for job in self.library.jobs],
            "targets": [self.library.settings.output],
            "uptodate": [config_changed(digest(router_key)), self.output_intact],
            "clean": True,
        }

    def namespace(self) -> dict[str, Any]:
        """What a dodo file exposes: DOIT_CONFIG and the task creators."""
        os.makedirs(os.path.join(self.library.settings.cache_dir, FRAGMENTS), exist_ok=True)
        return {
            "DOIT_CONFIG": {
                "backend": "sqlite3",
                "dep_file": os.path.join(self.library.settings.cache_dir, DOIT_STATE),
                "check_file_uptodate": self.checker,
                "default_tasks": ["model", "config"],
                "reporter": self.reporter,
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


def load(settings_path: str | None = None, *, lock: bool = True, notify=None) -> TaskGraph:
    """Settings → run lock → library → task graph (the bundled sample library is built on first
    use of its settings). The caller closes the graph; `dodo.py` leaves that to process exit."""
    for stream in (sys.stdout, sys.stderr):  # paths that are not valid UTF-8 print escaped
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    path = find_settings(settings_path)
    ensure_for_settings(path, Path(__file__).resolve().parents[2])
    settings = load_settings(path)
    held = _acquire(settings, notify) if lock else None
    try:
        return TaskGraph(Library.load(settings), held)
    except BaseException:
        if held is not None:  # a failed load must not keep the lock (an in-process caller may retry)
            held.__exit__(None, None, None)
        raise


def _acquire(settings: Settings, notify):
    held = run_lock(settings.cache_dir, notify=notify or (lambda m: print(m, file=sys.stderr)))
    try:
        held.__enter__()
    except OSError as exc:
        raise SwapgenError(f"{settings.cache_dir}: cannot use the cache folder ({exc.strerror or exc}); "
                           "check `cache_dir` in the settings file") from None
    return held


def run_doit(graph: TaskGraph, args: list[str]) -> int:
    """doit's command line (`run`, `list`, `info`, …) on this graph; closes the graph."""
    try:
        return DoitMain(ModuleTaskLoader(graph.namespace())).run(args)
    finally:
        graph.close()
