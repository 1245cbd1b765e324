"""llama.cpp's own estimate of a command: `llama-fit-params --fit-print on` (tools/fit-params,
common/fit.cpp `common_fit_print`) prints, per device, the MiB of model, context (KV cache and
recurrent state) and compute buffer that the same flags would allocate, without reading weights.

Which binary (`binaries.estimator_for`): the backend row's `fit_params`, else
`llama-fit-params` beside its `llama-server` (`fit_params: none` turns it off). Its identity (path,
size, modification time) is part of every cache key that holds its answers.

The call carries every flag of the generated command that changes what llama.cpp allocates and
that llama-fit-params b11434 accepts, spelled as written (`ESTIMATOR_FLAGS`), and runs with the
entry's environment (the device variables decide which devices it sees). What llama-server does
that the estimator cannot be told (common/arg.cpp registers those flags for other tools only):

- **the unified slot pool.** Without `--parallel` llama-server runs 4 sequences over one KV stream
  (tools/server/server.cpp: "n_parallel is set to auto, using n_parallel = 4 and kv_unified =
  true"); llama-fit-params runs 1 sequence and refuses `--kv-unified`. This was the 10% gap
  between the two (a Gemma-3 window cache of 4 × 1024 + 512 cells against 1024 + 512). The call
  asks with `-np 1`, the same full-attention cells; the window cells and recurrent state of the
  other sequences are priced by llama.cpp's rules (`footprint.Gap`, from the emitter).
- **the projector and the draft model** (`--mmproj`, `-md`): the estimator loads neither; their
  charge stays swapgen's (the footprint's `unseen`).
- **the repacked weights.** On the CPU, llama.cpp keeps weights of the types it can repack
  (Q4_0, Q4_K, IQ4_NL, …) in a repack buffer of the same size, whose device is neither the host
  nor one of the model's devices, so llama-fit-params b11434 leaves them out of its figures
  (common/fit.cpp `common_get_device_memory_data_impl`): a Q4_K model on a CPU build reports its
  token embeddings and output matrix alone, not its layers. The call asks with `--no-repack`, under which the
  same weights are counted in the Host row (a device's own figures do not change).
- **n_outputs_max**: the estimator reserves logits for n_batch outputs, llama-server for its
  slots (tools/server/server-context.cpp), so its compute figure is the higher by up to
  n_vocab × (n_ubatch − slots) × 4 bytes. No flag sets it; the estimator's figure is kept.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Sequence

import xxhash
from attrs import frozen

from autogen.figures.binaries import identity
from autogen.figures.logs import llama_error
from autogen.footprint import HOST_DEVICE, MIB, DeviceMemory, MemoryRecord, Source, record_from_data, record_to_data
from autogen.fsutil import write_if_changed

#: Flags llama-fit-params b11434 accepts that change what llama.cpp allocates, by spelling:
#: True = takes a value (its `--help`; common/arg.cpp).
ESTIMATOR_FLAGS: dict[str, bool] = {
    **dict.fromkeys(("-m", "--model", "-c", "--ctx-size", "-b", "--batch-size", "-ub", "--ubatch-size",
                     "-fa", "--flash-attn", "-ctk", "--cache-type-k", "-ctv", "--cache-type-v", "-np", "--parallel",
                     "-dev", "--device", "-ot", "--override-tensor", "-ncmoe", "--n-cpu-moe", "-ncffn",
                     "--n-cpu-ffn", "-ngl", "--gpu-layers", "--n-gpu-layers", "-sm", "--split-mode", "-ts",
                     "--tensor-split", "-mg", "--main-gpu", "--override-kv", "--rpc", "--lora", "--lora-scaled",
                     "-lm", "--load-mode"), True),
    **dict.fromkeys(("--swa-full", "-kvo", "--kv-offload", "-nkvo", "--no-kv-offload", "--no-host", "-cmoe",
                     "--cpu-moe", "--op-offload", "--no-op-offload"), False),
}
#: llama-server flags that take a value (so the walk skips it) but mean nothing to the estimator.
_VALUE_FLAGS_SKIPPED = frozenset({"--host", "--port", "-t", "--threads", "-mm", "--mmproj", "-mmu", "--mmproj-url",
                                  "-md", "--model-draft", "--spec-draft-model", "-fit", "--fit", "--pooling",
                                  "-a", "--alias", "--api-key", "--chat-template", "--jinja-template"})
_UNIFIED = frozenset({"-kvu", "--kv-unified"})
#: The call's own spelling of the repack switch (module docstring), replacing the command's.
_REPACK = frozenset({"--repack", "-nr", "--no-repack"})
NO_REPACK = "--no-repack"
_PARALLEL = frozenset({"-np", "--parallel"})
#: llama-server's slots without `--parallel` (tools/server/server.cpp).
SERVER_AUTO_SLOTS = 4
TIMEOUT_S = 120


@frozen
class EstimatorCall:
    """What llama-fit-params is asked for one generated command."""

    argv: tuple[str, ...]
    env: tuple[str, ...]
    #: Sequences of the command's unified KV pool that the call asks as one (0 = none asked so):
    #: the emitter prices the rest (`footprint.Gap`).
    unified_slots: int = 0


def estimator_call(estimator: str, argv: Sequence[str], env: Sequence[str] = ()) -> EstimatorCall:
    """The estimator's command for a generated llama-server argv (module docstring), then
    `--fit-print on`."""
    out = [estimator]
    parallel = None
    unified = False
    i = 1
    while i < len(argv):
        arg = argv[i]
        if arg in _PARALLEL and i + 1 < len(argv):
            parallel = argv[i + 1]
        unified = unified or arg in _UNIFIED
        if arg in _REPACK:
            i += 1
            continue
        takes_value = ESTIMATOR_FLAGS.get(arg)
        if takes_value is not None:
            out += [arg, argv[i + 1]] if takes_value and i + 1 < len(argv) else [arg]
            i += 2 if takes_value else 1
            continue
        i += 2 if arg in _VALUE_FLAGS_SKIPPED else 1
    out.append(NO_REPACK)
    slots = SERVER_AUTO_SLOTS if parallel in (None, "-1") else int(parallel) if parallel.isdigit() else 1
    unified_slots = 0
    if (parallel in (None, "-1") or unified) and slots > 1:
        out = [*_without_parallel(out), "-np", "1"]
        unified_slots = slots
    return EstimatorCall(argv=(*out, "--fit-print", "on"), env=tuple(env), unified_slots=unified_slots)


def _without_parallel(argv: list[str]) -> list[str]:
    out, i = [], 0
    while i < len(argv):
        if argv[i] in _PARALLEL:
            i += 2
            continue
        out.append(argv[i])
        i += 1
    return out


def parse(text: str) -> MemoryRecord | None:
    """`common_fit_print`'s lines, "<device> <model MiB> <context MiB> <compute MiB>", one per
    device, the host's last. Devices it names (CUDA0, ROCm1, Vulkan0, …) are the budget's; with
    none (a CPU build), the host stands for the device."""
    devices = []
    host = None
    for line in text.splitlines():
        parts = line.split()
        if len(parts) != 4 or not all(p.isdigit() for p in parts[1:]):
            continue
        figures = DeviceMemory(parts[0], *(int(p) * MIB for p in parts[1:]))
        if parts[0] == HOST_DEVICE:
            host = figures
        else:
            devices.append(figures)
    if host is None and not devices:
        return None
    if not devices:
        return MemoryRecord(source=Source.FIT_PARAMS, devices=(host,))
    return MemoryRecord(source=Source.FIT_PARAMS, devices=tuple(devices), host=host)


def run(call: EstimatorCall, timeout: float = TIMEOUT_S) -> tuple[MemoryRecord | None, str]:
    """(figures, "") or (None, the estimator's own line on why it failed: its first error line that
    says more than a later one, as llama-server's (`logs.llama_error`), else its last line)."""
    import subprocess  # noqa: PLC0415 - lazy: a run that asks nothing does not pay for it

    env = {**os.environ, **dict(e.split("=", 1) for e in call.env if "=" in e)}
    try:
        proc = subprocess.run(call.argv, capture_output=True, text=True, timeout=timeout, check=False, env=env,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"{Source.FIT_PARAMS} did not run: {exc}"
    figures = parse(proc.stdout)
    if proc.returncode != 0 or figures is None:
        why = llama_error(proc.stderr) or (proc.stderr.strip().splitlines() or ["no output"])[-1].strip()
        return None, f"{Source.FIT_PARAMS} exited {proc.returncode}: {why}"
    return figures, ""


class AnswerCache:
    """llama-fit-params' answers in `cache_dir/engine-estimates/`, one small file per question,
    keyed by the estimator's identity, the call, its environment and the model files' stamp: a
    rebuilt estimator or a changed file asks again. A failure is kept too, with its message."""

    DIR = "engine-estimates"

    def __init__(self, cache_dir: str):
        self.root = os.path.join(cache_dir, self.DIR)

    def key(self, estimator: str, call: EstimatorCall, model_stamp: str) -> str:
        return xxhash.xxh3_128_hexdigest(repr((identity(estimator), call.argv, call.env, model_stamp)).encode())

    def get(self, key: str) -> tuple[MemoryRecord | None, str] | None:
        """(figures, "") or (None, error) as asked before; None = never asked."""
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            with open(os.path.join(self.root, f"{key}.json"), encoding="utf-8") as f:
                data = json.load(f)
            return (record_from_data(data["figures"]) if data["figures"] else None), str(data["error"])
        return None

    def put(self, key: str, figures: MemoryRecord | None, error: str) -> None:
        data = {"figures": record_to_data(figures) if figures is not None else None, "error": error}
        write_if_changed(os.path.join(self.root, f"{key}.json"), json.dumps(data).encode(), durable=False)

    def answer(self, estimator: str, call: EstimatorCall, model_stamp: str) -> tuple[MemoryRecord | None, str]:
        """The cached answer, else the estimator's (then cached)."""
        key = self.key(estimator, call, model_stamp)
        cached = self.get(key)
        if cached is not None:
            return cached
        figures, error = run(call)
        self.put(key, figures, error)
        return figures, error
