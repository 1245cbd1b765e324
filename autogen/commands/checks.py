"""What a run refuses, or warns about, once it knows the settings and the discovered models.

The live config is the record of what llama-swap serves: a root or folder it serves models
from that now shows nothing stops the run, so an unmounted disk never unloads every model.
Settings that reach nothing (a glob that matches no model, a backend path that does not
exist) are one warning line each.
"""

from __future__ import annotations

import os
import re
import sys

import attrs

from autogen.discovery.rows import ModelRow
from autogen.engines import Engine, engine_of
from autogen.errors import SwapgenError
from autogen.fsutil import read_bytes
from autogen.settings.globs import glob_pattern
from autogen.settings.schema import DEFAULT_BUDGET_GB, Settings


def check_roots(settings: Settings) -> None:
    """A root that is missing or cannot be listed (a typo, an unmounted disk) stops the run:
    writing a config without its models would unload them all from llama-swap."""
    for i, root in enumerate(settings.roots):
        try:
            with os.scandir(root):
                pass
        except OSError as exc:
            raise SwapgenError(f"roots[{i}]: cannot list {root} ({exc.strerror or exc}); nothing was written") from None


def no_budget(settings: Settings, card_vram_gb: float | None) -> str | None:
    """The line a run prints when it sizes every model to the fallback budget because it has
    neither `vram_budget_gb` nor a card reading, saying why there is no reading and what to
    set; None when a budget is known, or when there are no roots (a fleet front that serves
    no model of its own)."""
    if settings.vram_budget_gb or card_vram_gb or not settings.roots:
        return None
    if settings.card_vram_gb == 0:
        why = "card_vram_gb: 0 (no card reading) and no vram_budget_gb"
    elif settings.gpus is not None:
        why = "none of the declared `gpus` has 3 GiB or more, and no vram_budget_gb is set"
    else:
        why = ("no GPU found (no NVIDIA or AMD driver answered: NVML, nvidia-smi, rocm-smi, sysfs), "
               "and no vram_budget_gb is set")
    where = os.path.basename(settings.source) or "the settings"
    return (f"{why}: every model is sized to a budget of {DEFAULT_BUDGET_GB:g} GiB. Set `vram_budget_gb` (the GiB "
            f"one model may use) and `card_vram_gb` (the card's total) in {where}, or declare `gpus:`")


def _served_lines(output: str) -> list[str] | None:
    """The live config's lines that are not comments (its `cmd` lines name each served model's
    files); None when there is no config yet."""
    data = read_bytes(output)
    if data is None:
        return None
    text = data.decode("utf-8", "surrogateescape")
    return [line for line in text.splitlines() if not line.lstrip().startswith("#")]


def under(path: str, folders: tuple[str, ...]) -> bool:
    """`path` is one of `folders` or inside one."""
    return any(path == f or path.startswith(f.rstrip(os.sep) + os.sep) for f in folders)


def _serves_from(lines: list[str], folders: tuple[str, ...]) -> bool:
    prefixes = tuple(f.rstrip(os.sep) + os.sep for f in folders)
    return any(p in line for line in lines for p in prefixes)


def _serves_any(lines: list[str]) -> bool:
    """A `models:` map with at least one entry (a generated empty one reads `models: {}`)."""
    text = "\n".join(lines)
    return re.search(r"^models:[ \t]*\n[ \t]+\S", text, re.MULTILINE) is not None


def check_vanished(settings: Settings, model_paths: list[str], unreadable: tuple[tuple[str, str], ...]) -> None:
    """Models the live config serves must not vanish without a word: a root that finds nothing
    while the config serves models from it (an unmounted disk or share, models moved into a
    hidden folder) or a folder that cannot be listed stops the run, unless the settings allow
    it (`allow_vanished_models`). A root that finds nothing otherwise is a warning."""
    lines = None
    fatal, warnings = [], []
    for i, root in enumerate(settings.roots):
        folders = (root, os.path.realpath(root))
        if any(under(path, folders) for path in model_paths):
            continue
        lines = _served_lines(settings.output) if lines is None else lines
        if lines and _serves_from(lines, folders):
            fatal.append(f"roots[{i}]: {root} holds no model swapgen can serve, but {settings.output} serves "
                         "models from it. Is a disk or network share not mounted? Were the models moved into a "
                         "hidden folder (names starting with '.' are not walked)?")
        else:
            warnings.append(f"roots[{i}]: {root} holds no model swapgen can serve (is it mounted? "
                            "folders whose names start with '.' are not walked)")
    for folder, why in unreadable:
        lines = _served_lines(settings.output) if lines is None else lines
        if lines and _serves_from(lines, (folder,)):
            fatal.append(f"{folder}: cannot list this folder ({why}), and {settings.output} serves models from it; "
                         "check its permissions, or whether it is mounted")
    if not model_paths and not fatal:
        lines = _served_lines(settings.output) if lines is None else lines
        if lines and _serves_any(lines):
            fatal.append(f"no model found in any root, but {settings.output} serves models; a config without "
                         "them would unload them all")
    for problem in fatal if settings.allow_vanished_models else ():
        print(f"swapgen: warning: {problem} Their entries leave the config (allow_vanished_models: true).",
              file=sys.stderr)
    for problem in warnings:
        print(f"swapgen: warning: {problem}", file=sys.stderr)
    if fatal and not settings.allow_vanished_models:
        raise SwapgenError("\n".join(fatal) + "\nNothing was written. Set `allow_vanished_models: true` in "
                           f"{settings.source or 'the settings'} to write the config without those models.")


def unmatched_patterns(settings: Settings, models: tuple[ModelRow, ...]) -> list[str]:
    """One line per override or group pattern that matches no model."""
    where = os.path.basename(settings.source) or "settings"
    paths = [row.match_path for row in models]
    problems = []
    for i, ov in enumerate(settings.overrides):
        pattern = glob_pattern(ov.match)
        quant = (ov.quant or "").strip().lower()
        if not any(pattern.match(path) and (not quant or quant == row.quant.lower())
                   for path, row in zip(paths, models, strict=True)):
            problems.append(f"{where}: overrides[{i}] (match {ov.match!r}"
                            + (f", quant {ov.quant!r}" if quant else "") + ") matches no model")
    ids = [row.id for row in models]
    for i, group in enumerate(settings.groups):
        for j, text in enumerate(group.match):
            if not any(glob_pattern(text).match(model_id) for model_id in ids):
                problems.append(f"{where}: groups[{i}].match[{j}] ({text!r}, group {group.name!r}) matches no model id")
    return problems


def backend_warnings(settings: Settings) -> list[str]:
    """One line per backend row whose absolute `path` does not exist (llama-swap could not start
    what it serves; with a `path_map`, backend paths are the container's and not looked for
    here), per row that asks to sleep but is not vLLM's, and what `llama_swap_warnings` says.
    Checked on every run: a binary installed later silences it."""
    problems = []
    for row in () if settings.path_map else settings.backends:
        exe = row.path.strip()
        if os.path.isabs(exe) and not os.path.exists(exe):
            problems.append(f"backend {row.id!r}: {exe} does not exist; llama-swap cannot start the models it serves")
    problems += [f"backend {row.id!r}: sleep applies to vllm rows only (docs/vllm-sleep.md); its models stop as "
                 "usual" for row in settings.backends if row.sleep and engine_of(row.kind) != Engine.VLLM]
    return problems + llama_swap_warnings(settings)


def llama_swap_warnings(settings: Settings) -> list[str]:
    """Secrets written as text, and `health_check_timeout` where a fragment does not write it."""
    where = os.path.basename(settings.source) or "settings"
    problems = []
    if settings.llama_swap:
        from autogen.router.passthrough import plain_text_keys  # noqa: PLC0415 - lazy: only with such keys

        plain = plain_text_keys(settings)
        if plain and settings.source:
            from autogen.settings.structure import settings_error  # noqa: PLC0415 - lazy: only with such keys

            lines = settings_error(settings.source, plain).lines
        else:
            lines = [None] * len(plain)
        problems += [f"{where}:{line}: {p}" if line else f"{where}: {p}" for p, line in zip(plain, lines, strict=True)]
    default = attrs.fields(Settings).health_check_timeout.default
    if settings.output_mode == "fragment" and settings.health_check_timeout != default:
        problems.append(f"{where}: health_check_timeout is not written in output_mode: fragment; set "
                        "healthCheckTimeout in the main llama-swap file (or in `llama_swap:`)")
    return problems
