"""llama-swap's `-config` plus `-config-dir`, merged as llama-swap merges them and checked as one
config (mostlygeek/llama-swap `internal/config/merge.go`, v230 and later).

The main file comes first, then every `*.yml` / `*.yaml` directly in the folder in name order.
Each file has its `${env.X}` substituted before it is parsed. Mappings merge key by key, lists
concatenate, a scalar two files write differently (its text or its tag: `0x8` is not `8`) is
refused (an empty null yields to a value; `~` is compared as text), and in
the identity maps (`models`, `groups`, `profiles`, `selectors`, `peers`, `matrix` and the
routing block's `groups` / `matrix`) an id two files define is refused. The merged document
then goes through the same checks as one file (`validate.check_document`); every problem
names the file and line it comes from.
"""

from __future__ import annotations

import os
import sys

from autogen.router.llamaswap_schema import ERROR, show
from autogen.router.validate import Problem, check_document, failed, parse_document, read_config, verdict
from autogen.router.yamllines import LineMap, LineSeq

#: merge.go `identityMapPaths`: their children are entities, and one defined twice is an error.
IDENTITY_MAPS = frozenset({"models", "groups", "profiles", "selectors", "peers", "matrix",
                           "routing.router.settings.groups", "routing.router.settings.matrix"})
#: Lines of the merged document are `file index × SPAN + line`, so a problem found after the
#: merge still names its file.
SPAN = 1 << 32


class MergedReport:
    """Problems of several files; a line number carries its file (`SPAN`)."""

    def __init__(self, sources: list[str], folder: str):
        self.sources = sources
        #: Named by a problem of the merged document that no file has (an empty folder's).
        self.folder = folder
        self.problems: list[Problem] = []
        #: `(id(mapping), key) → (text, tag)` of the scalars of every file's mappings
        #: (`yamllines.Converter`): merge.go compares two scalars by their text and tag.
        self.scalars: dict = {}
        #: Every file's document, alive until the merge is done (`scalars` is keyed by id).
        self.documents: list = []

    def add(self, line: int | None, message: str, severity: str = ERROR) -> None:
        index, at = divmod(line, SPAN) if line is not None else (0, None)
        source = self.sources[index] if index < len(self.sources) else self.folder
        self.problems.append(Problem(at or None, message, source, severity))


def config_dir_files(folder: str) -> list[str]:
    """merge.go `listYAMLFiles`: the folder's own `*.yml` / `*.yaml` files, sorted by path."""
    names = sorted(e.name for e in os.scandir(folder) if not e.is_dir() and e.name.endswith((".yml", ".yaml")))
    return [os.path.join(folder, name) for name in names]


def _numbered(value, offset: int):
    """`value` with every line number moved into its file's range."""
    if isinstance(value, LineMap):
        value.lines = {k: (n + offset if n is not None else None) for k, n in value.lines.items()}
        for item in value.values():
            _numbered(item, offset)
    elif isinstance(value, LineSeq):
        value.lines = [n + offset if n is not None else None for n in value.lines]
        for item in value:
            _numbered(item, offset)
    return value


def _merge_maps(dst: LineMap, src: LineMap, path: str, source: str, report: MergedReport) -> None:
    """mergeNodes: shared keys merge (identity maps refuse a shared child), src-only keys join."""
    for key, value in src.items():
        child = f"{path}.{key}" if path else key
        line = src.lines[key]
        scalars = report.scalars
        if key not in dst:
            dst[key], dst.lines[key] = value, line
            scalars[id(dst), key] = scalars.get((id(src), key))
        elif child in IDENTITY_MAPS:
            _merge_identity(dst[key], value, child, key, source, line, report)
        else:
            raw = (scalars.get((id(dst), key)), scalars.get((id(src), key)))
            dst[key] = _merge_value(dst[key], value, child, source, line, report, raw)
            if dst[key] is value:
                scalars[id(dst), key] = raw[1]


def _merge_identity(dst, src, path: str, name: str, source: str, line, report: MergedReport) -> None:
    """mergeIdentityMap: an id both sides define is a duplicate entity."""
    if not isinstance(dst, LineMap) or not isinstance(src, LineMap):
        report.add(line, f'conflict at "{path}": expected a mapping, introduced by {source}')
        return
    for key, value in src.items():
        if key in dst:
            why = f"found in {source} (already defined in another config source)"
            report.add(src.lines[key], f'duplicate {name} "{key}" {why}')
        else:
            dst[key], dst.lines[key] = value, src.lines[key]


def _is_null(value, raw) -> bool:
    """merge.go `isNullScalar`: only an empty null yields (`~` and `null` are compared as text)."""
    return value is None and (raw is None or raw[0] == "")


def _merge_value(dst, src, path: str, source: str, line, report: MergedReport, raw=(None, None)):
    """mergeValue: the merged value of one shared key. `raw`: the (text, tag) of each side when
    it is a scalar of a file (None when not known)."""
    if isinstance(dst, LineMap) and isinstance(src, LineMap):
        _merge_maps(dst, src, path, source, report)
        return dst
    if isinstance(dst, LineSeq) and isinstance(src, LineSeq):
        dst.extend(src)
        dst.lines = [*dst.lines, *src.lines]
        return dst
    if _is_null(dst, raw[0]):
        return src
    if _is_null(src, raw[1]):
        return dst
    if isinstance(dst, (LineMap, LineSeq)) or isinstance(src, (LineMap, LineSeq)):
        why = f"incompatible YAML node kinds ({show(dst)} vs {show(src)})"
        report.add(line, f'conflict at "{path}": {why} introduced by {source}')
    elif raw[0] is not None and raw[1] is not None:
        if raw[0] != raw[1]:  # merge.go: same Value and Tag, or a conflict (`0x8` is not `8`)
            # equal values written differently: show the texts and tags that differ
            before, here = (show(dst), show(src)) if dst != src else (" ".join(raw[0]), " ".join(raw[1]))
            report.add(line, f'conflict at "{path}": {source} sets a different value than a previous source '
                             f"({before} before, {here} here)")
    elif type(dst) is not type(src) or dst != src:
        report.add(line, f'conflict at "{path}": {source} sets a different value than a previous source '
                         f"({show(dst)} before, {show(src)} here)")
    return dst


def validate_sources(main: str | None, folder: str | None) -> tuple[list[Problem], LineMap | None]:
    """Every reason llama-swap would refuse `-config main -config-dir folder` (either may be
    None); the merged document when it could be built."""
    sources = [main] if main else []
    if folder:
        try:
            files = config_dir_files(folder)
        except OSError as exc:
            return [Problem(None, f"-config-dir: cannot list ({exc.strerror or exc})", folder)], None
        if main and any(os.path.abspath(f) == os.path.abspath(main) for f in files):
            why = f"-config path {main} is also present in -config-dir {folder}; remove it from one"
            return [Problem(None, why, main)], None
        sources += files
    report = MergedReport(sources, folder or main or "")
    merged: LineMap | None = None
    for index, path in enumerate(sources):
        text, problem = read_config(path)
        if problem is not None:
            report.problems.append(problem)
            continue
        one = _FileReport(path, report)
        doc = parse_document(text, one, report.scalars)
        report.documents.append(doc)
        if doc is None or doc is False:
            continue  # an empty file adds nothing; one that does not parse is already reported
        if not isinstance(doc, LineMap):
            report.problems.append(Problem(1, "top-level YAML must be a mapping", path))
            continue
        doc = _numbered(doc, index * SPAN)
        if merged is None:
            merged = doc
        else:
            _merge_maps(merged, doc, "", path, report)
    merged = merged if merged is not None else LineMap()  # only empty files: llama-swap's defaults
    if not any(p.fatal for p in report.problems):
        check_document(merged, report)
    return sorted(report.problems, key=lambda p: (p.source, p.line or 0)), merged


class _FileReport:
    """One file's problems before the merge (its own line numbers) into the merged report."""

    def __init__(self, source: str, into: MergedReport):
        self.source = source
        self.into = into

    def add(self, line: int | None, message: str, severity: str = ERROR) -> None:
        self.into.problems.append(Problem(line, message, self.source, severity))


def main_validate_merged(main: str | None, folder: str) -> int:
    """`swapgen validate [FILE] --config-dir DIR`: the merged config's problems, exit 1 on an
    error; else a summary, exit 0."""
    problems, doc = validate_sources(main, folder)
    for p in problems:
        print(p)
    where = f"{main} + {folder}" if main else folder
    if failed(problems) or doc is None:
        sys.stdout.flush()
        return 1
    print(verdict(where, problems, doc, "valid llama-swap config once merged"))
    sys.stdout.flush()
    return 0
