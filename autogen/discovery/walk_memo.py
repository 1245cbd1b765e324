"""What the walk found in each folder, kept for the next run: a folder whose entries are as they
were is not read again, its record is replayed (`discovery.walk`).

A folder's record is valid while its signature is: every file's name, size, modification
time, inode and mode (a file rewritten in place changes its size or time, a symlink pointed
elsewhere its inode, a `chmod` its mode), every subfolder's name, the entries that could not be
stat'ed with their error and link target, and for a snapshot of the HF cache the downloads
under way in its repo's `blobs/`. What the walk does with a folder depends on that alone, so a
replayed record is exactly what reading the folder again would give; tests change a folder in
every way and compare the result with a cold run.

Some folders are read every time, never replayed: an Ollama store (its manifests live below
folders the walk does not enter), an HF cache repo's `snapshots/` (which revision is served
depends on `refs/main`), and a folder with a problem or a skipped model (an unreadable file, a
download cut short: a skip for a cause is checked again on every run, docs/model-files.md).
"""

from __future__ import annotations

import os

import xxhash
from attrs import field, frozen

from autogen.discovery.hub_cache import hf_cache_repo, incomplete_blobs, is_snapshots_folder
from autogen.discovery.ollama_store import is_store
from autogen.discovery.pairing import DraftFacts
from autogen.discovery.rows import Download, ModelRow
from autogen.discovery.tree import AdapterFile, Folder, Ignored


@frozen
class FolderRecord:
    """Everything the walk found in one folder (`walk._Walker`), and the signature it is valid for."""

    path: str
    signature: str
    rows: tuple[ModelRow, ...] = ()
    #: (st_dev, st_ino) and st_mtime_ns of each row's path, in `rows` order.
    row_keys: tuple[tuple[int, int], ...] = ()
    row_times: tuple[int, ...] = ()
    ignored: tuple[Ignored, ...] = ()
    downloads: tuple[tuple[int, Download], ...] = ()
    adapters: tuple[AdapterFile, ...] = ()
    #: (path, what, reason when no model takes it) of each projector, draft and codec.
    sidecars: tuple[tuple[str, str, str], ...] = ()
    #: Per row (in `rows` order): whether its metadata is an HF config.json (True) or a GGUF
    #: header, None when the walk kept none (read again from the metadata cache when asked).
    metas: tuple[bool | None, ...] = ()
    #: Per row: what draft pairing reads of it (None: no metadata).
    facts: tuple[DraftFacts | None, ...] = ()
    #: The subfolders walked next, by name.
    walked: tuple[str, ...] = ()


@frozen
class WalkMemo:
    """The records of the last walk, by folder path."""

    folders: dict[str, FolderRecord] = field(factory=dict)


def signature(folder: Folder) -> str:
    """The digest a folder's record is valid for (module docstring)."""
    parts = [f"{e.name}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ino}\0{st.st_mode}\n" for e, st in folder.files]
    parts += [f"{e.name}\0dir\0{st.st_ino}\n" for e, st in folder.folders]
    parts += [f"{e.name}\0skipped\n" for e in folder.skipped]
    parts += [f"{e.name}\0error\0{exc.errno}\0{_link(e.path)}\n" for e, exc in folder.failed]
    if hf_cache_repo(folder.path):
        parts += [f"{path}\0incomplete\0{size}\n" for path, size in incomplete_blobs(folder.path)]
    return xxhash.xxh3_128_hexdigest("".join(parts).encode("utf-8", "surrogatepass"))


def replayable(folder: Folder) -> bool:
    """Whether a folder's record may be kept for the next run, as far as its entries tell
    (module docstring): not an Ollama store, not an HF cache repo's `snapshots/`. Ask before
    the walk reads it (reading drops a store's folders from the walk)."""
    return not (is_snapshots_folder(folder.path) or _has_store(folder))


def _has_store(folder: Folder) -> bool:
    return is_store({entry.name for entry, _ in folder.folders})


def _link(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return ""
