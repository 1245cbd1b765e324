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
import sys
from contextlib import contextmanager
from typing import Any

import xxhash
from doit.dependency import FileChangedChecker
from doit.exceptions import TaskFailed
from doit.reporter import ConsoleReporter
from doit.tools import config_changed

from autogen.discovery import discover
from autogen.entry import Plan
from autogen.errors import ModelError, SwapgenError
from autogen.fsutil import read_bytes, run_lock, write_if_changed
from autogen.gpus import card_vram_gb
from autogen.metacache import MetaCache, head_hash
from autogen.metadata import ModelMeta
from autogen.plan import AUDIOCPP, Job, build_plan, global_inputs, make_job, model_inputs, profile_owners
from autogen.router import Fragment, assemble, write_config
from autogen.settings import Settings, load_settings

FRAGMENTS = "fragments"
DOIT_STATE = "doit-state.sqlite3"
#: id → digest of the inputs each model's current fragment was emitted from.
EMITTED_KEYS = "emitted-keys.json"
SUMMARY = "summary.json"


class SwapgenFileChecker(FileChangedChecker):
    """Size + mtime, and on an mtime-only change an xxhash of the first MiB (never the whole
    file: doit's md5 checker would read terabytes after a `touch`). Keep the class name stable:
    doit stores it per task and a rename re-runs every task."""

    def check_modified(self, file_path, file_stat, state):
        size, mtime_ns, head = state
        if file_stat.st_size != size:
            return True
        if file_stat.st_mtime_ns == mtime_ns:
            return False
        return head != head_hash(file_path)

    def get_state(self, dep, current_state):
        st = os.stat(dep)
        if current_state and current_state[0] == st.st_size and current_state[1] == st.st_mtime_ns:
            return None
        return [st.st_size, st.st_mtime_ns, head_hash(dep)]


def _digest(text: str) -> str:
    return xxhash.xxh3_128_hexdigest(text.encode("utf-8", "surrogatepass"))


def fragment_path(cache_dir: str, model_id: str) -> str:
    return os.path.join(cache_dir, FRAGMENTS, xxhash.xxh3_64_hexdigest(model_id.encode()) + ".json")


def side_files(settings: Settings, job: Job) -> list[str]:
    """Files a model task writes beside its fragment (a missing one re-runs the task)."""
    if job.role == AUDIOCPP and job.error is None:
        from autogen.emit_audio import audiocpp_config_path

        return [audiocpp_config_path(settings.cache_dir, job.row.id)]
    return []


class Pipeline:
    """One run's loaded state: settings, discovered models and their resolved jobs."""

    def __init__(self, settings: Settings, *, lock: bool = True, notify=None):
        self.settings = settings
        self._lock = run_lock(settings.cache_dir, notify=notify or (lambda m: print(m, file=sys.stderr)))
        if lock:
            self._lock.__enter__()
        self._locked = lock
        self.cache = MetaCache(settings.cache_dir)
        self.card_vram_gb = card_vram_gb(settings)
        self.discovery = discover(settings.roots, self.cache.gguf)
        self.metas: dict[str, ModelMeta | None] = {}
        self.jobs: list[Job] = []
        for row in self.discovery.models:
            error = self.discovery.row_errors.get(row.id)
            meta = None
            if error is None and row.format in ("gguf", "hf"):
                try:
                    meta = self.cache.meta(row.path, hf=row.format == "hf")
                except ModelError as exc:
                    error = str(exc)
            self.metas[row.id] = meta
            self.jobs.append(make_job(settings, row, meta, error, self.card_vram_gb))
        self.cache.save()
        self.settings_key = _digest(global_inputs(settings))
        #: Profile ids several models make → the model that keeps it (cross-model profile clashes).
        self.profile_owners = profile_owners(self.jobs, settings)
        self.keys_path = os.path.join(settings.cache_dir, EMITTED_KEYS)
        try:
            with open(self.keys_path, encoding="utf-8") as f:
                self.keys: dict[str, str] = json.load(f)
        except (OSError, ValueError):
            self.keys = {}
        self.new_keys: dict[str, str] = {}
        self.stats = {"emitted": 0, "written": 0}

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
        plan = self.plan(job)
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
        fragments = [Fragment.load(p) for p in paths]
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
        from autogen.plan import LLM
        from autogen.profiles_llama import profile_ids

        if job.role == LLM and job.engine == "llama" and (ids := profile_ids(job.row, job.override, self.settings)):
            doc += "  (+ profiles: " + ", ".join(i[len(job.row.id):] for i in ids) + ")"
        return doc

    def task_model(self):
        """One router fragment per discovered model (class, engine, backend, path)."""
        for job in self.jobs:
            # A plain bool, not doit's config_changed: doit inspects the signature of every
            # callable uptodate on every run, a third of a 1,000-model no-op.
            key = _digest(model_inputs(job, self.settings, self.settings_key, self.metas.keys(), self.profile_owners))
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
    global _ACTIVE
    _ACTIVE = Pipeline(load_settings(settings_path), **kwargs)
    return _ACTIVE
