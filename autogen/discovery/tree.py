"""What a walk of the roots can see and what it returns: the one tree iterator (`folders`: the
folders discovery enters, `skipped_folder` those it never enters), which both the walk and the
signature of every entry it would visit (`walk_signature`, a no-op run's whole look at the roots)
go through, and the `Discovery` record.

Kept apart from the walker (`discovery.walk`), which reads headers and pairs files, so that a
run served from the load memo imports none of that.
"""

from __future__ import annotations

import operator
import os
import stat as statmod
from collections.abc import Iterator

import xxhash
from attrs import field, frozen

from autogen.discovery.hub_cache import incomplete_in
from autogen.discovery.ledger import Ledger
from autogen.discovery.rows import Download, ModelRow

#: Ollama's home folder: the one hidden folder discovery walks (its `models/` is the store).
OLLAMA_HOME = ".ollama"


@frozen
class Ignored:
    """A file or folder that is not a model of its own (shown by `swapgen list`): a reason
    that names what it is. `attached`: it serves a model all the same (a projector, a draft,
    a LoRA adapter offered as a profile), so the listing says so instead of "ignored"."""

    path: str
    reason: str
    attached: bool = False


@frozen
class AdapterFile:
    """A LoRA adapter found by the walk, waiting for its base (`discovery.pairing`): a GGUF
    (`general.type` adapter) or a PEFT folder (`adapter_config.json` + weights).

    Example: AdapterFile(path="/m/loras/sql-lora", kind="peft", size_bytes=33_571_000,
    base_name="meta-llama/Llama-3.1-8B-Instruct", rank=16).
    """

    path: str
    #: "gguf" or "peft".
    kind: str
    size_bytes: int
    #: PEFT: `base_model_name_or_path` of adapter_config.json; GGUF: read from its header later.
    base_name: str = ""
    rank: int = 0
    #: (st_dev, st_ino, st_mtime_ns) of the file (a PEFT folder's weights): what the id ledger
    #: tells a renamed adapter by, as it does a model (`ledger.Ledger`).
    key: tuple[int, int, int] = (0, 0, 0)


@frozen
class Discovery:
    models: tuple[ModelRow, ...]
    #: Files and folders that are not models of their own, each with what it is; informational.
    ignored: tuple[Ignored, ...] = ()
    #: Unreadable folders, symlink loops, missing roots: reported, never fatal.
    problems: tuple[str, ...] = ()
    #: (folder, why) per folder that could not be listed: its models, if any, are unknown.
    unreadable: tuple[tuple[str, str], ...] = ()
    #: Per-model reasons found while discovering (missing shard, bad config.json, incomplete
    #: download, unreadable header); keyed by model id, becomes a SKIPPED line.
    row_errors: dict[str, str] = field(factory=dict, hash=False)
    #: How far each incomplete download has come, keyed by model id (`swapgen list` shows it).
    downloads: dict[str, Download] = field(factory=dict, hash=False)
    #: LoRA adapters found, for `discovery.pairing` to offer on their bases.
    adapters: tuple[AdapterFile, ...] = ()
    #: The ids given this run (path → id, device, inode), the next run's `Ledger`.
    ledger: Ledger = field(factory=Ledger, hash=False)
    #: One line per file whose id changed since the previous run (`ledger.id_changes`).
    id_changes: tuple[str, ...] = ()


def skipped_folder(name: str, parent: str) -> bool:
    """Folders discovery never enters: hidden ones but Ollama's home `.ollama` (its `models/` is
    a store), and the HF cache's `blobs/` (its files are reached through the snapshots' symlinks)."""
    return ((name.startswith(".") and name != OLLAMA_HOME)
            or (name == "blobs" and os.path.basename(parent).startswith("models--")))


def root_folder(root: str) -> str:
    """The folder a root is walked as: a symlinked root is followed once, to its target."""
    return os.path.realpath(root) if os.path.islink(root) else root


_NAME = operator.attrgetter("name")
#: A folder entry with its stat (symlinks followed).
Stat = tuple[os.DirEntry, os.stat_result]


class Folder:
    """One folder as discovery sees it (`folders`): its regular files and the subfolders it enters,
    each in name order with its stat (symlinks followed), the subfolders it does not enter
    (`skipped_folder`) and the entries it cannot stat. `error`: the folder itself could not be
    read (`stage` "read") or listed ("list"); `again`: it was met before, as one of the folders
    being walked ("loop") or elsewhere ("seen"). A consumer may drop items of `folders` to leave
    them unwalked, as with `os.walk`."""

    __slots__ = ("again", "error", "failed", "files", "folders", "path", "skipped", "st", "stage")

    def __init__(self, path: str, st: os.stat_result | None, *, error: OSError | None = None, stage: str = "",
                 again: str = ""):
        self.path, self.st, self.error, self.stage, self.again = path, st, error, stage, again
        self.files: list[Stat] = []
        self.folders: list[Stat] = []
        self.skipped: list[os.DirEntry] = []
        self.failed: list[tuple[os.DirEntry, OSError]] = []

    @property
    def key(self) -> tuple[int, int]:
        assert self.st is not None
        return self.st.st_dev, self.st.st_ino


def folders(top: str, visited: set[tuple[int, int]]) -> Iterator[Folder]:
    """Every folder under `top` that discovery enters, depth first, each folder once (`visited`
    holds the folders met, shared over the roots): what the walk reads and what a no-op run's
    signature stats, so the rules of what is seen are these alone."""
    yield from _folder(top, None, visited, [])


def _folder(path: str, st: os.stat_result | None, visited: set[tuple[int, int]],
            descent: list[tuple[int, int]]) -> Iterator[Folder]:
    if st is None:
        try:
            st = os.stat(path)
        except OSError as exc:
            yield Folder(path, None, error=exc, stage="read")
            return
    key = (st.st_dev, st.st_ino)
    if key in visited:
        yield Folder(path, st, again="loop" if key in descent else "seen")
        return
    visited.add(key)
    try:
        with os.scandir(path) as it:
            entries = sorted(it, key=_NAME)
    except OSError as exc:
        yield Folder(path, st, error=exc, stage="list")
        return
    folder = Folder(path, st)
    files, subfolders, is_dir, is_file = folder.files, folder.folders, statmod.S_ISDIR, statmod.S_ISREG
    for entry in entries:
        try:
            est = entry.stat()  # follows symlinks: sizes come from the target
        except OSError as exc:
            folder.failed.append((entry, exc))
            continue
        if is_dir(est.st_mode):
            if skipped_folder(entry.name, path):
                folder.skipped.append(entry)
            else:
                subfolders.append((entry, est))
        elif is_file(est.st_mode):
            files.append((entry, est))
    yield folder
    descent.append(key)
    for entry, est in folder.folders:
        yield from _folder(entry.path, est, visited, descent)
    descent.pop()


#: The folders the last `walk_signature` listed, per root, for the walk that may follow in the
#: same run (`scanned`): a run after a change lists every folder once, not twice.
_LAST_SCAN: dict[tuple[str, ...], list[list[Folder]]] = {}


def walk_signature(roots: tuple[str, ...]) -> str:
    """A digest of everything discovery can see under `roots` (`folders`): every entry it would
    visit, by path, type, size, mtime, inode and mode. Equal digests mean discovery would find the
    same rows (file contents are trusted by size and mtime, as doit and the metadata cache trust
    them; a `chmod` can make a file unreadable). Every no-op run pays for it: one `stat` per
    entry and one digest of all the lines."""
    lines: list[str] = []
    visited: set[tuple[int, int]] = set()
    scan: list[list[Folder]] = []
    for root in roots:
        lines.append(f"root\0{root}\n")
        listed = list(folders(root_folder(root), visited))
        scan.append(listed)
        for folder in listed:
            _signature_lines(folder, lines)
    _LAST_SCAN.clear()
    _LAST_SCAN[roots] = scan
    return xxhash.xxh3_128_hexdigest("".join(lines).encode("utf-8", "surrogatepass"))


def _signature_lines(folder: Folder, lines: list[str]) -> None:
    if folder.error is not None or folder.again:
        lines.append(f"{folder.again or 'error'}\0{folder.path}\0{folder.error and folder.error.errno}\n")
        return
    lines.extend(f"error\0{entry.path}\0{exc.errno}\n" for entry, exc in folder.failed)
    lines.extend(f"{e.path}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ino}\0{st.st_mode}\n" for e, st in folder.files)
    lines.extend(f"{e.path}\0dir\n" for e, _ in folder.folders)
    for entry in folder.skipped:  # a download under way in blobs/ keeps its snapshot from being served
        if entry.name == "blobs":
            lines.extend(f"{path}\0incomplete\0{size}\n" for path, size in incomplete_in(entry.path))


def scanned(roots: tuple[str, ...]) -> list[list[Folder]] | None:
    """The folders `walk_signature` listed for `roots` in this run, each once, for the walk to
    read instead of listing them again (taken: a second walk lists anew); None when there is no
    such listing, or when it met a folder twice (a symlink): what the walk skips could then
    change which of the two places is the one walked, so it lists as it goes."""
    scan = _LAST_SCAN.pop(roots, None)
    if scan is None or any(folder.again for listed in scan for folder in listed):
        return None
    return scan
