"""Is an HF model folder whole? Which safetensors files it needs, and whether each is there at
the size its header promises.

The files needed are the ones `model.safetensors.index.json` names (its `weight_map` values),
else every `*.safetensors` in the folder, a `-0000k-of-0000n` set counting all n of its names.
Each must exist and be at least as long as its header says (`safetensors_header`); only the
header is read. A broken symlink (an HF cache snapshot whose blob is gone) or a `*.incomplete`
blob of the repo makes the folder incomplete too, and so does a downloader's control file
beside a weight file (`DOWNLOAD_MARKERS`: the file is preallocated at its full size, so its
size says nothing while it is written). The reason names the files and never the
bytes downloaded so far, so it stays the same while a download grows; the progress is a
`Download` that `swapgen list` shows.
"""

from __future__ import annotations

import os
import re
from collections.abc import Container, Iterable, Mapping, Sequence

from attrs import Factory, define, frozen

from autogen.discovery.rows import Download
from autogen.errors import ModelError
from autogen.metadata.probes import HeaderProbe
from autogen.metadata.safetensors_header import INDEX_NAME, read_weight_index
from autogen.numfmt import gib_text

SAFETENSORS = ".safetensors"
SHARD_NAME = re.compile(r"(?i)^(.*)-(\d{5})-of-(\d{5})\.safetensors$")
#: Files a downloader keeps beside one it is still writing, and removes when it is done:
#: aria2c's control file (`<file>.aria2`) and axel's state file (`<file>.st`). Both allocate the
#: whole file first (aria2c's default `--file-allocation=prealloc`), so a file still being
#: written already has its full size and a whole header.
DOWNLOAD_MARKERS = (".aria2", ".st")
#: Names listed in a reason; the rest are counted ("and 158 more").
SHOWN_NAMES = 4


def names_text(names: Sequence[str]) -> str:
    """"a, b, c" or "a, b, c, d and 3 more"."""
    shown = ", ".join(names[:SHOWN_NAMES])
    return shown + (f" and {len(names) - SHOWN_NAMES} more" if len(names) > SHOWN_NAMES else "")


def still_written(files: Iterable[str], present: Container[str]) -> str | None:
    """Why one of `files` is still being written (a downloader's control file beside it, among
    `present`, which names files as `files` does); None when none is."""
    for file in files:
        for marker in DOWNLOAD_MARKERS:
            if file + marker in present:
                return (f"download in progress: {os.path.basename(file)}{marker} beside "
                        f"{os.path.basename(file)} says its downloader is still writing it")
    return None


def incomplete_text(missing: Sequence[str], short: Sequence[str], total: int, want_bytes: int) -> str:
    """"incomplete download: 2 of 4 files missing (c, d), b cut short (16.07 GiB expected)"."""
    parts = []
    if missing:
        parts.append(f"{len(missing)} of {total} files missing ({names_text(missing)})")
    if short:
        parts.append(f"{names_text(short)} cut short")
    expected = f" ({gib_text(want_bytes)} expected)" if want_bytes else ""
    return f"incomplete download: {', '.join(parts)}{expected}"


@frozen
class WeightCheck:
    """An HF folder's weight files and whether they are whole.

    Example: WeightCheck(files=("/m/Llama/model-00001-of-00004.safetensors", …), have_bytes=9_663_676_416,
    reason="incomplete download: 2 of 4 files missing (…)", download=Download(9_663_676_416, 16_060_522_496),
    index="/m/Llama/model.safetensors.index.json").
    """

    #: The weight files present on disk (paths): what the model is sized from.
    files: tuple[str, ...]
    have_bytes: int
    #: Why the model cannot be served yet; None = whole.
    reason: str | None = None
    #: How far the download has come, when it is incomplete.
    download: Download | None = None
    #: The index file, when there is one (a model input).
    index: str | None = None
    #: The safetensors `__metadata__.format` values of the files ("pt", "mlx", …).
    formats: frozenset[str] = frozenset()


def required_names(folder: str, weights: Sequence[str], broken: Sequence[str],
                   has_index: bool) -> tuple[tuple[str, ...], str | None, int]:
    """(names the model needs, the index error, the index's total tensor bytes)."""
    if has_index:
        try:
            index = read_weight_index(os.path.join(folder, INDEX_NAME))
        except ModelError as exc:
            return (), str(exc), 0
        return index.files, None, index.total_size
    names = set(weights) | {n for n in broken if n.lower().endswith(SAFETENSORS)}
    for name in list(names):
        shard = SHARD_NAME.match(name)
        if shard:
            total = int(shard.group(3))
            names.update(f"{shard.group(1)}-{i:05d}-of-{shard.group(3)}.safetensors" for i in range(1, total + 1))
    return tuple(sorted(names)), None, 0


@define
class _Files:
    """What the weight files named by a folder hold, file by file."""

    files: list[str] = Factory(list)
    missing: list[str] = Factory(list)
    short: list[str] = Factory(list)
    errors: list[str] = Factory(list)
    formats: set[str] = Factory(set)
    have: int = 0
    want: int = 0


def _read_files(folder: str, names: Sequence[str], stats: Mapping[str, os.stat_result], broken: Sequence[str],
                probe: HeaderProbe) -> _Files:
    """Each named weight file: present or missing, its header's expected size, its writer."""
    found = _Files()
    for name in names:
        path = os.path.join(folder, name)
        st = stats.get(name)
        if st is None and "/" in name:  # an index may name a file in a subfolder
            try:
                st = os.stat(path)
            except OSError:
                st = None
        if st is None:
            if name not in broken:
                found.missing.append(name)
            continue
        found.files.append(path)
        found.have += st.st_size
        info = probe(path, st.st_size, st.st_mtime_ns)
        if info.error is not None:
            found.errors.append(info.error)
            continue
        found.want += max(info.expected_size, st.st_size)
        if info.weights_format:
            found.formats.add(info.weights_format)
        if st.st_size < info.expected_size:
            found.short.append(name)
    return found


def check_weights(folder: str, stats: Mapping[str, os.stat_result], broken: Sequence[str], probe: HeaderProbe,
                  incomplete: Sequence[tuple[str, int]] = ()) -> WeightCheck | None:
    """The weight files of the folder and what keeps it from being served; None when it holds
    no weights at all (no index, no `*.safetensors`, no download under way). `stats`: the
    folder's regular files by name; `broken`: names of its broken symlinks; `incomplete`:
    (path, size) of the repo's `*.incomplete` blobs (HF cache only)."""
    weights = [n for n in stats if n.lower().endswith(SAFETENSORS)]
    has_index = INDEX_NAME in stats
    if not has_index and not incomplete and (not any(stats[n].st_size for n in weights)
                                             and not any(n.lower().endswith(SAFETENSORS) for n in broken)):
        return None
    names, index_error, index_total = required_names(folder, weights, broken, has_index)
    index = os.path.join(folder, INDEX_NAME) if has_index else None
    found = _read_files(folder, names, stats, broken, probe)
    files, missing, short, errors, formats = found.files, found.missing, found.short, found.errors, found.formats
    have, want = found.have, found.want
    reasons = [f"broken symlink {name} (its target {_target(folder, name)} is missing)" for name in broken]
    if index_error:
        reasons.append(index_error)
    reasons += errors[:1]
    if missing or short:
        # stable while bytes arrive: the index's total, else the headers' sizes once every file is there
        expected = index_total if index_total else want if not missing else 0
        reasons.append(incomplete_text(missing, short, len(names), expected))
    if (writing := still_written(names, stats)) is not None:
        reasons.append(writing)
    downloading = sum(size for _, size in incomplete)
    if incomplete:
        shown = names_text([os.path.join("blobs", os.path.basename(p)) for p, _ in incomplete])
        reasons.append(f"download in progress or interrupted ({shown}): finish it with `hf download`, "
                       "or delete the .incomplete files")
    if not names and not reasons:
        return None
    reason = "; ".join(reasons) or None
    download = None
    if missing or short or incomplete:
        total = max(index_total, want) if not missing else index_total
        download = Download(have_bytes=have + downloading, want_bytes=total)
    return WeightCheck(files=tuple(files), have_bytes=have, reason=reason, download=download, index=index,
                       formats=frozenset(formats))


def _target(folder: str, name: str) -> str:
    try:
        return os.readlink(os.path.join(folder, name))
    except OSError:
        return "?"
