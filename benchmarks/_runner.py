"""Run a module as `python -m MODULE ARGS…`, then report this process's own cost as JSON.

    python benchmarks/_runner.py OUT.json MODULE|SCRIPT.py [ARGS…]

Writes {"rc", "seconds", "cpu_s", "max_rss_kb", "io": /proc/self/io fields} to OUT.json. Imports only
the standard library pieces it needs, so the measurement is the module's, not the runner's.
"""

import json
import os
import resource
import runpy
import sys
import time


def _io() -> dict[str, int]:
    try:
        with open("/proc/self/io") as f:
            return {k: int(v) for k, v in (line.split(":") for line in f)}
    except OSError:
        return {}


def _peak_rss_kb() -> int:
    """VmHWM of this process. Not getrusage's ru_maxrss: Linux carries that across exec, so a
    child would report its (forked) parent's peak."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def main() -> None:
    out, module, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    sys.argv = [module, *args]
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the repo, not benchmarks/
    start = time.perf_counter()
    rc = 0
    try:
        if module.endswith(".py"):
            runpy.run_path(module, run_name="__main__")
        else:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    seconds = time.perf_counter() - start
    sys.stdout.flush()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    report = {"rc": rc, "seconds": seconds, "io": _io(), "cpu_s": usage.ru_utime + usage.ru_stime,
              "max_rss_kb": _peak_rss_kb()}
    with open(out, "w") as f:
        json.dump(report, f)
    sys.exit(rc)


if __name__ == "__main__":
    main()
