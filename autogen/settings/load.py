"""Finding and reading `swapgen.yaml`: ruamel.yaml → one strict cattrs converter → `schema` classes.

Errors name the exact place (`overrides[2].vllm_gpu_util: expected a number, got 'high'`) and
nothing is written. Relative paths resolve against the settings file's folder; `~` is expanded.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import attrs
import xxhash

from autogen import GENERATOR_VERSION, __version__
from autogen.bounds import SETTINGS, InputTooLarge, read_input
from autogen.errors import SettingsError, did_you_mean
from autogen.fsutil import code_stamp, write_if_changed
from autogen.settings.owned import place_problems
from autogen.settings.schema import (
    DEFAULT_OUTPUT,
    MMPROJ_MODES,
    PRESET_LLAMA_SWAP_KEYS,
    PRESET_MODEL_LLAMA_SWAP_KEYS,
    SD_COMPONENT_FIELDS,
    BackendRow,
    Encoders,
    Override,
    PathMapping,
    Profile,
    Settings,
)

SETTINGS_ENV = "SWAPGEN_SETTINGS"
DEFAULT_SETTINGS_NAME = "swapgen.yaml"


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


def _resolve_profile(base: Path, profile: Profile) -> Profile:
    return attrs.evolve(profile, mmproj=_path_or_keyword(base, profile.mmproj, MMPROJ_MODES))


def _resolve_override(base: Path, ov: Override) -> Override:
    """Component, LoRA, projector, draft and VAD paths; `none` and the `mmproj` modes are keywords
    (`emit.sd.resolve_components`, `emit.llama._projector`, `llama_profiles.draft_path`,
    `emit.whisper`)."""
    components = {name: _path_or_keyword(base, getattr(ov, name), ("none",), fold=True)
                  for name in SD_COMPONENT_FIELDS}
    return attrs.evolve(ov, **components, lora_dir=_path_or_keyword(base, ov.lora_dir, ()),
                        mmproj=_path_or_keyword(base, ov.mmproj, MMPROJ_MODES),
                        draft=_path_or_keyword(base, ov.draft, ("none",)),
                        vad_model=_path_or_keyword(base, ov.vad_model, ("none",), fold=True),
                        profiles=tuple(_resolve_profile(base, p) for p in ov.profiles))


def load_backends_file(path: Path) -> tuple[BackendRow, ...]:
    """Rows of the machine-owned backends file (a YAML list, or `{backends: [...]}`)."""
    # lazy: a run served from the settings cache never loads ruamel or cattrs
    from autogen.settings.structure import describe, read_yaml, structure  # noqa: PLC0415

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


def load_settings(path: str | Path | None = None, *, check_pins: bool = True) -> Settings:
    """Read, structure and resolve the settings file. Raises SettingsError.

    The result is cached per settings file (keyed by its bytes and the backends file's), so a
    run where nothing changed pays neither ruamel nor cattrs. Pins are checked on every load,
    outside the cache: `swapgen backends detect` (`check_pins=False`) must be able to create
    the rows a pin names."""
    path = find_settings(str(path) if path else None)
    cache = _SettingsCache(path)
    settings = cache.load()
    if settings is None:
        settings = _parse_settings(path)
        cache.store(settings)
    problems = _pin_problems(settings, settings.backends) if check_pins else []
    problems += written_place_problems(settings)
    if problems:
        from autogen.settings.structure import settings_error  # noqa: PLC0415 - lazy: only on an error

        raise settings_error(str(path), problems)
    return settings


def _pin_problems(settings: Settings, backends: tuple[BackendRow, ...]) -> list[str]:
    """A `backend:` pin must name a row of the registry in use (the backends file's rows when
    it has any): a typo would otherwise quietly leave the model on the automatic pick."""
    ids = [row.id.strip() for row in backends]
    problems = []
    for i, ov in enumerate(settings.overrides):
        pin = (ov.backend or "").strip()
        if pin and pin not in ids:
            known = ", ".join(ids) if ids else "none"
            problems.append(f"overrides[{i}].backend: no backend row has id {pin!r}{did_you_mean(pin, ids)} "
                            f"(ids: {known})")
    return problems


def written_place_problems(settings: Settings) -> list[str]:
    """The files this settings file makes swapgen write, where they may not be
    (`settings.owned.place_problems`): checked on every load, since a root or a link may move."""
    reads = {"the settings file itself": settings.source, "the backends file": settings.backends_file}
    problems = place_problems("output", settings.output, reads, settings.roots)
    if settings.backends_file:
        problems += place_problems("backends_file", settings.backends_file,
                                   {"the settings file itself": settings.source}, settings.roots)
    if settings.report:
        problems += place_problems("report", settings.report, {**reads, "the config (`output`)": settings.output},
                                   settings.roots)
    return problems


def _budget_problems(settings: Settings) -> list[str]:
    """A VRAM budget above the card it is for cannot be met: every size would be wrong."""
    card = settings.card_vram_gb
    if not card:  # None: read at run time; 0: no reading
        return []
    budgets = [("vram_budget_gb", settings.vram_budget_gb)]
    budgets += [(f"default_profiles[{i}].vram_budget_gb", v.vram_budget_gb)
                for i, v in enumerate(settings.default_profiles)]
    for i, ov in enumerate(settings.overrides):
        budgets.append((f"overrides[{i}].vram_budget_gb", ov.vram_budget_gb))
        budgets += [(f"overrides[{i}].profiles[{j}].vram_budget_gb", v.vram_budget_gb)
                    for j, v in enumerate(ov.profiles)]
    return [f"{where}: {budget:g} GiB is above card_vram_gb ({card:g} GiB); a model sized to it cannot fit the card"
            for where, budget in budgets if budget is not None and budget > card]


def _routing_problems(settings: Settings) -> list[str]:
    """llama-swap refuses a config with both `groups` and a `matrix` (load.go "config cannot use
    both 'groups' and 'matrix'"), so `routing: auto` and declared groups exclude each other."""
    if settings.routing is None or not settings.groups:
        return []
    return [f"routing: {settings.routing!r} plans llama-swap's matrix router, which cannot be used together "
            f"with groups; remove `groups` ({len(settings.groups)} declared) or set `routing: null`"]


#: Settings only llama-swap reads, refused with `target: llama-server` (key → what it is).
LLAMA_SWAP_ONLY = {
    "routing": "plans llama-swap's matrix router",
    "groups": "are llama-swap groups",
    "hosts": "make a fleet of llama-swap peers",
}
_PRESET_NOTE = ("target: llama-server writes a models preset for llama.cpp's router, which has no such setting; "
                "remove it or use target: llama-swap")


def _target_problems(settings: Settings) -> list[str]:
    """With `target: llama-server`, every setting only llama-swap reads, named by its place."""
    if settings.target != "llama-server":
        return []
    problems = [f"{key}: {what}; {_PRESET_NOTE}" for key, what in LLAMA_SWAP_ONLY.items() if getattr(settings, key)]
    if settings.output_mode != "full":
        problems.append(f"output_mode: {settings.output_mode!r} is a llama-swap -config-dir part; {_PRESET_NOTE}")
    problems += _llama_swap_keys_problems("llama_swap", settings.llama_swap, PRESET_LLAMA_SWAP_KEYS)
    hooks = settings.llama_swap.get("hooks")
    if isinstance(hooks, dict):
        problems += _llama_swap_keys_problems("llama_swap.hooks", hooks, ("on_startup",))
        if isinstance(hooks.get("on_startup"), dict):
            problems += _llama_swap_keys_problems("llama_swap.hooks.on_startup", hooks["on_startup"], ("preload",))
    for i, ov in enumerate(settings.overrides):
        problems += _llama_swap_keys_problems(f"overrides[{i}].llama_swap", ov.llama_swap,
                                              PRESET_MODEL_LLAMA_SWAP_KEYS)
        profiles = [(f"overrides[{i}].profiles[{j}]", p) for j, p in enumerate(ov.profiles)]
        problems += [f"{where}.unlisted: hides a llama-swap entry; {_PRESET_NOTE}"
                     for where, item in [(f"overrides[{i}]", ov), *profiles] if item.unlisted]
    problems += [f"default_profiles[{j}].unlisted: hides a llama-swap entry; {_PRESET_NOTE}"
                 for j, v in enumerate(settings.default_profiles) if v.unlisted]
    return problems


def _llama_swap_keys_problems(where: str, block: dict, allowed: tuple[str, ...]) -> list[str]:
    return [f"{where}.{key}: a llama-swap key; {_PRESET_NOTE} (it takes {', '.join(allowed)})"
            for key in block if key not in allowed]


def _distributed_problems(settings: Settings) -> list[str]:
    """`vllm_distributed` says how a model spans the hosts `vllm_nodes` names; alone it would
    quietly do nothing."""
    return [f"overrides[{i}].vllm_distributed: {ov.vllm_distributed!r} needs vllm_nodes (the hosts the model "
            "spans); add them or remove vllm_distributed"
            for i, ov in enumerate(settings.overrides) if ov.vllm_distributed and not ov.vllm_nodes]


def _resolve_path_map(base: Path, pairs: tuple[PathMapping, ...]) -> tuple[PathMapping, ...]:
    """Host folders resolved like `roots` and both sides normalised (`/mnt/models/` is
    `/mnt/models`), so prefixes compare on whole path components."""
    return tuple(PathMapping(host=os.path.normpath(_resolve(base, p.host)),
                             served=None if p.served is None else os.path.normpath(p.served))
                 for p in pairs)


def _path_map_problems(pairs: tuple[PathMapping, ...]) -> list[str]:
    """The first matching pair wins, so a folder listed twice, or below a folder listed before
    it, would never be used: a mistake, not a preference."""
    problems = []
    for i, pair in enumerate(pairs):
        for earlier in pairs[:i]:
            if pair.host == earlier.host:
                problems.append(f"path_map: {pair.host!r} is listed twice")
                break
            if earlier.host == "/" or pair.host.startswith(earlier.host + "/"):
                problems.append(f"path_map: {pair.host!r} is never used: {earlier.host!r} above it matches "
                                "its files first; list the longer folder first")
                break
    return problems


def _parse_settings(path: Path) -> Settings:
    # lazy: a run served from the settings cache never loads ruamel or cattrs
    from autogen.settings.structure import read_yaml, settings_error, structure  # noqa: PLC0415

    data = read_yaml(path)
    if data is None:
        data = {}
    settings: Settings = structure(data, Settings, str(path))
    base = path.parent
    problems = (_duplicates(settings.backends, "backends", "id") + _duplicates(settings.groups, "groups", "name")
                + _duplicates(settings.gpus or (), "gpus", "index"))
    problems += _duplicates(settings.hosts, "hosts", "name")
    if not settings.roots and not settings.hosts:
        problems.append("roots: list at least one model folder")
    backends_file = _resolve(base, settings.backends_file) if settings.backends_file else None
    backends = settings.backends
    # the settings file named as its own backends file is refused by `written_place_problems`
    if backends_file and os.path.exists(backends_file) and os.path.realpath(backends_file) != os.path.realpath(path):
        file_rows = load_backends_file(Path(backends_file))
        problems += _duplicates(file_rows, Path(backends_file).name, "id")
        if file_rows:
            backends = file_rows
    problems += _budget_problems(settings) + _routing_problems(settings) + _distributed_problems(settings)
    problems += _target_problems(settings)
    path_map = _resolve_path_map(base, settings.path_map)
    problems += _path_map_problems(path_map)
    if problems:
        raise settings_error(str(path), problems)
    return attrs.evolve(
        settings,
        roots=tuple(_resolve(base, r) for r in settings.roots),
        output=_resolve(base, settings.output if "output" in data else DEFAULT_OUTPUT[settings.target]),
        cache_dir=_resolve(base, settings.cache_dir),
        backends_file=backends_file,
        backends=backends,
        backend_venvs=tuple(_resolve(base, v) for v in settings.backend_venvs),
        encoders=_resolve_paths(base, settings.encoders),
        overrides=tuple(_resolve_override(base, ov) for ov in settings.overrides),
        default_profiles=tuple(_resolve_profile(base, p) for p in settings.default_profiles),
        hosts=tuple(attrs.evolve(h, settings=_resolve(base, h.settings)) for h in settings.hosts),
        path_map=path_map,
        report=_resolve(base, settings.report) if settings.report else None,
        source=str(path),
    )


def _file_digest(path: str | None) -> str | None:
    """The settings cache's key of a file: "-" for no file, "absent", or its digest; None when
    it cannot be read within `bounds.SETTINGS` (a miss: the parse then says why)."""
    if not path:
        return "-"
    try:
        return xxhash.xxh3_128_hexdigest(read_input(path, SETTINGS))
    except FileNotFoundError:
        return "absent"
    except (OSError, InputTooLarge):
        return None


class _SettingsCache:
    """Pickled `Settings` in the user's cache folder ($XDG_CACHE_HOME/swapgen), valid while the
    settings file, its backends file and this module are unchanged. Any failure = a miss."""

    def __init__(self, path: Path):
        root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        name = xxhash.xxh3_64_hexdigest(str(path).encode("utf-8", "surrogatepass"))
        self.file = os.path.join(root, "swapgen", f"settings-{name}.pickle")
        self.path = path
        # every module of the package may shape the result (classes, hooks, keyword tables), and
        # `~` in paths expands against HOME, so a different HOME is a different result
        self.version = (GENERATOR_VERSION, __version__, code_stamp(), str(path), os.path.expanduser("~"))

    def load(self) -> Settings | None:
        try:
            with open(self.file, "rb") as f:
                version, digest, backends_file, backends_digest, settings = pickle.load(f)
        except Exception:
            return None
        if version != self.version or digest is None or digest != _file_digest(str(self.path)):
            return None
        if backends_digest is None or backends_digest != _file_digest(backends_file):
            return None
        if not isinstance(settings, Settings):
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
