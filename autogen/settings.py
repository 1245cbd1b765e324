"""`swapgen.yaml`: loaded with ruamel.yaml, structured once by a strict cattrs converter.

Past `load_settings` there are no dicts: every stage reads these frozen classes. Errors name
the exact place (`overrides[2].vllm_gpu_util: expected a number, got 'high'`) and nothing is
written. Relative paths resolve against the settings file's folder; `~` is expanded.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import attrs
import xxhash
from attrs import field, frozen

from autogen import GENERATOR_VERSION, __version__
from autogen.errors import SettingsError
from autogen.kvcost import KV_TYPE_BYTES
from autogen.fsutil import write_if_changed

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


#: llama-server b11434 `-ctk/-ctv` values (`llama-server --help`); one list with their sizes.
LLAMA_KV_TYPES = tuple(KV_TYPE_BYTES)
FLASH_ATTN_MODES = ("on", "off", "auto")
#: `mmproj:` keywords; any other non-empty string is a projector path.
MMPROJ_MODES = ("auto", "none", "cpu", "gpu")
#: Override fields naming a diffusion component file; "none" (any case) drops the component
#: (mirrors `emit_sd.OVERRIDE_FIELD`).
SD_COMPONENT_FIELDS = ("vae", "clip_l", "clip_g", "t5xxl", "llm_text_encoder")


def find_settings(explicit: str | None = None) -> Path:
    """`--settings` / `settings=`, else $SWAPGEN_SETTINGS, else ./swapgen.yaml."""
    chosen = explicit or os.environ.get(SETTINGS_ENV) or DEFAULT_SETTINGS_NAME
    return Path(chosen).expanduser().absolute()


def _resolve(base: Path, value: str) -> str:
    return str((base / Path(value).expanduser()).absolute())


def _resolve_paths(base: Path, encoders: Encoders) -> Encoders:
    """Declared component paths, relative to the settings file's folder like `roots`."""
    changes = {a.name: _resolve(base, v) for a in attrs.fields(Encoders) if (v := getattr(encoders, a.name))}
    return attrs.evolve(encoders, **changes)


def _path_or_keyword(base: Path, value: str | None, keywords: tuple[str, ...], fold: bool = False) -> str | None:
    """A path value resolved like `roots`; a keyword (as the emitter reads it) stays as written."""
    if value is None:
        return None
    word = value.strip().lower() if fold else value.strip()
    return value if word in keywords else _resolve(base, value.strip())


def _resolve_variant(base: Path, variant: Variant) -> Variant:
    return attrs.evolve(variant, mmproj=_path_or_keyword(base, variant.mmproj, MMPROJ_MODES))


def _resolve_override(base: Path, ov: Override) -> Override:
    """Component, LoRA and projector paths; `none` and the `mmproj` modes are keywords
    (`emit_sd.resolve_components`, `emit_llama._projector`)."""
    components = {name: _path_or_keyword(base, getattr(ov, name), ("none",), fold=True)
                  for name in SD_COMPONENT_FIELDS}
    return attrs.evolve(ov, **components, lora_dir=_path_or_keyword(base, ov.lora_dir, ()),
                        mmproj=_path_or_keyword(base, ov.mmproj, MMPROJ_MODES),
                        variants=tuple(_resolve_variant(base, v) for v in ov.variants))


def load_backends_file(path: Path) -> tuple[BackendRow, ...]:
    """Rows of the machine-owned backends file (a YAML list, or `{backends: [...]}`)."""
    from autogen.structure import describe, read_yaml, structure

    data = read_yaml(path)
    if isinstance(data, dict) and set(data) == {"backends"}:
        data = data["backends"]
    if data is None:
        return ()
    if not isinstance(data, list):
        raise SettingsError(str(path), [f"(top level): expected a list of backend rows, got {describe(data)}"])
    holder = structure({"roots": [], "backends": data}, Settings, str(path))
    return holder.backends


def _duplicates(rows: tuple, where: str, key: str) -> list[str]:
    """Rows whose `key` repeats an earlier row's: backend ids, group names, GPU indices."""
    problems, seen = [], {}
    for i, row in enumerate(rows):
        value = getattr(row, key)
        if value in seen:
            problems.append(f"{where}[{i}].{key}: duplicate {key} {value!r} (also {where}[{seen[value]}])")
        seen.setdefault(value, i)
    return problems


def load_settings(path: str | Path | None = None) -> Settings:
    """Read, structure and resolve the settings file. Raises SettingsError.

    The result is cached per settings file (keyed by its bytes and the backends file's), so a
    run where nothing changed pays neither ruamel nor cattrs."""
    path = find_settings(str(path) if path else None)
    cache = _SettingsCache(path)
    settings = cache.load()
    if settings is None:
        settings = _parse_settings(path)
        cache.store(settings)
    return settings


def _parse_settings(path: Path) -> Settings:
    from autogen.structure import read_yaml, structure

    data = read_yaml(path)
    if data is None:
        data = {}
    settings: Settings = structure(data, Settings, str(path))
    base = path.parent
    problems = (_duplicates(settings.backends, "backends", "id") + _duplicates(settings.groups, "groups", "name")
                + _duplicates(settings.gpus or (), "gpus", "index"))
    if not settings.roots:
        problems.append("roots: list at least one model folder")
    backends_file = _resolve(base, settings.backends_file) if settings.backends_file else None
    backends = settings.backends
    if backends_file and os.path.exists(backends_file):
        file_rows = load_backends_file(Path(backends_file))
        problems += _duplicates(file_rows, Path(backends_file).name, "id")
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
        overrides=tuple(_resolve_override(base, ov) for ov in settings.overrides),
        default_variants=tuple(_resolve_variant(base, v) for v in settings.default_variants),
        source=str(path),
    )


def _file_digest(path: str | None) -> str:
    if not path:
        return "-"
    try:
        with open(path, "rb") as f:
            return xxhash.xxh3_128_hexdigest(f.read())
    except OSError:
        return "absent"


class _SettingsCache:
    """Pickled `Settings` in the user's cache folder ($XDG_CACHE_HOME/swapgen), valid while the
    settings file, its backends file and this module are unchanged. Any failure = a miss."""

    def __init__(self, path: Path):
        root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        name = xxhash.xxh3_64_hexdigest(str(path).encode("utf-8", "surrogatepass"))
        self.file = os.path.join(root, "swapgen", f"settings-{name}.pickle")
        self.path = path
        # this module and the structuring rules in `structure.py` shape the result
        code = [os.stat(os.path.join(os.path.dirname(__file__), name)) for name in ("settings.py", "structure.py")]
        # `~` in paths expands against HOME, so a different HOME is a different result
        self.version = (GENERATOR_VERSION, __version__, tuple((c.st_size, c.st_mtime_ns) for c in code), str(path),
                        os.path.expanduser("~"))

    def load(self) -> Settings | None:
        try:
            with open(self.file, "rb") as f:
                version, digest, backends_file, backends_digest, settings = pickle.load(f)
        except Exception:  # noqa: BLE001 - a stale or foreign pickle is just a miss
            return None
        if version != self.version or digest != _file_digest(str(self.path)):
            return None
        if backends_digest != _file_digest(backends_file) or not isinstance(settings, Settings):
            return None
        return settings

    def store(self, settings: Settings) -> None:
        record = (self.version, _file_digest(str(self.path)), settings.backends_file,
                  _file_digest(settings.backends_file), settings)
        try:
            os.makedirs(os.path.dirname(self.file), exist_ok=True)
            write_if_changed(self.file, pickle.dumps(record), durable=False)
        except OSError:
            pass
