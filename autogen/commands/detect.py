"""`swapgen backends detect`: find installed engines, read their versions, write `backends_file`.

Where it looks, in this order (the first path to a binary names its row; a binary reached
twice, e.g. through a symlink, is one row, compared by resolved real path):

1. the paths of the managed rows already in `backends_file`, so a row stays put while its
   binary exists whatever PATH the run sees (pre-commit's PATH is not your shell's);
2. every folder on $PATH;
3. `~/.local/bin` (pip --user, pipx, uv tool), `/usr/local/bin` (make install), `/opt/*/bin` and
   `/opt/*/build/bin` (release bundles), `~/*/build/bin` (a CMake build of a source checkout,
   e.g. `~/llama.cpp/build/bin`);
4. `bin/vllm` of each venv listed in the settings key `backend_venvs`.

`~/.cache` is not searched: llama.cpp's folder there holds downloaded models, not binaries, and
pipx / uv keep their venvs elsewhere but link the entry points into `~/.local/bin`.

Version: `<exe> --version`, stdout and stderr together, all probes in parallel, each killed
(with its whole process group) after `PROBE_TIMEOUT` s; a failure leaves "" and a note. What each
engine is asked and how its answer and its files are read (version, build, and which engine a
shared binary name is) is its row's probe (`EngineRow.probe`, in `figures.probes`).

Only rows with `managed: true` are ours: rows in `backends:` and unmanaged rows of the file are
never changed. A known binary keeps its row's id and ★ (a probe that fails keeps the row's last
version and build); a new row gets the ★ only when no row of the file serves its roles yet
(`role_taken`); a row whose binary is gone is dropped. The settings' `backends:` rows are not
read once the file has rows, so they neither take ids nor hold ★s here.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import os
import signal
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import attrs
from attrs import frozen

from autogen.engines import ENGINES, Engine, engine_of, engine_row, imported
from autogen.errors import SettingsError, SwapgenError
from autogen.fsutil import read_bytes, write_if_changed
from autogen.numfmt import counted
from autogen.resolve.backends import role_taken
from autogen.settings.fields import key_of
from autogen.settings.load import find_settings, load_backends_file, load_settings
from autogen.settings.owned import BACKENDS_MARK, replace_problem
from autogen.settings.schema import BackendRow, Settings
from autogen.settings.structure import read_yaml, structure, unstructure

PROBE_TIMEOUT = 10.0

#: Executable name → engine (`EngineRow.binaries`; docs/maintainers/backends.md#legacy-exes for the legacy names).
BINARIES: dict[str, Engine] = {name: engine for engine, row in ENGINES.items() for name in row.binaries}

#: Engine → the project a row's `component` names (`EngineRow.component`).
COMPONENTS: dict[Engine, str] = {engine: row.component for engine, row in ENGINES.items() if row.component}

#: Fixed places besides $PATH (globs; `~` is $HOME). Tests replace this tuple.
SYSTEM_PLACES: tuple[str, ...] = ("~/.local/bin", "/usr/local/bin", "/opt/*/bin", "/opt/*/build/bin", "~/*/build/bin")

#: Its first line marks the file as detect's to rewrite (`settings.owned.BACKENDS_MARK`).
FILE_HEADER = (
    f"{BACKENDS_MARK.prefix}rows with `managed: true` are {BACKENDS_MARK.suffix}\n"
    "# Rows without `managed: true` are kept as they are: add your own here. While this file has\n"
    "# rows, the settings file's `backends:` list is not read.\n")


@frozen
class Found:
    """One installed engine binary after probing.

    Example: Found(path="/usr/local/bin/llama-server", real="/opt/llama/bin/llama-server",
    engine="llama", version="b11434", build="cuda").
    """

    #: As found (the symlink a user runs), or the managed row's own path.
    path: str
    #: `os.path.realpath(path)`: the identity used to de-duplicate and match rows.
    real: str
    engine: str
    version: str = ""
    build: str = ""


@frozen
class Change:
    """What detect writes and how it differs from the file it read."""

    #: The file's rows in write order: unmanaged rows as read, then managed rows by id.
    rows: tuple[BackendRow, ...]
    added: tuple[BackendRow, ...]
    dropped: tuple[BackendRow, ...]
    #: One line per kept row whose version or build changed ("llama-cuda: version b1 → b2"), by
    #: settings key.
    updated: tuple[str, ...]


# ---------------------------------------------------------------------------------------------
# finding


def search_dirs(path_env: str, venvs: tuple[str, ...]) -> list[str]:
    """Folders to look in, in order, without repeats (module docstring)."""
    dirs = [d for d in path_env.split(os.pathsep) if d]
    for place in SYSTEM_PLACES:
        dirs += sorted(glob.glob(os.path.expanduser(place)))
    dirs += [os.path.join(v, "bin") for v in venvs]
    return list(dict.fromkeys(os.path.abspath(d) for d in dirs))


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def find_binaries(known: list[tuple[str, str]], dirs: list[str]) -> list[tuple[str, str, str]]:
    """(path, real path, engine) per binary; `known` (path, engine) pairs come first."""
    wanted = list(known)
    for folder in dirs:
        wanted += [(os.path.join(folder, name), engine.value) for name, engine in BINARIES.items()]
    out, seen = [], set()
    for path, engine in wanted:
        if not _executable(path):
            continue
        real = os.path.realpath(path)
        if real not in seen:
            seen.add(real)
            out.append((path, real, engine))
    return out


# ---------------------------------------------------------------------------------------------
# probing


def run_probe(argv: list[str], timeout: float) -> tuple[int | None, str]:
    """(exit code, stdout+stderr); (None, "") when it did not finish within `timeout` s.

    The whole process group is killed: a wrapper script's children would otherwise keep the
    pipe open and the read would never end.
    """
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True)
    except OSError as exc:
        return -1, str(exc)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):  # it ended just now
            os.killpg(proc.pid, signal.SIGKILL)
        proc.stdout.close()
        proc.wait()
        return None, ""
    return proc.returncode, out.decode("utf-8", "replace")


def _probe(path: str, real: str, engine: str, timeout: float) -> tuple[Found, list[str]]:
    notes: list[str] = []

    def ask(flag: str, quiet: bool = False) -> tuple[bool, str]:
        code, text = run_probe([path, flag], timeout)
        if code is None:
            notes.append(f"{path}: `{flag}` gave no answer within {timeout:g} s (stopped it)")
        elif code != 0 and not quiet:
            first = text.strip().splitlines()[0][:120] if text.strip() else "no output"
            notes.append(f"{path}: `{flag}` failed (exit {code}): {first}")
        return code == 0, text

    probed = imported(engine_row(engine).probe)(ask, path, real)
    if probed.answered and not probed.version:
        notes.append(f"{path}: no version in its `--version` answer")
    return Found(path=path, real=real, engine=probed.engine or engine, version=probed.version,
                 build=probed.build), notes


def probe_all(binaries: list[tuple[str, str, str]], timeout: float) -> tuple[list[Found], list[str]]:
    """Probe every binary in parallel; results in input order."""
    if not binaries:
        return [], []
    with ThreadPoolExecutor(max_workers=min(8, len(binaries))) as pool:
        results = list(pool.map(lambda b: _probe(*b, timeout), binaries))
    return [f for f, _ in results], [n for _, notes in results for n in notes]


# ---------------------------------------------------------------------------------------------
# planning (pure)


def _is_ours(row: BackendRow) -> bool:
    return row.managed and engine_of(row.kind) in COMPONENTS


def _base_id(found: Found) -> str:
    suffix = found.build if found.build and engine_row(found.engine).build_in_id else ""
    return f"{found.engine}-{suffix}" if suffix else found.engine


def _unique(base: str, taken: set[str]) -> str:
    n, candidate = 1, base
    while candidate in taken:
        n += 1
        candidate = f"{base}-{n}"
    taken.add(candidate)
    return candidate


def plan(found: list[Found], file_rows: tuple[BackendRow, ...]) -> Change:
    """The new file rows from what was found and the file's current rows. The settings' own
    `backends:` rows take no part: once the file has a row they are not read at all, so an id
    or a ★ of theirs would only rename a found engine (`llama-cpu-2`) or leave its class
    without a ★."""
    foreign = [r for r in file_rows if not _is_ours(r)]
    by_real = {f.real: f for f in found}
    kept, dropped, updated = [], [], []
    for row in (r for r in file_rows if _is_ours(r)):
        f = by_real.pop(os.path.realpath(row.path.strip()), None)
        if f is None:
            dropped.append(row)
            continue
        new = attrs.evolve(row, kind=f.engine, component=COMPONENTS[Engine(f.engine)],
                           version=f.version or row.version, build=f.build or row.build)
        for name, key in (("version", "version"), ("build", "variant")):
            if getattr(new, name) != getattr(row, name):
                updated.append(f"{row.id}: {key} {getattr(row, name) or '-'} → {getattr(new, name)}")
        kept.append(new)
    context = [*foreign, *kept]
    taken = {r.id for r in context}
    added = []
    # GPU builds first, so a role's first ★ goes to one, and a fork after the engine it forks
    # (`EngineRow.star_second`); then by path, for stable ids.
    for f in sorted(by_real.values(),
                    key=lambda f: (engine_row(f.engine).star_second, f.engine, f.build in ("", "cpu"), f.real)):
        row = BackendRow(id=_unique(_base_id(f), taken), kind=f.engine, path=f.path,
                         default=not role_taken(context, f.engine), version=f.version, managed=True,
                         component=COMPONENTS[Engine(f.engine)], build=f.build)
        context.append(row)
        added.append(row)
    managed = sorted([*kept, *added], key=lambda r: r.id)
    return Change(rows=(*foreign, *managed), added=tuple(added), dropped=tuple(dropped), updated=tuple(updated))


def _scalar(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value, ensure_ascii=False)


def render(rows: tuple[BackendRow, ...]) -> bytes:
    """The backends file, by hand for byte stability: fields in class order under their settings
    keys, defaults left out."""
    if not rows:
        return (FILE_HEADER + "[]\n").encode()
    lines = [FILE_HEADER.rstrip("\n")]
    for row in rows:
        fields = [a for a in attrs.fields(BackendRow)
                  if a.name in ("id", "kind", "path") or getattr(row, a.name) != a.default]
        for i, a in enumerate(fields):
            lines.append(f"{'- ' if i == 0 else '  '}{key_of(a)}: {_scalar(getattr(row, a.name))}")
    return ("\n".join(lines) + "\n").encode()


# ---------------------------------------------------------------------------------------------
# command


def _manual_rows(settings: Settings) -> tuple[BackendRow, ...]:
    """The settings file's own `backends:` (load_settings replaced them with the file's rows)."""
    data = read_yaml(find_settings(settings.source)) or {}
    return structure(data, Settings, settings.source).backends


#: How to go on when `backends_file` names a file detect did not write.
_HAND_WRITTEN = ("detect rewrites the whole file; move it away and run detect again, and put rows of yours under "
                 "`backends:` in the settings or into the new file below its header")


def detect(settings: Settings, *, dry_run: bool = False, timeout: float = PROBE_TIMEOUT) -> dict:
    """Find, probe, plan and (unless `dry_run`) write; returns the report `--json` prints."""
    if settings.path_map:
        raise SwapgenError(
            f"{settings.source}: path_map is set, so backend paths are the executables as the container sees them; "
            "detect finds and probes the host's engines and cannot check those. Write the rows under `backends:` "
            "by hand (docs/containers-and-watch.md)")
    if not settings.backends_file:
        raise SettingsError(settings.source, [
            "backends_file: required by `swapgen backends detect`, which writes its rows there "
            "(hint: add `backends_file: backends.yaml`)"])
    target = Path(settings.backends_file)
    refused = replace_problem("backends_file", str(target), (BACKENDS_MARK,), _HAND_WRITTEN)
    if refused:
        raise SwapgenError(f"{settings.source}: {refused}")
    file_rows = load_backends_file(target) if target.exists() else ()
    known = [(r.path.strip(), engine_of(r.kind)) for r in file_rows if _is_ours(r)]
    binaries = find_binaries(known, search_dirs(os.environ.get("PATH", ""), settings.backend_venvs))
    found, notes = probe_all(binaries, timeout)
    change = plan(found, file_rows)
    data = render(change.rows)
    existed = target.exists()
    changed = read_bytes(str(target)) != data
    written = write_if_changed(str(target), data) if not dry_run else False
    manual = _manual_rows(settings)
    if manual and any(r.managed for r in change.rows):
        gone = [r.id for r in manual if r.id not in {row.id for row in change.rows}]
        notes.append(f"rows in {target.name} replace the {counted(len(manual), 'row')} under `backends:` when "
                     "settings load (docs/settings.md: `backends_file`)"
                     + (f": pins to {', '.join(gone)} then name no row (a settings error until they name one)"
                        if gone else ""))
    return {
        "file": str(target),
        "rows": [unstructure(r) for r in change.rows if r.managed],
        "added": [r.id for r in change.added],
        "dropped": [{"id": r.id, "path": r.path} for r in change.dropped],
        "updated": list(change.updated),
        "existed": existed,
        "changed": changed,
        "written": written,
        "dry_run": dry_run,
        "notes": notes,
    }


def format_report(report: dict) -> str:
    """One line per managed row (★, id, kind, version, build, path), then what changed."""
    lines = []
    for r in report["rows"]:
        star = "★" if r["default"] else " "
        lines.append(f"{star} {r['id']:<16} {r['kind']:<9} {r['version'] or '-':<10} "
                     f"{r['variant'] or '-':<7} {r['path']}")
    if not lines:
        lines.append("no engines found (searched $PATH, " + ", ".join(SYSTEM_PLACES) + ", backend_venvs)")
    lines += [f"added: {i}" for i in report["added"]]
    lines += [f"dropped: {d['id']} ({d['path']} is gone)" for d in report["dropped"]]
    lines += [f"updated: {u}" for u in report["updated"]]
    lines += [f"note: {n}" for n in report["notes"]]
    name = report["file"]
    if report["dry_run"]:
        would = "rewritten" if report["existed"] else "written"
        lines.append(f"dry run: {name} would be {would if report['changed'] else 'left unchanged'}")
    else:
        lines.append(f"wrote {name}" if report["written"] else f"{name} unchanged")
    return "\n".join(lines) + "\n"


def main_backends(settings_path: str | None, args: list[str]) -> int:
    """`swapgen backends detect [--dry-run] [--json]`."""
    parser = argparse.ArgumentParser(prog="swapgen backends", description="Manage the backend registry.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="detect")
    cmd = sub.add_parser("detect", help="find installed engines and write backends_file")
    cmd.add_argument("--dry-run", action="store_true", help="print what would change, write nothing")
    cmd.add_argument("--json", action="store_true", help="print the report as JSON")
    opts = parser.parse_args(args)
    report = detect(load_settings(settings_path, check_pins=False), dry_run=opts.dry_run)
    print(json.dumps(report, indent=2, ensure_ascii=False) if opts.json else format_report(report).rstrip("\n"))
    return 0
