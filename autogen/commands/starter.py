"""`swapgen init`: a commented starter `swapgen.yaml` from what this machine has.

It lists as roots the usual places people keep models that exist here (`model_places`), says
which GPUs the probe sees (or that it sees none, and what to set instead), and registers the
engines `swapgen backends detect` finds in the same places. The file is created, never
replaced (`fsutil.write_new`), and it runs as written: `swapgen doctor` then says what is still
missing, and `swapgen` writes the config.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

import attrs
from attrs import frozen

from autogen.commands import detect
from autogen.commands.checks import under
from autogen.errors import SwapgenError
from autogen.fsutil import write_new
from autogen.numfmt import counted, format_g
from autogen.resolve import gpus
from autogen.settings.load import find_settings
from autogen.settings.owned import replace_problem
from autogen.settings.schema import DEFAULT_BUDGET_GB, BackendRow, Gpu

#: Where Ollama's Linux service keeps its store (its install script's `ollama` user's home).
OLLAMA_SERVICE_STORE = "/usr/share/ollama/.ollama/models"


@frozen
class Place:
    """A folder where a tool keeps models, as the starter file names it.

    Example: Place(path="/home/me/.cache/huggingface/hub", label="the Hugging Face cache").
    """

    #: Absolute, `~` expanded.
    path: str
    #: What the root's comment says it is, naming the variable that moved it, if one did.
    label: str


def _candidates(env: Mapping[str, str], home: str) -> list[Place]:
    """Every usual place, present or not, in the order the file lists them."""
    cache = env.get("XDG_CACHE_HOME") or os.path.join(home, ".cache")
    # huggingface_hub's constants.py: HF_HUB_CACHE (legacy HUGGINGFACE_HUB_CACHE), else HF_HOME/hub,
    # else $XDG_CACHE_HOME/huggingface/hub
    if env.get("HF_HUB_CACHE"):
        hub = Place(env["HF_HUB_CACHE"], "the Hugging Face cache ($HF_HUB_CACHE)")
    elif env.get("HUGGINGFACE_HUB_CACHE"):
        hub = Place(env["HUGGINGFACE_HUB_CACHE"], "the Hugging Face cache ($HUGGINGFACE_HUB_CACHE)")
    elif env.get("HF_HOME"):
        hub = Place(os.path.join(env["HF_HOME"], "hub"), "the Hugging Face cache ($HF_HOME/hub)")
    else:
        hub = Place(os.path.join(cache, "huggingface", "hub"), "the Hugging Face cache")
    ollama = (Place(env["OLLAMA_MODELS"], "Ollama's models ($OLLAMA_MODELS)") if env.get("OLLAMA_MODELS")
              else Place(os.path.join(home, ".ollama", "models"), "Ollama's models"))
    return [
        hub,
        Place(os.path.join(home, ".lmstudio", "models"), "LM Studio's models folder"),
        Place(os.path.join(cache, "lm-studio", "models"), "LM Studio's models folder (before 0.3)"),
        ollama,
        Place(OLLAMA_SERVICE_STORE, "Ollama's models (its Linux service)"),
        Place(os.path.join(home, "models"), "your own models folder"),
    ]


def model_places(env: Mapping[str, str], home: str) -> list[Place]:
    """The usual places that exist and can be listed. A place inside another one is left out
    (the outer root scans it; nested roots are reported as overlapping), and so is a second
    name for the same folder."""
    present: list[tuple[Place, str]] = []
    for place in _candidates(env, home):
        path = os.path.abspath(os.path.expanduser(place.path))
        real = os.path.realpath(path)
        if os.path.isdir(path) and os.access(path, os.R_OK | os.X_OK) and all(real != r for _, r in present):
            present.append((attrs.evolve(place, path=path), real))
    return [place for place, real in present
            if not any(other != real and under(real, (other,)) for _, other in present)]


def _shown(path: str, home: str) -> str:
    """`~/models` for a folder under HOME (the settings expand `~`), else the path."""
    return "~" + path[len(home):] if under(path, (home,)) and path != home else path


_PLAIN = re.compile(r"^[A-Za-z_/~.][A-Za-z0-9_./~+-]*$")


def _scalar(value: object) -> str:
    """A flow-mapping value: plain when YAML reads it back as the same string, else quoted."""
    if isinstance(value, bool):
        return "true" if value else "false"
    text = str(value)
    return text if _PLAIN.match(text) and text.lower() not in ("true", "false", "null", "yes", "no", "on", "off") \
        else '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def backend_line(row: BackendRow) -> str:
    """`  - {id: llama-cuda, kind: llama, path: /usr/bin/llama-server, default: true, …}`."""
    fields = [("id", row.id), ("kind", row.kind), ("path", row.path)]
    fields += [(key, value) for key, value in (("default", row.default), ("version", row.version),
                                               ("variant", row.build)) if value]
    return "  - {" + ", ".join(f"{name}: {_scalar(value)}" for name, value in fields) + "}"


def _roots_part(places: list[Place], home: str) -> list[str]:
    width = max(len(_shown(p.path, home)) for p in places) + 2
    lines = ["# Model folders, scanned recursively: the usual places that exist on this machine.", "roots:"]
    lines += [f"  - {_shown(p.path, home):<{width}}# {p.label}" for p in places]
    return lines


def _gpu_part(found: tuple[Gpu, ...]) -> list[str]:
    usable = gpus.eligible(found)
    if not usable:
        seen = ("; " + ", ".join(f"{g.name} ({format_g(round(g.vram_gb, 1))} GiB)" for g in found)
                + " under 3 GiB, not used") if found else ""
        return [f"# No GPU found (no NVIDIA or AMD driver answered: NVML, nvidia-smi, rocm-smi, sysfs){seen}.",
                f"# Every model is sized to {DEFAULT_BUDGET_GB:g} GiB until you set the VRAM one model may use and the",
                "# card's total, in GiB (or declare `gpus:`):",
                f"# vram_budget_gb: {DEFAULT_BUDGET_GB:g}",
                f"# card_vram_gb: {DEFAULT_BUDGET_GB:g}"]
    total = format_g(round(sum(g.vram_gb for g in usable), 1))
    lines = ["# GPUs seen now (probed again after each reboot; declare `gpus:` to pin them):"]
    lines += [f"#   {g.index}: {g.name}, {format_g(round(g.vram_gb, 1))} GiB" for g in found]
    lines += [f"# The VRAM one model may use, in GiB; default: the GPUs' total, {total} GiB. Leave some",
              "# room for the desktop and other programs:",
              f"# vram_budget_gb: {format_g(max(1.0, round(sum(g.vram_gb for g in usable) - 2)))}"]
    return lines


def _backends_part(rows: tuple[BackendRow, ...]) -> list[str]:
    if not rows:
        return ["# No engine found where `swapgen backends detect` looks ($PATH and the usual install folders).",
                "# Install llama.cpp's llama-server (or vLLM) and add its row:",
                "#   - {id: llama, kind: llama, path: /path/to/llama-server, default: true}",
                "backends: []"]
    return ["# Engines found where `swapgen backends detect` looks ($PATH and the usual install folders).",
            "# `default: true` is the engine a class of models gets unless an override pins another:",
            "backends:", *(backend_line(r) for r in rows)]


def render(places: list[Place], found_gpus: tuple[Gpu, ...], rows: tuple[BackendRow, ...], home: str) -> str:
    """The starter file's text."""
    head = ["# swapgen settings, written by `swapgen init` from what this machine has. Every key is in",
            "# swapgen's docs/settings.md. `swapgen doctor` says what is still missing; `swapgen` writes the config.",
            ""]
    paths = ["", "# The llama-swap config swapgen writes, and its cache (relative to this file):",
             "output: config.yaml", "cache_dir: cache", ""]
    return "\n".join([*head, *_roots_part(places, home), *paths, *_gpu_part(found_gpus), "",
                      *_backends_part(rows)]) + "\n"


def found_backends(env: Mapping[str, str]) -> tuple[tuple[BackendRow, ...], list[str]]:
    """The rows `backends detect` would add to an empty file, as plain rows for `backends:`
    (`managed` and `component` are for a backends file), and its notes."""
    binaries = detect.find_binaries([], detect.search_dirs(env.get("PATH", ""), ()))
    found, notes = detect.probe_all(binaries, detect.PROBE_TIMEOUT)
    rows = detect.plan(found, ()).rows
    return tuple(attrs.evolve(r, managed=False, component="") for r in rows), notes


def _outside_places(target, places: list[Place]) -> None:
    """The starter names `config.yaml` beside itself: inside a root it would be refused
    (`settings.owned.place_problems`), so the starter is not written there either."""
    config = os.path.realpath(target.parent / "config.yaml")
    inside = [p.path for p in places if under(config, (os.path.realpath(p.path),))]
    if inside:
        raise SwapgenError(f"{target} is in the model folder {inside[0]}, and so would be the config.yaml it names: "
                           "swapgen never writes into a model folder. Nothing was written: run `swapgen --settings "
                           "PATH init` with PATH outside the model folders (e.g. ~/swapgen.yaml)")


def main_init(settings_path: str | None) -> int:
    """`swapgen init`: write the starter at the settings path (`--settings`, $SWAPGEN_SETTINGS,
    else ./swapgen.yaml); never over a file."""
    target = find_settings(settings_path)
    if os.path.lexists(target):
        raise SwapgenError(f"{target} exists; `swapgen init` never replaces a file. `swapgen doctor` checks it, "
                           "and `swapgen --settings OTHER.yaml init` writes a new one")
    refused = replace_problem("--settings", str(target), (), "")
    if refused:
        raise SwapgenError(f"{refused}; nothing was written")
    env, home = os.environ, os.path.expanduser("~")
    places = model_places(env, home)
    if not places:
        names = ", ".join(_shown(p.path, home) for p in _candidates(env, home))
        raise SwapgenError(f"no model folder found in the usual places ({names}); nothing was written. Make one "
                           "(mkdir ~/models) and put models there, or write `roots:` in swapgen.yaml yourself")
    _outside_places(target, places)
    rows, notes = found_backends(env)
    found_gpus = gpus.probe_gpus()
    try:
        written = write_new(str(target), render(places, found_gpus, rows, home).encode("utf-8"))
    except OSError as exc:
        raise SwapgenError(f"{target}: cannot be created ({exc.strerror or exc}); nothing was written") from None
    if not written:
        raise SwapgenError(f"{target} appeared while swapgen init ran; it was left as it is")
    for note in notes:
        print(f"swapgen: note: {note}")
    usable = gpus.eligible(found_gpus)
    print(f"wrote {target}: {counted(len(places), 'root')}, {counted(len(usable), 'GPU')}, "
          f"{counted(len(rows), 'engine')}. Next: `swapgen doctor`, then `swapgen`.")
    return 0
