"""The doit task graph: `model:<id>` per discovered model, then `config`.

A model task's target is its fragment, named after the digest of every input it is emitted
from (`Library.model_key`: settings, resolution, and each file's size and head hash). The name is
the record of those inputs, so the two change in one rename and an interrupted run (Ctrl-C,
SIGTERM, SIGKILL, power loss) can never leave a fragment that claims inputs it was not built
from: a changed input names a fragment that does not exist yet, and doit runs the task. doit's
own state (`file_dep`s judged by `SwapgenFileChecker`: size, mtime, xxhash of the first MiB) is
saved only when a run ends, so it can be older than the fragments; it can only add re-runs.

The config task runs after the model tasks, concatenates the fragments, validates the result
and writes it only when the bytes differ; it is out of date when a fragment's name, size or
mtime is not as it last read them (`fragments_read`: one digest, not a doit state per
fragment). `load` is what `dodo.py` and `swapgen` call: settings → lock → `Library` → `TaskGraph`.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import xxhash
from doit.cmd_base import ModuleTaskLoader
from doit.cmd_info import Info
from doit.dependency import FileChangedChecker
from doit.doit_cmd import DoitMain
from doit.exceptions import InvalidCommand, TaskFailed
from doit.tools import config_changed

from autogen.commands.library import LIBRARY_MEMO, RUN_MEMO, Library, digest
from autogen.commands.report import SUMMARY, SummaryReporter
from autogen.commands.sample import ensure_for_settings
from autogen.discovery.ledger import LEDGER
from autogen.errors import SwapgenError, did_you_mean
from autogen.fsutil import read_bytes, remove_stale_temps, run_lock, write_if_changed
from autogen.resolve.gpus import GPU_CACHE_FILE, inventory
from autogen.settings.fields import CONFIG, inputs_of
from autogen.settings.load import find_settings, load_settings
from autogen.settings.schema import LLAMA_SERVER, Host, Settings

if TYPE_CHECKING:  # what emitting and assembling use: a no-op run imports none of it
    from autogen.resolve.job import Job
    from autogen.router.assemble import Fragment
    from autogen.router.checked_blocks import Assembled
    from autogen.router.fleet import Peer

#: The metadata cache's file (`metadata.cache.CACHE_FILE`, which a no-op run does not import; a
#: test keeps the two in step).
CACHE_FILE = "metadata.json"

#: The blocks of the config found valid (`router.checked_blocks.FILE`, kept in step by a test).
CHECKED_BLOCKS = "checked-blocks.json"

FRAGMENTS = "fragments"
#: Fragment path → (its file's identity, the fragment) as this process last read it.
_READ_FRAGMENTS: dict[str, tuple[tuple[int, int, int], Fragment]] = {}
DOIT_STATE = "doit-state.sqlite3"


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C raises KeyboardInterrupt: doit stops the same way (it saves
    its state for the tasks that finished) and the run lock is released. `signum` is the signal
    (a calibration stops on SIGHUP too), for the exit status 128 + signum."""

    def __init__(self, signum: int = signal.SIGTERM):
        super().__init__(signum)
        self.signum = signum


def _raise_terminated(signum, frame):
    raise Terminated()


class ClosedPipe(BaseException):
    """stdout's reader left (`swapgen info model:x | head`). doit prints a traceback for every
    `Exception` a command raises, so the `BrokenPipeError` is turned into this, which it lets
    through to the CLI's quiet exit."""


class _PipeGuard:
    """sys.stdout while doit runs: a write or flush into a closed pipe raises `ClosedPipe`."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            raise ClosedPipe() from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise ClosedPipe() from None

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


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
        if self.heads is not None:
            return self.heads(path, size, mtime_ns)
        from autogen.metadata.cache import head_hash  # noqa: PLC0415 - lazy: only for a changed file

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


def fragment_path(cache_dir: str, model_id: str, key: str) -> str:
    """`fragments/<id hash>-<inputs key>.json`: the inputs a fragment was emitted from are part
    of its name, written by the same rename as its content."""
    return os.path.join(cache_dir, FRAGMENTS, f"{xxhash.xxh3_64_hexdigest(model_id.encode())}-{key}.json")


def fragments_read(paths: list[str], task, values) -> bool:
    """doit `uptodate`: the fragments are the ones, as they were, when the config last read them
    (by name, size and mtime: a name is the digest of its inputs, and a fragment cut short by a
    power loss reads again). One digest instead of a doit state per fragment, which a no-op run
    would decode and compare one by one."""
    task.value_savers.append(lambda: {"fragments": _fragments_state(paths)})  # as the run leaves them
    return values.get("fragments") == _fragments_state(paths)


def _fragments_state(paths: list[str]) -> str:
    state = xxhash.xxh3_128()
    for path in paths:
        try:
            st = os.stat(path)
            state.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\n".encode("utf-8", "surrogatepass"))
        except OSError:
            state.update(f"{path}\0missing\n".encode("utf-8", "surrogatepass"))
    return state.hexdigest()


def clean_caches(cache_dir: str) -> None:
    """What `doit clean` removes besides the fragments: the run's summary and the caches
    (never the config: llama-swap may be serving it)."""
    for name in (SUMMARY, RUN_MEMO, LIBRARY_MEMO, CACHE_FILE, CHECKED_BLOCKS):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(cache_dir, name))


class TaskGraph:
    """The doit side of one run: the task creators, their actions and the record of which
    inputs each fragment was emitted from. Holds the run locks until `close`.

    A fleet front's graph also holds one graph per host (`hosts`): their model tasks are
    `model:<host>/<id>`, their config tasks `config:<host>`, and the front's own config is the
    task `front`, which runs after them and lists each host's served ids as a peer."""

    def __init__(self, library: Library, lock=None, sigterm=None, *, host: Host | None = None,
                 hosts: tuple[TaskGraph, ...] = ()):
        self.library = library
        #: The fleet host this graph generates (None: a single host or the front).
        self.host = host
        self.hosts = hosts
        #: Task-name prefix of this graph's models: `<host>/` for a fleet host.
        self.prefix = f"{host.name}/" if host is not None else ""
        self._locks = [lock] if lock is not None else []
        #: The SIGTERM handler `load` replaced, restored by `close` (None: nothing to restore).
        self._sigterm = sigterm
        #: id → the fragment file its current inputs name.
        self.fragments = {row.id: fragment_path(library.settings.cache_dir, row.id, library.model_key(row.id))
                          for row in library.models}
        self.stats: dict[str, Any] = {"emitted": 0, "written": 0}
        # doit instantiates these itself: subclasses carry this graph (same class names, which doit stores)
        self.checker = type("SwapgenFileChecker", (SwapgenFileChecker,), {"heads": staticmethod(self._head)})
        self.reporter = type("SummaryReporter", (SummaryReporter,), {"graph": self})

    def _head(self, path: str, size: int, mtime_ns: int) -> str:
        return self._owner(path).library.cache.head(path, size, mtime_ns)

    def _owner(self, path: str) -> TaskGraph:
        """The graph whose library has `path` among its inputs (the doit checker is run-wide)."""
        for graph in self.hosts:
            if path in graph.inputs:
                return graph
        return self

    @functools.cached_property
    def inputs(self) -> frozenset[str]:
        return frozenset(p for row in self.library.models for p in row.inputs)

    @property
    def graphs(self) -> tuple[TaskGraph, ...]:
        """This graph and its hosts' (one graph when not a fleet front)."""
        return (self, *self.hosts)

    def task_name(self, model_id: str) -> str:
        return f"model:{self.prefix}{model_id}"

    def close(self) -> None:
        while self._locks:
            self._locks.pop().__exit__(None, None, None)
        if self._sigterm is not None:
            signal.signal(signal.SIGTERM, self._sigterm)
            self._sigterm = None

    def fragment_is_current(self, job: Job) -> bool:
        """The model's fragment was emitted from today's inputs."""
        return os.path.exists(self.fragments[job.row.id])

    # -- actions ------------------------------------------------------------------------------

    @functools.cached_property
    def router_exe(self) -> str | None:
        """`target: llama-server`: the binary llama.cpp's router runs every model with."""
        settings = self.library.settings
        if settings.target != LLAMA_SERVER:
            return None
        from autogen.resolve.backends import llama_router_exe  # noqa: PLC0415 - lazy: a preset's runs only

        return llama_router_exe(settings)

    def emit_model(self, model_id: str) -> bool:
        # deliberate lazy imports here and below: a no-op run emits and assembles nothing
        from autogen.emit.entry import Plan  # noqa: PLC0415
        from autogen.figures.plan import start_errors  # noqa: PLC0415
        from autogen.router.assemble import Fragment  # noqa: PLC0415
        from autogen.router.preset import preset_plan  # noqa: PLC0415

        job = self.library.job(model_id)
        failed: dict[str, str] = {}
        internal = ""
        try:
            host = self.library.host_plan(job)
            failed = start_errors(host, job, self.library.engine)
            plan = self.library.served(job, host)
        except Exception as exc:
            traceback.print_exc(file=sys.stderr)
            internal = f"{type(exc).__name__}: {exc}"
            plan = Plan.skip(job.row.id, f"internal error while planning ({internal}); please report it")
        sections, left_out = (), ()
        if self.router_exe is not None:
            plan, sections, left_out = preset_plan(plan, job.engine, self.router_exe)
        for path, text in plan.files:  # e.g. audio.cpp's server config, named by its cmd
            write_if_changed(path, text.encode("utf-8"))
        fragment = Fragment.from_plan(plan, self.library.settings.target, sections, left_out, failed, internal)
        self.stats["emitted"] += 1
        if write_if_changed(self.fragments[job.row.id], fragment.to_json(), durable=False):
            self.stats["written"] += 1
        return True

    def assemble(self) -> dict[str, str] | TaskFailed:
        from autogen.router.assemble import kept_config, output_problem, passthrough_hint, write_config  # noqa: PLC0415

        settings = self.library.settings
        refused = output_problem(settings)  # a hand-written file, a device, …: nothing is written
        if refused:
            return TaskFailed(f"{settings.source}: {refused}")
        fragments = [self._load_fragment(row.id) for row in self.library.models]
        kept = kept_config(settings, fragments, self.router_exe is not None)
        if kept:
            return TaskFailed(kept)
        conflicts = sorted({c for f in fragments for c in f.conflicts})
        if conflicts:  # an override's llama-swap key an engine's entry sets too, a path outside `path_map`
            from autogen.settings.structure import settings_error  # noqa: PLC0415 - lazy: only on an error

            return TaskFailed(f"{settings_error(self.library.settings.source, conflicts)}\nNothing was written.")
        try:
            config, counts = self._config(fragments)
        except SwapgenError as exc:
            return TaskFailed(str(exc))
        text = config if isinstance(config, str) else config.text
        digest_ = xxhash.xxh3_128_hexdigest(text.encode())
        served = sum(1 for f in fragments if f.members)
        # before the config: a summary that names the config's digest describes it (`output_intact`)
        write_if_changed(os.path.join(self.library.settings.cache_dir, SUMMARY),
                         json.dumps({"config": digest_, "served": served, "skipped": len(fragments) - served,
                                     **counts}).encode(), durable=False)
        try:
            # a preset holds no `llama_swap:` keys as given: no hint points to them
            hint = None if self.router_exe else (lambda problems: passthrough_hint(self.library.settings, problems))
            written = write_config(self.library.settings.output, config, hint, self.router_exe,
                                   self.library.settings.cache_dir)
        except SwapgenError as exc:
            return TaskFailed(str(exc))
        self.stats["config"] = "written" if written else "unchanged"
        self._prune_fragments(set(self.fragments.values()))
        return {"digest": digest_}

    def _config(self, fragments: list[Fragment]) -> tuple[Assembled | str, dict[str, Any]]:
        """The config of these fragments (a models preset's text, or the assembled llama-swap
        config: its blocks are validated apart, `checked_blocks`) and the counts the run's
        summary reports. Raises SwapgenError."""
        from autogen.router.assemble import assemble, assemble_preset  # noqa: PLC0415 - lazy, as `assemble`
        from autogen.router.fleet import render_front  # noqa: PLC0415

        if self.router_exe is not None:
            preset = assemble_preset(self.library.settings, fragments, self.router_exe)
            return preset.text, {"router": preset.command,
                                 "left_out": [list(item) for f in fragments for item in f.left_out]}
        config = assemble(self.library.settings, fragments,
                          warn=lambda message: print(f"swapgen: warning: {message}", file=sys.stderr))
        if not self.hosts:
            return config, {}
        part = render_front(self.peers(), {m[0] for f in fragments for m in f.members})
        return attrs.evolve(config, tail=config.tail + part.text), {"peers": part.peers, "selectors": part.selectors}

    def write_report(self) -> dict[str, str] | TaskFailed:
        """The plan page of every host this graph generates (`report` in the settings), written
        only when its bytes change, after the configs (`commands.plan_page`)."""
        from autogen.commands import plan_page  # noqa: PLC0415 - lazy: only a run whose page changed

        path = plan_page.page_path(self.library.settings)
        try:
            data = plan_page.render(plan_page.plan_report(self))
            written = plan_page.write_page(self.library.settings, path, data)
        except SwapgenError as exc:
            return TaskFailed(str(exc))
        self.stats["report"] = "written" if written else "unchanged"
        return {"digest": xxhash.xxh3_128_hexdigest(data)}

    def report_intact(self, task, values) -> bool:
        """The page still holds what the report task last wrote."""
        data = read_bytes(self.library.settings.report or "")
        return data is not None and values.get("digest") == xxhash.xxh3_128_hexdigest(data)

    def task_report(self):
        """The plan page (`report` in the settings): written after the configs when anything it shows may
        have changed (what loading read, or a fragment's inputs), and only when its bytes change."""
        key = repr((self.library.settings.report, [(g.library.load_key, sorted(g.fragments.values()))
                                                   for g in self.graphs]))
        return {
            "actions": [self.write_report],
            "task_dep": ["front"] if self.hosts else ["config"],
            "targets": [self.library.settings.report],
            "uptodate": [config_changed(digest(key)), self.report_intact],
            # the page is the user's, like the config: `doit clean` leaves it
            "clean": [],
        }

    def peers(self) -> list[Peer]:
        """Each host with the ids its config serves: its fragments' entries, as `config:<host>`
        assembled them (that task ran first)."""
        from autogen.router.fleet import Peer  # noqa: PLC0415

        return [Peer(name=g.host.name, url=g.host.url, api_key_env=g.host.api_key_env,
                     models=tuple(sorted(m[0] for row in g.library.models for m in g._load_fragment(row.id).members)))
                for g in self.hosts]

    def _side_files_intact(self, model_id: str) -> bool:
        """Files the model writes beside its fragment hold what the fragment recorded: a run
        stopped between writing them and writing the fragment re-runs the task."""
        if not self.library.side_files(model_id):
            return True
        from autogen.router.assemble import Fragment  # noqa: PLC0415

        try:
            recorded = Fragment.load(self.fragments[model_id]).files
        except (OSError, ValueError, KeyError, TypeError):
            return False
        return all(read_bytes(path) == text.encode("utf-8") for path, text in recorded)

    def _load_fragment(self, model_id: str) -> Fragment:
        """The model's fragment; one that cannot be read (cut short by a power loss: the rename
        reached the disk, the data did not) is emitted again. A fragment's name is the digest of
        its inputs, so one this process read before, still the same file, is not read again
        (`swapgen watch`'s worker assembles the config after every change)."""
        from autogen.router.assemble import Fragment  # noqa: PLC0415

        path = self.fragments[model_id]
        try:
            st = os.stat(path)
            identity = (st.st_ino, st.st_size, st.st_mtime_ns)
            kept = _READ_FRAGMENTS.get(path)
            if kept is not None and kept[0] == identity:
                return kept[1]
            fragment = Fragment.load(path)
        except (OSError, ValueError, KeyError, TypeError):
            self.emit_model(model_id)
            return Fragment.load(path)
        _READ_FRAGMENTS[path] = (identity, fragment)
        return fragment

    def _prune_fragments(self, keep: set[str]) -> None:
        """Fragments of other inputs or of models gone, and temp files a killed run left."""
        folder = os.path.join(self.library.settings.cache_dir, FRAGMENTS)
        for name in os.listdir(folder):
            path = os.path.join(folder, name)
            if path not in keep and (name.endswith(".json") or name.endswith(".tmp")):
                os.unlink(path)
                _READ_FRAGMENTS.pop(path, None)

    def output_intact(self, task, values) -> bool:
        """The config task is up to date only while the output still holds what we wrote, and
        the summary describes that output (a killed run may have written one and not the other)."""
        data = read_bytes(self.library.settings.output)
        if data is None or values.get("digest") != xxhash.xxh3_128_hexdigest(data):
            return False
        summary = read_bytes(os.path.join(self.library.settings.cache_dir, SUMMARY))
        try:
            return json.loads(summary or b"{}").get("config") == values["digest"]
        except (ValueError, AttributeError):
            return False

    # -- tasks --------------------------------------------------------------------------------

    def task_model(self):
        """One router fragment per discovered model (class, engine, backend, path)."""
        for graph in self.graphs:
            yield from graph._model_tasks()

    def _model_tasks(self):
        for row in self.library.models:
            yield {
                "name": self.prefix + row.id,
                "doc": self.library.doc(row.id),
                "file_dep": list(row.inputs),
                # the fragment's name is its inputs' key: it exists exactly when it is current
                "targets": [self.fragments[row.id], *self.library.side_files(row.id)],
                "actions": [(self.emit_model, [row.id])],
                # a plain bool: a model with no input files still counts as having dependencies
                "uptodate": [self._side_files_intact(row.id)],
                "clean": True,
            }

    def _routing_inputs(self) -> tuple | None:
        """What `routing: auto` and a preset's `--models-max` plan against besides the
        fragments: the cards (and the router's binary, whose `--help` checks a preset)."""
        settings = self.library.settings
        if not (settings.routing or self.router_exe):
            return None
        return settings.routing, inventory(settings), self.library.card_vram_gb, self.router_exe

    def task_config(self):
        """Assemble, validate and write the router config (only when its bytes change)."""
        if not self.hosts:
            return self._config_task()
        return ({"name": g.host.name, "doc": f"the config of host {g.host.name}: {g.library.settings.output}",
                 **g._config_task()} for g in self.hosts)

    def task_front(self):
        """The front's config: its own models, each host as a peer, selectors for shared ids."""
        # the hosts' fragments give the peers' lists; their configs are written first, so the
        # front never lists a model a host's (failed) config does not serve
        task = self._config_task(extra=[path for g in self.hosts for path in g.fragments.values()])
        task["task_dep"] += [f"config:{g.host.name}" for g in self.hosts]
        return task

    def _config_task(self, extra: list[str] = ()):
        """The config is assembled from the fragments (`extra`: more fragments it reads): it runs
        after the model tasks, and while its fragments are as it last read them (`fragments_read`)."""
        settings = self.library.settings
        fragments = sorted([*self.fragments.values(), *extra])
        # every fragment's settings, the keys declared to invalidate the config (`settings.fields`)
        # and what the routing plans against
        router_key = repr((self.library.settings_key, inputs_of(settings, CONFIG), self._routing_inputs()))
        return {
            "actions": [self.assemble],
            "task_dep": [self.task_name(row.id) for row in self.library.models],
            "targets": [settings.output],
            "uptodate": [config_changed(digest(router_key)), functools.partial(fragments_read, fragments),
                         self.output_intact],
            # `doit clean` removes fragments and caches, never the config llama-swap is serving
            "clean": [(clean_caches, [settings.cache_dir])],
        }

    def namespace(self) -> dict[str, Any]:
        """What a dodo file exposes: DOIT_CONFIG and the task creators."""
        for graph in self.graphs:
            os.makedirs(os.path.join(graph.library.settings.cache_dir, FRAGMENTS), exist_ok=True)
        fleet = {"task_front": self.task_front} if self.hosts else {}
        page = {"task_report": self.task_report} if self.library.settings.report else {}
        return {
            "DOIT_CONFIG": {
                "backend": "sqlite3",
                "dep_file": os.path.join(self.library.settings.cache_dir, DOIT_STATE),
                "check_file_uptodate": self.checker,
                "default_tasks": ["model", "config", *(["front"] if self.hosts else []), *(["report"] if page else [])],
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
            **fleet,
            **page,
        }


def load(settings_path: str | None = None, *, lock: bool = True, notify=None) -> TaskGraph:
    """Settings → run lock → library → task graph (the bundled sample library is built on first
    use of its settings). The caller closes the graph; `dodo.py` leaves that to process exit.
    From here until `close`, SIGTERM stops the run as Ctrl-C does (`Terminated`)."""
    for stream in (sys.stdout, sys.stderr):  # paths that are not valid UTF-8 print escaped
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    sigterm = None
    if threading.current_thread() is threading.main_thread():
        sigterm = signal.signal(signal.SIGTERM, _raise_terminated)
    held = graph = None
    try:
        path = find_settings(settings_path)
        ensure_for_settings(path, Path(__file__).resolve().parents[2])
        settings = load_settings(path)
        check_llama_swap_keys(settings)
        hosts = ()
        if settings.hosts:
            from autogen.settings.fleet import load_hosts  # noqa: PLC0415 - lazy: a fleet front only

            hosts = load_hosts(settings)
        for fh in hosts:
            check_llama_swap_keys(fh.settings)
        held = _acquire(settings, notify) if lock else None
        graph = TaskGraph(Library.load(settings), held, sigterm)
        if hosts:
            graph.hosts = _host_graphs(hosts, graph, notify if lock else False)
        return graph
    except BaseException:
        # a failed load keeps neither the locks nor the handler (an in-process caller may retry)
        if graph is not None:
            graph.close()
        elif held is not None:
            held.__exit__(None, None, None)
        if sigterm is not None:
            signal.signal(signal.SIGTERM, sigterm)
        raise


def check_llama_swap_keys(settings: Settings) -> None:
    """The settings' `llama_swap:` keys as llama-swap's schema reads them (`router.passthrough`);
    a mistake is a settings error at its line, before anything runs."""
    if not (settings.llama_swap or any(ov.llama_swap for ov in settings.overrides)):
        return
    # deliberate lazy import: the schema tables load only for settings that have such keys
    from autogen.router.passthrough import settings_problems  # noqa: PLC0415

    problems = settings_problems(settings)
    if problems:
        from autogen.settings.structure import settings_error  # noqa: PLC0415 - lazy: only on an error

        raise settings_error(settings.source, problems)


def _host_graphs(hosts, front: TaskGraph, notify) -> tuple[TaskGraph, ...]:
    """One graph per fleet host, each holding its host's lock (taken into `front`'s, released
    by its `close`); `notify` False = no locks."""
    from autogen.resolve.nodes import fleet_of  # noqa: PLC0415 - lazy: a fleet front only

    known = {fh.host.name: (fh.host, fh.settings) for fh in hosts}
    graphs = []
    for fh in hosts:
        if notify is not False:
            front._locks.append(_acquire(fh.settings, notify))
        graphs.append(TaskGraph(Library.load(fh.settings, fleet_of(fh.host.name, known)), host=fh.host))
    return tuple(graphs)


def _acquire(settings: Settings, notify):
    held = run_lock(settings.cache_dir, notify=notify or (lambda m: print(m, file=sys.stderr)))
    try:
        held.__enter__()
    except OSError as exc:
        raise SwapgenError(f"{settings.cache_dir}: cannot use the cache folder ({exc.strerror or exc}); "
                           "check `cache_dir` in the settings file") from None
    # Under the lock no write is in flight: a temp file beside the output or a cache file is what
    # a killed run left between writing and renaming it, whichever tasks this run goes on to skip.
    remove_stale_temps(settings.output)
    for name in (SUMMARY, RUN_MEMO, LIBRARY_MEMO, CACHE_FILE, GPU_CACHE_FILE, LEDGER, CHECKED_BLOCKS):
        remove_stale_temps(os.path.join(settings.cache_dir, name))
    return held


class TaskInfo(Info):
    """doit's `info`, with a clear message for a task that does not exist (doit's own raises
    a KeyError with a traceback). Registered for `doit` in pyproject.toml, for `swapgen` by
    `run_doit`."""

    name = "info"

    def _execute(self, pos_args, hide_status=False):
        names = [task.name for task in self.task_list]
        if len(pos_args) == 1 and pos_args[0] not in names:
            raise InvalidCommand(f"no task {pos_args[0]!r}{did_you_mean(pos_args[0], names)}; "
                                 "`swapgen list` shows every model's task")
        return super()._execute(pos_args, hide_status)


def run_doit(graph: TaskGraph, args: list[str]) -> int:
    """doit's command line (`run`, `list`, `info`, …) on this graph; closes the graph. Raises
    `ClosedPipe` when stdout's reader leaves early."""
    stdout = sys.stdout
    sys.stdout = _PipeGuard(stdout)  # before `namespace`, whose `outfile` is doit's run output
    try:
        commands = {"COMMAND": {"info": f"{__name__}:TaskInfo"}}
        return DoitMain(ModuleTaskLoader(graph.namespace()), extra_config=commands).run(args) or 0  # clean: None
    finally:
        sys.stdout = stdout
        graph.close()
