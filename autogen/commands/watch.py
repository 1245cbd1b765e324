"""`swapgen watch`: generate, then generate again whenever a root or the settings change.

llama-swap reloads its config when the file changes (`--watch-config`), so a watcher on the
library closes the loop: a finished download appears in the config, a deleted folder leaves it.

- Events: the kernel's (inotify, or the platform's own) through `watchfiles`; a root on a
  network or FUSE mount, where events for changes made elsewhere never arrive, is polled
  instead (`Watch.polling` auto reads the mount table; `always` / `never` decide for all).
  The settings file and its backends file are checked by `stat` on every tick. A fleet front
  watches its hosts' roots and settings files too (its runs generate their configs).
- Settling: a change starts nothing until every changed path has kept its size for
  `Watch.settle_seconds` with no new event, so a 40 GB download causes one run, after it ends,
  and a half-written model is never read (discovery also skips a GGUF shorter than its header
  says, should a run start for another reason).
- Runs: each is a `swapgen run` in a worker process that stays up between runs
  (`commands.watch_run`: no interpreter start or imports per run, and the records the last run
  wrote are still in its memory), so it takes the run lock, is exactly as crash-consistent and
  writes the config only when its bytes change, and the watcher itself holds nothing of a run.
  One line per run says what triggered it, which models were added, removed or changed, and
  the run's own summary. A run that fails (a settings mistake)
  keeps the last good config; the watcher keeps watching.
- Stopping: SIGTERM or Ctrl-C between runs ends the watcher at once (exit 0, or 130 for
  Ctrl-C); during a run the child is stopped by the run's own interruption rules (it saves
  doit's state; the old config stays), then the watcher ends. The child also gets SIGTERM if
  the watcher dies (`commands.watch_run`), so no process is left behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable

from attrs import frozen

from autogen.errors import SettingsError
from autogen.settings.fleet import load_hosts
from autogen.settings.load import find_settings, load_settings
from autogen.settings.schema import Settings

#: File systems whose changes made elsewhere raise no local event (`Watch.polling` auto).
POLLED_FILE_SYSTEMS = frozenset(("nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "virtiofs", "ceph", "glusterfs",
                                 "lustre", "gpfs", "afs", "davfs", "fuse"))
#: Seconds between two looks at the settings file and at the pending changes when idle.
IDLE_TICK = 1.0
#: watchfiles groups the events of this many milliseconds into one batch.
EVENT_BATCH_MS = 200


def mount_types(mountinfo: str = "/proc/self/mountinfo") -> list[tuple[str, str]]:
    """(mount point, file system type) of every mount, longest mount point first; [] where the
    table cannot be read (not Linux: the platform's watcher is used everywhere)."""
    try:
        with open(mountinfo, encoding="utf-8", errors="surrogateescape") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    mounts = []
    for line in lines:
        left, sep, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if sep and len(fields) >= 5 and tail:
            point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])
            mounts.append((point, tail[0]))
    return sorted(mounts, key=lambda m: len(m[0]), reverse=True)


def needs_polling(path: str, mounts: list[tuple[str, str]]) -> bool:
    """The mount that holds `path`, or one mounted below it (a NAS share inside the models
    folder), is a network or FUSE file system (`fuse.sshfs`, `nfs4`, …): a watch on the folder
    gets no event for what changes there. `fuseblk` is a local disk through FUSE (ntfs-3g),
    where local writes raise events."""
    real = os.path.realpath(path)

    def polled(fstype: str) -> bool:
        return fstype.split(".")[0] in POLLED_FILE_SYSTEMS

    holder = next((fstype for point, fstype in mounts if _inside(real, point)), "")
    return polled(holder) or any(point != real and _inside(point, real) and polled(fstype)
                                 for point, fstype in mounts)


def _inside(path: str, folder: str) -> bool:
    """`path` is `folder` or lies below it, on whole path components."""
    return path == folder or path.startswith(folder.rstrip("/") + "/")


@frozen
class WatchPlan:
    """What the settings ask the watcher to follow: their roots, and a fleet front's hosts' roots.

    Example: WatchPlan(events=("/mnt/models",), polled=("/mnt/nas",), settle=30.0, poll_interval=10.0,
    ignored=(("/srv/swapgen/cache", "/srv/swapgen/config.yaml"),)).
    """

    events: tuple[str, ...]
    polled: tuple[str, ...]
    settle: float
    poll_interval: float
    #: (cache folder, config) of every settings file: the runs' own writes, not changes.
    ignored: tuple[tuple[str, str], ...]
    #: Roots that do not exist now (an unmounted disk): watched once they appear.
    missing: tuple[str, ...] = ()

    @classmethod
    def of(cls, scope: tuple[Settings, ...], mounts: list[tuple[str, str]] | None = None, *,
           poll_all: bool = False) -> WatchPlan:
        """`scope`: the settings and, for a fleet front, each host's; the first one's `watch:`
        decides. `poll_all`: poll every root whatever it says (the kernel's watcher failed)."""
        mounts = mount_types() if mounts is None else mounts
        watch = scope[0].watch
        roots = list(dict.fromkeys(r for s in scope for r in s.roots))
        present = [r for r in roots if os.path.isdir(r)]
        mode = "always" if poll_all else watch.polling
        polled = [r for r in present if mode == "always" or (mode == "auto" and needs_polling(r, mounts))]
        return cls(events=tuple(r for r in present if r not in polled), polled=tuple(polled),
                   settle=watch.settle_seconds, poll_interval=watch.poll_interval_seconds,
                   ignored=tuple((s.cache_dir, s.output) for s in scope),
                   missing=tuple(r for r in roots if r not in present))

    @property
    def roots(self) -> tuple[str, ...]:
        return self.events + self.polled

    def ignores(self, path: str) -> bool:
        """A write of a run: a config, its temp files, a cache folder."""
        for cache, output in self.ignored:
            folder, name = os.path.split(output)
            if (path in (output, cache) or path.startswith(cache + "/")
                    or (os.path.dirname(path) == folder and os.path.basename(path).startswith(f".{name}."))):
                return True
        return False


class WatchFailed(Exception):
    """A `watchfiles` loop ended with an error (`polling`: it was a polling one)."""

    def __init__(self, message: str, polling: bool):
        super().__init__(message)
        self.polling = polling


class Watchers:
    """The `watchfiles` loops of one plan, each in a thread, their batches put on `changes`."""

    def __init__(self, plan: WatchPlan, changes: queue.Queue):
        self.plan = plan
        self.stop = threading.Event()
        self.threads = []
        for roots, polling in ((plan.events, False), (plan.polled, True)):
            if roots:
                thread = threading.Thread(target=self._run, args=(roots, polling, changes), daemon=True,
                                          name=f"swapgen-watch-{'poll' if polling else 'events'}")
                thread.start()
                self.threads.append(thread)

    def _run(self, roots: tuple[str, ...], polling: bool, changes: queue.Queue) -> None:
        import watchfiles  # noqa: PLC0415 - lazy: only `swapgen watch` needs it

        def keep(_change, path: str) -> bool:
            return not self.plan.ignores(path)

        try:
            for batch in watchfiles.watch(*roots, watch_filter=keep, debounce=EVENT_BATCH_MS, step=50,
                                          stop_event=self.stop, raise_interrupt=False, force_polling=polling,
                                          poll_delay_ms=int(self.plan.poll_interval * 1000),
                                          ignore_permission_denied=True):
                changes.put({path for _, path in batch})
        except Exception as exc:  # the main loop polls instead, or starts over
            changes.put(WatchFailed(f"{'polling' if polling else 'watching'} {', '.join(roots)} stopped "
                                    f"({type(exc).__name__}: {exc}); polling instead", polling))

    def close(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=5)


class Settling:
    """Changed paths and when each last moved: a path is settled once its size has not changed,
    and no event named it, for `settle` seconds."""

    def __init__(self, settle: float, clock: Callable[[], float] = time.monotonic):
        self.settle = settle
        self.clock = clock
        #: path → (size or None when absent, time of the last change seen)
        self.pending: dict[str, tuple[int | None, float]] = {}

    def add(self, paths: Iterable[str]) -> None:
        now = self.clock()
        for path in paths:
            self.pending[path] = (_size(path), now)

    def settled(self) -> bool:
        """True when something is pending and all of it has settled (sizes checked now)."""
        if not self.pending:
            return False
        now = self.clock()
        for path, (size, _since) in list(self.pending.items()):
            current = _size(path)
            if current != size:
                self.pending[path] = (current, now)
        return all(now - since >= self.settle for _, since in self.pending.values())

    def due_in(self) -> float:
        """Seconds until everything pending has settled, if nothing moves again (0: now)."""
        now = self.clock()
        return max((self.settle - (now - since) for _, since in self.pending.values()), default=0.0)

    def take(self) -> list[str]:
        paths = sorted(self.pending)
        self.pending.clear()
        return paths


def _size(path: str) -> int | None:
    try:
        return os.stat(path).st_size
    except OSError:
        return None


def _stamp(path: str | None) -> tuple | None:
    """What tells a settings file's edit (an editor's rename included)."""
    if not path:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


# -- one run ------------------------------------------------------------------------------------


_ENTRY = re.compile(r'^  ("(?:[^"\\]|\\.)*"):\s*$')
_SKIP = re.compile(r'^  # SKIPPED ("(?:[^"\\]|\\.)*"): ')


def model_blocks(text: str) -> dict[str, str]:
    """`models:` of a config swapgen wrote, id → its block (comment lines above it included; a
    skipped model's block is its `# SKIPPED` line, keyed `# <id>`). Our own byte-stable format:
    an entry's own lines are indented four spaces, so most lines are taken without a pattern."""
    lines = text.splitlines()
    try:
        start = lines.index("models:") + 1
    except ValueError:
        return {}
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    comments: list[str] = []
    for line in lines[start:]:
        if line.startswith("    "):
            if current is not None:
                current.append(line)
            continue
        if line and not line.startswith(" "):
            break
        if (skip := _SKIP.match(line)) is not None:
            found["# " + json.loads(skip.group(1))] = [line]
            current = None
        elif (entry := _ENTRY.match(line)) is not None:
            current = found[json.loads(entry.group(1))] = [*comments, line]
            comments = []
        elif line.startswith("  #"):
            comments.append(line)
    return {key: "\n".join(block) for key, block in found.items()}


def describe_change(before: dict[str, str], after: dict[str, str]) -> str:
    """`added a, b; removed c; changed d; skipped e` (served ids; past `SHOWN_IDS` a count and
    the first few), or `no model changed`."""
    served_before = {k for k in before if not k.startswith("# ")}
    served_after = {k for k in after if not k.startswith("# ")}
    parts = []
    for label, ids in (("added", served_after - served_before), ("removed", served_before - served_after),
                       ("changed", {k for k in served_after & served_before if before[k] != after[k]}),
                       ("skipped", {k[2:] for k in after if k.startswith("# ") and before.get(k) != after[k]})):
        if ids:
            parts.append(f"{label} {_some(sorted(ids))}")
    return "; ".join(parts) or "no model changed"


#: Ids a line names before it counts the rest (a first run over 2,000 models stays one line).
SHOWN_IDS = 5


def _some(ids: list[str]) -> str:
    """`a, b` or `12 models: a, b, c, d, e, …`."""
    if len(ids) <= SHOWN_IDS:
        return ", ".join(ids)
    return f"{len(ids)} models: {', '.join(ids[:SHOWN_IDS])}, …"


class Runner:
    """Runs `swapgen run` in the worker (`commands.watch_run`), started on first use and again
    when it ends (a crash, an upgrade of swapgen); `stop` forwards a SIGTERM to a run under way."""

    def __init__(self, settings_path: str):
        self.settings_path = settings_path
        self.worker: subprocess.Popen | None = None
        #: A run is under way in the worker.
        self.busy = False

    def _start(self) -> subprocess.Popen:
        # the worker arms its SIGTERM-on-parent-death itself (a `preexec_fn` is not safe beside
        # the watcher's threads)
        argv = [sys.executable, "-m", "autogen.commands.watch_run", str(os.getpid()), "--settings",
                self.settings_path, "run"]
        return subprocess.Popen(argv, stdout=subprocess.PIPE, stdin=subprocess.PIPE, text=True,
                                errors="backslashreplace")

    def run(self) -> tuple[int, str]:
        """(exit status, the run's summary line without its `swapgen: `). A worker that ends
        without answering (it found swapgen upgraded, or it crashed) is started again once."""
        for _ in range(2):
            if self.worker is None or self.worker.poll() is not None:
                self.worker = self._start()
            self.busy = True
            try:
                answer = self._ask(self.worker)
            finally:
                self.busy = False
            if answer is not None:
                return answer["code"], answer["summary"].removeprefix("swapgen: ")
            code, self.worker = self.worker.wait(), None
        return code, ""

    @staticmethod
    def _ask(worker: subprocess.Popen) -> dict | None:
        """The worker's answer to one run, or None when it ended first."""
        try:
            worker.stdin.write("run\n")
            worker.stdin.flush()
            line = worker.stdout.readline()
        except (BrokenPipeError, OSError):
            return None
        try:
            return json.loads(line) if line else None
        except ValueError:
            return None

    def stop(self) -> None:
        """SIGTERM to a run under way (it stops by its own interruption rules, then the worker ends)."""
        worker = self.worker
        if self.busy and worker is not None and worker.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                worker.send_signal(signal.SIGTERM)

    def close(self) -> None:
        """End the worker: it leaves at the end of its requests."""
        worker, self.worker = self.worker, None
        if worker is not None:
            with contextlib.suppress(OSError):
                worker.stdin.close()
            try:
                worker.wait(timeout=30)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()


class Stop(Exception):
    """SIGTERM or Ctrl-C reached the watcher (`code`: the exit status it ends with)."""

    def __init__(self, code: int):
        super().__init__(code)
        self.code = code


class Watch:
    """The watcher's loop: the current settings, the watchers, the pending changes."""

    def __init__(self, settings_path: str, out=None):
        self.settings_path = str(find_settings(settings_path))
        self.out = out or sys.stdout
        self.runner = Runner(self.settings_path)
        self.changes: queue.Queue = queue.Queue()
        #: The settings, then each fleet host's (the last good ones).
        self.scope: tuple[Settings, ...] = ()
        self.plan: WatchPlan | None = None
        self.watchers: Watchers | None = None
        self.stamps: tuple = ()
        self.stopping: int | None = None
        #: Every root polled, since the kernel's watcher failed.
        self.poll_all = False
        #: (the config file's stamp, its blocks) as last read.
        self.blocks: tuple[tuple | None, dict[str, str]] | None = None

    def say(self, text: str) -> None:
        print(f"swapgen watch: {text}", file=self.out, flush=True)

    def _stop_signal(self, signum, _frame) -> None:
        code = 0 if signum == signal.SIGTERM else 130
        if self.runner.busy:
            self.stopping = code  # the child stops by its own interruption rules; the loop ends after it
            if signum == signal.SIGTERM:
                self.runner.stop()
            return
        raise Stop(code)

    def main(self) -> int:
        handlers = {s: signal.signal(s, self._stop_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            self.scope = _scope(self.settings_path)  # a mistake now stops the watcher: nothing to keep
            self.stamps = self._settings_stamps()
            self._restart_watchers()
            self._run("first run")
            while self.stopping is None:
                self._wait_and_run()
            return self.stopping
        except Stop as stop:
            return stop.code
        finally:
            for signum, handler in handlers.items():
                signal.signal(signum, handler)
            if self.watchers is not None:
                self.watchers.close()
            self.runner.close()

    def _settings_stamps(self) -> tuple:
        paths = [self.settings_path, *(p for s in self.scope for p in (s.source, s.backends_file))]
        return tuple(_stamp(p) for p in dict.fromkeys(paths))

    def _reload(self) -> None:
        """Read the settings again; a mistake keeps the last good ones (the run that follows
        prints it and keeps the config). Restarts the watchers when what they follow changed."""
        with contextlib.suppress(SettingsError):
            self.scope = _scope(self.settings_path)
        self._restart_watchers()

    def _restart_watchers(self, *, polling: bool = False) -> None:
        """Watch what the settings name and what exists now; `polling`: every root is polled
        (the kernel's watcher failed, e.g. its limit of watched folders)."""
        self.poll_all = self.poll_all or polling
        plan = WatchPlan.of(self.scope, poll_all=self.poll_all)
        if self.watchers is not None and plan == self.plan:
            return
        if self.watchers is not None:
            self.watchers.close()
        self.plan = plan
        self.watchers = Watchers(plan, self.changes)
        modes = [f"{len(plan.events)} root{'s' if len(plan.events) != 1 else ''} by events"] if plan.events else []
        modes += [f"{len(plan.polled)} polled every {plan.poll_interval:g} s"] if plan.polled else []
        modes += [f"{len(plan.missing)} missing (watched once it appears)"] if plan.missing else []
        self.say(f"watching {', '.join(modes) or 'no root'}; a change settles after {plan.settle:g} s")

    def _wait_and_run(self) -> None:
        """Collect changes until all of them have settled, then run once."""
        settling = Settling(self.plan.settle)
        settings_changed = False
        while not settling.settled():
            # sizes are looked at again every fifth of the settle time, and once more the moment
            # the last change is due to settle: no tick's worth of waiting after it
            tick = IDLE_TICK if not settling.pending else \
                max(0.01, min(IDLE_TICK, self.plan.settle / 5, settling.due_in()))
            try:
                batch = self.changes.get(timeout=tick)
            except queue.Empty:
                batch = None
            if isinstance(batch, WatchFailed):
                self._watch_failed(batch)
                settling.add(self.plan.roots)
            elif batch:
                settling.add(batch)
            stamps = self._settings_stamps()
            if stamps != self.stamps:
                self.stamps, settings_changed = stamps, True
                settling.add([self.settings_path])
            if WatchPlan.of(self.scope, poll_all=self.poll_all) != self.plan:  # a root appeared or vanished
                self._restart_watchers()
                settling.add(self.plan.roots)
        paths = settling.take()
        if settings_changed:
            self._reload()
        self._run(_trigger(paths, self.settings_path))

    def _watch_failed(self, failed: WatchFailed) -> None:
        """The kernel's watcher failed (its limit of watched folders, a root gone under it): poll
        instead. A failing poll starts over after a pause."""
        print(f"swapgen watch: warning: {failed}", file=sys.stderr, flush=True)
        if failed.polling:
            time.sleep(IDLE_TICK)
        self.plan = None
        self._restart_watchers(polling=True)

    def _run(self, trigger: str) -> None:
        output = self.scope[0].output
        before = self._blocks(output)
        code, summary = self.runner.run()
        name = os.path.basename(output)
        if code != 0:
            why = "interrupted" if self.stopping is not None else f"run failed (exit {code})"
            self.say(f"{trigger}: {why}; {name} kept as it was")
            return
        change = describe_change(before, self._blocks(output))
        self.say(f"{trigger}: {change}; {summary}")

    def _blocks(self, output: str) -> dict[str, str]:
        """The config's blocks (`model_blocks`), read again only when the file changed since the
        last read: the config after one run is the config before the next."""
        stamp = _stamp(output)
        if self.blocks is None or self.blocks[0] != stamp or stamp is None:
            self.blocks = (stamp, model_blocks(_read_text(output)))
        return self.blocks[1]


def _scope(settings_path: str) -> tuple[Settings, ...]:
    """The settings and, for a fleet front, every host's (raises SettingsError)."""
    settings = load_settings(settings_path)
    return (settings, *(fh.settings for fh in load_hosts(settings))) if settings.hosts else (settings,)


def _read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def _trigger(paths: list[str], settings_path: str) -> str:
    """`settings changed`, `1 change settled (x.gguf)`, `3 changes settled (a, b, …)`."""
    if paths == [settings_path]:
        return "settings changed"
    names = [os.path.basename(p.rstrip("/")) or p for p in paths]
    shown = ", ".join(names[:2]) + (", …" if len(names) > 2 else "")
    return f"{len(paths)} change{'s' if len(paths) != 1 else ''} settled ({shown})"


def main_watch(settings_path: str | None) -> int:
    """`swapgen watch`: runs until SIGTERM or Ctrl-C."""
    return Watch(settings_path).main()

