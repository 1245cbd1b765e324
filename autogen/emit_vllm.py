"""The vLLM emitter: one `vllm serve` entry per GGUF file or HF folder, sized from the budget.

vLLM preallocates: its KV pool comes from `--max-model-len` and its share of the card from
`--gpu-memory-utilization`, so both are derived from the model's VRAM budget and its real f16
KV cost instead of the trained window and a flat 0.90 (seed `backends.md` "vllm", reference
`spec-backends-vllm-hf.md` §3–5, §7). Only the override's `ctx`, `vllm_*` knobs and
`extra_args` apply; llama's knobs are ignored.

Argv order (reference §3.8): exe, `serve <path>`, `--host`, `--port`, `--served-model-name`,
`--quantization gguf` (GGUF only), `--gpu-memory-utilization`, then — new against the original's
code, placed where its design note suggests — `--kv-cache-memory-bytes`, then `--max-model-len`,
`--tokenizer`, `--enable-auto-tool-choice --tool-call-parser`, `--tensor-parallel-size`,
`extra_args`.

KV-pool pin (the seed's `--kv-cache-memory-bytes`, reference §3.10): `KvReserve(ctx) × 1.10 + 0.25 GiB`, computed in
integer bytes and rounded UP to a whole MiB (1,048,576 bytes); the footprint then charges the
rounded pin, uncapped by the budget. `--max-model-len` is not shrunk to make room for the
10 % + 0.25 GiB margin, which keeps the reference's derived numbers (§3.10).

Devices (`ctx.devices`): vLLM's utilization and KV pin are per GPU, so on devices the
footprint is one rank's: weights / TP + its KV share (`kv_shards`) + the overhead, against the
smallest card, and `--tensor-parallel-size` is the device count unless pinned. The reference's
"footprint / TP / card" would spread the per-rank overhead too. Without devices nothing changes.

Where we differ from the original: the path is passed as is (backslashes are not turned into
`/`; quoting is the renderer's job); the 4096 floor for over-budget weights is capped by a
shorter trained window (vLLM refuses a longer one); a model with no per-token KV
(bytes_per_token 0) gets its trained window and no pin; weights are the row's size rounded to
2 decimals, as the original's `SizeGB`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from attrs import frozen

from autogen.emitcontext import EmitContext
from autogen.entry import Capabilities, Entry, MetaValue, Plan, Skip
from autogen.kvcost import kv_bytes
from autogen.metadata import ModelMeta
from autogen.numfmt import GIB, ceil_to, format_g, gib, round_half_away
from autogen.toolparsers import ParserChoice, choose_tool_parser, format_version, parse_version

# Constants of the original (reference §3.2).
DEFAULT_UTIL = 0.90
MIN_UTIL, MAX_UTIL = 0.10, 0.95
#: Flat reserve for activations, CUDA graphs and the profiling peak (vLLM's allocator is opaque).
OVERHEAD_GIB = 1.5
FALLBACK_CTX = 32768
CTX_STEP = 4096
HOST = "127.0.0.1"
DEFAULT_EXE = "vllm"

#: The pin's margin: paged blocks and hybrid page sizes do not match our cost byte for byte.
PIN_FACTOR_TENTHS = 11  # × 1.10
PIN_PAD_BYTES = GIB // 4  # + 0.25 GiB
MIB = 1 << 20

#: `--kv-cache-memory-bytes` first shipped in vLLM 0.10.2 (vllm-project/vllm#21489; ecosystem §6.2).
KV_PIN_SINCE = (0, 10, 2)
#: GGUF left vLLM core in 0.24.0 for the `vllm-gguf-plugin` package (ecosystem §0 trap 9).
GGUF_PLUGIN_SINCE = (0, 24)

#: Options whose presence in `extra_args` replaces ours, with the shortest prefix vLLM 0.33.0's
#: argparse (`allow_abbrev=True`) resolves to them uniquely; `_` is read as `-` like vLLM does.
_MEMORY_FLAGS = {
    "--kv-cache-memory-bytes": "--kv-cache-mem",
    "--gpu-memory-utilization": "--gp",
    "--device-memory-utilization": "--device-m",
}
_PARSER_FLAGS = {"--tool-call-parser": "--tool-c"}
#: `--chat-template-content-format` and `-kwargs` share the prefix, so only the full name counts.
_TEMPLATE_FLAGS = {"--chat-template": "--chat-template"}

#: Split GGUF shard names (reference §5); a shard set is served by llama.cpp only.
_SHARD = re.compile(r"-\d{5}-of-\d{5}\.gguf$")


def _sets_option(extra_args: Sequence[str], flags: dict[str, str]) -> bool:
    """Does `extra_args` carry one of `flags`, spelled in full, abbreviated, or `--x=value`?"""
    for arg in extra_args:
        if not arg.startswith("--"):
            continue
        name = arg.split("=", 1)[0].replace("_", "-")
        if any(flag.startswith(name) and len(name) >= len(least) for flag, least in flags.items()):
            return True
    return False


def weights_gb(ctx: EmitContext) -> float:
    """Weights in GiB rounded to 2 decimals, the original's `SizeGB` that every formula charges
    (a 2 KiB stub folder is 0, as in the reference's example G)."""
    return round_half_away(gib(ctx.row.size_bytes), 2)


def rounded_ctx(tokens: float) -> int:
    """Floor to a multiple of 4096, at least 4096 (`RoundedCtx`)."""
    return max(CTX_STEP, int(tokens // CTX_STEP) * CTX_STEP)


@frozen
class VllmSizing:
    """Every sizing number of one vLLM entry with the note that explains it.

    Example: VllmSizing(max_model_len=32768, ctx_note="sized to 6.5GB free of budget",
    footprint_gb=15.5, util=0.65, util_note="15.5GB needed … of 24.0GB card, under the 16.0GB
    budget", kv_pin_bytes=None, pin_note="vLLM 0.10.1 lacks --kv-cache-memory-bytes",
    est_vram_gb=15.6, kv_reserve_gb=6.0).
    """

    max_model_len: int
    ctx_note: str
    footprint_gb: float
    util: float
    util_note: str
    #: `--kv-cache-memory-bytes`; None = not pinned (see pin_note).
    kv_pin_bytes: int | None
    pin_note: str
    est_vram_gb: float
    #: f16 KV of `max_model_len` tokens in GiB; None = no KV cost model.
    kv_reserve_gb: float | None
    #: `--tensor-parallel-size`: the override's pin, else the number of devices (1 = not written).
    tensor_parallel: int = 1


def kv_shards(meta: ModelMeta | None, tp: int) -> int:
    """Ranks the KV cache is divided over: vLLM gives each rank num_kv_heads / tp heads, but
    replicates heads when there are fewer than ranks, and MLA's one latent on every rank."""
    if meta is not None and meta.kv_lora_rank:
        return 1
    heads = max(meta.head_count_kv, default=0) if meta is not None else 0
    return min(tp, heads) if heads else tp


def size_vllm(ctx: EmitContext, version: tuple[int, ...] | None) -> VllmSizing:
    """`--max-model-len`, the KV pin, the footprint, `--gpu-memory-utilization`, the estimate.

    On devices (`ctx.devices`) every number is per GPU, since vLLM's utilization and KV pin are
    both per GPU: a rank holds weights / TP, its share of the KV (`kv_shards`) and its own
    overhead, against the smallest chosen card. Without devices the card is the pooled reading
    and a `vllm_tensor_parallel` pin changes only the flag (the reference's numbers)."""
    ov, budget, weights = ctx.override, ctx.budget_gb, weights_gb(ctx)
    card = ctx.card_vram_gb if ctx.card_vram_gb and ctx.card_vram_gb > 0 else None
    tp_pin = ov.vllm_tensor_parallel if ov is not None and ov.vllm_tensor_parallel else None
    tp, ranks, shards = tp_pin or 1, 1, 1
    if ctx.devices:
        tp = ranks = tp_pin or len(ctx.devices)
        shards = kv_shards(ctx.meta, tp)
        card = min(g.vram_gb for g in ctx.devices[:ranks])  # vLLM takes the first `tp` visible GPUs
    per_token = ctx.kv.bytes_per_token if ctx.kv is not None else None
    trained = ctx.meta.context_length if ctx.meta is not None else 0

    # --max-model-len (reference §3.4)
    avail = budget - weights - OVERHEAD_GIB * ranks
    if ov is not None and ov.ctx:
        max_len, ctx_note = ov.ctx, "pinned"
    else:
        if avail <= 0:
            max_len, ctx_note = CTX_STEP, "weights exceed the VRAM budget"
        elif per_token is None:
            max_len, ctx_note = FALLBACK_CTX, "no KV cost model; conservative default"
        elif per_token == 0:
            max_len, ctx_note = trained or FALLBACK_CTX, "no per-token KV cache"
        else:
            max_len = rounded_ctx(avail * GIB // per_token)
            ctx_note = f"sized to {avail:.1f}GB free of budget"
        # vLLM refuses a window past the trained one, so the 4096 floor is capped too
        if 0 < trained < max_len:
            max_len = trained
            ctx_note = f"{ctx_note}; trained context" if avail <= 0 else "trained context"
    kv_bytes_ctx = kv_bytes(ctx.kv, max_len) if per_token is not None else None
    kv_reserve = gib(kv_bytes_ctx) if kv_bytes_ctx is not None else None

    # KV-pool pin (reference §3.10)
    pin_bytes, pin_note = None, ""
    if ov is not None and ov.vllm_gpu_util:
        pin_note = "utilization pinned (vLLM fills its share)"
    elif _sets_option(ov.extra_args if ov else (), _MEMORY_FLAGS):
        pin_note = "extra_args set the memory"
    elif kv_bytes_ctx is None:
        pin_note = "no KV cost model"
    elif per_token == 0:
        pin_note = "no per-token KV cache to size a pool from"
    elif version is not None and version < KV_PIN_SINCE:
        pin_note = f"vLLM {format_version(version)} lacks --kv-cache-memory-bytes (0.10.2+)"
    else:
        # ceil((kv / shards × 11/10 + pad) / MiB) MiB, in integers so no float noise reaches the argv
        tenths = -(-kv_bytes_ctx // shards) * PIN_FACTOR_TENTHS + PIN_PAD_BYTES * 10
        pin_bytes = -(-tenths // (10 * MIB)) * MIB
        pin_note = f"KV {kv_reserve:.2f}GB × 1.10 + 0.25GB, whole MiB"
        if shards > 1:
            pin_note = f"KV {kv_reserve:.2f}GB / {shards} ranks × 1.10 + 0.25GB per GPU, whole MiB"

    # footprint on one GPU (reference §3.5; uncapped with a pin, since that is what the process holds)
    if pin_bytes is not None:
        footprint = weights / ranks + gib(pin_bytes) + OVERHEAD_GIB
    elif kv_reserve is None:
        footprint = budget / ranks
    else:
        footprint = min(budget / ranks, weights / ranks + kv_reserve / shards + OVERHEAD_GIB)

    # --gpu-memory-utilization (reference §3.6) and the estimate (§3.7)
    if ov is not None and ov.vllm_gpu_util:
        util, util_note = ov.vllm_gpu_util, "pinned"
    elif card is None:
        util, util_note = DEFAULT_UTIL, "no GPU reading"
    else:
        util = min(MAX_UTIL, max(MIN_UTIL, ceil_to(footprint / card, 2)))
        share = budget / ranks
        what = "weights+KV+overhead" if ranks == 1 else f"weights/{ranks}+KV/{shards}+overhead per GPU"
        of_card = f"{card:.1f}GB card" if not ctx.devices else (
            f"{card:.1f}GB card {ctx.devices[0].index}" if len(ctx.devices) == 1
            else f"the smallest {card:.1f}GB card of {len(ctx.devices)}")
        if footprint < share or pin_bytes is not None:
            util_note = (f"{footprint:.1f}GB needed ({what}) of {of_card}, "
                         f"{'under' if footprint <= share else 'over'} the {budget:.1f}GB budget")
        else:
            util_note = f"{footprint:.1f}GB budget{' per GPU' if ranks > 1 else ''} of {of_card}"
    # each rank takes `util` of its own card
    cards = sum(g.vram_gb for g in ctx.devices[:ranks]) if ctx.devices else card
    est = round_half_away(util * cards if cards is not None else footprint * ranks, 2)
    return VllmSizing(max_model_len=max_len, ctx_note=ctx_note, footprint_gb=footprint, util=util,
                      util_note=util_note, kv_pin_bytes=pin_bytes, pin_note=pin_note,
                      est_vram_gb=est, kv_reserve_gb=kv_reserve, tensor_parallel=tp)


def is_split_gguf(ctx: EmitContext) -> bool:
    return ctx.row.format == "gguf" and (ctx.row.is_split or bool(_SHARD.search(ctx.row.path)))


def model_names(ctx: EmitContext) -> tuple[str, ...]:
    """What else names the model for the tool-parser family rules: the file or folder, its parent
    folder (the HF cache's repo) and GGUF `general.name`."""
    name = ctx.meta.name if ctx.meta is not None else ""
    return (re.split(r"[/\\]", ctx.row.path.rstrip("/\\"))[-1], ctx.row.repo, name)


def served_template(ctx: EmitContext) -> bool | None:
    """Does vLLM serve the model with a chat template? A GGUF's own answers for it unless
    `vllm_tokenizer` or a `--chat-template` in `extra_args` brings another; an HF folder's lives
    in `tokenizer_config.json`, which we do not read (None = not known)."""
    ov = ctx.override
    elsewhere = ov is not None and (bool((ov.vllm_tokenizer or "").strip())
                                    or _sets_option(ov.extra_args, _TEMPLATE_FLAGS))
    if ctx.meta is None or ctx.meta.source != "gguf" or elsewhere:
        return None
    return ctx.meta.has_chat_template


def vllm_argv(ctx: EmitContext, sizing: VllmSizing, parser: ParserChoice) -> tuple[str, ...]:
    """The command line (reference §3.8 plus the pin); pure, shared by YAML and `swapgen show`."""
    ov = ctx.override
    extra = ov.extra_args if ov else ()
    argv = [ctx.backend.exe or DEFAULT_EXE, "serve", ctx.row.path, "--host", HOST, "--port", "${PORT}",
            "--served-model-name", ctx.row.id]
    if ctx.row.format == "gguf":
        argv += ["--quantization", "gguf"]
    argv += ["--gpu-memory-utilization", format_g(round_half_away(sizing.util, 2))]
    if sizing.kv_pin_bytes is not None:
        argv += ["--kv-cache-memory-bytes", str(sizing.kv_pin_bytes)]
    argv += ["--max-model-len", str(sizing.max_model_len)]
    tokenizer = (ov.vllm_tokenizer or "").strip() if ov else ""
    if tokenizer:
        argv += ["--tokenizer", tokenizer]
    if parser.parser and not _sets_option(extra, _PARSER_FLAGS):
        argv += ["--enable-auto-tool-choice", "--tool-call-parser", parser.parser]
    if sizing.tensor_parallel > 1:
        argv += ["--tensor-parallel-size", str(sizing.tensor_parallel)]
    return (*argv, *extra)


def emit_vllm(ctx: EmitContext) -> Plan:
    """One `vllm serve` entry (or a Skip for a split GGUF), card reading from `ctx`."""
    row, ov, meta = ctx.row, ctx.override, ctx.meta
    if is_split_gguf(ctx):
        reason = "vllm cannot load split gguf shards; merge them with llama-gguf-split --merge"
        return Plan(model_id=row.id, skips=(Skip(row.id, reason),))
    tp = ov.vllm_tensor_parallel if ov is not None and ov.vllm_tensor_parallel else 0
    if ctx.devices and tp > len(ctx.devices):
        reason = (f"vllm_tensor_parallel {tp} needs {tp} GPUs; devices "
                  f"{','.join(str(g.index) for g in ctx.devices)} give {len(ctx.devices)}")
        return Plan(model_id=row.id, skips=(Skip(row.id, reason),))
    row_version = ctx.backend.row.version if ctx.backend.row is not None else ""
    version = parse_version(row_version)
    sizing = size_vllm(ctx, version)
    arch = meta.arch if meta is not None else ""
    template = served_template(ctx)
    markers = meta.chat_template_markers if template and meta.chat_template_scanned else None
    parser = choose_tool_parser(arch, row.id, names=model_names(ctx), has_chat_template=template,
                                template_markers=markers, vocab_size=meta.vocab_size if meta is not None else 0,
                                pin=ov.vllm_tool_parser if ov else None, table=ctx.settings.tool_parsers,
                                version=version)
    extra_parser = _sets_option(ov.extra_args if ov else (), _PARSER_FLAGS)
    tools = bool(parser.parser) or extra_parser
    per_token = ctx.kv.bytes_per_token if ctx.kv is not None else None
    size = weights_gb(ctx)
    util_text = format_g(round_half_away(sizing.util, 2))

    comment = [f"vllm · {arch or '?'} · {format_g(size)} GB · max-model-len {sizing.max_model_len} "
               f"({sizing.ctx_note})",
               f"gpu-memory-utilization {util_text} ({sizing.util_note})"]
    if sizing.kv_pin_bytes is not None:
        comment.append(f"kv-cache-memory-bytes {sizing.kv_pin_bytes} ({sizing.pin_note})")
    else:
        comment.append(f"KV pool not pinned: {sizing.pin_note}")
    if extra_parser:
        comment.append("tool-call parser set by extra_args")
    elif parser.parser:
        comment.append(f"tool-call parser {parser.parser} ({parser.note})")
    else:
        comment.append(f"no tool-call parser ({parser.note}): vllm rejects requests carrying tools")
    if row.format == "gguf" and (version is None or version >= GGUF_PLUGIN_SINCE):
        which = f"vLLM {format_version(version)}" if version else "vLLM 0.24 and newer"
        comment.append(f"{which} loads GGUF only with the vllm-gguf-plugin package installed")

    metadata: list[tuple[str, MetaValue]] = [
        ("backend", ctx.backend.backend_id), ("engine", "vllm"), ("arch", arch), ("size_gb", size),
        ("max_model_len", sizing.max_model_len), ("gpu_util", round_half_away(sizing.util, 2))]
    if sizing.kv_pin_bytes is not None:
        metadata.append(("kv_cache_bytes", sizing.kv_pin_bytes))
    if per_token is not None:
        metadata.append(("kv_bytes_per_token", per_token))
    metadata.append(("est_vram_gb", sizing.est_vram_gb))
    if parser.parser and not extra_parser:
        metadata.append(("tool_parser", parser.parser))

    entry = Entry(id=row.id, argv=vllm_argv(ctx, sizing, parser), comment=tuple(comment),
                  metadata=tuple(metadata),
                  capabilities=Capabilities(tools=True if tools else None, context=sizing.max_model_len),
                  ttl=ctx.ttl, unlisted=bool(ov and ov.unlisted))
    return Plan(model_id=row.id, entries=(entry,), notes=_notes(ctx, sizing, parser, version, row_version))


def _notes(ctx: EmitContext, sizing: VllmSizing, parser: ParserChoice, version: tuple[int, ...] | None,
           row_version: str) -> tuple[str, ...]:
    """Every sizing number with its reason, for `swapgen show`."""
    card = ctx.card_vram_gb
    kv = ctx.kv
    if ctx.devices:
        cards = ", ".join(f"{g.index}: {g.vram_gb:g} GiB" for g in ctx.devices)
        card_text = f"devices {cards} (tensor parallel {sizing.tensor_parallel}, sized per GPU)"
    else:
        card_text = f"card {'%g GiB' % card if card else 'not read'}"
    lines = [f"backend {ctx.backend.backend_id} ({ctx.backend.why}), vLLM version "
             f"{row_version or 'unknown (taken as current)'}",
             f"budget {ctx.budget_gb:g} GiB, {card_text}, "
             f"weights {weights_gb(ctx):g} GiB, overhead {OVERHEAD_GIB:g} GiB",
             f"KV cost: {kv.bytes_per_token if kv is not None else 'none'} bytes/token (f16)"
             + (f" — {kv.note}" if kv is not None and kv.note else "")]
    if kv is not None:
        lines += [f"  {step}" for step in kv.derivation]
    lines.append(f"max-model-len {sizing.max_model_len}: {sizing.ctx_note}")
    if sizing.kv_reserve_gb is not None:
        lines.append(f"KV at max-model-len: {sizing.kv_reserve_gb:.3f} GiB")
    lines.append(f"kv-cache-memory-bytes {sizing.kv_pin_bytes}: {sizing.pin_note}"
                 if sizing.kv_pin_bytes is not None else f"no KV pin: {sizing.pin_note}")
    lines.append(f"footprint {sizing.footprint_gb:.3f} GiB")
    lines.append(f"gpu-memory-utilization {format_g(round_half_away(sizing.util, 2))}: {sizing.util_note}")
    lines.append(f"est_vram_gb {format_g(sizing.est_vram_gb)}"
                 + (" (utilization × each device's card)" if ctx.devices else
                    " (utilization × card)" if card else " (footprint, no card reading)"))
    lines.append(f"tool-call parser {parser.parser or 'none'}: {parser.note}")
    return tuple(lines)
