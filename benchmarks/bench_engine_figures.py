"""What asking llama-fit-params costs a run: calls per entry and seconds per model.

    python benchmarks/bench_engine_figures.py MODELS_DIR --server PATH [--fit-params PATH] [--budget GiB]

Plans every GGUF under MODELS_DIR for llama-server three ways: swapgen's model alone
(`fit_params: none`), with the build's llama-fit-params and an empty answer cache (a first run,
or a new build), and again with the answers cached (every later run of the same commands).
Prints per model the estimator calls per entry (bounded by `figures.plan.MAX_ROUNDS`), the
seconds, the ratio to the model alone, and the context and source each way decided. Real-width
headers with sparse weights make it honest: llama-fit-params reads the header, the tensor list
and the vocabulary, never the weights (`tests/data/record_llama_alloc.py WORK` writes such files
under WORK/models).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from autogen.commands.library import Library
from autogen.figures import fit_params
from autogen.settings.load import load_settings


def settings_file(folder: Path, models: Path, server: str, estimator: str, budget: float) -> Path:
    folder.mkdir(exist_ok=True)
    path = folder / "swapgen.yaml"
    path.write_text(f"roots: [{models}]\nvram_budget_gb: {budget}\ncard_vram_gb: 0\ncache_dir: {folder / 'cache'}\n"
                    f"backends:\n  - {{id: llama, kind: llama, path: {server}, default: true, variant: cuda, "
                    f"fit_params: {estimator}}}\n")
    return path


def plan_all(library: Library) -> dict[str, tuple[float, int, list]]:
    """id → (seconds, estimator calls, [(entry id, ctx, source)])."""
    calls = {"n": 0}
    real_run = fit_params.run

    def counted(call, timeout=fit_params.TIMEOUT_S):
        calls["n"] += 1
        return real_run(call, timeout)

    fit_params.run = counted
    out = {}
    try:
        for job in library.jobs:
            if job.engine != "llama" or job.error:
                continue
            before = calls["n"]
            start = time.perf_counter()
            plan = library.plan(job)
            seconds = time.perf_counter() - start
            decided = [(e.id, dict(e.metadata).get("ctx"), e.footprint.source.value if e.footprint else "-")
                       for e in plan.entries]
            out[job.row.id] = (seconds, calls["n"] - before, decided)
    finally:
        fit_params.run = real_run
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models")
    ap.add_argument("--server", required=True)
    ap.add_argument("--fit-params", default=None, help="default: llama-fit-params beside --server")
    ap.add_argument("--budget", type=float, default=22.0)
    args = ap.parse_args(argv)
    estimator = args.fit_params or os.path.join(os.path.dirname(args.server), "llama-fit-params")
    models = Path(args.models).resolve()
    with tempfile.TemporaryDirectory() as tmp:
        alone = Library.load(load_settings(settings_file(Path(tmp) / "a", models, args.server, "none", args.budget)))
        base = plan_all(alone)
        folder = Path(tmp) / "b"
        cold = plan_all(Library.load(load_settings(settings_file(folder, models, args.server, estimator,
                                                                 args.budget))))
        warm = plan_all(Library.load(load_settings(settings_file(folder, models, args.server, estimator,
                                                                 args.budget))))
    print(f"{'model':34} {'entries':>7} {'calls':>5} {'cold s':>7} {'warm s':>7} {'alone s':>8} {'cold/alone':>10}"
          "  decided (ctx, source): alone → with llama-fit-params")
    total_calls = total_entries = 0
    for model, (seconds, calls, decided) in sorted(cold.items()):
        base_s, _, base_decided = base[model]
        entries = len(decided)
        total_calls, total_entries = total_calls + calls, total_entries + entries
        print(f"{model:34} {entries:>7} {calls:>5} {seconds:>7.2f} {warm[model][0]:>7.3f} {base_s:>8.3f} "
              f"{seconds / max(base_s, 1e-6):>10.0f}  {[d[1:] for d in base_decided]} → {[d[1:] for d in decided]}")
    print(f"{total_calls} calls for {total_entries} entries (bound: {fit_params_bound()} per entry); warm runs ask "
          f"nothing: {sum(c for _, c, _ in warm.values())} calls")
    return 0


def fit_params_bound() -> int:
    from autogen.figures.plan import MAX_ROUNDS  # noqa: PLC0415

    return MAX_ROUNDS


if __name__ == "__main__":
    raise SystemExit(main())
