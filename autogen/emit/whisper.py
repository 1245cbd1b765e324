"""The whisper.cpp emitter: one whisper-server entry per whisper model, sized from its header.

Rules: docs/maintainers/whisper.md. Argv (every flag from whisper-server 1.8.5's parser,
`flags.whisper`):

    <exe> -m <model> --host 127.0.0.1 --port ${PORT} --inference-path /v1/audio/transcriptions
      [-l auto] [-nfa] [-ng] [-t <n>] [--vad -vm <silero>] <extra_args>

- `--inference-path /v1/audio/transcriptions`: the server's route for multipart transcription
  requests is `request_path + inference_path` (examples/server/server.cpp), `/inference` by
  default; OpenAI clients post to `/v1/audio/transcriptions`, which llama-swap forwards
  unchanged (its `modelPostFormRoutes`). `/health` stays at the root: `checkEndpoint: /health`,
  which answers 200 once the model is loaded (the server loads it before it listens).
- `-l auto` for a multilingual model: whisper-server's default language is `en`, which makes a
  multilingual model transcribe everything as English; OpenAI's endpoint detects the language
  unless the request names one (a request's `language` field still wins). An English-only
  model keeps the default.
- Flash attention is whisper.cpp's default; `flash_attn: off` writes `-nfa` (and is sized so:
  the encoder's attention scores then take F32 per head).
- The GPU: whisper-server puts the whole model on one GPU (no partial offload). It runs there
  when its estimate fits the budget, on the CPU (`-ng`) when it does not or `ngl: 0` asks; a CPU
  build (`variant: cpu`) needs no flag. The device is the placement's (`devices:`, the
  largest card of several: `EngineRow.one_gpu`), pinned by the row's device variable.
- The Silero VAD model of the folder (or the override's `vad_model`, `none` for none) adds
  `--vad -vm <file>`: whisper-server then transcribes only the speech it finds.
"""

from __future__ import annotations

import itertools
import os

from attrs import frozen

from autogen.cmdline import HOST, unsafe_arg_reason
from autogen.emit.entry import Capabilities, Entry, MetaValue, Plan
from autogen.engines import ENGINES, Engine
from autogen.errors import ModelError
from autogen.flags.whisper import split_extra
from autogen.footprint import HOST_DEVICE, DeviceMemory, Footprint, MemoryRecord, Source
from autogen.metadata.whisper_header import WhisperShape
from autogen.numfmt import GIB, format_g, gib_figure, gib_text
from autogen.resolve.context import EmitContext
from autogen.sizing.llama import runtime_bytes
from autogen.sizing.whisper import WhisperMemory, whisper_memory

ENGINE = ENGINES[Engine.WHISPER]
#: The OpenAI transcription route, which llama-swap forwards as it is.
OPENAI_PATH = "/v1/audio/transcriptions"
#: Builds without a GPU backend (a backend row's `variant`).
CPU_BUILDS = ("cpu", "cpu-portable")
#: What whisper.cpp 1.8.5 printed for a Silero VAD model's graph (`compute buffer (VAD) = 1.60 MB`).
VAD_COMPUTE = 1_600_000


@frozen
class Launch:
    """Where the model runs and why: on the GPU, or on the CPU, by a `-ng` swapgen writes
    (`no_gpu_flag`), the user's own `-ng`, or a CPU build (no GPU to leave)."""

    gpu: bool
    no_gpu_flag: bool
    why: str


def _pick(ctx: EmitContext, name: str):
    """The override's value, else the settings' (as llama-server's knobs)."""
    value = getattr(ctx.override, name, None) if ctx.override is not None else None
    return value if value is not None else getattr(ctx.settings, name, None)


def _vad(ctx: EmitContext) -> tuple[str | None, int]:
    """(the VAD model, its bytes): the override's `vad_model` (a path, or none), else the folder's."""
    chosen = ctx.override.vad_model if ctx.override is not None else None
    if chosen is None:
        return ctx.row.vad, ctx.row.vad_bytes
    if chosen.strip().lower() == "none":
        return None, 0
    if (reason := unsafe_arg_reason(chosen)) is not None:
        raise ModelError(f"vad_model {chosen!r} cannot be passed safely: {reason}")
    try:
        return chosen, os.path.getsize(chosen)
    except OSError as exc:
        raise ModelError(f"vad_model {chosen}: cannot read ({exc.strerror or exc})") from None


def _record(memory: WhisperMemory, launch: Launch, cpu_build: bool, unseen: int, vad_bytes: int) -> MemoryRecord:
    """The estimate: whisper.cpp's printed parts on the GPU or the host, what it does not print
    (the runtime, the fallback's self cache, the VAD on the CPU) beside them."""
    vad = DeviceMemory(HOST_DEVICE, vad_bytes, 0, VAD_COMPUTE) if vad_bytes else None
    weights, caches, compute = memory.weights.bytes, memory.context, memory.compute_bytes
    if launch.gpu:
        return MemoryRecord(source=Source.ESTIMATE, devices=(DeviceMemory("GPU0", weights, caches, compute),),
                            host=vad, unseen=(unseen + memory.fallback.bytes,))
    if cpu_build:  # no accelerator: the host stands for the device (footprint module docstring)
        return MemoryRecord(source=Source.ESTIMATE, devices=(DeviceMemory(HOST_DEVICE, weights, caches, compute),),
                            unseen=(memory.fallback.bytes + (vad.total if vad else 0),))
    extra = vad.total if vad else 0
    return MemoryRecord(source=Source.ESTIMATE, devices=(),
                        host=DeviceMemory(HOST_DEVICE, weights, caches + memory.fallback.bytes, compute + extra))


def _flash(ctx: EmitContext, args: tuple[str, ...]) -> bool:
    """Flash attention: the last of `-fa`/`-nfa` in `extra_args` (the parser's last word wins),
    else on unless `flash_attn: off`."""
    for arg in reversed(args):
        if arg in ("-fa", "--flash-attn", "-nfa", "--no-flash-attn"):
            return arg in ("-fa", "--flash-attn")
    return _pick(ctx, "flash_attn") != "off"


def _launch(ctx: EmitContext, cpu_build: bool, gpu_bytes: int, args: tuple[str, ...]) -> Launch:
    if any(a in ("-ng", "--no-gpu") for a in args):
        return Launch(gpu=False, no_gpu_flag=False, why="-ng in extra_args")
    if cpu_build:
        return Launch(gpu=False, no_gpu_flag=False, why=f"CPU build ({ctx.backend.backend_id})")
    if _pick(ctx, "ngl") == 0:
        return Launch(gpu=False, no_gpu_flag=True, why="ngl: 0 asks for the CPU")
    budget = int(ctx.budget_gb * GIB)
    if gpu_bytes > budget:
        return Launch(gpu=False, no_gpu_flag=True,
                      why=f"{gib_text(gpu_bytes)} does not fit the {format_g(ctx.budget_gb)} GiB budget: on the CPU")
    return Launch(gpu=True, no_gpu_flag=False, why="whole model on the GPU")


def _argv(ctx: EmitContext, shape: WhisperShape, flash: bool, launch: Launch, vad: str | None,
          extra: tuple[tuple[str, ...], frozenset[str]]) -> tuple[str, ...]:
    """The command line, in the module docstring's order; a group whose meaning `extra_args` sets
    gives way to it."""
    args, replaced = extra
    installed = ctx.backend.engine == Engine.WHISPER
    groups: list[tuple[str, tuple[str, ...]]] = [
        ("", (ctx.backend.exe if installed else ENGINE.exe,)), ("model", ("-m", ctx.row.path)),
        ("host", ("--host", HOST)), ("port", ("--port", "${PORT}")),
        ("inference_path", ("--inference-path", OPENAI_PATH))]
    if shape.multilingual:
        groups.append(("language", ("-l", "auto")))
    if not flash:
        groups.append(("flash_attn", ("-nfa",)))
    if launch.no_gpu_flag:
        groups.append(("gpu", ("-ng",)))
    if (threads := _pick(ctx, "threads")):
        groups.append(("threads", ("-t", str(threads))))
    if vad:
        groups.append(("vad", ("--vad", "-vm", vad)))
    return tuple(token for meaning, group in groups if meaning not in replaced for token in group) + args


def _request_path(args: tuple[str, ...]) -> str:
    """The `--request-path` of the user's `extra_args` (it moves `/health` too), "" without one."""
    for flag, value in itertools.pairwise(args):
        if flag == "--request-path":
            return value.rstrip("/")
    return ""


def _comment(ctx: EmitContext, shape: WhisperShape, record: MemoryRecord, launch: Launch, flash: bool,
             vad: str | None) -> list[str]:
    where = "GPU" if launch.gpu else "CPU"
    layers = f"{shape.n_audio_layer}+{shape.n_text_layer} layers, width {shape.n_audio_state}"
    lines = [f"whisper.cpp · {shape.quant} · {layers} · {format_g(round(ctx.row.size_bytes / GIB, 2))} GiB · "
             f"{where} ({launch.why}), flash attention {'on' if flash else 'off'}",
             f"est VRAM {gib_figure(record.vram)} GiB of {format_g(ctx.budget_gb)} GiB, RAM "
             f"{gib_figure(record.host.total if record.host else 0)} GiB"]
    if vad:
        lines.append(f"VAD {os.path.basename(vad)}: transcribes only the speech it finds")
    for encoder in ctx.row.encoders[:1]:
        lines.append(f"encoder {os.path.basename(encoder)} beside it: loaded only by a whisper.cpp built with that "
                     "framework, from the model's path")
    if ctx.backend.engine != Engine.WHISPER:
        lines.append(f"WARNING: no whisper.cpp backend registered (a row of kind whisper); {ctx.row.id} runs "
                     f"{ENGINE.exe} from PATH")
    return lines


def _notes(ctx: EmitContext, memory: WhisperMemory, record: MemoryRecord, launch: Launch) -> tuple[str, ...]:
    return (f"backend {ctx.backend.backend_id} ({ctx.backend.why})", f"placement: {launch.why}",
            *(fact.line for fact in memory.facts),
            f"printed at start: {gib_text(memory.printed)} (weights + caches + compute buffers)",
            f"estimate: VRAM {gib_text(record.vram)}, RAM {gib_text(record.host.total if record.host else 0)}")


def _metadata(ctx: EmitContext, footprint: Footprint, shape: WhisperShape, flash: bool,
              vad: str | None) -> tuple[tuple[str, MetaValue], ...]:
    data: list[tuple[str, MetaValue]] = [("backend", ctx.backend.backend_id), ("engine", footprint.engine),
                                         ("arch", "whisper"), ("size_gb", footprint.disk_gb)]
    if footprint.vram:
        data.append(("est_vram_gb", footprint.vram_gb))
    data += [("est_ram_gb", footprint.host_gb), ("quant", shape.quant), ("multilingual", shape.multilingual),
             ("flash_attn", flash), ("vad", vad is not None)]
    return tuple(data)


def emit_whisper(ctx: EmitContext) -> Plan:
    """One whisper-server entry (module docstring)."""
    shape = ctx.meta.whisper if ctx.meta is not None else None
    if shape is None:
        raise ModelError("no readable whisper.cpp header: cannot size whisper-server")
    extra = split_extra(tuple(ctx.override.extra_args) if ctx.override is not None else ())
    flash = _flash(ctx, extra[0])
    vad, vad_bytes = _vad(ctx)
    memory = whisper_memory(shape, flash)
    build = ctx.backend.row.build.strip().lower() if ctx.backend.row is not None else ""
    cpu_build = build in CPU_BUILDS
    runtime = 0 if cpu_build else runtime_bytes(build)
    launch = _launch(ctx, cpu_build, memory.printed + memory.fallback.bytes + runtime, extra[0])
    argv = _argv(ctx, shape, flash, launch, vad, extra)
    estimate = _record(memory, launch, cpu_build, runtime, vad_bytes)
    record = next((r.engine for r in ctx.readings if r.argv == argv), estimate)
    footprint = Footprint(engine=ENGINE.label, vram=record.vram, host=record.host.total if record.host else 0,
                          disk=ctx.row.size_bytes + vad_bytes, memory=record)
    ov = ctx.override
    entry = Entry(id=ctx.row.id, argv=argv, comment=tuple(_comment(ctx, shape, record, launch, flash, vad)),
                  metadata=_metadata(ctx, footprint, shape, flash, vad),
                  capabilities=Capabilities(inputs=("audio",), outputs=("text",)), ttl=ctx.ttl,
                  unlisted=bool(ov and ov.unlisted), check_endpoint=f"{_request_path(extra[0])}/health",
                  coexist_group=None if launch.gpu else "asr", footprint=footprint, estimate=estimate)
    return Plan(model_id=ctx.row.id, entries=(entry,), notes=_notes(ctx, memory, record, launch))
