"""What a running engine reports about its own memory, read from its log (and, where the driver
tools exist, from their per-process tables): the measurements of `swapgen calibrate`.

- **llama-server** (b11434) logs each buffer it allocates at load, at log verbosity 4
  (`LLAMA_ARG_LOG_VERBOSITY`): `load_tensors: <buffer> model buffer size = X MiB`
  (src/llama-model.cpp), `llama_kv_cache: <buffer> KV buffer size` (src/llama-kv-cache.cpp),
  `llama_memory_recurrent: <buffer> RS buffer size`, `sched_reserve: <buffer> compute buffer
  size` (src/llama-context.cpp), `<buffer> output buffer size`. A buffer named after a device
  (CUDA0, ROCm1, Vulkan0) is that device's; CPU, CPU_Mapped, CPU_REPACK and *_Host buffers are
  host memory. A graph reserved again replaces its earlier size. The projector's buffers
  (`alloc_compute_meta`, tools/mtmd/clip.cpp) and a draft model's (a second `load_tensors`) end
  the main model's report.
- **vLLM** (0.33) logs, per worker: `Model loading took X GiB memory and Y seconds`
  (vllm/v1/worker/gpu_model_runner.py), `Available KV cache memory: X GiB`
  (vllm/v1/worker/gpu_worker.py) or, with `--kv-cache-memory-bytes`, `reserved X GiB memory for
  KV Cache`, and once `GPU KV cache size: N tokens, Maximum concurrency for L tokens per request:
  Cx` (vllm/v1/core/kv_cache_utils.py). Numbers are GiB rounded to 2 decimals (`format_gib`).

- **whisper-server** (whisper.cpp 1.8.5) prints at start, at any log level (src/whisper.cpp):
  `whisper_model_load: <buffer> total size = X MB` per weights buffer, then in
  `whisper_init_state` the `kv self`, `kv cross` and `kv pad` sizes and the four `compute buffer
  (conv|encode|cross|decode)` sizes, in MB of 10^6 bytes, all on its first backend: the GPU that
  `whisper_backend_init_gpu: using <device> backend` names, else the host.

- **ik_llama.cpp's llama-server** logs the same buffers at its default verbosity, as llama.cpp
  did before its `llama_context` rewrite (src/llama.cpp): `llm_load_tensors: <buffer> buffer size`
  (the weights), `llama_kv_cache_init: <buffer> KV buffer size`, `llama_init_from_model: <buffer>
  output buffer size` and `compute buffer size`.

Each measured engine's row names its reader here (`EngineRow.log_reader`: `LLAMA_LOG`,
`IK_LLAMA_LOG`, `VLLM_LOG`, `WHISPER_LOG`).

- **nvidia-smi** `--query-compute-apps=pid,gpu_uuid,used_memory --format=csv,noheader,nounits`
  (MiB per process and GPU) with `--query-gpu=index,uuid`; **rocm-smi** `--showpids` (bytes).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence

from attrs import frozen

from autogen.footprint import HOST_DEVICE, MIB, DeviceMemory, MemoryRecord, Source

GIB = 1 << 30
_WHISPER_WEIGHTS = re.compile(r"whisper_model_load:\s+(\S+) total size =\s*([\d.]+) MB")
_WHISPER_DEVICE = re.compile(r"whisper_backend_init_gpu: using (\S+) backend")
_WHISPER_STATE = re.compile(r"whisper_init_state: (kv self|kv cross|kv pad|compute buffer \(\w+\))\s+(?:size\s+)?=\s*"
                            r"([\d.]+) MB")
#: b11434's log line: optional "0.00.073.304 " timestamp, then the level letter.
_LEVEL = re.compile(r"^(?:\d+\.\d+\.\d+\.\d+ )?([EWIDT]) ")
_BUFFER = re.compile(r"(\w+):\s+(\S+)\s+(model|KV|RS|compute|output|LoRA|DSV4 \w+ state) buffer size =\s*([\d.]+) MiB")
#: ik_llama.cpp's (src/llama.cpp): the weights' line names no kind (`llm_load_tensors: CPU buffer
#: size`), the others as llama.cpp's older code did (`llama_kv_cache_init`, `llama_init_from_model`).
_IK_BUFFER = re.compile(r"(\w+):\s+(\S+)\s+(?:(KV|compute|output|LoRA) )?buffer size =\s*([\d.]+) MiB")
#: Its error lines: a loader's (`llama_model_load: error loading model: …`) or the parser's
#: (`error: unknown argument: …`, common/common.cpp).
_IK_ERROR = re.compile(r"(?:^|: )error(?: loading model)?: (.+)$")
_PART = {"model": "model", "LoRA": "model", "KV": "context", "RS": "context", "compute": "compute",
         "output": "output"}
#: Lines of an error level that only say a later line's news (llama.cpp's own fit failing first).
_ECHOES = ("common_fit_params:", "exiting due to", "cleaning up before exit")
#: Error lines of a probe the server goes on after (the projector's memory, read before the model
#: loads: tools/mtmd `mtmd_get_memory_usage`); when the load then fails, a later line says why.
_PROBES = ("mtmd_get_memory_usage:",)

_VLLM_WORKER = re.compile(r"^\((\S+) pid=(\d+)\)")
_VLLM_LOADED = re.compile(r"Model loading took ([\d.]+) GiB memory")
_VLLM_KV = re.compile(r"Available KV cache memory: (-?[\d.]+) GiB|reserved ([\d.]+) GiB memory for KV Cache")
_VLLM_TOKENS = re.compile(r"KV cache size: ([\d,]+) tokens, Maximum concurrency for ([\d,]+) tokens per request: "
                          r"([\d.]+)x")
_PY_ERROR = re.compile(r"^(?:\S+ )*?(\w+(?:Error|Exception)): (.+)$")


@frozen
class LogReader:
    """How `swapgen calibrate` reads one engine's start. Example: `LLAMA_LOG`."""

    #: Variables set unless the entry sets them, so the log reports the memory.
    env: tuple[tuple[str, str], ...]
    #: The log → the engine's own line on why it stopped ("" = none).
    error: Callable[[str], str]
    #: (the log, the devices of the entry's estimate) → (the engine's report as a memory record,
    #: or None without one; the tokens its KV cache holds, or 0).
    figures: Callable[[str, Sequence[DeviceMemory]], tuple[MemoryRecord | None, int]]


def buffer_device(buffer: str) -> str:
    """The device a llama.cpp buffer lives on: its own name, or the host."""
    if buffer.startswith("CPU") or buffer.endswith("_Host") or buffer == HOST_DEVICE:
        return HOST_DEVICE
    return buffer.removesuffix("_Mapped")


def llama_report(text: str, pattern: re.Pattern[str] = _BUFFER) -> MemoryRecord | None:
    """The main model's allocations at load, per device (module docstring); None when the log has
    no buffer line (a lower log verbosity, or no model loaded). A projector's and a draft model's
    buffers are left out: llama-fit-params cannot see them either, so both records carry
    swapgen's charge for them beside the parts, and readings of either source compare alike."""
    parts: dict[tuple[str, str, str], float] = {}  # (device, part, which buffer) → MiB
    main_done = False
    for line in text.splitlines():
        if (m := pattern.search(line)) is None:
            continue
        func, buffer, kind, size = m.groups()
        part = _PART.get(kind or "model", "context")
        if func == "alloc_compute_meta" or (part == "model" and func.endswith("load_tensors") and main_done):
            break  # the projector's or the draft's buffers follow the main model's
        main_done = main_done or part != "model"
        key = (buffer_device(buffer), part, f"{func} {buffer}")
        # a graph reserved again replaces its size; other buffers of one kind add up
        parts[key] = float(size) + (0.0 if part == "compute" else parts.get(key, 0.0))
    sums: dict[str, dict[str, float]] = {}
    for (device, part, _), mib in parts.items():
        figures = sums.setdefault(device, {"model": 0.0, "context": 0.0, "compute": 0.0})
        figures["compute" if part == "output" else part] += mib
    if not sums:
        return None
    rows = {d: DeviceMemory(d, *(round(p[k] * MIB) for k in ("model", "context", "compute"))) for d, p in sums.items()}
    host = rows.pop(HOST_DEVICE, None)
    if not rows:
        return MemoryRecord(source=Source.MEASURED, devices=(host,)) if host is not None else None
    return MemoryRecord(source=Source.MEASURED, devices=tuple(rows.values()), host=host)


def llama_error(text: str) -> str:
    """The engine's own line on why it stopped: the first error-level line that is not an echo,
    or an argument error ("error: invalid argument: --x"); a probe's line only when no other says
    more."""
    probe = ""
    for line in text.splitlines():
        m = _LEVEL.match(line)
        body = line[m.end():].strip() if m else line.strip()
        if ((m and m.group(1) == "E") or body.startswith("error:")) and not any(e in body for e in _ECHOES):
            body = re.sub(r"^(srv|cmn|res)\s+", "", body)
            if not body.startswith(_PROBES):
                return body
            probe = probe or body
    return probe


def llama_figures(text: str, planned: Sequence[DeviceMemory]) -> tuple[MemoryRecord | None, int]:
    """llama-server's buffers (`llama_report`); its pool's tokens are its `-c`, not read here."""
    return llama_report(text), 0


@frozen
class VllmReport:
    """vLLM's memory lines, one per worker (tensor-parallel rank), in bytes.

    Example: VllmReport(weights=(16_384_000_000,), kv=(5_905_580_032,), kv_tokens=120_000,
    max_model_len=32768).
    """

    weights: tuple[int, ...]
    kv: tuple[int, ...]
    kv_tokens: int = 0
    max_model_len: int = 0


def vllm_report(text: str) -> VllmReport | None:
    """The figures of vLLM's start-up log (module docstring); None when it never loaded a model."""
    weights: dict[str, int] = {}
    kv: dict[str, int] = {}
    tokens = length = 0
    for line in text.splitlines():
        worker = m.group(1) if (m := _VLLM_WORKER.match(line)) else ""
        if m := _VLLM_LOADED.search(line):
            weights[worker] = round(float(m.group(1)) * GIB)
        elif m := _VLLM_KV.search(line):
            kv[worker] = max(0, round(float(m.group(1) or m.group(2)) * GIB))
        elif m := _VLLM_TOKENS.search(line):
            tokens, length = int(m.group(1).replace(",", "")), int(m.group(2).replace(",", ""))
    if not weights:
        return None
    order = sorted(weights)
    return VllmReport(weights=tuple(weights[w] for w in order), kv=tuple(kv.get(w, 0) for w in order),
                      kv_tokens=tokens, max_model_len=length)


def vllm_error(text: str) -> str:
    """vLLM's own reason: the last exception line (`ValueError: To serve at least one request …`),
    else the last ERROR log line."""
    last_error = ""
    for line in text.splitlines():
        stripped = line.strip()
        if m := _PY_ERROR.match(stripped):
            last_error = f"{m.group(1)}: {m.group(2)}"
        elif " ERROR " in stripped and not last_error:
            last_error = stripped.split("] ", 1)[-1]
    return last_error


def vllm_figures(text: str, planned: Sequence[DeviceMemory]) -> tuple[MemoryRecord | None, int]:
    """vLLM's per-worker weights and KV pool, with the rest of what the estimate puts on the
    device as its compute part, and the tokens its pool holds."""
    report = vllm_report(text)
    if report is None:
        return None, 0
    rows = []
    for i, (weights, kv) in enumerate(zip(report.weights, report.kv, strict=True)):
        name = planned[i].name if i < len(planned) else f"GPU{i}"
        takes = planned[i].total if i < len(planned) else weights + kv
        rows.append(DeviceMemory(name, weights, kv, max(0, takes - weights - kv)))
    note = (f"vLLM: KV cache of {report.kv_tokens:,} tokens for max-model-len {report.max_model_len:,}"
            if report.kv_tokens else "")
    return MemoryRecord(source=Source.MEASURED, devices=tuple(rows), note=note), report.kv_tokens


def whisper_report(text: str) -> MemoryRecord | None:
    """whisper-server's allocations at start, per device (module docstring); None before its
    model loaded."""
    device = HOST_DEVICE
    parts: dict[str, list[float]] = {}  # device → [model, context, compute] in MB
    for line in text.splitlines():
        if m := _WHISPER_DEVICE.search(line):
            device = buffer_device(m.group(1))
        elif m := _WHISPER_WEIGHTS.search(line):
            parts.setdefault(buffer_device(m.group(1)), [0.0, 0.0, 0.0])[0] += float(m.group(2))
        elif m := _WHISPER_STATE.search(line):
            part = 2 if m.group(1).startswith("compute") else 1
            parts.setdefault(device, [0.0, 0.0, 0.0])[part] += float(m.group(2))
    if not parts:
        return None
    rows = {d: DeviceMemory(d, *(round(mb * 1e6) for mb in figures)) for d, figures in parts.items()}
    host = rows.pop(HOST_DEVICE, None)
    if not rows:
        return MemoryRecord(source=Source.MEASURED, devices=(host,)) if host is not None else None
    return MemoryRecord(source=Source.MEASURED, devices=tuple(rows.values()), host=host)


def whisper_error(text: str) -> str:
    """whisper-server's own line on why it stopped: the first that says error or failed
    ("error: unknown argument: --m", "whisper_model_load: invalid model data (bad magic)")."""
    for line in text.splitlines():
        if re.search(r"(?i)\berror\b|failed|invalid", line):
            return line.strip()
    return ""


def whisper_figures(text: str, planned: Sequence[DeviceMemory]) -> tuple[MemoryRecord | None, int]:
    return whisper_report(text), 0


def ik_llama_error(text: str) -> str:
    """ik_llama.cpp's own line on why it stopped: its first error line (`_IK_ERROR`)."""
    for line in text.splitlines():
        if m := _IK_ERROR.search(line.strip()):
            return m.group(1).strip()
    return ""


def ik_llama_figures(text: str, planned: Sequence[DeviceMemory]) -> tuple[MemoryRecord | None, int]:
    """ik_llama.cpp's buffers, read as llama.cpp's are (`llama_report`)."""
    return llama_report(text, _IK_BUFFER), 0


#: llama-server reports its buffers at log verbosity 4 (module docstring).
LLAMA_LOG = LogReader(env=(("LLAMA_ARG_LOG_VERBOSITY", "4"),), error=llama_error, figures=llama_figures)
#: ik_llama.cpp's llama-server logs them at its default verbosity.
IK_LLAMA_LOG = LogReader(env=(), error=ik_llama_error, figures=ik_llama_figures)
#: vLLM logs its figures at any level.
VLLM_LOG = LogReader(env=(), error=vllm_error, figures=vllm_figures)
#: whisper-server prints its figures at any level.
WHISPER_LOG = LogReader(env=(), error=whisper_error, figures=whisper_figures)


def nvidia_per_process(apps: str, gpus: str, pids: Iterable[int]) -> dict[int, int]:
    """GPU index → bytes the processes `pids` hold, from nvidia-smi's two CSV tables."""
    index = {}
    for line in gpus.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) == 2 and cells[0].isdigit():
            index[cells[1]] = int(cells[0])
    wanted = set(pids)
    held: dict[int, int] = {}
    for line in apps.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) == 3 and cells[0].isdigit() and int(cells[0]) in wanted and cells[2].isdigit():
            gpu = index.get(cells[1])
            if gpu is not None:
                held[gpu] = held.get(gpu, 0) + int(cells[2]) * MIB
    return held


def rocm_per_process(text: str, pids: Iterable[int]) -> dict[int, int]:
    """GPU index → bytes from `rocm-smi --showpids` ("PID NAME GPU(s) VRAM_USED SDMA CU"): the
    table names how many GPUs a process uses, not which, so it is charged to GPU 0 when one."""
    wanted = set(pids)
    held: dict[int, int] = {}
    for line in text.splitlines():
        cells = line.split()
        if len(cells) >= 4 and cells[0].isdigit() and int(cells[0]) in wanted and cells[3].isdigit():
            held[0] = held.get(0, 0) + int(cells[3])
    return held
