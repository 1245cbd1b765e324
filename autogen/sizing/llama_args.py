"""What the user chose for one llama-server model, and what `extra_args` decide, read as
llama-server b11434 reads its flags (`llama-server --help`).

A flag in `extra_args` (any spelling) replaces ours of the same meaning, and its value pins the
sizing (`-c`, `-ngl`, `--n-cpu-moe`, `-np`, `-fa`, `-ctk`/`-ctv`, `--image-max-tokens`); each value read back is checked
against what b11434 accepts. The vLLM counterpart is `flags.vllm`.
"""

from __future__ import annotations

from collections.abc import Sequence

from attrs import frozen

from autogen.cmdline import unsafe_arg_reason
from autogen.engines import engine_row, imported
from autogen.errors import ModelError
from autogen.flags.llama import MAINLINE, LlamaFlags
from autogen.metadata.kvcost import KV_TYPE_BYTES
from autogen.resolve.context import EmitContext
from autogen.settings.schema import FLASH_ATTN_MODES, IK_MLA_MODES, INT32_MAX, MAX_SLOTS
from autogen.sizing.llama import FLOAT_KV_TYPES, LlamaKnobs

#: The ik_llama.cpp options the settings declare (settings key → flag meaning), which a
#: llama.cpp row has no flag for: set there, they are left out with a note.
IK_OPTIONS = {"mla": "mla", "fused_moe": "fused_moe", "run_time_repack": "run_time_repack"}


def vocabulary(ctx: EmitContext) -> LlamaFlags:
    """The command-line vocabulary of the llama-server a model resolved to (`EngineRow.flags`)."""
    reference = engine_row(ctx.backend.engine).flags
    return imported(reference) if reference else MAINLINE


def extra_flags(extra_args: Sequence[str], flags: LlamaFlags = MAINLINE) -> dict[str, tuple[str, str | None]]:
    """Knob → (flag, value) for every known flag in `extra_args` (last one wins); the off
    spelling of an option that takes a value (ik_llama.cpp's `-no-fa`) reads as `off`."""
    found: dict[str, tuple[str, str | None]] = {}
    for i, arg in enumerate(extra_args):
        flag, eq, inline = arg.partition("=")
        knob = flags.flag_knobs.get(flag)
        if knob is None:
            continue
        if flag in flags.switches:
            value = "off" if flags.negative(flag) and flags.table.by_flag[flag].values else None
        elif eq:
            value = inline
        else:
            value = extra_args[i + 1] if i + 1 < len(extra_args) else None
        found[knob] = (flag, value)
    return found


def split_equals(extra_args: Sequence[str], flags: LlamaFlags = MAINLINE) -> tuple[str, ...]:
    """`--ctx-size=4096` → `--ctx-size 4096` for the flags we know: llama-server b11434 rejects the
    `=` form ("error: invalid argument: --ctx-size=4096", seen in the real-server test), and so
    does ik_llama.cpp ("unknown argument")."""
    out: list[str] = []
    for arg in extra_args:
        flag, eq, value = arg.partition("=")
        out += [flag, value] if eq and flag in flags.flag_knobs and flag not in flags.switches else [arg]
    return tuple(out)


def _integer(value: str | None, minimum: int, maximum: int) -> int | None:
    """`value` as an integer within [minimum, maximum], else None (a C `int` holds at most 10
    digits: a longer number is never read, however long)."""
    if value is None or not value.lstrip("-").isdigit() or len(value.lstrip("-0")) > 10:
        return None
    number = int(value)
    return number if minimum <= number <= maximum else None


def _pin(found: dict[str, tuple[str, str | None]], knob: str, *, words: Sequence[str] = (),
         minimum: int | None = None, maximum: int = INT32_MAX, hint: str = "") -> int | str:
    """The value `extra_args` gives `knob`: one of `words`, or an integer from `minimum` to
    `maximum` (llama-server parses its numbers as a C `int`). Anything else is a ModelError naming
    the flag, the value and what llama-server b11434 accepts: it would refuse to start, or run a
    command we did not size."""
    flag, value = found[knob]
    if value in words:
        return value
    number = _integer(value, minimum, maximum) if minimum is not None else None
    if number is not None:
        return number
    expected = ", ".join(([f"an integer from {minimum} to {maximum}"] if minimum is not None else []) + list(words))
    raise ModelError(f"extra_args: {flag} {_shown(value)}: expected {expected}{hint}")


def _shown(value: str | None) -> str:
    if value is None:
        return "no value"
    return repr(value) if len(value) <= 40 else f"{value[:30]!r}… ({len(value)} characters)"


def _image_max_tokens(found: dict[str, tuple[str, str | None]]) -> int | None:
    """`--image-max-tokens` of `extra_args`: llama-server takes any integer, and clip.cpp reads one
    of 0 or less as unset (tools/mtmd/clip.cpp `clip_init`): None then."""
    flag, value = found["image_max_tokens"]
    number = _integer(value, -INT32_MAX - 1, INT32_MAX)
    if number is None:
        raise ModelError(f"extra_args: {flag} {_shown(value)}: expected an integer from {-INT32_MAX - 1} to "
                         f"{INT32_MAX} (0 or less = the projector's own)")
    return number if number > 0 else None


@frozen
class LlamaChoices:
    """Everything the user chose for one model (override > settings), with extra_args pins."""

    knobs: LlamaKnobs
    threads: int | None
    #: "auto" | "none" | "cpu" | "gpu" | a projector path.
    mmproj: str
    extra_args: tuple[str, ...]
    #: Knobs `extra_args` sets (their flags replace ours).
    replaced: frozenset[str]
    #: The user chose the slot count (else llama-server's auto, AUTO_SLOTS): `--parallel` is emitted.
    slots_chosen: bool = False
    #: `--image-max-tokens` in `extra_args`: it changes the projector's warmup image (None or 0: its own).
    image_max_tokens: int | None = None
    #: ik_llama.cpp's fused MoE path (its default; `-no-fmoe` turns it off).
    fused_moe: bool = True
    #: Settings the row's llama-server has no flag for, left out (`swapgen show` prints them).
    notes: tuple[str, ...] = ()


def resolve_choices(ctx: EmitContext) -> LlamaChoices:
    """Merge override > settings, then the pins of `extra_args`, each value checked, in the
    vocabulary of the row's llama-server (`vocabulary`)."""
    s, ov = ctx.settings, ctx.override
    words = vocabulary(ctx)

    def pick(name: str):
        value = getattr(ov, name, None) if ov is not None else None
        return value if value is not None else getattr(s, name, None)

    extra = split_equals(ov.extra_args, words) if ov is not None else ()
    found = extra_flags(extra, words)
    meta = ctx.meta
    blocks = meta.block_count if meta is not None else 0
    ctx_pin, ngl, parallel = pick("ctx"), pick("ngl"), pick("parallel")
    n_cpu_moe, kv_type, flash_attn = pick("n_cpu_moe"), pick("kv_type"), pick("flash_attn")
    if "parallel" in found:  # -1: llama-server's auto slots
        parallel = _pin(found, "parallel", minimum=1, maximum=MAX_SLOTS, words=("-1",), hint=" (-1 = auto)")
        parallel = None if parallel == "-1" else parallel
    slots = parallel or 1
    if "ctx" in found:  # 0: the trained window (llama-server: "0 = loaded from model")
        ctx_pin = _ctx_pin(found, meta, slots)
    if "ngl" in found or "n_cpu_moe" in found:
        ngl, n_cpu_moe = _placement_pins(found, blocks, ngl, n_cpu_moe, words)
    if "flash_attn" in found:
        flash_attn = _pin(found, "flash_attn", words=FLASH_ATTN_MODES)
    if "cache_type_k" in found or "cache_type_v" in found:
        kv_type = _cache_type_pin(found, flash_attn)
    if "fit" in found:
        _fit_pin(found, words)
    ik = _ik_options(pick, found, words)
    image_max_tokens = None
    if "image_max_tokens" in found:
        image_max_tokens = _image_max_tokens(found)
    mmproj = (pick("mmproj") or "auto").strip()
    unified = "kv_unified" in found and found["kv_unified"][0] in ("-kvu", "--kv-unified")
    knobs = LlamaKnobs(ctx=ctx_pin, kv_type=kv_type, parallel=slots, flash_attn=flash_attn,
                       ngl=ngl, n_cpu_moe=n_cpu_moe,
                       sequences=None if parallel is not None or words.auto_slots == 1 else words.auto_slots,
                       kv_unified=unified, swa_full="swa_full" in found, mla=ik.mla,
                       attn_max_batch=ik.attn_max_batch, run_time_repack=ik.run_time_repack)
    return LlamaChoices(knobs=knobs, threads=pick("threads"), mmproj=mmproj, extra_args=extra,
                        replaced=frozenset(found), slots_chosen=parallel is not None,
                        image_max_tokens=image_max_tokens, fused_moe=ik.fused_moe, notes=ik.notes)


@frozen
class IkOptions:
    """ik_llama.cpp's own options for one model (settings and `extra_args`), with a note per
    such setting a llama.cpp row leaves out."""

    mla: int | None = None
    attn_max_batch: int = 0
    fused_moe: bool = True
    run_time_repack: bool = False
    notes: tuple[str, ...] = ()


def _ik_options(pick, found: dict[str, tuple[str, str | None]], words: LlamaFlags) -> IkOptions:
    """The ik_llama.cpp options of a model: on a row whose vocabulary has no such flag
    (llama.cpp) a setting is left out with a note, never written."""
    chosen = {key: pick(key) for key in IK_OPTIONS}
    if "mla" not in words.knobs:
        notes = tuple(f"{key}: {str(value).lower()} is an ik_llama.cpp option; llama.cpp has no such flag, "
                      "left out" for key, value in chosen.items() if value is not None)
        return IkOptions(notes=notes)
    mla = chosen["mla"]
    if "mla" in found:
        mla = _pin(found, "mla", words=tuple(str(m) for m in IK_MLA_MODES), hint=" (0 to 3)")
    amb = _pin(found, "attn_max_batch", minimum=0, hint=" (MiB)") if "attn_max_batch" in found else 0
    fused = chosen["fused_moe"] is not False and "fused_moe" not in found
    repack = bool(chosen["run_time_repack"]) or "run_time_repack" in found
    return IkOptions(mla=None if mla is None else int(mla), attn_max_batch=int(amb), fused_moe=fused,
                     run_time_repack=repack)


def _fit_pin(found: dict[str, tuple[str, str | None]], words: LlamaFlags) -> None:
    """llama.cpp's `-fit on|off`; ik_llama.cpp's `--fit` places every layer by the memory free at
    start, which no sizing can describe (and it refuses `--n-cpu-moe` beside it)."""
    if found["fit"][0] in words.switches:
        raise ModelError(f"extra_args: {found['fit'][0]} places layers by the memory free at start, which swapgen "
                         "cannot size; drop it (swapgen sizes -c and -ngl itself)")
    _pin(found, "fit", words=("on", "off"))


def _placement_pins(found: dict[str, tuple[str, str | None]], blocks: int, ngl: int | None, n_cpu_moe: int | None,
                    words: LlamaFlags) -> tuple[int | None, int | None]:
    """(`-ngl`, `--n-cpu-moe`) as `extra_args` pin them (`ngl`, `n_cpu_moe`: the settings' values,
    kept unless pinned)."""
    if "ngl" in found:
        ngl = _pin(found, "ngl", minimum=0, words=("all",),
                   hint=" ('auto' fits layers to free memory at start, which swapgen cannot size)")
        ngl = blocks + 1 if ngl == "all" else ngl
    if "n_cpu_moe" in found:
        flag, _ = found["n_cpu_moe"]
        n_cpu_moe = blocks if flag in words.switches else _pin(found, "n_cpu_moe", minimum=0)
    return ngl, n_cpu_moe


def _ctx_pin(found: dict[str, tuple[str, str | None]], meta, slots: int) -> int:
    """The per-slot context of `-c` in `extra_args` (0 = the trained window)."""
    total = _pin(found, "ctx", minimum=0, hint=" (0 = the trained context)")
    if total == 0 and not (meta and meta.context_length):
        raise ModelError(f"extra_args: {found['ctx'][0]} 0 asks for the trained context, "
                         "which the GGUF header does not state")
    return max(1, (total or meta.context_length) // slots)


def _cache_type_pin(found: dict[str, tuple[str, str | None]], flash_attn: str | None) -> str:
    """The cache type of `-ctk`/`-ctv` in `extra_args`, sized at the larger of the two."""
    k, v = (_pin(found, knob, words=tuple(KV_TYPE_BYTES)) if knob in found else None
            for knob in ("cache_type_k", "cache_type_v"))
    k, v = k or v, v or k
    if flash_attn == "off" and v not in FLOAT_KV_TYPES:
        raise ModelError(f"extra_args: cache type {v} for V needs flash attention, which is off")
    return max((k, v), key=KV_TYPE_BYTES.__getitem__)


def checked_path(path: str) -> str:
    """A user-given projector path, or ModelError when no command line can carry it safely."""
    if (reason := unsafe_arg_reason(path)) is not None:
        raise ModelError(f"mmproj path {path!r} cannot be passed safely: {reason}")
    return path
