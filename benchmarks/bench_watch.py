"""`swapgen watch` on a 2,000-model library: resident memory, CPU time per idle minute, and the
time from a finished download to the new config.

    python benchmarks/bench_watch.py [--models 2000] [--vocab 150000] [--idle 60] [--settle 2]
                                     [--downloads 3] [--workdir /tmp/swapgen-bench-watch]

The library is `benchmarks/library.py`'s (built once, reused while its stamp matches). The
watcher runs as users run it (`python -m autogen.commands.cli --settings … watch`); its CPU time
and memory are read from `/proc/<pid>` (its runs are child processes and are counted apart).
Idle is measured twice: with the kernel's events, and polling every root (what a network or
FUSE mount gets) at the default interval. A download is a new GGUF (a real 150k-vocabulary
header) that grows in steps (`truncate`, as a downloader extends a file) and then stops; the
latency is from its last step to the watcher's line reporting the config written, and is shown
with the settle time taken off (what is left is the run itself). Medians over `--downloads`.
Writes `benchmarks/results/watch-<date>.json` (git-ignored).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import queue
import random
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from benchmarks import bench_library, library  # noqa: E402

CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
TICKS = os.sysconf("SC_CLK_TCK")



def cpu_seconds(pid: int) -> float:
    """utime + stime of the process itself (`/proc/<pid>/stat` fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def memory_mb(pid: int) -> dict[str, float]:
    """VmRSS (now) and VmHWM (peak) of the process, in MB."""
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            values[key] = int(rest.split()[0]) / 1024
    return values


class Watcher:
    def __init__(self, work: Path):
        self.lines: queue.Queue[tuple[float, str]] = queue.Queue()
        self.proc = subprocess.Popen([sys.executable, "-m", "autogen.commands.cli", "--settings",
                                      str(work / "swapgen.yaml"), "watch"], cwd=work, env=CHILD_ENV,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put((time.perf_counter(), line.rstrip("\n")))

    def next_run(self, timeout: float = 600) -> tuple[float, str]:
        deadline = time.perf_counter() + timeout
        while True:
            at, line = self.lines.get(timeout=max(0.1, deadline - time.perf_counter()))
            if not line.startswith("swapgen watch: watching"):
                return at, line

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=120)


def idle(watcher: Watcher, seconds: float) -> dict[str, float]:
    """CPU seconds per idle minute and memory while nothing changes."""
    start_cpu, start = cpu_seconds(watcher.proc.pid), time.perf_counter()
    time.sleep(seconds)
    cpu, wall = cpu_seconds(watcher.proc.pid) - start_cpu, time.perf_counter() - start
    return {"cpu_s_per_idle_minute": cpu / wall * 60, "idle_seconds": wall, **memory_mb(watcher.proc.pid)}


def download(watcher: Watcher, lib: Path, n: int, vocab: int, settle: float) -> dict[str, float]:
    """A new model that grows in ten steps 0.2 s apart; the time from its last step to the line."""
    staging = lib.parent / "staging" / f"New{n:03d}-Q4_K_M.gguf"
    header = library._llm(staging, random.Random(n), vocab)
    size = staging.stat().st_size
    target = lib / "downloads" / staging.name
    target.parent.mkdir(exist_ok=True)
    with open(staging, "rb") as f:
        head = f.read(header)
    with open(target, "wb") as f:
        f.write(head[: len(head) // 2])
    for step in range(1, 11):
        time.sleep(0.2)
        os.truncate(target, max(len(head), size * step // 10))
        if step == 1:
            with open(target, "r+b") as f:
                f.write(head)
    finished = time.perf_counter()
    at, line = watcher.next_run()
    shutil.rmtree(staging.parent)
    assert "config.yaml written" in line and "added" in line, line
    return {"latency_s": at - finished, "after_settle_s": at - finished - settle}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=2000)
    parser.add_argument("--vocab", type=int, default=150_000)
    parser.add_argument("--idle", type=float, default=60.0, help="seconds of each idle measurement")
    parser.add_argument("--settle", type=float, default=2.0)
    parser.add_argument("--downloads", type=int, default=3)
    parser.add_argument("--workdir", default="/tmp/swapgen-bench-watch")
    args = parser.parse_args()
    work = Path(args.workdir)
    lib = work / "library"
    work.mkdir(parents=True, exist_ok=True)
    print(f"library: {args.models} models under {lib}", file=sys.stderr)
    library.build(lib, models=args.models, n_vocab=args.vocab)
    shutil.rmtree(lib / "downloads", ignore_errors=True)
    results: dict = {"models": args.models, "vocab": args.vocab, "settle_s": args.settle,
                     "cpus": os.cpu_count(), "python": platform.python_version()}
    for polling in ("never", "always"):
        # the library benchmark's settings, and how to watch
        (work / "swapgen.yaml").write_text(
            bench_library.SETTINGS + f"watch: {{settle_seconds: {args.settle}, polling: {polling}}}\n")
        watcher = Watcher(work)
        started = time.perf_counter()
        at, line = watcher.next_run()
        print(f"  [{polling}] first run {at - started:.1f} s: {line}", file=sys.stderr)
        results[f"idle_{polling}"] = idle(watcher, args.idle)
        print(f"  [{polling}] idle: {results[f'idle_{polling}']}", file=sys.stderr)
        if polling == "never":
            runs = [download(watcher, lib, n, args.vocab, args.settle) for n in range(args.downloads)]
            results["download"] = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
            results["download"]["all_latency_s"] = [round(r["latency_s"], 2) for r in runs]
            results["after_downloads"] = memory_mb(watcher.proc.pid)
            shutil.rmtree(lib / "downloads")
            watcher.next_run()  # the models leave the config again
        results[f"exit_{polling}"] = watcher.stop()
    out = HERE / "results" / f"watch-{time.strftime('%Y-%m-%d')}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    ev, po, dl = results["idle_never"], results["idle_always"], results["download"]
    peak = results["after_downloads"]["VmHWM"]
    print(f"watcher at {args.models} models: RSS {ev['VmRSS']:.0f} MB idle (peak {peak:.0f} MB); "
          f"CPU {ev['cpu_s_per_idle_minute']:.3f} s per idle minute by events, "
          f"{po['cpu_s_per_idle_minute']:.3f} s polling every 10 s (RSS {po['VmRSS']:.0f} MB); finished download → "
          f"config {dl['latency_s']:.2f} s ({dl['after_settle_s']:.2f} s after the {args.settle:g} s settle)")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
