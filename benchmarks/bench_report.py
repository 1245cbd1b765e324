"""How long a plan page of 100 models takes to make and to show (docs/plan-page.md).

    python benchmarks/bench_report.py [--models 100] [--reps 5] [--workdir /tmp/swapgen-bench-report]

A synthetic library (`benchmarks/library.py`, vocabularies of 32k tokens: the page reads no
header the config run has not cached) on two cards, generated once per routing mode: groups (the
default) and `routing: auto` (a matrix). Then, medians of `--reps`:

- generation: `swapgen report` in a fresh process (what a user runs: start-up, the library from
  its memo, every model planned, the page rendered and written), wall time and the child's CPU
  time (user + system: what the wall time is on an idle machine);
- render: headless Chromium (`tests/browser.py`) opening the page from `file://`, from navigation
  to its load event (`PerformanceNavigationTiming.loadEventEnd`), the browser already running.

Target: generation + render under a second for 100 models. The machine is shared: the best of
the repetitions is printed beside the median. Writes `benchmarks/results/report-<date>.json`
(git-ignored).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from benchmarks import library  # noqa: E402
from tests.browser import Browser, chromium  # noqa: E402

TARGET_S = 1.0
SETTINGS = """\
roots: [library]
output: config.yaml
cache_dir: cache
vram_budget_gb: 22
gpus:
  - {{index: 0, name: RTX 4090, vram_gb: 24, vendor: nvidia}}
  - {{index: 1, name: RTX 3090, vram_gb: 24, vendor: nvidia}}
backends:
  - {{id: llama-cuda, kind: llama, path: /opt/llama/bin/llama-server, default: true, variant: cuda}}
  - {{id: vllm, kind: vllm, path: /opt/vllm/bin/vllm, version: "0.11.0"}}
{routing}"""
MODES = {"groups": "", "matrix": "routing: auto\n"}


def swapgen(folder: Path, *args: str) -> tuple[float, float]:
    """(wall seconds, CPU seconds) one `swapgen ARGS` takes in a fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "autogen.commands.cli", "--settings", str(folder / "swapgen.yaml"), *args],
                   check=True, cwd=HERE.parent, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env={**os.environ, "PYTHONPATH": str(HERE.parent)})
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def render_ms(browser: Browser, page: Path) -> float:
    browser.open(page)
    assert browser.requests() == [page.resolve().as_uri()]
    return browser.evaluate("performance.getEntriesByType('navigation')[0].loadEventEnd")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=100)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--workdir", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "swapgen-bench-report"))
    args = parser.parse_args()
    if chromium() is None:
        print("bench_report: no Chromium (scripts/setup-slow-checks.sh chromium)", file=sys.stderr)
        return 1
    work = Path(args.workdir)
    counts = library.build(work / "shared" / "library", models=args.models, n_vocab=32_000)
    rows = {}
    with Browser() as browser:
        for mode, routing in MODES.items():
            folder = work / mode
            folder.mkdir(parents=True, exist_ok=True)
            if not (folder / "library").exists():
                (folder / "library").symlink_to(work / "shared" / "library")
            (folder / "swapgen.yaml").write_text(SETTINGS.format(routing=routing))
            swapgen(folder)  # the config, and the caches a user's page is made from
            (folder / "report.html").unlink(missing_ok=True)  # a page of another swapgen is not replaced
            runs = [swapgen(folder, "report") for _ in range(args.reps)]
            page = folder / "report.html"
            renders = [render_ms(browser, page) / 1000 for _ in range(args.reps)]
            wall, cpu, render = (statistics.median(x) for x in ([w for w, _ in runs], [c for _, c in runs], renders))
            best = min(w for w, _ in runs) + min(renders)
            kib = page.stat().st_size // 1024
            rows[mode] = {"generation_s": round(wall, 3), "generation_cpu_s": round(cpu, 3),
                          "render_s": round(render, 3), "total_s": round(wall + render, 3),
                          "best_total_s": round(best, 3), "page_kb": kib}
            print(f"{mode:7} {args.models} models: generation {wall:.2f} s (CPU {cpu:.2f} s) + render {render:.2f} s "
                  f"= {wall + render:.2f} s, best {best:.2f} s (target < {TARGET_S:g} s), page {kib} KiB")
    out = HERE / "results" / f"report-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"models": args.models, "library": counts, "reps": args.reps, "rows": rows}, indent=2))
    print(f"wrote {out}")
    return 0 if all(r["best_total_s"] < TARGET_S for r in rows.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
