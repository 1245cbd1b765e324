"""Speech emitters: TTS (qwentts.cpp, TTS.cpp), ASR (parakeet.cpp) and audio.cpp.

Rules: docs/maintainers/classes.md#speech (TTS, audio.cpp, ASR), worked examples I–L and P there.

    qwentts    <exe> --model <talker> --codec <codec> --voices-dir <dir>/voices/<stem> --port ${PORT}
    TTS.cpp    <exe> --model-path <gguf> --host 127.0.0.1 --port ${PORT} [--n-threads <n>]
    parakeet   <exe> --model <gguf> --port ${PORT}
    audio.cpp  <exe> --host 127.0.0.1 --port ${PORT} [--backend <flavour>] --max-loaded-models 1
                 --voice-dir <dir>/voices [--threads <n>] --config <cache_dir>/audiocpp/<id>.json

audio.cpp has no `--model` flag: the model is named in a server JSON (`--config`). The original's
router wrote it at spawn; upstream llama-swap has no spawn hook, so the plan carries the file in
`Plan.files` and the model task writes it (docs/maintainers/classes.md#audiocpp). TTS.cpp, parakeet and the
SAM server run on the CPU: no VRAM estimate, and they join coexistence groups
(docs/maintainers/classes.md#coexistence-groups).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable

from autogen import fsutil
from autogen.cmdline import HOST
from autogen.discovery.rows import ModelRow
from autogen.emit.entry import Capabilities, Entry, MetaValue, Plan
from autogen.engines import ENGINES, Engine
from autogen.errors import ModelError
from autogen.footprint import Footprint, flat_record
from autogen.numfmt import GIB, format_g, gib, round_half_away, size_gb
from autogen.resolve.context import EmitContext
from autogen.resolve.roles import AUDIOCPP_FAMILIES, is_ttscpp_model

# -- audio.cpp families ------------------------------------------------------------------------

#: Families that clone a voice from a reference clip (metadata `voice_clone`).
AUDIOCPP_CLONE = frozenset({"moss_tts_nano", "qwen3_tts", "f5_tts", "index_tts2", "echo_tts", "chatterbox",
                            "cosyvoice3"})
#: Backend row `build` (settings key `variant`) → audio.cpp `--backend` (docs/maintainers/classes.md#audiocpp);
#: anything else: no flag + a NOTE.
AUDIOCPP_FLAVOURS = {"cuda": "cuda", "vulkan": "vulkan", "metal": "metal", "metal-x64": "metal", "cpu": "cpu",
                     "cpu-portable": "cpu"}


# -- shared ------------------------------------------------------------------------------------

def _extra(ctx: EmitContext) -> tuple[str, ...]:
    return tuple(ctx.override.extra_args) if ctx.override is not None else ()


def _threads(ctx: EmitContext) -> int | None:
    return ctx.override.threads if ctx.override is not None else None


def _comment(engine: str, arch: str, row: ModelRow, why: str) -> str:
    return f"{engine} · {arch or '?'} · {format_g(size_gb(row.size_bytes))} GiB · {why}"


def _footprint(ctx: EmitContext, engine: Engine, est_vram_gb: float | None) -> Footprint:
    """The entry's footprint: the flat VRAM rule's figure (GiB, two decimals) as bytes, with the
    model file on the GPU; None = CPU, the file in host RAM."""
    vram = round(est_vram_gb * GIB) if est_vram_gb is not None else 0
    size = ctx.row.size_bytes
    return Footprint(engine=ENGINES[engine].label, vram=vram, disk=size,
                     memory=flat_record(vram, size, 0 if vram else size))


def _metadata(footprint: Footprint, ctx: EmitContext, arch: str,
              *extra: tuple[str, MetaValue]) -> tuple[tuple[str, MetaValue], ...]:
    data: list[tuple[str, MetaValue]] = [("backend", ctx.backend.backend_id), ("engine", footprint.engine),
                                         ("arch", arch), ("size_gb", footprint.disk_gb)]
    if footprint.vram:
        data.append(("est_vram_gb", footprint.vram_gb))
    return tuple(data) + extra


def _entry(ctx: EmitContext, argv: tuple[str, ...], comment: list[str], footprint: Footprint, *extra_metadata,
           **kw) -> Entry:
    ov = ctx.override
    return Entry(id=ctx.row.id, argv=argv, comment=tuple(comment), ttl=ctx.ttl, unlisted=bool(ov and ov.unlisted),
                 footprint=footprint, estimate=footprint.memory, metadata=_metadata(footprint, ctx, *extra_metadata),
                 **kw)


def _stem(path: str) -> str:
    name = os.path.basename(path)
    return name[: -len(".gguf")] if name.lower().endswith(".gguf") else os.path.splitext(name)[0]


# -- TTS ---------------------------------------------------------------------------------------

def tts_engine(ctx: EmitContext) -> str:
    """The engine that runs this model: a pin's engine wins; an auto pick must match the model's
    format (a Kokoro file on the qwentts binary cannot load), else ModelError."""
    own = Engine.TTSCPP.value if is_ttscpp_model(ctx.row, ctx.meta) else Engine.TTS.value
    resolved = ctx.backend
    if resolved.row is None or resolved.engine not in (Engine.TTS, Engine.TTSCPP) or resolved.engine == own:
        return own
    if resolved.why.startswith("pinned"):
        return resolved.engine
    wanted = "ttscpp (TTS.cpp)" if own == Engine.TTSCPP else "tts (qwentts.cpp)"
    raise ModelError(f"no {wanted} backend registered; '{resolved.backend_id}' runs the other TTS engine, "
                     f"which cannot load this model. Add a backend row of kind {wanted.split()[0]}")


def emit_tts(ctx: EmitContext, file_size: Callable[[str], int | None] = fsutil.file_size) -> Plan:
    """qwentts.cpp (GPU, with its folder's codec) or TTS.cpp (CPU, `useModelName`)."""
    if tts_engine(ctx) == Engine.TTSCPP:
        return _emit_ttscpp(ctx)
    row, meta = ctx.row, ctx.meta
    arch = meta.arch if meta is not None else ""
    if not row.codec:
        raise ModelError("Qwen3-TTS talker with no paired codec gguf (qwen-tokenizer-*hz) in its folder; "
                         "tts-server cannot start without it")
    codec_bytes = file_size(row.codec) or 0
    voices = os.path.join(os.path.dirname(row.path), "voices", _stem(row.path))
    argv = (ctx.backend.exe or ENGINES[Engine.TTS].exe, "--model", row.path, "--codec", row.codec,
            "--voices-dir", voices, "--port", "${PORT}", *_extra(ctx))
    est = round_half_away(gib(row.size_bytes + codec_bytes) + 0.3, 2)
    comment = [_comment("qwentts.cpp", arch, row, f"Qwen3-TTS talker, codec {os.path.basename(row.codec)}, "
                                                  f"est VRAM talker + codec + 0.3 GiB")]
    entry = _entry(ctx, argv, comment, _footprint(ctx, Engine.TTS, est), arch, ("voice_clone", True),
                   check_endpoint="/health", capabilities=Capabilities(inputs=("text",), outputs=("audio",)))
    notes = (f"backend {ctx.backend.backend_id} ({ctx.backend.why})",
             f"est VRAM {format_g(est)} GiB = talker {format_g(size_gb(row.size_bytes))} + codec "
             f"{format_g(size_gb(codec_bytes))} + 0.3")
    return Plan(model_id=row.id, entries=(entry,), notes=notes)


def _emit_ttscpp(ctx: EmitContext) -> Plan:
    row, meta = ctx.row, ctx.meta
    arch = meta.arch if meta is not None else ""
    argv = [ctx.backend.exe or ENGINES[Engine.TTSCPP].exe, "--model-path", row.path, "--host", HOST,
            "--port", "${PORT}"]
    if (threads := _threads(ctx)):
        argv += ["--n-threads", str(threads)]  # long flags only: TTS.cpp binds -t twice
    comment = [_comment("tts.cpp", arch, row, "TTS.cpp tts-server, self-contained, CPU only (no VRAM charge)")]
    if ctx.backend.row is None:
        comment.append(f"WARNING: no TTS.cpp backend registered (a row of kind ttscpp); using {ctx.backend.exe}, "
                       f"which must be TTS.cpp's tts-server for this model to load")
    entry = _entry(ctx, tuple(argv) + _extra(ctx), comment, _footprint(ctx, Engine.TTSCPP, None), arch,
                   check_endpoint="/health", use_model_name=_stem(row.path),
                   capabilities=Capabilities(inputs=("text",), outputs=("audio",)), coexist_group="tts")
    return Plan(model_id=row.id, entries=(entry,), notes=(f"backend {ctx.backend.backend_id} ({ctx.backend.why})",))


# -- ASR ---------------------------------------------------------------------------------------

def emit_asr(ctx: EmitContext) -> Plan:
    """parakeet-server: CPU by default (a GPU opt-in via extra_args is an accepted under-charge)."""
    row, meta = ctx.row, ctx.meta
    arch = meta.arch if meta is not None else ""
    argv = (ctx.backend.exe or ENGINES[Engine.ASR].exe, "--model", row.path, "--port", "${PORT}", *_extra(ctx))
    comment = [_comment("parakeet", arch, row, "Parakeet ASR, parakeet.cpp parakeet-server, CPU (no VRAM charge)")]
    entry = _entry(ctx, argv, comment, _footprint(ctx, Engine.ASR, None), arch, check_endpoint="none",
                   capabilities=Capabilities(inputs=("audio",), outputs=("text",)), coexist_group="asr")
    return Plan(model_id=row.id, entries=(entry,), notes=(f"backend {ctx.backend.backend_id} ({ctx.backend.why})",))


# -- audio.cpp ---------------------------------------------------------------------------------

def audiocpp_config_path(cache_dir: str, model_id: str) -> str:
    return os.path.join(cache_dir, "audiocpp", f"{model_id}.json")


def audiocpp_config(model_id: str, family: str, path: str, task: str) -> str:
    """The server JSON the Go original's router wrote at spawn (docs/maintainers/classes.md#audiocpp)."""
    doc = {"lazy_load": False, "max_loaded_models": 1, "idle_unload_ms": 0, "min_free_memory_mb": 0,
           "models": [{"id": model_id, "family": family, "path": path.replace("\\", "/"), "task": task}]}
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def emit_audiocpp(ctx: EmitContext) -> Plan:
    row, meta = ctx.row, ctx.meta
    family = meta.audio_family if meta is not None else ""
    if not family:
        raise ModelError("audio.cpp gguf with no audiocpp.model_spec.family in its header; re-download or "
                         "re-convert it with a current audio.cpp")
    if family not in AUDIOCPP_FAMILIES:
        raise ModelError(f"unknown audio.cpp family {family!r}; "
                         "add it to AUDIOCPP_FAMILIES in autogen/resolve/roles.py")
    task = AUDIOCPP_FAMILIES[family]
    if not task:
        raise ModelError(f"audio.cpp family {family!r} is a music / separation / voice-conversion / alignment "
                         f"model, which has no class or route here yet")
    resolved = ctx.backend
    comment = [_comment("audio.cpp", family, row, f"task {task}, est VRAM size + 0.4 GiB")]
    installed = resolved.engine == Engine.AUDIOCPP
    exe = resolved.exe if installed else ENGINES[Engine.AUDIOCPP].exe
    if not installed:
        comment.append(f"WARNING: no audio.cpp backend registered (a row of kind audiocpp); {row.id} will not "
                       f"start until one is installed")
    build = (resolved.row.build.strip().lower() if installed and resolved.row is not None else "")
    flavour = AUDIOCPP_FLAVOURS.get(build)
    if installed and flavour is None:
        comment.append(f"NOTE: audio.cpp backend '{resolved.backend_id}' records no known build variant, so no "
                       f"--backend flag is emitted and the server's own default applies")
    config = audiocpp_config_path(ctx.settings.cache_dir, ctx.row.id)
    argv = [exe, "--host", HOST, "--port", "${PORT}"]
    if flavour:
        argv += ["--backend", flavour]
    argv += ["--max-loaded-models", "1", "--voice-dir", os.path.join(os.path.dirname(row.path), "voices")]
    if (threads := _threads(ctx)):
        argv += ["--threads", str(threads)]
    argv += ["--config", config]
    est = round_half_away(gib(row.size_bytes) + 0.4, 2)
    clone = task == "tts" and family in AUDIOCPP_CLONE
    caps = (Capabilities(inputs=("text",), outputs=("audio",)) if task == "tts"
            else Capabilities(inputs=("audio",), outputs=("text",)))
    footprint = _footprint(ctx, Engine.AUDIOCPP, est)
    entry = _entry(ctx, tuple(argv) + _extra(ctx), comment, footprint, family, ("task", task),
                   *((("voice_clone", True),) if clone else ()), check_endpoint="/health", capabilities=caps)
    text = audiocpp_config(row.id, family, row.path, task)
    return Plan(model_id=row.id, entries=(entry,), files=((config, text),),
                notes=(f"backend {resolved.backend_id} ({resolved.why})", f"server config {config}"))

