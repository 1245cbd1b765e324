"""`swapgen watch` on a library changed while it runs: new models, a growing download, a deleted
folder, a settings mistake, SIGTERM. One config rewrite per settled change, nothing half-written
served, no process left behind. The watcher runs as users run it, in a child process, with short
settle times; the only timing in an assertion is a generous timeout."""

from __future__ import annotations

import io
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from autogen.commands.watch import Settling, WatchPlan, describe_change, model_blocks, mount_types, needs_polling
from autogen.settings.schema import Settings, Watch
from tests.builders import SETTINGS, add_model
from tests.guide_pages import code_blocks, page
from tests.runs import generate

TIMEOUT = 90  # seconds; generous for a loaded machine, never a measurement


def settings_text(settle: float = 1.0, extra: str = "") -> str:
    # the output beside the root (never inside one: docs/settings.md#files-swapgen-writes)
    return SETTINGS + f"watch: {{settle_seconds: {settle}, poll_interval_seconds: 0.2{extra}}}\n"


def readme_lines() -> list[str]:
    """The watcher's lines docs/containers-and-watch.md shows."""
    (body,) = [b for lang, b, _ in code_blocks(page("containers-and-watch.md"))
               if lang == "text" and b.startswith("swapgen watch: ")]
    return body.splitlines()


def normalised(line: str) -> str:
    """A line without what depends on timing and settings: how events were batched, the settle time."""
    line = re.sub(r"\d+ changes? settled \([^)]*\)", "N changes settled", line)
    return re.sub(r"settles after [\d.]+ s", "settles after T s", line)


class Watcher:
    """A `swapgen watch` child; its stdout lines arrive on `lines`."""

    def __init__(self, library: Path):
        self.library = library
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "autogen.commands.cli", "--settings", str(library / "swapgen.yaml"), "watch"],
            stdout=subprocess.PIPE, stderr=open(library / "watch.err", "w"), text=True, cwd=library)  # noqa: SIM115
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def next_run(self) -> str:
        """The next line that reports a run (not the `watching …` ones)."""
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=1)
            except queue.Empty:
                assert self.proc.poll() is None, f"watcher ended: {self.stderr()}"
                continue
            self.seen.append(line)
            if not line.startswith("swapgen watch: watching"):
                return line
        raise AssertionError(f"no run within {TIMEOUT} s; saw {self.seen}; stderr {self.stderr()}")

    def no_run_within(self, seconds: float) -> None:
        """Nothing reported for a while (used after a change must not cause a run)."""
        try:
            line = self.lines.get(timeout=seconds)
        except queue.Empty:
            return
        if not line.startswith("swapgen watch: watching"):
            raise AssertionError(f"unexpected run: {line}")

    def stderr(self) -> str:
        return (self.library / "watch.err").read_text()

    def stop(self, signum=signal.SIGTERM) -> int:
        self.proc.send_signal(signum)
        return self.proc.wait(timeout=TIMEOUT)


def processes() -> list[tuple[int, int, str, bytes]]:
    """(pid, parent pid, state, command line) of every live process (from /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                state, parent = Path(f"/proc/{entry}/stat").read_text().rpartition(")")[2].split()[:2]
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            found.append((int(entry), int(parent), state, cmdline))
    return found


def children_of(pid: int) -> list[int]:
    return [child for child, parent, _, _ in processes() if parent == pid]


def swapgen_processes(settings: Path) -> list[int]:
    """Processes (zombies aside) whose command line names `settings`: a run or a watcher of this library."""
    return [pid for pid, _, state, cmdline in processes() if str(settings).encode() in cmdline and state != "Z"]


@pytest.fixture
def library(tmp_path):
    add_model(tmp_path / "models", "A-GGUF/Alpha-Q4_0.gguf")
    (tmp_path / "swapgen.yaml").write_text(settings_text())
    return tmp_path


@pytest.fixture
def watcher(library):
    w = Watcher(library)
    yield w
    if w.proc.poll() is None:
        w.stop(signal.SIGKILL)


def config(library: Path) -> str:
    return (library / "config.yaml").read_text()


class TestWatch:
    def test_new_models_and_a_deleted_folder_give_one_rewrite_each(self, library, watcher):
        assert watcher.next_run().startswith("swapgen watch: first run: added alpha-q4_0; 1 model (")
        inode = os.stat(library / "config.yaml").st_ino
        add_model(library / "models", "B-GGUF/Beta-Q4_0.gguf")
        add_model(library / "models", "C-GGUF/Gamma-Q4_0.gguf")
        line = watcher.next_run()
        assert "added beta-q4_0, gamma-q4_0; 3 models (3 served, 0 skipped)" in line and "config.yaml written" in line
        assert os.stat(library / "config.yaml").st_ino != inode
        watcher.no_run_within(3)  # its own write of config.yaml is no change
        shutil.rmtree(library / "models/B-GGUF")
        line = watcher.next_run()
        assert "removed beta-q4_0; 2 models (2 served, 0 skipped)" in line and "config.yaml written" in line
        assert '"beta-q4_0"' not in config(library)
        assert watcher.stop() == 0
        shown = [normalised(line) for line in readme_lines() if "settings changed" not in line]
        assert shown and set(shown) <= {normalised(line) for line in watcher.seen}

    def test_a_change_that_changes_no_entry_leaves_the_config_alone(self, library, watcher):
        watcher.next_run()
        inode = os.stat(library / "config.yaml").st_ino
        (library / "models/notes.txt").write_text("not a model\n")
        line = watcher.next_run()
        assert line.endswith("config.yaml unchanged") and "no model changed" in line
        assert os.stat(library / "config.yaml").st_ino == inode
        assert watcher.stop() == 0

    def test_a_growing_download_causes_one_run_after_it_ends(self, library):
        (library / "swapgen.yaml").write_text(settings_text(settle=2.0))
        watcher = Watcher(library)
        try:
            watcher.next_run()
            whole = add_model(library / "staging", "D-GGUF/Delta-Q4_0.gguf")
            data = Path(whole).read_bytes()
            target = library / "models/D-GGUF/Delta-Q4_0.gguf"
            target.parent.mkdir(parents=True)
            chunk = len(data) // 12 + 1
            served_early = []
            with open(target, "wb") as f:
                for start in range(0, len(data), chunk):  # a download: the file grows in steps
                    f.write(data[start:start + chunk])
                    f.flush()
                    served_early.append('"delta-q4_0"' in config(library))
                    time.sleep(0.2)
            line = watcher.next_run()
            assert "added delta-q4_0" in line and "config.yaml written" in line, line
            assert not any(served_early)
            watcher.no_run_within(4)
            assert watcher.stop() == 0
        finally:
            if watcher.proc.poll() is None:
                watcher.stop(signal.SIGKILL)

    def test_a_settings_mistake_keeps_the_config_and_the_watcher(self, library, watcher):
        watcher.next_run()
        good = config(library)
        settings = library / "swapgen.yaml"
        settings.write_text(settings.read_text().replace("vram_budget_gb: 8", "vram_budget_gb: high"))
        line = watcher.next_run()
        assert line == "swapgen watch: settings changed: run failed (exit 1); config.yaml kept as it was"
        assert line in readme_lines()
        assert "vram_budget_gb: expected a number, got 'high'" in watcher.stderr()
        assert config(library) == good
        add_model(library / "models", "B-GGUF/Beta-Q4_0.gguf")
        assert "run failed" in watcher.next_run()  # still watching; the settings are still wrong
        settings.write_text(settings.read_text().replace("vram_budget_gb: high", "vram_budget_gb: 8"))
        line = watcher.next_run()
        assert "added beta-q4_0" in line and "config.yaml written" in line
        assert watcher.stop() == 0

    def test_sigterm_between_runs_ends_it_with_nothing_left_behind(self, library, watcher):
        watcher.next_run()
        assert watcher.stop() == 0
        assert "Traceback" not in watcher.stderr()
        assert swapgen_processes(library / "swapgen.yaml") == []

    def test_ctrl_c_between_runs_ends_it(self, library, watcher):
        watcher.next_run()
        assert watcher.stop(signal.SIGINT) == 130
        assert "Traceback" not in watcher.stderr()
        assert swapgen_processes(library / "swapgen.yaml") == []

    def test_sigterm_at_any_instant_of_a_run_leaves_a_whole_config(self, library):
        """Stopped while its run may be anywhere: the config is the old one or a whole new one."""
        for i in range(24):
            add_model(library / "models", f"M{i}-GGUF/Model{i}-Q4_0.gguf")
        watcher = Watcher(library)
        watcher.next_run()
        before = config(library)
        (library / "swapgen.yaml").write_text(settings_text().replace("vram_budget_gb: 8", "vram_budget_gb: 6"))
        deadline = time.monotonic() + TIMEOUT
        while not children_of(watcher.proc.pid) and time.monotonic() < deadline:
            time.sleep(0.01)  # the run has started
        assert watcher.stop() == 0
        assert swapgen_processes(library / "swapgen.yaml") == []
        after = config(library)
        assert generate(library / "swapgen.yaml")[0] == 0
        assert after in (before, config(library))
        assert not [p for p in (library / "models").iterdir() if p.suffix == ".tmp"]

    def test_a_watcher_killed_outright_takes_its_run_with_it(self, library):
        for i in range(24):
            add_model(library / "models", f"M{i}-GGUF/Model{i}-Q4_0.gguf")
        watcher = Watcher(library)
        deadline = time.monotonic() + TIMEOUT
        while not children_of(watcher.proc.pid) and time.monotonic() < deadline:
            time.sleep(0.01)  # its first run has started
        watcher.stop(signal.SIGKILL)
        while swapgen_processes(library / "swapgen.yaml") and time.monotonic() < deadline:
            time.sleep(0.05)  # the run gets SIGTERM and stops by its interruption rules
        assert swapgen_processes(library / "swapgen.yaml") == []

    def test_polling_sees_new_models(self, library):
        (library / "swapgen.yaml").write_text(settings_text(extra=", polling: always"))
        watcher = Watcher(library)
        try:
            assert watcher.next_run().startswith("swapgen watch: first run")
            assert "1 polled every 0.2 s" in watcher.seen[0]
            add_model(library / "models", "B-GGUF/Beta-Q4_0.gguf")
            assert "added beta-q4_0" in watcher.next_run()
            assert watcher.stop() == 0
        finally:
            if watcher.proc.poll() is None:
                watcher.stop(signal.SIGKILL)


class TestParts:
    def test_network_and_fuse_mounts_are_polled(self, tmp_path):
        info = tmp_path / "mountinfo"
        info.write_text("22 1 8:1 / / rw - ext4 /dev/sda1 rw\n"
                        "40 22 0:50 / /mnt/nas rw,relatime shared:1 - nfs4 nas:/models rw\n"
                        "41 22 0:51 / /mnt/my\\040drive rw - fuse.sshfs me@box:/m rw\n"
                        "42 22 8:17 / /mnt/win rw - fuseblk /dev/sdb1 rw\n")
        mounts = mount_types(str(info))
        assert needs_polling("/mnt/nas/qwen", mounts) and needs_polling("/mnt/my drive/x", mounts)
        assert not needs_polling("/mnt/win/models", mounts) and not needs_polling("/home/me/models", mounts)
        assert not needs_polling("/mnt/nas2", mounts)
        assert mount_types(str(tmp_path / "absent")) == []

    def test_a_network_share_mounted_inside_a_root_makes_it_polled(self, tmp_path):
        """No event arrives for what another machine writes to the share, wherever it is mounted."""
        info = tmp_path / "mountinfo"
        info.write_text("22 1 8:1 / / rw - ext4 /dev/sda1 rw\n"
                        "40 22 0:50 / /srv/models/nas rw,relatime shared:1 - nfs4 nas:/models rw\n"
                        "42 22 8:17 / /srv/models/usb rw - fuseblk /dev/sdb1 rw\n")
        mounts = mount_types(str(info))
        assert needs_polling("/srv/models", mounts) and needs_polling("/srv", mounts)
        assert not needs_polling("/srv/models/usb", mounts) and not needs_polling("/srv/models2", mounts)

    def test_the_plan_follows_the_settings(self, tmp_path):
        (tmp_path / "a").mkdir()
        settings = Settings(roots=(str(tmp_path / "a"), str(tmp_path / "b")), cache_dir=str(tmp_path / "cache"),
                            output=str(tmp_path / "a/config.yaml"), watch=Watch(polling="never"))
        plan = WatchPlan.of((settings,), mounts=[("/", "nfs")])
        assert (plan.events, plan.polled, plan.missing) == ((str(tmp_path / "a"),), (), (str(tmp_path / "b"),))
        assert WatchPlan.of((settings,), poll_all=True).polled == (str(tmp_path / "a"),)
        assert plan.ignores(str(tmp_path / "a/config.yaml")) and plan.ignores(str(tmp_path / "a/.config.yaml.x.tmp"))
        assert plan.ignores(str(tmp_path / "cache/fragments/x.json"))
        assert not plan.ignores(str(tmp_path / "a/x.gguf")) and not plan.ignores(str(tmp_path / "cache2"))

    def test_a_fleet_front_watches_its_hosts_roots(self, tmp_path):
        for name in ("front", "gpu-a"):
            (tmp_path / name / "models").mkdir(parents=True)
        front, host = (Settings(roots=(str(tmp_path / name / "models"),), cache_dir=str(tmp_path / name / "cache"),
                                output=str(tmp_path / name / "models/config.yaml")) for name in ("front", "gpu-a"))
        plan = WatchPlan.of((front, host), mounts=[])
        assert plan.events == (str(tmp_path / "front/models"), str(tmp_path / "gpu-a/models"))
        assert plan.ignores(str(tmp_path / "gpu-a/models/config.yaml")) and plan.ignores(str(tmp_path / "front/cache/x"))

    def test_a_growing_file_does_not_settle(self, tmp_path):
        now = [0.0]
        settling = Settling(5.0, clock=lambda: now[0])
        path = tmp_path / "x.gguf"
        path.write_bytes(b"a")
        settling.add([str(path)])
        for step in range(1, 5):  # grows every 4 s: never 5 s still
            now[0] += 4
            path.write_bytes(b"a" * (step + 1))
            assert not settling.settled()
        now[0] += 4
        assert not settling.settled()
        now[0] += 1
        assert settling.settled() and settling.take() == [str(path)] and not settling.settled()

    def test_the_wait_ends_the_moment_the_last_change_settles(self, tmp_path):
        now = [0.0]
        settling = Settling(2.0, clock=lambda: now[0])
        settling.add([str(tmp_path / "a")])
        now[0] = 1.5
        settling.add([str(tmp_path / "b")])
        now[0] = 2.25
        assert settling.due_in() == 1.25  # b settles at 3.5
        now[0] = 3.5
        assert settling.due_in() == 0 and settling.settled()

    def test_what_changed_is_read_from_the_configs(self, library):
        add_model(library / "models", "B-GGUF/Beta-Q4_0.gguf")
        generate(library / "swapgen.yaml")
        before = model_blocks(config(library))
        assert set(before) == {"alpha-q4_0", "beta-q4_0"}
        (library / "models/B-GGUF/Beta-Q4_0.gguf").unlink()
        add_model(library / "models", "C-GGUF/Gamma-Q4_0.gguf", blocks=6)
        (library / "models/broken-Q4_0.gguf").write_bytes(b"not a gguf")
        (library / "swapgen.yaml").write_text(settings_text().replace("vram_budget_gb: 8", "vram_budget_gb: 4"))
        generate(library / "swapgen.yaml")
        after = model_blocks(config(library))
        assert describe_change(before, after) == "added gamma-q4_0; removed beta-q4_0; changed alpha-q4_0; skipped broken-q4_0"
        assert describe_change(after, after) == "no model changed"
        many = {f"m{i:02d}": "" for i in range(12)}
        assert describe_change({}, many) == "added 12 models: m00, m01, m02, m03, m04, …"


class TestWorker:
    """The worker that runs the watcher's runs stays up between them (`commands.watch_run`)."""

    def test_one_worker_serves_every_run_and_the_last_records_come_from_memory(self, library, monkeypatch):
        from autogen import records  # noqa: PLC0415 - the module whose file reads are counted
        from autogen.commands import watch_run  # noqa: PLC0415

        add = lambda name: add_model(library / "models", f"{name}-GGUF/{name}-Q4_0.gguf")  # noqa: E731
        args = ["--settings", str(library / "swapgen.yaml"), "run"]
        requests, answers = io.StringIO("run\nrun\n"), io.StringIO()
        reads = []
        real = records.read_bytes
        monkeypatch.setattr(records, "read_bytes", lambda path: reads.append(os.path.basename(path)) or real(path))
        first = watch_run.run_once(args)
        add("Beta")
        reads.clear()
        assert watch_run.serve(args, requests, answers) == 0
        got = [json.loads(line) for line in answers.getvalue().splitlines()]
        assert first[0] == 0 and [g["code"] for g in got] == [0, 0]
        assert "2 models" in got[0]["summary"] and "0 re-emitted" in got[1]["summary"]
        assert "library-memo.json" not in reads and "checked-blocks.json" not in reads  # written here: kept

    def test_a_worker_ends_without_answering_when_swapgen_changed_on_disk(self, library, monkeypatch):
        from autogen.commands import watch_run  # noqa: PLC0415

        monkeypatch.setattr(watch_run, "code_changed", lambda started: True)
        answers = io.StringIO()
        assert watch_run.serve(["--settings", str(library / "swapgen.yaml"), "run"], io.StringIO("run\n"), answers) == 0
        assert answers.getvalue() == ""

    def test_the_watcher_keeps_one_worker_and_ends_it(self, library, watcher):
        watcher.next_run()
        (worker,) = children_of(watcher.proc.pid)
        add_model(library / "models", "B-GGUF/Beta-Q4_0.gguf")
        assert "added beta-q4_0" in watcher.next_run()
        assert children_of(watcher.proc.pid) == [worker]
        assert watcher.stop() == 0
        assert swapgen_processes(library / "swapgen.yaml") == []
