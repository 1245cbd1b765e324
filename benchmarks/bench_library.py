"""Performance at 1,000 and 2,000 models: cold, no-op and one-change runs, memory, bytes read.
Targets (docs/maintainers/performance.md): cold ≤ 10 ms per model reading only header bytes;
no-op within 1.5× of doit's own floor for as many tasks, at every size; one new model file and
one changed override each run only that model's task and cost ≤ 2× the no-op; peak memory ≤
150 MB at 2,000 models.

    python benchmarks/bench_library.py [--models 1000 2000] [--vocab 150000] [--reps 5]
                                       [--workdir /tmp/swapgen-bench] [--no-gguf-reader]

Every measurement is a fresh `python -m autogen.commands.cli --settings …` (what `swapgen` runs) in a
child wrapped by `_runner.py`, which reports the child's own peak RSS and `/proc/self/io`;
wall time is taken around the whole child (interpreter start included). Medians of `--reps`
runs. "Cold" means an empty `cache_dir` (no metadata cache, no doit state) with the page
cache warm: it measures our work, not the disk. Two baselines run in the same script: doit
itself with as many trivial tasks as models (the floor for a no-op run, each of its runs right
after one of ours, so both see the same load) and `gguf.GGUFReader` on one of the library's
headers (once: it takes ~15 s). Each size has its own library under the work folder. Prints
ratios and writes `benchmarks/results/<date>.json` (git-ignored).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from benchmarks import library  # noqa: E402

RUNNER = str(HERE / "_runner.py")
#: Children write bytecode (to a cache outside the repo) even when PYTHONDONTWRITEBYTECODE is
#: set, as an installed swapgen would: compiling our modules on every run is not our cost.
CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
TARGETS = {"cold_ms_per_model": 10.0, "noop_vs_floor": 1.5, "change_vs_noop": 2.0, "peak_rss_mb": 150.0}

SETTINGS = """\
roots: [library]
output: config.yaml
cache_dir: cache
vram_budget_gb: 24
card_vram_gb: 24
backends:
  - {id: llama-cuda, kind: llama, path: /opt/llama/bin/llama-server, default: true, variant: cuda}
  - {id: vllm, kind: vllm, path: /opt/vllm/bin/vllm, version: "0.11.0"}
overrides:
  - {match: "*Model0007*", backend: vllm}
  - {match: "*Model001?*", ctx: 16384}
  - {match: "*/pub03/*", extra_args: ["--mlock"]}
  - {match: "*/Model0042-GGUF/*", ctx: 32768}
"""

FLOOR_DODO = """\
import os
DOIT_CONFIG = {"backend": "sqlite3", "dep_file": "floor-state.sqlite3", "verbosity": 1}


def _touch(target):
    with open(target, "w") as f:
        f.write("x")


def task_t():
    for i in range(%d):
        yield {"name": str(i), "actions": [(_touch, [f"out/{i}.txt"])],
               "file_dep": [f"in/{i}.txt"], "targets": [f"out/{i}.txt"]}
"""


def run_child(out_dir: Path, module: str, args: list[str], cwd: Path) -> dict:
    """One measured child process; raises with its output when it fails."""
    report = out_dir / "child.json"
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, RUNNER, str(report), module, *args], cwd=cwd,
                          capture_output=True, text=True, env=CHILD_ENV)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{module} {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    data = json.loads(report.read_text())
    return {"wall_s": wall, "cpu_s": data["cpu_s"], "rss_mb": data["max_rss_kb"] / 1024,
            "rchar": data["io"].get("rchar", 0),
            "read_bytes": data["io"].get("read_bytes", 0), "stdout": proc.stdout, "stderr": proc.stderr}


def summary(runs: list[dict]) -> dict:
    keys = ("wall_s", "cpu_s", "rss_mb", "rchar", "read_bytes")
    return {k: statistics.median(r[k] for r in runs) for k in keys} | {"n": len(runs),
            "wall_all": [round(r["wall_s"], 4) for r in runs]}


def executed_tasks(stdout: str) -> list[str]:
    """Tasks doit actually ran ('.  name' lines; up-to-date tasks print nothing with our reporter)."""
    return [line[3:].strip() for line in stdout.splitlines() if line.startswith(".  ")]


def bench_swapgen(work: Path, lib_root: Path, floor: Path, args) -> dict:
    """Cold, no-op (each followed by a run of the doit floor in `floor`) and one-change runs: a
    header rewritten in place, a new model file, an override changed."""
    (work / "swapgen.yaml").write_text(SETTINGS)
    cli = ["--settings", str(work / "swapgen.yaml")]
    scratch = Path(tempfile.mkdtemp(prefix="bench-"))
    cold = []
    for _ in range(args.cold_reps):
        shutil.rmtree(work / "cache", ignore_errors=True)
        (work / "config.yaml").unlink(missing_ok=True)
        cold.append(run_child(scratch, "autogen.commands.cli", cli, work))
        print(f"  cold run: {cold[-1]['wall_s']:.2f} s", file=sys.stderr)
    executed = executed_tasks(cold[-1]["stdout"])
    noop, floor_noop = [], []
    for _ in range(args.reps):  # side by side: the floor runs right after each of ours
        noop.append(run_child(scratch, "autogen.commands.cli", cli, work))
        floor_noop.append(run_child(scratch, "doit", ["-f", "dodo.py"], floor))
    noop_tasks = [executed_tasks(r["stdout"]) for r in noop]
    changes = {name: ([], []) for name in ("rewrite", "new_model", "override")}
    for rep in range(args.reps):
        for name, (runs, tasks) in changes.items():
            _change(name, rep, work, lib_root, args.vocab)
            runs.append(run_child(scratch, "autogen.commands.cli", cli, work))
            tasks.append(executed_tasks(runs[-1]["stdout"]))
            noop.append(run_child(scratch, "autogen.commands.cli", cli, work))  # and a no-op beside it
    library.change_one(lib_root, args.vocab, None)  # back to the built library
    shutil.rmtree(lib_root / "arrivals", ignore_errors=True)
    (work / "swapgen.yaml").write_text(SETTINGS)
    run_child(scratch, "autogen.commands.cli", cli, work)
    dodo = [run_child(scratch, "doit", ["-f", str(HERE.parent / "dodo.py"), f"settings={work / 'swapgen.yaml'}"], work)
            for _ in range(args.reps)]
    shutil.rmtree(scratch)
    return {"cold": summary(cold), "cold_tasks_run": len(executed), "noop": summary(noop),
            "noop_tasks_run": max(len(t) for t in noop_tasks), "noop_doit_dodo": summary(dodo),
            **{name: summary(runs) for name, (runs, _) in changes.items()},
            **{f"{name}_tasks_run": tasks for name, (_, tasks) in changes.items()},
            "summary_line": cold[-1]["stdout"].strip().splitlines()[-1], "floor_noop": summary(floor_noop)}


def _change(name: str, rep: int, work: Path, lib_root: Path, vocab: int) -> None:
    """One change of the library or the settings (`rep` makes each one new)."""
    if name == "rewrite":  # model 0's header rewritten in place, another trained context
        library.change_one(lib_root, vocab, 4096 * (rep + 1))
    elif name == "new_model":  # a finished download in a folder of its own
        library.add_one(lib_root / "arrivals" / f"New{rep:03d}-GGUF" / f"New{rep:03d}-8B-Q4_K_M.gguf", vocab, rep)
    else:  # the override of one model given another context
        (work / "swapgen.yaml").write_text(SETTINGS.replace("ctx: 32768", f"ctx: {8192 + 1024 * rep}"))


def make_floor(work: Path, n: int) -> Path:
    """doit with `n` trivial tasks, each with one input and one output, run once (its cold run)."""
    floor = work / "floor"
    shutil.rmtree(floor, ignore_errors=True)
    (floor / "in").mkdir(parents=True)
    (floor / "out").mkdir()
    for i in range(n):
        (floor / "in" / f"{i}.txt").write_text(f"{i}\n")
    (floor / "dodo.py").write_text(FLOOR_DODO % n)
    scratch = Path(tempfile.mkdtemp(prefix="bench-"))
    run_child(scratch, "doit", ["-f", "dodo.py"], floor)
    shutil.rmtree(scratch)
    return floor


def bench_reader(path: Path, with_gguf: bool) -> dict:
    """Our header reader vs gguf.GGUFReader on the same file, each in a fresh child."""
    scratch = Path(tempfile.mkdtemp(prefix="bench-"))
    out = {}
    code = {"ours": "from autogen.metadata.gguf_header import read_gguf_header as r; r({p!r})",
            "gguf_reader": "import gguf; gguf.GGUFReader({p!r})",
            "python": "pass"}
    for name, stmt in code.items():
        if name == "gguf_reader" and not with_gguf:
            continue
        script = scratch / f"{name}.py"
        script.write_text(stmt.format(p=str(path)) + "\n")
        runs = [run_child(scratch, str(script), [], scratch) for _ in range(1 if name == "gguf_reader" else 3)]
        out[name] = summary(runs)
    shutil.rmtree(scratch)
    return out


def bench_size(work: Path, n: int, args) -> dict:
    """Everything at `n` models, in `work/<n>`: its library, swapgen's runs and doit's floor."""
    base = work / str(n)
    base.mkdir(parents=True, exist_ok=True)
    lib_root = base / "library"
    t0 = time.perf_counter()
    lib = library.build(lib_root, n, args.vocab)
    lib["build_s"] = round(time.perf_counter() - t0, 1)
    print(f"library: {lib['models']} models, {lib['files']} files, "
          f"{lib['gguf_header_bytes'] / 1e9:.2f} GB of GGUF headers ({lib['build_s']} s)", file=sys.stderr)
    ours = bench_swapgen(base, lib_root, make_floor(base, n), args)
    floor = ours.pop("floor_noop")
    ratios = {
        "cold_ms_per_model": ours["cold"]["wall_s"] * 1000 / lib["models"],
        "cold_rchar_vs_header_bytes": ours["cold"]["rchar"] / lib["gguf_header_bytes"],
        "noop_s": ours["noop"]["wall_s"],
        "noop_vs_floor": ours["noop"]["wall_s"] / floor["wall_s"],
        "noop_vs_floor_cpu": ours["noop"]["cpu_s"] / floor["cpu_s"],
        "cold_cpu_ms_per_model": ours["cold"]["cpu_s"] * 1000 / lib["models"],
        **{f"{name}_vs_noop": ours[name]["wall_s"] / ours["noop"]["wall_s"] for name in ("rewrite", "new_model",
                                                                                          "override")},
        **{f"{name}_vs_noop_cpu": ours[name]["cpu_s"] / ours["noop"]["cpu_s"] for name in ("rewrite", "new_model",
                                                                                            "override")},
        "peak_rss_mb": max(ours[k]["rss_mb"] for k in ("cold", "noop", "rewrite", "new_model", "override")),
    }
    return {"library": lib, "swapgen": ours, "doit_floor": {"noop": floor}, "ratios": ratios}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", type=int, nargs="+", default=[1000, 2000],
                   help="library sizes, each measured with its own floor (default 1000 2000)")
    p.add_argument("--vocab", type=int, default=150_000)
    p.add_argument("--reps", type=int, default=5, help="runs per no-op/change measurement (median)")
    p.add_argument("--cold-reps", type=int, default=3)
    p.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "swapgen-bench"))
    p.add_argument("--no-gguf-reader", action="store_true", help="skip the GGUFReader baseline (~15 s)")
    args = p.parse_args()
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    CHILD_ENV["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
    sizes = {n: bench_size(work, n, args) for n in args.models}
    reader = bench_reader(library.llm_path(work / str(args.models[0]) / "library", 1), not args.no_gguf_reader)
    if "gguf_reader" in reader:
        reader["ratios"] = {"gguf_reader_vs_ours_s": reader["gguf_reader"]["wall_s"] / reader["ours"]["wall_s"],
                            "gguf_reader_vs_ours_rss": reader["gguf_reader"]["rss_mb"] / reader["ours"]["rss_mb"]}
    result = {"date": time.strftime("%Y-%m-%dT%H:%M:%S"), "host": platform.node(), "cpus": os.cpu_count(),
              "machine": machine(), "python": platform.python_version(), "load_average": os.getloadavg(),
              "sizes": sizes, "header_reader": reader, "targets": TARGETS}
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    out = results / f"{time.strftime('%Y-%m-%dT%H-%M-%S')}.json"
    out.write_text(json.dumps(result, indent=2, default=str) + "\n")
    report(result)
    print(f"\nwritten {out}")
    return 0


def machine() -> str:
    """The CPU model and count, as /proc/cpuinfo names it (the floor depends on it)."""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        model = ""
    return f"{model or platform.processor() or platform.machine()}, {os.cpu_count()} CPUs"


def report(r: dict) -> None:
    ok = lambda good: "ok" if good else "MISSED"  # noqa: E731
    print(f"machine: {r['machine']}; Python {r['python']}; load average {r['load_average']}")
    for n, size in r["sizes"].items():
        s, f, x = size["swapgen"], size["doit_floor"], size["ratios"]
        print(f"models: {size['library']['models']}  ({s['summary_line']})")
        print(f"  cold:    {s['cold']['wall_s']:.2f} s = {x['cold_ms_per_model']:.1f} ms/model "
              f"[{ok(x['cold_ms_per_model'] <= TARGETS['cold_ms_per_model'])} ≤ 10], "
              f"CPU {x['cold_cpu_ms_per_model']:.1f} ms/model; read {s['cold']['rchar'] / 1e9:.2f} GB "
              f"= {x['cold_rchar_vs_header_bytes']:.2f}× the GGUF header bytes; RSS {s['cold']['rss_mb']:.0f} MB")
        print(f"  no-op:   {s['noop']['wall_s']:.3f} s; "
              f"doit floor ({n} tasks, side by side) {f['noop']['wall_s']:.3f} s; "
              f"ratio {x['noop_vs_floor']:.2f} [{ok(x['noop_vs_floor'] <= TARGETS['noop_vs_floor'])} ≤ 1.5]; "
              f"CPU {s['noop']['cpu_s']:.3f} s vs {f['noop']['cpu_s']:.3f} s = {x['noop_vs_floor_cpu']:.2f}×; "
              f"{s['noop_tasks_run']} tasks ran; read {s['noop']['rchar'] / 1e6:.1f} MB; "
              f"RSS {s['noop']['rss_mb']:.0f} MB; via doit -f dodo.py {s['noop_doit_dodo']['wall_s']:.3f} s")
        for name, what in (("new_model", "one new model"), ("override", "one override"), ("rewrite", "one rewrite")):
            tasks = s[f"{name}_tasks_run"]
            one = all(len(t) == 2 and "config" in t and any(task.startswith("model:") for task in t) for t in tasks)
            ratio, cpu = x[name + "_vs_noop"], x[name + "_vs_noop_cpu"]
            print(f"  {what:<13}: {s[name]['wall_s']:.3f} s = {ratio:.2f}× the no-op "
                  f"[{ok(ratio <= TARGETS['change_vs_noop'])} ≤ 2] (CPU {cpu:.2f}×); "
                  f"tasks run {tasks[0]} [{ok(one)} one model + config]; RSS {s[name]['rss_mb']:.0f} MB")
        print(f"  memory:  peak {x['peak_rss_mb']:.0f} MB [{ok(x['peak_rss_mb'] <= TARGETS['peak_rss_mb'])} ≤ 150]")
    h = r["header_reader"]
    line = (f"header:  ours {h['ours']['wall_s']:.3f} s / {h['ours']['rss_mb']:.0f} MB "
            f"(python alone {h['python']['wall_s']:.3f} s)")
    if "gguf_reader" in h:
        line += (f"; gguf.GGUFReader {h['gguf_reader']['wall_s']:.1f} s / {h['gguf_reader']['rss_mb']:.0f} MB "
                 f"= {h['ratios']['gguf_reader_vs_ours_s']:.0f}× slower, "
                 f"{h['ratios']['gguf_reader_vs_ours_rss']:.0f}× the memory")
    print(line)


if __name__ == "__main__":
    sys.exit(main())
