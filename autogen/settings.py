"""`swapgen.yaml`: loaded with ruamel.yaml, structured once by a strict cattrs converter.

Past `load_settings` there are no dicts: every stage reads these frozen classes. Errors name
the exact place (`overrides[2].vllm_gpu_util: expected a number, got 'high'`) and nothing is
written. Relative paths resolve against the settings file's folder; `~` is expanded.
"""

from __future__ import annotations

import difflib
import os
import shlex
from pathlib import Path
from typing import Any

import attrs
import cattrs
from attrs import field, frozen
from cattrs.errors import ClassValidationError, ForbiddenExtraKeysError, IterableValidationError
from cattrs.gen import make_dict_structure_fn, override

from autogen.errors import SettingsError

SETTINGS_ENV = "SWAPGEN_SETTINGS"
DEFAULT_SETTINGS_NAME = "swapgen.yaml"


@frozen
class BackendRow:
    """One installed engine. `id` is what an override's `backend:` pins.

    Example: BackendRow(id="llama-cuda", kind="llama", path="/opt/llama/bin/llama-server",
    default=True, variant="cuda").
    """

    id: str
    kind: str
    path: str
    name: str = ""
    #: The ★: this row is the automatic pick for its class.
    default: bool = False
    #: Installed version, e.g. "0.11.0" (vLLM gates flags on it).
    version: str = ""
    #: Written by `swapgen backends detect` (never edit by hand; rewritten on detect).
    managed: bool = False
    component: str = ""
    #: Build flavour: "cuda", "rocm", "vulkan", "cpu", …
    variant: str = ""
    #: A derived row for one installed build of a component (pin it by id).
    build: bool = False


@frozen
class Variant:
    """A named llama profile of one model: `<id>-<slug(name)>` (see README)."""

    name: str
    ctx: int | None = None
    kv_type: str | None = None
    vram_budget_gb: float | None = None
    parallel: int | None = None
    flash_attn: str | None = None
    threads: int | None = None
    ngl: int | None = None
    mmproj: str | None = None
    extra_args: tuple[str, ...] = ()
    unlisted: bool = False


@frozen
class Override:
    """Per-model knobs; the first row whose `match` glob fits the model's path wins."""

    #: Glob on the model's full path: case-insensitive, `*` crosses folders, `?` one char.
    match: str
    quant: str | None = None
    skip: bool = False
    unlisted: bool = False
    #: Registry id to pin; a stale id falls back to automatic resolution.
    backend: str | None = None
    ctx: int | None = None
    vram_budget_gb: float | None = None
    vllm_gpu_util: float | None = None
    vllm_tensor_parallel: int | None = None
    vllm_tokenizer: str | None = None
    #: "none" turns the tool-call parser off; anything else is used verbatim.
    vllm_tool_parser: str | None = None
    #: Appended verbatim; a flag here replaces our generated flag of the same meaning.
    extra_args: tuple[str, ...] = ()
    devices: tuple[int, ...] | None = None
    ctx_variants: tuple[int, ...] = ()
    variants: tuple[Variant, ...] = ()
    # llama-server knobs
    kv_type: str | None = None
    parallel: int | None = None
    flash_attn: str | None = None
    threads: int | None = None
    ngl: int | None = None
    #: "auto" | "none" | "cpu" | "gpu" | a projector path.
    mmproj: str | None = None
    # sd-server (image) knobs; component paths win over `encoders`, "none" drops the component
    #: VAE, e.g. "/models/flux/ae.safetensors".
    vae: str | None = None
    #: CLIP-L / CLIP-G text encoders (Flux.1 needs CLIP-L), e.g. "/models/clip_l.safetensors".
    clip_l: str | None = None
    clip_g: str | None = None
    #: T5-XXL text encoder (Flux.1, Chroma), e.g. "/models/t5xxl_fp16.safetensors".
    t5xxl: str | None = None
    #: LLM text encoder (`--llm`: Z-Image, Qwen-Image, Flux.2), e.g. "/models/Qwen3-4B-Q8_0.gguf".
    llm_text_encoder: str | None = None
    #: LoRA folder for sd-server (default: the model's own folder).
    lora_dir: str | None = None
    #: true/false pins sd-server's `--offload-to-cpu` (default: from the budget).
    offload_to_cpu: bool | None = None
    #: Keep the VAE / text encoders on the CPU (defaults: false / true).
    vae_on_cpu: bool | None = None
    te_on_cpu: bool | None = None
    #: sd-server savers `--diffusion-fa` / `--vae-tiling` (default: on).
    diffusion_fa: bool | None = None
    vae_tiling: bool | None = None
    #: sd-server generation defaults (`--steps`, `--cfg-scale`, `--sampling-method`, size).
    steps: int | None = None
    cfg_scale: float | None = None
    sampling_method: str | None = None
    width: int | None = None
    height: int | None = None


@frozen
class Encoders:
    """Diffusion components shared by every image model that needs them (reference
    `spec-classes.md` §4.3 "declared fields"); a per-model override path wins.

    Example: Encoders(flux_vae="/models/flux/ae.safetensors", clip_l="/models/clip_l.safetensors",
    t5xxl="/models/t5xxl_fp16.safetensors").
    """

    #: Flux.1 AE (16-channel latents): Flux.1, Chroma, LongCat.
    flux_vae: str | None = None
    #: Flux.2 VAE (32-channel latents): Flux.2 / Klein, ERNIE-Image.
    flux2_vae: str | None = None
    #: Z-Image / Lumina VAE; default: `flux_vae` (Z-Image's AE is Flux.1's).
    zimage_vae: str | None = None
    #: Qwen-Image VAE (a Wan-2.1-style 3-D VAE).
    qwen_image_vae: str | None = None
    clip_l: str | None = None
    clip_g: str | None = None
    t5xxl: str | None = None
    #: LLM text encoder for `--llm` (Z-Image: Qwen3-4B, Qwen-Image: Qwen2.5-VL-7B, …); pin per
    #: model with the override's `llm_text_encoder` when several families need different ones.
    llm_text_encoder: str | None = None


@frozen
class Group:
    """A llama-swap group: models whose id matches one of `match` join the first such group."""

    name: str
    match: tuple[str, ...] = ()
    #: True: members stay loaded side by side (swap: false).
    coexist: bool = False


@frozen
class Gpu:
    index: int
    vram_gb: float
    name: str = ""
    vendor: str = ""


@frozen
class Settings:
    """The whole settings file, paths already absolute."""

    roots: tuple[str, ...]
    output: str = "config.yaml"
    cache_dir: str = "cache"
    #: Per-model VRAM budget in GiB; None = the probed card total, else 8.
    vram_budget_gb: float | None = None
    #: Total VRAM of the eligible GPUs in GiB; None = probe once; 0 = "no reading".
    card_vram_gb: float | None = None
    ttl: int = 600
    health_check_timeout: int = 300
    backends: tuple[BackendRow, ...] = ()
    backends_file: str | None = None
    server_exe: str | None = None
    sd_server_exe: str | None = None
    tts_server_exe: str | None = None
    asr_server_exe: str | None = None
    overrides: tuple[Override, ...] = ()
    groups: tuple[Group, ...] = ()
    #: Architecture → vLLM tool-call parser; extends/replaces the built-in table.
    tool_parsers: dict[str, str] = field(factory=dict, hash=False)
    gpus: tuple[Gpu, ...] | None = None
    devices: tuple[int, ...] | None = None
    default_variants: tuple[Variant, ...] = ()
    # llama-server defaults (an override wins)
    kv_type: str | None = None
    parallel: int | None = None
    flash_attn: str | None = None
    threads: int | None = None
    #: Virtualenvs whose `bin/vllm` `swapgen backends detect` also checks (relative to this file).
    backend_venvs: tuple[str, ...] = ()
    #: Declared diffusion components for image models (see `Encoders`).
    encoders: Encoders = Encoders()
    #: Where the settings were read from (not a key of the file).
    source: str = field(default="", kw_only=True)


# ---------------------------------------------------------------------------------------------
# strict scalar hooks: "false" is not True, "600" is not a number


def _describe(value: Any) -> str:
    if isinstance(value, str):
        return repr(value)
    if value is None:
        return "nothing"
    if isinstance(value, (dict, list)):
        return f"a {'mapping' if isinstance(value, dict) else 'list'}"
    return repr(value)


def _strict_str(value: Any, _type: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {_describe(value)}")
    return value


def _strict_int(value: Any, _type: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"expected an integer, got {_describe(value)}")
    return value


def _strict_float(value: Any, _type: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"expected a number, got {_describe(value)}")
    return float(value)


def _strict_bool(value: Any, _type: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {_describe(value)}")
    return value


def _args(value: Any, _type: Any) -> tuple[str, ...]:
    """Extra arguments: a list of strings, or one string split like a shell would."""
    if isinstance(value, str):
        try:
            return tuple(shlex.split(value))
        except ValueError as exc:
            raise ValueError(f"cannot split {value!r}: {exc}") from None
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise ValueError(f"expected a list of strings or one string, got {_describe(value)}")


def _str_map(value: Any, _type: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        raise ValueError(f"expected a mapping of strings, got {_describe(value)}")
    for k, v in value.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise ValueError(f"expected string keys and values, got {k!r}: {v!r}")
    return dict(value)


def _checked(base, check, message):
    def hook(value: Any, type_: Any):
        if value is None:
            return None
        result = base(value, type_)
        if not check(result):
            raise ValueError(f"{message}, got {_describe(value)}")
        return result

    return hook


_positive_float = _checked(_strict_float, lambda v: v > 0, "expected a number above 0")
_non_negative_float = _checked(_strict_float, lambda v: v >= 0, "expected a number of 0 or more")
_positive_int = _checked(_strict_int, lambda v: v > 0, "expected an integer above 0")
_fraction = _checked(_strict_float, lambda v: 0 < v <= 1, "expected a fraction in (0, 1]")
_ttl = _checked(_strict_int, lambda v: v >= -1, "expected an integer of -1 or more")
_health = _checked(_strict_int, lambda v: v >= 15, "expected an integer of 15 or more (llama-swap's minimum)")
_nonblank = _checked(_strict_str, lambda v: v.strip() != "", "expected a non-empty string")

#: llama-server b11434 `-ctk/-ctv` values (`llama-server --help`).
LLAMA_KV_TYPES = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1")
FLASH_ATTN_MODES = ("on", "off", "auto")
#: `mmproj:` keywords; any other non-empty string is a projector path.
MMPROJ_MODES = ("auto", "none", "cpu", "gpu")
_kv_type = _checked(_strict_str, lambda v: v in LLAMA_KV_TYPES, f"expected one of {', '.join(LLAMA_KV_TYPES)}")
_flash_attn = _checked(_strict_str, lambda v: v in FLASH_ATTN_MODES, "expected on, off or auto")
_mmproj = _checked(_strict_str, lambda v: v.strip() != "",
                   "expected auto, none, cpu, gpu or a projector path")
_non_negative_int = _checked(_strict_int, lambda v: v >= 0, "expected an integer of 0 or more")
_LLAMA_HOOKS = {"kv_type": _kv_type, "flash_attn": _flash_attn, "mmproj": _mmproj, "ngl": _non_negative_int}

_SD_HOOKS = {
    **dict.fromkeys(("vae", "clip_l", "clip_g", "t5xxl", "llm_text_encoder", "lora_dir", "sampling_method"),
                    _nonblank),
    **dict.fromkeys(("steps", "width", "height"), _positive_int),
    "cfg_scale": _positive_float,
}

_FIELD_HOOKS: dict[type, dict[str, Any]] = {
    BackendRow: {"id": _nonblank, "kind": _nonblank, "path": _nonblank},
    Variant: {
        "name": _nonblank,
        "ctx": _positive_int,
        "vram_budget_gb": _positive_float,
        "parallel": _positive_int,
        "threads": _positive_int,
        "extra_args": _args,
        **_LLAMA_HOOKS,
    },
    Override: {
        "match": _nonblank,
        "ctx": _positive_int,
        "vram_budget_gb": _positive_float,
        "vllm_gpu_util": _fraction,
        "vllm_tensor_parallel": _positive_int,
        "parallel": _positive_int,
        "threads": _positive_int,
        "extra_args": _args,
        **_LLAMA_HOOKS,
        **_SD_HOOKS,
    },
    Encoders: dict.fromkeys(("flux_vae", "flux2_vae", "zimage_vae", "qwen_image_vae", "clip_l", "clip_g",
                             "t5xxl", "llm_text_encoder"), _nonblank),
    Gpu: {"vram_gb": _non_negative_float},
    Settings: {
        "vram_budget_gb": _positive_float,
        "card_vram_gb": _non_negative_float,
        "ttl": _ttl,
        "health_check_timeout": _health,
        "tool_parsers": _str_map,
        "parallel": _positive_int,
        "threads": _positive_int,
        "kv_type": _kv_type,
        "flash_attn": _flash_attn,
    },
}


def _make_converter() -> cattrs.Converter:
    conv = cattrs.Converter(forbid_extra_keys=True)
    conv.register_structure_hook(str, _strict_str)
    conv.register_structure_hook(int, _strict_int)
    conv.register_structure_hook(float, _strict_float)
    conv.register_structure_hook(bool, _strict_bool)

    for cls, hooks in _FIELD_HOOKS.items():
        overrides = {name: override(struct_hook=hook) for name, hook in hooks.items()}
        if cls is Settings:
            overrides["source"] = override(omit=True)
        conv.register_structure_hook(
            cls, make_dict_structure_fn(cls, conv, _cattrs_forbid_extra_keys=True, **overrides)
        )
    return conv


_CONVERTER = _make_converter()


# ---------------------------------------------------------------------------------------------
# error paths


def _format_path(path: str) -> str:
    path = path.removeprefix("$")
    return path.removeprefix(".") or "(top level)"


def _format_exception(exc: BaseException, type_: Any) -> str:
    if isinstance(exc, KeyError):
        return "required key missing"
    if isinstance(exc, ForbiddenExtraKeysError):
        known = [a.name for a in attrs.fields(exc.cl) if a.name != "source"]
        parts = []
        for key in sorted(exc.extra_fields):
            hint = difflib.get_close_matches(key, known, n=1)
            parts.append(f"unknown key {key!r}" + (f" (did you mean {hint[0]!r}?)" if hint else ""))
        return "; ".join(parts)
    if isinstance(exc, ValueError):
        return str(exc)
    if isinstance(exc, TypeError) and type_ is not None:
        return f"expected {getattr(type_, '__name__', type_)}, got something else"
    return f"invalid value ({exc})"


def _error_lines(exc: ClassValidationError | IterableValidationError) -> list[str]:
    lines = []
    for message in cattrs.transform_error(exc, path="$", format_exception=_format_exception):
        text, _, where = message.rpartition(" @ ")
        lines.append(f"{_format_path(where)}: {text}")
    return lines


def structure(data: Any, cls: type, source: str):
    """Structure plain data into `cls`, raising SettingsError with one line per problem."""
    if not isinstance(data, dict):
        raise SettingsError(source, [f"(top level): expected a mapping of settings, got {_describe(data)}"])
    try:
        return _CONVERTER.structure(data, cls)
    except (ClassValidationError, IterableValidationError) as exc:
        raise SettingsError(source, _error_lines(exc)) from None


# ---------------------------------------------------------------------------------------------
# loading


def find_settings(explicit: str | None = None) -> Path:
    """`--settings` / `settings=`, else $SWAPGEN_SETTINGS, else ./swapgen.yaml."""
    chosen = explicit or os.environ.get(SETTINGS_ENV) or DEFAULT_SETTINGS_NAME
    return Path(chosen).expanduser().absolute()


def read_yaml(path: Path) -> Any:
    """Parse one YAML file with ruamel (safe, pure), errors as SettingsError naming the line."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SettingsError(str(path), ["file not found (pass --settings PATH or set SWAPGEN_SETTINGS)"]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsError(str(path), [f"cannot read: {exc}"]) from None
    try:
        return YAML(typ="safe", pure=True).load(text)
    except YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else "(parse)"
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SettingsError(str(path), [f"{where}: not valid YAML: {problem}"]) from None


def _resolve(base: Path, value: str) -> str:
    return str((base / Path(value).expanduser()).absolute())


def _resolve_paths(base: Path, encoders: Encoders) -> Encoders:
    """Declared component paths, relative to the settings file's folder like `roots`."""
    changes = {a.name: _resolve(base, v) for a in attrs.fields(Encoders) if (v := getattr(encoders, a.name))}
    return attrs.evolve(encoders, **changes)


def load_backends_file(path: Path) -> tuple[BackendRow, ...]:
    """Rows of the machine-owned backends file (a YAML list, or `{backends: [...]}`)."""
    data = read_yaml(path)
    if isinstance(data, dict) and set(data) == {"backends"}:
        data = data["backends"]
    if data is None:
        return ()
    if not isinstance(data, list):
        raise SettingsError(str(path), [f"(top level): expected a list of backend rows, got {_describe(data)}"])
    holder = structure({"roots": [], "backends": data}, Settings, str(path))
    return holder.backends


def _check_registry(rows: tuple[BackendRow, ...], where: str) -> list[str]:
    problems, seen = [], {}
    for i, row in enumerate(rows):
        if row.id in seen:
            problems.append(f"{where}[{i}].id: duplicate id {row.id!r} (also {where}[{seen[row.id]}])")
        seen.setdefault(row.id, i)
    return problems


def load_settings(path: str | Path | None = None) -> Settings:
    """Read, structure and resolve the settings file. Raises SettingsError."""
    path = find_settings(str(path) if path else None)
    data = read_yaml(path)
    if data is None:
        data = {}
    settings: Settings = structure(data, Settings, str(path))
    base = path.parent
    problems = _check_registry(settings.backends, "backends")
    if not settings.roots:
        problems.append("roots: list at least one model folder")
    backends_file = _resolve(base, settings.backends_file) if settings.backends_file else None
    backends = settings.backends
    if backends_file and os.path.exists(backends_file):
        file_rows = load_backends_file(Path(backends_file))
        problems += _check_registry(file_rows, Path(backends_file).name)
        if file_rows:
            backends = file_rows
    if problems:
        raise SettingsError(str(path), problems)
    return attrs.evolve(
        settings,
        roots=tuple(_resolve(base, r) for r in settings.roots),
        output=_resolve(base, settings.output),
        cache_dir=_resolve(base, settings.cache_dir),
        backends_file=backends_file,
        backends=backends,
        backend_venvs=tuple(_resolve(base, v) for v in settings.backend_venvs),
        encoders=_resolve_paths(base, settings.encoders),
        source=str(path),
    )


def unstructure(value: Any) -> Any:
    """Plain data (for up-to-date keys and `--json` output)."""
    return _CONVERTER.unstructure(value)
