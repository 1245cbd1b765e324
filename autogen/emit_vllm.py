"""The vLLM emitter: one `vllm serve` entry per GGUF file or HF folder, sized from the budget.

vLLM preallocates: its KV pool comes from `--max-model-len` and its share of the card from
`--gpu-memory-utilization`, so both are derived from the model's VRAM budget and its real f16
KV cost instead of the trained window and a flat 0.90 (seed `backends.md` "vllm", reference
`spec-backends-vllm-hf.md` §3–5, §7). Only the override's `ctx`, `vllm_*` knobs and
`extra_args` apply; llama's knobs are ignored. A `--max-model-len` or `--tensor-parallel-size`
in `extra_args` is a pin like `ctx` / `vllm_tensor_parallel` (vLLM takes the last value, and
extra_args come last), so the sizing follows it and our own flag is left out.

Argv order (reference §3.8): exe, `serve <path>`, `--host`, `--port`, `--served-model-name`,
`--quantization gguf` (GGUF only), `--gpu-memory-utilization`, then — new against the original's
code, placed where its design note suggests — `--kv-cache-memory-bytes`, then `--max-model-len`,
`--tokenizer`, `--enable-auto-tool-choice --tool-call-parser`, `--tensor-parallel-size`,
`extra_args`.

KV-pool pin (the seed's `--kv-cache-memory-bytes`, reference §3.10): `KvReserve(ctx) × 1.10 + 0.25 GiB`, computed in
integer bytes and rounded UP to a whole MiB (1,048,576 bytes); the footprint then charges the
rounded pin, uncapped by the budget. `--max-model-len` is not shrunk to make room for the
10 % + 0.25 GiB margin, which keeps the reference's derived numbers (§3.10).

KvReserve(ctx) is the KV of `ctx` tokens plus ONE sequence's recurrent state (SSM / linear
attention, `KvCost.state_bytes_per_seq`), the reference's `slope·ctx + const` (§3.4.1): vLLM
refuses to start unless its pool holds one request of `--max-model-len`, and a `MambaSpec`
layer's share of that request is one state page (`max_memory_usage_bytes`,
vllm/v1/kv_cache_interface.py). So the state is taken from the room before the window is sized,
and the footprint and the pin carry it.

Devices (`ctx.devices`): vLLM's utilization and KV pin are per GPU, so on devices every number
is one rank's, against the smallest card: weights / TP, the KV one rank holds
(`per_gpu_bytes_per_token`: heads fewer than ranks and MLA latents are copied to every rank),
the overhead, and `max-model-len` from the budget's share per card. There the window is also
capped to what fits 0.95 of the card (pin margin included), and a model that does not fit even
at the 4096 floor is a Skip: vLLM could not start it. `--tensor-parallel-size` is the device
count unless pinned. Without devices nothing changes (the reference's pooled numbers).

Where we differ from the original: the path is passed as is (backslashes are not turned into
`/`; quoting is the renderer's job); the 4096 floor for over-budget weights is capped by a
shorter trained window (vLLM refuses a longer one); a model with no per-token KV
(bytes_per_token 0) gets its trained window and no pin; weights are the row's size rounded to
2 decimals, as the original's `SizeGB`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from attrs import frozen

from autogen.cmdline import HOST
from autogen.emitcontext import EmitContext
from autogen.entry import Capabilities, Entry, MetaValue, Plan, Skip
from autogen.errors import ModelError
from autogen.kvcost import KvCost
from autogen.metadata import ModelMeta
from autogen.numfmt import GIB, ceil_to, format_g, gib, round_half_away, size_gb
from autogen.toolparsers import ParserChoice, choose_tool_parser, format_version, parse_version

# Constants of the original (reference §3.2).
DEFAULT_UTIL = 0.90
MIN_UTIL, MAX_UTIL = 0.10, 0.95
#: Flat reserve for activations, CUDA graphs and the profiling peak (vLLM's allocator is opaque).
OVERHEAD_GIB = 1.5
FALLBACK_CTX = 32768
CTX_STEP = 4096
DEFAULT_EXE = "vllm"
#: `--max-model-len auto` / `-1`: vLLM fits the window to its KV memory
#: (`vllm/v1/core/kv_cache_planning.py` `_auto_fit_max_model_len`).
AUTO = -1

#: The pin's margin: paged blocks and hybrid page sizes do not match our cost byte for byte.
PIN_FACTOR_TENTHS = 11  # × 1.10
PIN_PAD_BYTES = GIB // 4  # + 0.25 GiB
MIB = 1 << 20

#: `--kv-cache-memory-bytes` first shipped in vLLM 0.10.2 (vllm-project/vllm#21489; ecosystem §6.2).
KV_PIN_SINCE = (0, 10, 2)
#: GGUF left vLLM core in 0.24.0 for the `vllm-gguf-plugin` package (ecosystem §0 trap 9).
GGUF_PLUGIN_SINCE = (0, 24)

#: Options of `extra_args` we read, with the shortest prefix vLLM 0.33.0's argparse
#: (`allow_abbrev=True`) resolves to them uniquely; `_` is read as `-` like vLLM does.
#: `--chat-template-content-format` and `-kwargs` share the template's prefix, so only the
#: full name counts there.
_OPTIONS = {
    "--kv-cache-memory-bytes": "--kv-cache-mem",
    "--gpu-memory-utilization": "--gp",
    "--device-memory-utilization": "--device-m",
    "--tool-call-parser": "--tool-c",
    "--chat-template": "--chat-template",
    "--max-model-len": "--max-m",
    "--tensor-parallel-size": "--te",
}
_MEMORY = ("--kv-cache-memory-bytes", "--gpu-memory-utilization", "--device-memory-utilization")
#: vLLM's only short spelling among them (exact, or `-tp=N`).
_SHORT = {"-tp": "--tensor-parallel-size"}
#: `human_readable_int` (vllm/utils/argparse_utils.py): `32k` = 32000, `32K` = 32768.
_HUMAN_INT = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")
_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}

#: Split GGUF shard names (reference §5); a shard set is served by llama.cpp only.
_SHARD = re.compile(r"-\d{5}-of-\d{5}\.gguf$")


@frozen
class ExtraArgs:
    """What the override's `extra_args` decide for vLLM, read as its parser reads them.

    Example: ExtraArgs(max_model_len=32000, tensor_parallel=2, sets_memory=False,
    sets_parser=True, sets_template=False) for `--max-m=32k -tp 2 --tool-call-parser x`.
    """

    #: Tokens, or AUTO; None = not given.
    max_model_len: int | None = None
    tensor_parallel: int | None = None
    sets_memory: bool = False
    sets_parser: bool = False
    sets_template: bool = False


def parse_max_model_len(text: str) -> int:
    """vLLM's `human_readable_int_or_auto`: `32768`, `32k`, `32K`, `1.5k`, `auto` or `-1` (AUTO);
    raises ValueError where vLLM's parser refuses the value."""
    text = text.strip()
    if text == "-1" or text.lower() == "auto":
        return AUTO
    match = _HUMAN_INT.fullmatch(text)
    if match is None:
        return int(text)
    number, suffix = match.groups()
    if suffix in _DECIMAL:
        return int(float(number) * _DECIMAL[suffix])
    return int(number) * _BINARY[suffix]


def read_extra_args(extra_args: Sequence[str]) -> ExtraArgs:
    """One pass over `extra_args`: options spelled in full, abbreviated, with `_`, or `--x=value`;
    the last value of a repeated option wins, as in argparse. Raises ModelError for a length or
    tensor-parallel value vLLM would refuse."""
    given: dict[str, str | None] = {}
    for i, arg in enumerate(extra_args):
        name, eq, value = arg.partition("=")
        option = _SHORT.get(name)
        if option is None and name.startswith("--"):
            name = name.replace("_", "-")
            option = next((full for full, least in _OPTIONS.items()
                           if full.startswith(name) and len(name) >= len(least)), None)
        if option is not None:
            given[option] = value if eq else (extra_args[i + 1] if i + 1 < len(extra_args) else None)
    length = tp = None
    if "--max-model-len" in given:
        text = given["--max-model-len"] or ""
        length = _or_zero(parse_max_model_len, text)
        if length < 1 and length != AUTO:
            raise ModelError(f"extra_args --max-model-len {text!r} is not a length vLLM accepts "
                             "(tokens such as 32768, 32k, 32K, or auto)")
    if "--tensor-parallel-size" in given:
        text = given["--tensor-parallel-size"] or ""
        tp = _or_zero(int, text)  # vLLM's argparse type
        if tp < 1:
            raise ModelError(f"extra_args --tensor-parallel-size {text!r} is not a GPU count")
    return ExtraArgs(max_model_len=length, tensor_parallel=tp,
                     sets_memory=any(flag in given for flag in _MEMORY),
                     sets_parser="--tool-call-parser" in given, sets_template="--chat-template" in given)


def _or_zero(parse: Callable[[str], int], text: str) -> int:
    try:
        return parse(text)
    except ValueError:
        return 0


def rounded_ctx(tokens: float) -> int:
    """Floor to a multiple of 4096, at least 4096 (`RoundedCtx`)."""
    return max(CTX_STEP, int(tokens // CTX_STEP) * CTX_STEP)


def per_gpu_bytes_per_token(kv: KvCost | None, meta: ModelMeta | None, tp: int) -> int | None:
    """f16 KV bytes per token on one of `tp` ranks (None = no cost model). vLLM gives each rank
    max(1, heads // tp) of a layer's KV heads (`ModelConfig.get_num_kv_heads`,
    vllm/config/model.py), so heads fewer than ranks are copied, and MLA's one latent per layer
    sits whole on every rank."""
    if kv is None or kv.bytes_per_token is None:
        return None
    total = kv.bytes_per_token
    if tp == 1 or kv.mla:
        return total
    heads = [h for h in (kv.kv_heads or (meta.head_count_kv if meta is not None else ())) if h > 0]
    if not heads:
        return -(-total // tp)
    return -(-total * sum(max(1, h // tp) for h in heads) // sum(heads))


def pin_bytes(kv_bytes: int) -> int:
    """`--kv-cache-memory-bytes` for `kv_bytes` of KV: × 1.10 + 0.25 GiB, rounded up to a whole
    MiB, in integers so no float noise reaches the argv."""
    tenths = kv_bytes * PIN_FACTOR_TENTHS + PIN_PAD_BYTES * 10
    return -(-tenths // (10 * MIB)) * MIB


@frozen
class VllmSizing:
    """Every sizing number of one vLLM entry with the note that explains it.

    Example: VllmSizing(max_model_len=32768, ctx_note="sized to 6.5GB free of budget",
    footprint_gb=15.5, util=0.65, util_note="15.5GB needed … of 24.0GB card, under the 16.0GB
    budget", kv_pin_bytes=None, pin_note="vLLM 0.10.1 lacks --kv-cache-memory-bytes",
    est_vram_gb=15.6, kv_reserve_gb=6.0, tensor_parallel=1, weights_gb=8.0, gpu_util=0.65,
    util_flag="0.65", extra=ExtraArgs()).
    """

    #: The window vLLM will use (for `auto`, our estimate of what it fits).
    max_model_len: int
    ctx_note: str
    footprint_gb: float
    util: float
    util_note: str
    #: `--kv-cache-memory-bytes`; None = not pinned (see pin_note).
    kv_pin_bytes: int | None
    pin_note: str
    est_vram_gb: float
    #: f16 KV of `max_model_len` tokens plus one sequence's recurrent state, on one GPU, in GiB;
    #: None = no KV cost model.
    kv_reserve_gb: float | None
    #: `--tensor-parallel-size`: extra_args' or the override's pin, else the number of devices.
    tensor_parallel: int = 1
    #: The row's size as every formula charges it (`numfmt.size_gb`).
    weights_gb: float = 0.0
    #: `util` rounded to 2 decimals (metadata) and as the flag prints it.
    gpu_util: float = 0.0
    util_flag: str = ""
    extra: ExtraArgs = ExtraArgs()
    #: One sequence's recurrent state on one GPU, in bytes (part of `kv_reserve_gb` and the pin).
    state_bytes: int = 0


def per_gpu_state_bytes(kv: KvCost | None, tp: int) -> int:
    """Recurrent state one sequence holds on one of `tp` ranks: vLLM splits the state's heads and
    conv channels over the ranks (`MambaStateShapeCalculator`,
    vllm/model_executor/layers/mamba/mamba_utils.py); rounded up."""
    return -(-kv.state_bytes_per_seq // tp) if kv is not None else 0


def size_vllm(ctx: EmitContext, version: tuple[int, ...] | None) -> VllmSizing:
    """`--max-model-len`, the KV pin, the footprint, `--gpu-memory-utilization`, the estimate.

    On devices (`ctx.devices`) every number is per GPU (module docstring). Without devices the
    card is the pooled reading and a tensor-parallel pin changes only the flag (the reference's
    numbers). Raises ModelError when vLLM could not start: a tensor-parallel pin above the
    devices, a model over 0.95 of the smallest card at the floor, an unreadable extra_args value.
    """
    ov, budget = ctx.override, ctx.budget_gb
    extra = read_extra_args(ov.extra_args if ov is not None else ())
    weights = size_gb(ctx.row.size_bytes)
    card = ctx.card_vram_gb if ctx.card_vram_gb and ctx.card_vram_gb > 0 else None
    tp_pin = extra.tensor_parallel or (ov.vllm_tensor_parallel if ov is not None else None) or None
    util_pin = ov.vllm_gpu_util if ov is not None and ov.vllm_gpu_util else None
    length_pin = extra.max_model_len or (ov.ctx if ov is not None and ov.ctx else None)
    tp, ranks = tp_pin or 1, 1
    if ctx.devices:
        if tp_pin is not None and tp_pin > len(ctx.devices):
            which = "extra_args --tensor-parallel-size" if extra.tensor_parallel else "vllm_tensor_parallel"
            raise ModelError(f"{which} {tp_pin} needs {tp_pin} GPUs; devices "
                             f"{','.join(str(g.index) for g in ctx.devices)} give {len(ctx.devices)}")
        tp = ranks = tp_pin or len(ctx.devices)
        card = min(g.vram_gb for g in ctx.devices[:ranks])  # vLLM takes the first `tp` visible GPUs
    of_card = "" if card is None else f"{card:.1f}GB card" if not ctx.devices else (
        f"{card:.1f}GB card {ctx.devices[0].index}" if ranks == 1 else f"the smallest {card:.1f}GB card of {ranks}")
    per_token = per_gpu_bytes_per_token(ctx.kv, ctx.meta, ranks)
    state = per_gpu_state_bytes(ctx.kv, ranks) if per_token is not None else 0
    trained = ctx.meta.context_length if ctx.meta is not None else 0
    share, rank_weights = budget / ranks, weights / ranks

    pin_note = _why_no_pin(bool(util_pin), extra, length_pin, per_token, version)

    def kv_gib(tokens: int) -> float:
        """What one GPU charges for the KV of `tokens` and one sequence's state: the pin, else the raw cache."""
        kv = (per_token or 0) * tokens + state
        return gib(pin_bytes(kv) if not pin_note else kv)

    # the physical limit on devices: vLLM cannot start past its utilization of the smallest card
    limit = (util_pin or MAX_UTIL) * card if ctx.devices and card is not None else None
    if limit is not None:
        floor = min(n for n in (CTX_STEP, trained, length_pin) if n is not None and n > 0)
        need = rank_weights + kv_gib(floor) + OVERHEAD_GIB
        if need > limit:
            kv_what = "KV + recurrent state" if state else "KV"
            raise ModelError(f"needs {need:.1f}GB per GPU at max-model-len {floor} (weights {rank_weights:.1f}GB "
                             f"+ {kv_what} + {OVERHEAD_GIB:g}GB overhead), over {limit:.1f}GB of {of_card}: "
                             "vLLM cannot start it; give it more devices or a smaller quant")

    # --max-model-len (reference §3.4): a pin stands as given
    if length_pin is not None and length_pin != AUTO:
        max_len, ctx_note = length_pin, "pinned by extra_args" if extra.max_model_len else "pinned"
    else:
        fits = None
        if limit is not None and per_token:
            # KV room under the limit, less the pin's margin and its whole-MiB rounding, and the state
            room = limit - rank_weights - OVERHEAD_GIB
            room = (room - gib(PIN_PAD_BYTES + MIB)) * 10 / PIN_FACTOR_TENTHS if not pin_note else room
            fits = (rounded_ctx((room * GIB - state) // per_token), f"{limit:.1f}GB of {of_card}")
        max_len, ctx_note = _budget_window(share - rank_weights - OVERHEAD_GIB, per_token, trained, fits,
                                           " per GPU" if ranks > 1 else "", state)
        if length_pin == AUTO:
            ctx_note = f"auto in extra_args: vLLM fits it to its memory, about {max_len} ({ctx_note})"
    kv_gpu = per_token * max_len + state if per_token is not None else None
    kv_reserve = gib(kv_gpu) if kv_gpu is not None else None

    pin = pin_bytes(kv_gpu) if not pin_note and kv_gpu is not None else None
    if pin is not None:
        what = (f"KV {kv_reserve:.2f}GB" if not state else
                f"(KV {gib(kv_gpu - state):.2f}GB + one sequence's recurrent state {gib(state):.2f}GB)")
        pin_note = f"{what}{' per GPU' if ranks > 1 else ''} × 1.10 + 0.25GB, whole MiB"

    # footprint on one GPU (reference §3.5; uncapped with a pin, since that is what the process holds)
    if pin is not None:
        footprint = rank_weights + gib(pin) + OVERHEAD_GIB
    elif kv_reserve is None:
        footprint = share
    else:
        footprint = min(share, rank_weights + kv_reserve + OVERHEAD_GIB)

    # --gpu-memory-utilization (reference §3.6) and the estimate (§3.7)
    if util_pin:
        util, util_note = util_pin, "pinned"
    elif card is None:
        util, util_note = DEFAULT_UTIL, "no GPU reading"
    else:
        util = min(MAX_UTIL, max(MIN_UTIL, ceil_to(footprint / card, 2)))
        what, per_gpu = ("weights+KV+overhead", "") if ranks == 1 else (f"weights/{ranks}+KV+overhead", " per GPU")
        if footprint < share or pin is not None:
            util_note = (f"{footprint:.1f}GB needed ({what}) of {of_card}, "
                         f"{'under' if footprint <= share else 'over'} the {share:.1f}GB budget{per_gpu}")
        else:
            util_note = f"{footprint:.1f}GB budget{per_gpu} of {of_card}"
    # each rank takes `util` of its own card
    cards = sum(g.vram_gb for g in ctx.devices[:ranks]) if ctx.devices else card
    est = round_half_away(util * cards if cards is not None else footprint * ranks, 2)
    gpu_util = round_half_away(util, 2)
    return VllmSizing(max_model_len=max_len, ctx_note=ctx_note, footprint_gb=footprint, util=util,
                      util_note=util_note, kv_pin_bytes=pin, pin_note=pin_note, est_vram_gb=est,
                      kv_reserve_gb=kv_reserve, tensor_parallel=tp, weights_gb=weights, gpu_util=gpu_util,
                      util_flag=format_g(gpu_util), extra=extra, state_bytes=state)


def _why_no_pin(util_pinned: bool, extra: ExtraArgs, length_pin: int | None, per_token: int | None,
                version: tuple[int, ...] | None) -> str:
    """Why no KV-pool pin is written (reference §3.10); "" = it is."""
    if util_pinned:
        return "utilization pinned (vLLM fills its share)"
    if extra.sets_memory:
        return "extra_args set the memory"
    if length_pin == AUTO:
        return "max-model-len auto: vLLM sizes the window from its memory"
    if per_token is None:
        return "no KV cost model"
    if per_token == 0:
        return "no per-token KV cache to size a pool from"
    if version is not None and version < KV_PIN_SINCE:
        return f"vLLM {format_version(version)} lacks --kv-cache-memory-bytes (0.10.2+)"
    return ""


def _budget_window(avail: float, per_token: int | None, trained: int, fits: tuple[int, str] | None,
                   per_gpu: str, state: int) -> tuple[int, str]:
    """`--max-model-len` and its note from `avail` GiB of KV room less `state` bytes of one
    sequence's recurrent state (reference §3.4, `MaxCtxForBudget(avail, slope, const)`), cut to
    `fits` = (tokens, what) the card holds on devices, then to the trained window."""
    if avail <= 0:
        max_len, note = CTX_STEP, "weights exceed the VRAM budget"
    elif per_token is None:
        max_len, note = FALLBACK_CTX, "no KV cost model; conservative default"
    elif per_token == 0:
        max_len, note = trained or FALLBACK_CTX, "no per-token KV cache"
    else:
        max_len = rounded_ctx((avail * GIB - state) // per_token)
        note = f"sized to {avail:.1f}GB free of budget{per_gpu}" + (
            f", less {gib(state):.2f}GB recurrent state" if state else "")
        if fits is not None and fits[0] < max_len:
            max_len, note = fits[0], f"{note}, cut to fit {fits[1]}"
    # vLLM refuses a window past the trained one, so the 4096 floor is capped too
    if 0 < trained < max_len:
        return trained, f"{note}; trained context" if avail <= 0 else "trained context"
    return max_len, note


def is_split_gguf(ctx: EmitContext) -> bool:
    return ctx.row.format == "gguf" and (ctx.row.is_split or bool(_SHARD.search(ctx.row.path)))


def model_names(ctx: EmitContext) -> tuple[str, ...]:
    """What else names the model for the tool-parser family rules: the file or folder, its parent
    folder (the HF cache's repo) and GGUF `general.name`."""
    name = ctx.meta.name if ctx.meta is not None else ""
    return (re.split(r"[/\\]", ctx.row.path.rstrip("/\\"))[-1], ctx.row.repo, name)


def served_template(ctx: EmitContext, extra: ExtraArgs) -> bool | None:
    """Does vLLM serve the model with a chat template? A GGUF's own answers for it unless
    `vllm_tokenizer` or a `--chat-template` in `extra_args` brings another; an HF folder's lives
    in `tokenizer_config.json`, which we do not read (None = not known)."""
    ov = ctx.override
    elsewhere = extra.sets_template or (ov is not None and bool((ov.vllm_tokenizer or "").strip()))
    if ctx.meta is None or ctx.meta.source != "gguf" or elsewhere:
        return None
    return ctx.meta.has_chat_template


def vllm_argv(ctx: EmitContext, sizing: VllmSizing, parser: ParserChoice) -> tuple[str, ...]:
    """The command line (reference §3.8 plus the pin); pure, shared by YAML and `swapgen show`.
    Our `--max-model-len`, `--tensor-parallel-size` and parser flags give way to extra_args'."""
    ov, extra = ctx.override, sizing.extra
    argv = [ctx.backend.exe or DEFAULT_EXE, "serve", ctx.row.path, "--host", HOST, "--port", "${PORT}",
            "--served-model-name", ctx.row.id]
    if ctx.row.format == "gguf":
        argv += ["--quantization", "gguf"]
    argv += ["--gpu-memory-utilization", sizing.util_flag]
    if sizing.kv_pin_bytes is not None:
        argv += ["--kv-cache-memory-bytes", str(sizing.kv_pin_bytes)]
    if extra.max_model_len is None:
        argv += ["--max-model-len", str(sizing.max_model_len)]
    tokenizer = (ov.vllm_tokenizer or "").strip() if ov else ""
    if tokenizer:
        argv += ["--tokenizer", tokenizer]
    if parser.parser and not extra.sets_parser:
        argv += ["--enable-auto-tool-choice", "--tool-call-parser", parser.parser]
    if sizing.tensor_parallel > 1 and extra.tensor_parallel is None:
        argv += ["--tensor-parallel-size", str(sizing.tensor_parallel)]
    return (*argv, *(ov.extra_args if ov else ()))


def emit_vllm(ctx: EmitContext) -> Plan:
    """One `vllm serve` entry, or a Skip for a split GGUF or a model vLLM could not start."""
    row, ov, meta = ctx.row, ctx.override, ctx.meta
    if is_split_gguf(ctx):
        reason = "vllm cannot load split gguf shards; merge them with llama-gguf-split --merge"
        return Plan(model_id=row.id, skips=(Skip(row.id, reason),))
    row_version = ctx.backend.row.version if ctx.backend.row is not None else ""
    version = parse_version(row_version)
    try:
        sizing = size_vllm(ctx, version)
    except ModelError as exc:
        return Plan(model_id=row.id, skips=(Skip(row.id, str(exc)),))
    arch = meta.arch if meta is not None else ""
    template = served_template(ctx, sizing.extra)
    markers = meta.chat_template_markers if template and meta.chat_template_scanned else None
    parser = choose_tool_parser(arch, row.id, names=model_names(ctx), has_chat_template=template,
                                template_markers=markers, vocab_size=meta.vocab_size if meta is not None else 0,
                                pin=ov.vllm_tool_parser if ov else None, table=ctx.settings.tool_parsers,
                                version=version)
    extra_parser = sizing.extra.sets_parser
    per_token = ctx.kv.bytes_per_token if ctx.kv is not None else None

    comment = [f"vllm · {arch or '?'} · {format_g(sizing.weights_gb)} GB · max-model-len "
               f"{sizing.max_model_len} ({sizing.ctx_note})",
               f"gpu-memory-utilization {sizing.util_flag} ({sizing.util_note})"]
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
        ("backend", ctx.backend.backend_id), ("engine", "vllm"), ("arch", arch), ("size_gb", sizing.weights_gb),
        ("max_model_len", sizing.max_model_len), ("gpu_util", sizing.gpu_util)]
    if sizing.kv_pin_bytes is not None:
        metadata.append(("kv_cache_bytes", sizing.kv_pin_bytes))
    if per_token is not None:
        metadata.append(("kv_bytes_per_token", per_token))
    metadata.append(("est_vram_gb", sizing.est_vram_gb))
    if parser.parser and not extra_parser:
        metadata.append(("tool_parser", parser.parser))

    tools = bool(parser.parser) or extra_parser
    entry = Entry(id=row.id, argv=vllm_argv(ctx, sizing, parser), comment=tuple(comment),
                  metadata=tuple(metadata),
                  capabilities=Capabilities(tools=True if tools else None, context=sizing.max_model_len),
                  ttl=ctx.ttl, unlisted=bool(ov and ov.unlisted))
    return Plan(model_id=row.id, entries=(entry,), notes=_notes(ctx, sizing, parser, row_version))


def _notes(ctx: EmitContext, sizing: VllmSizing, parser: ParserChoice, row_version: str) -> tuple[str, ...]:
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
             f"weights {sizing.weights_gb:g} GiB, overhead {OVERHEAD_GIB:g} GiB",
             f"KV cost: {kv.bytes_per_token if kv is not None else 'none'} bytes/token (f16)"
             + (f" — {kv.note}" if kv is not None and kv.note else "")]
    if kv is not None:
        lines += [f"  {step}" for step in kv.derivation]
    lines.append(f"max-model-len {sizing.max_model_len}: {sizing.ctx_note}")
    if sizing.kv_reserve_gb is not None:
        lines.append(f"KV at max-model-len: {sizing.kv_reserve_gb:.3f} GiB"
                     + (f", including {gib(sizing.state_bytes):.3f} GiB of recurrent state for one sequence "
                        "(vLLM starts only if one request of max-model-len fits)" if sizing.state_bytes else ""))
    lines.append(f"kv-cache-memory-bytes {sizing.kv_pin_bytes}: {sizing.pin_note}"
                 if sizing.kv_pin_bytes is not None else f"no KV pin: {sizing.pin_note}")
    lines.append(f"footprint {sizing.footprint_gb:.3f} GiB")
    lines.append(f"gpu-memory-utilization {sizing.util_flag}: {sizing.util_note}")
    lines.append(f"est_vram_gb {format_g(sizing.est_vram_gb)}"
                 + (" (utilization × each device's card)" if ctx.devices else
                    " (utilization × card)" if card else " (footprint, no card reading)"))
    lines.append(f"tool-call parser {parser.parser or 'none'}: {parser.note}")
    return tuple(lines)
