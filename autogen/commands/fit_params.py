"""llama.cpp's own estimate beside swapgen's, for `swapgen show`.

llama.cpp ships `llama-fit-params`: given a model and the launch flags it prints, per device,
the MiB of model, context (KV + recurrent state) and compute buffer that llama-server would
allocate (`common_fit_print`, common/fit.cpp), without reading the weights. When the serving
backend row's build has it (next to its `llama-server`), `show` runs it on the entry's own
flags. Generation never needs it: configs are often written where no engine is installed.

One known difference: the estimator reserves logits for `n_batch` outputs where llama-server
passes its slot count (`n_outputs_max`), so its compute figure is higher by about
n_vocab × (n_batch − slots) × 4 bytes (docs/sizing.md).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence

from attrs import frozen

ESTIMATOR = "llama-fit-params"
#: Flags of a generated command that change what llama.cpp allocates (value-taking / switches).
SIZING_FLAGS = frozenset({"-c", "--ctx-size", "-ngl", "--gpu-layers", "--n-gpu-layers", "--n-cpu-moe", "-ncmoe",
                          "-fa", "--flash-attn", "-ctk", "--cache-type-k", "-ctv", "--cache-type-v", "-np",
                          "--parallel", "-b", "--batch-size", "-ub", "--ubatch-size", "-sm", "--split-mode",
                          "-ts", "--tensor-split"})
SIZING_SWITCHES = frozenset({"--swa-full", "-kvu", "--kv-unified", "-no-kvu", "--no-kv-unified", "--cpu-moe",
                             "-cmoe"})
TIMEOUT_S = 60


@frozen
class DeviceFigures:
    """One device's line of `llama-fit-params --fit-print on`, in MiB."""

    device: str
    model: int
    context: int
    compute: int


def estimator_beside(server_exe: str | None) -> str | None:
    """`llama-fit-params` next to the backend row's `llama-server`, if that build has it."""
    if not server_exe or os.sep not in server_exe:
        return None
    candidate = os.path.join(os.path.dirname(server_exe), ESTIMATOR)
    return candidate if os.path.isfile(candidate) and os.access(candidate, os.X_OK) else None


def estimator_argv(estimator: str, argv: Sequence[str]) -> list[str]:
    """The estimator's command for a generated llama-server argv: the model and the flags that
    size allocations, then `--fit-print on`."""
    out = [estimator]
    i = 1
    while i < len(argv):
        arg = argv[i]
        if arg in ("-m", "--model") or arg in SIZING_FLAGS:
            if i + 1 < len(argv):
                out += [arg, argv[i + 1]]
            i += 2
            continue
        if arg in SIZING_SWITCHES:
            out.append(arg)
        i += 1
    return [*out, "--fit-print", "on"]


def parse(text: str) -> tuple[DeviceFigures, ...]:
    """Lines "<device> <model MiB> <context MiB> <compute MiB>" of `common_fit_print`."""
    found = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 4 and all(p.isdigit() for p in parts[1:]):
            found.append(DeviceFigures(parts[0], int(parts[1]), int(parts[2]), int(parts[3])))
    return tuple(found)


def run(estimator: str, argv: Sequence[str]) -> tuple[tuple[DeviceFigures, ...], str]:
    """(figures, "") or ((), why not)."""
    command = estimator_argv(estimator, argv)
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return (), f"{ESTIMATOR} did not run: {exc}"
    figures = parse(proc.stdout)
    if proc.returncode != 0 or not figures:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return (), f"{ESTIMATOR} exited {proc.returncode}: {tail}"
    return figures, ""
