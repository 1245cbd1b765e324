"""How the routing planner's set count and time grow with the entry count (`docs/maintainers/routing.md`).

    python benchmarks/bench_routing.py [--sizes 25,50,100,200] [--reps 3]

Three synthetic libraries per size, on one 24 GB card and on 24 + 24 + 12 GB: "full" (every
model sized to the whole budget, as swapgen sizes them without profiles), "mixed" (estimates
spread from 0.5 to 22 GB, a third of them with a `share` profile of at most 11 GB) and "slices"
(every entry a quarter card: the worst case, C(n, 4) maximal sets). Prints the set count, whether
the plan stayed exact, the lines written, the planning time relative to 25 entries of the same
kind (ratios: the machine is not the product), and what writing costs on top: rendering, the
read-back check against the cards and `swapgen validate` of the routing block with its models.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from autogen.router.assemble import _written_sets
from autogen.router.matrix_plan import Device, Load, check_plan, plan_matrix, render_matrix
from autogen.router.validate import validate_text

HOSTS = {"1x24": (Device(0, 24.0),), "24+24+12": (Device(0, 24.0), Device(1, 24.0), Device(2, 12.0))}


def library(kind: str, n: int, devices) -> list[Load]:
    rng = random.Random(n)
    loads = []
    for i in range(n):
        pin = None if len(devices) == 1 else (rng.choice(devices).index,)
        if kind == "full":
            est = round(rng.uniform(19.0, 22.8), 2)
        elif kind == "slices":
            est = 6.0
        else:
            est = round(rng.uniform(0.5, 22.0), 2)
        loads.append(Load(f"model{i:03d}", f"model{i:03d}", est, pin, round(rng.uniform(0.1, 20), 2), "llama.cpp"))
        if kind == "mixed" and i % 3 == 0:
            loads.append(Load(f"model{i:03d}-share", f"model{i:03d}", round(rng.uniform(6.0, 11.0), 2), pin, 4.0,
                              "llama.cpp"))
    return loads


def timed(loads, devices, reps: int) -> tuple[float, object]:
    times, plan = [], None
    for _ in range(reps):
        start = time.perf_counter()
        plan = plan_matrix(loads, devices)
        times.append(time.perf_counter() - start)
    return statistics.median(times), plan


def written(loads, devices, plan) -> tuple[float, int]:
    """Seconds to render, check and validate the block; the number of set lines."""
    start = time.perf_counter()
    lines = render_matrix(plan)
    assert check_plan(plan, loads, devices, _written_sets(plan, lines)) == []
    models = "".join(f"  {x.entry_id}:\n    cmd: srv --port ${{PORT}}\n" for x in loads)
    assert validate_text("models:\n" + models + "\n".join(lines) + "\n") == []
    return time.perf_counter() - start, len(lines) - lines.index("        sets:") - 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="25,50,100,200")
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"{'host':<9} {'kind':<7} {'models':>6} {'entries':>7} {'sets':>6} {'exact':>5} {'lines':>5} "
          f"{'plan vs 25':>10} {'plan ms':>8} {'write ms':>8}")
    for host, devices in HOSTS.items():
        for kind in ("full", "mixed", "slices"):
            base = None
            for n in sizes:
                loads = library(kind, n, devices)
                seconds, plan = timed(loads, devices, args.reps)
                base = base or seconds
                write_s, lines = written(loads, devices, plan)
                print(f"{host:<9} {kind:<7} {n:>6} {len(loads):>7} {len(plan.sets):>6} {plan.exact!s:>5} {lines:>5} "
                      f"{seconds / base:>9.1f}x {seconds * 1000:>8.1f} {write_s * 1000:>8.1f}")


if __name__ == "__main__":
    main()
