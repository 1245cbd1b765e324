"""`swapgen doctor`: what is missing to serve each library (one settings file, or each host of a
fleet and its front), before a run finds out one model at a time.

Three things a library needs: roots that hold models, a VRAM budget (set, or read from the
GPUs), and the engines its models resolve to, installed where this shell finds them. Each check
prints one line, `ok`, `empty` or `missing`; the exit status is 1 when any line is not `ok`.
Nothing is written but the metadata cache a run would write too.
"""

from __future__ import annotations

import os
import shutil

import attrs
from attrs import frozen

from autogen.commands.checks import no_budget, under
from autogen.commands.library import Library
from autogen.emit.dispatch import folder_unloadable
from autogen.numfmt import counted, format_g
from autogen.resolve.backends import legacy_exes
from autogen.resolve.gpus import card_vram_gb
from autogen.resolve.nodes import Fleet, fleet_of
from autogen.settings.fleet import load_hosts
from autogen.settings.load import load_settings
from autogen.settings.schema import Settings

#: How many model ids a line names before "…".
SHOWN_IDS = 3


@frozen
class Finding:
    """One check's result. Example: Finding("missing", "engine vllm", "`vllm` is not on PATH")."""

    #: "ok", "empty" (roots) or "missing".
    status: str
    subject: str
    detail: str

    def __str__(self) -> str:
        return f"  {self.status:<8} {self.subject}: {self.detail}"


def _ids(ids: list[str]) -> str:
    return ", ".join(ids[:SHOWN_IDS]) + (", …" if len(ids) > SHOWN_IDS else "")


def _roots(settings: Settings, library: Library | None) -> list[Finding]:
    findings = []
    for root in settings.roots:
        shown = os.path.normpath(root)
        if not os.path.isdir(root) or not os.access(root, os.R_OK | os.X_OK):
            findings.append(Finding("missing", f"root {shown}", "does not exist or cannot be listed"))
            continue
        folders = (root, os.path.realpath(root))
        n = sum(1 for row in library.discovery.models if under(row.path, folders)) if library else 0
        findings.append(Finding("ok", f"root {shown}", counted(n, "model")) if n else
                        Finding("empty", f"root {shown}", "holds no model swapgen can serve (`swapgen list` shows "
                                "what it found and ignored)"))
    return findings


def _budget(settings: Settings) -> Finding:
    card = card_vram_gb(settings)
    if (why := no_budget(settings, card)) is not None:
        return Finding("missing", "budget", why)
    if settings.vram_budget_gb:
        return Finding("ok", "budget", f"{format_g(settings.vram_budget_gb)} GiB per model (vram_budget_gb)")
    return Finding("ok", "budget", f"{format_g(round(card, 1))} GiB per model (the GPUs' total; vram_budget_gb "
                                   "sets less)")


def _detect_hint(settings: Settings) -> str:
    """How `swapgen backends detect` applies here: it writes `backends_file`, which a starter file
    does not set."""
    return ("run `swapgen backends detect`" if settings.backends_file
            else "set `backends_file: backends.yaml` and run `swapgen backends detect`")


def _engine(settings: Settings, backend_id: str | None, exe: str, ids: list[str]) -> Finding:
    """One engine: a registry row (`backend_id`), or the exe models fall back to without one (None)."""
    where = shutil.which(exe)
    subject = f"engine {backend_id}" if backend_id is not None else f"engine {os.path.basename(exe)} (no backend row)"
    serves = f"{counted(len(ids), 'model')} ({_ids(ids)})" if ids else "no model yet"
    if where:
        return Finding("ok", subject, f"{where} serves {serves}")
    what = "does not exist or is not executable" if os.sep in exe else "is not on PATH"
    fix = "fix the row's path" if backend_id is not None else "add its row to `backends:`"
    return Finding("missing", subject, f"{exe} {what}; it would serve {serves}. Install it, {fix}, or "
                   f"{_detect_hint(settings)}")


def _engines(settings: Settings, library: Library | None) -> list[Finding]:
    """Each registry row, and each legacy exe a model falls back to, found on PATH or not (with
    the models it serves); safetensors folders that no vLLM row can take. With no row and no
    model yet, whether llama-server is found: the first model will need it."""
    users: dict[tuple[str | None, str], list[str]] = {(row.id, row.path.strip()): [] for row in settings.backends}
    need_vllm = []
    for job in library.jobs if library is not None else ():
        if folder_unloadable(job):
            need_vllm.append(job.row.id)
        elif job.backend is not None and job.error is None:
            row_id = job.backend.row.id if job.backend.row is not None else None
            users.setdefault((row_id, job.backend.exe), []).append(job.row.id)
    if not users:
        users[(None, legacy_exes(settings)["server_exe"])] = []
    findings = [_engine(settings, backend_id, exe, ids) for (backend_id, exe), ids in users.items()]
    if need_vllm:
        findings.append(Finding("missing", "engine vllm", f"no backend row of kind vllm to serve "
                                f"{counted(len(need_vllm), 'safetensors folder')} ({_ids(need_vllm)}). "
                                f"Install vLLM and add its row (or {_detect_hint(settings)})"))
    return findings


def diagnose(settings: Settings, fleet: Fleet | None = None) -> list[Finding]:
    """The findings for one library; a missing root is reported, the others are still read."""
    present = tuple(r for r in settings.roots if os.path.isdir(r) and os.access(r, os.R_OK | os.X_OK))
    library = Library.discover(attrs.evolve(settings, roots=present), card_vram_gb(settings), fleet) \
        if present else None
    findings = [*_roots(settings, library), _budget(settings), *_engines(settings, library)]
    if library is not None:
        skipped = [job.row.id for job in library.jobs if job.error is not None]
        if skipped:
            findings.append(Finding("ok", "models", f"{counted(len(skipped), 'model')} skipped when read "
                                    f"({_ids(skipped)}): `swapgen list` says why"))
    return findings


def main_doctor(settings_path: str | None) -> int:
    """`swapgen doctor`: one block per library; exit 1 when something is missing."""
    settings = load_settings(settings_path)
    hosts = load_hosts(settings) if settings.hosts else ()
    known = {fh.host.name: (fh.host, fh.settings) for fh in hosts}
    libraries = [(f"{fh.host.name}: {fh.settings.source}", fh.settings, fleet_of(fh.host.name, known))
                 for fh in hosts]
    if settings.roots or not hosts:
        libraries.append((settings.source, settings, None))
    problems = 0
    for title, host_settings, fleet in libraries:
        findings = diagnose(host_settings, fleet)
        print(title)
        for finding in findings:
            print(finding)
        problems += sum(1 for f in findings if f.status != "ok")
    print(f"{counted(problems, 'thing')} missing" if problems else "nothing missing: `swapgen` writes the config")
    return 1 if problems else 0
