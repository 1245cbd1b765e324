"""What a walk of the roots can see and what it returns: the folders discovery never enters
(`skipped_folder`), the signature of every entry it would visit (`walk_signature`, a no-op run's
whole look at the roots), and the `Discovery` record.

Kept apart from the walker (`discovery.walk`), which reads headers and pairs files, so that a
run served from the load memo imports none of that.
"""

from __future__ import annotations

import os
import stat as statmod

import xxhash
from attrs import field, frozen

from autogen.discovery.hub_cache import incomplete_in
from autogen.discovery.naming import Ledger
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
    #: One line per file whose id changed since the previous run (`naming.id_changes`).
    id_changes: tuple[str, ...] = ()


def skipped_folder(name: str, parent: str) -> bool:
    """Folders discovery never enters: hidden ones but Ollama's home `.ollama` (its `models/` is
    a store), and the HF cache's `blobs/` (its files are reached through the snapshots' symlinks)."""
    return ((name.startswith(".") and name != OLLAMA_HOME)
            or (name == "blobs" and os.path.basename(parent).startswith("models--")))


def walk_signature(roots: tuple[str, ...]) -> str:
    """A digest of everything discovery can see under `roots`: every entry it would visit, by
    path, type, size, mtime and inode (symlinks followed, as discovery follows them). Equal
    digests mean discovery would find the same rows (file contents are trusted by size and
    mtime, as doit and the metadata cache trust them). Every no-op run pays for it: one `stat`
    per entry, a folder's reused for its own loop check, and one digest of all the lines."""
    lines: list[str] = []
    visited: set[tuple[int, int]] = set()

    def walk(folder: str, st: os.stat_result) -> None:
        if (st.st_dev, st.st_ino) in visited:
            lines.append(f"loop\0{folder}\n")
            return
        visited.add((st.st_dev, st.st_ino))
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=_entry_name)
        except OSError as exc:
            lines.append(f"error\0{folder}\0{exc.errno}\n")
            return
        for entry in entries:
            try:
                est = entry.stat()
            except OSError as exc:
                lines.append(f"error\0{entry.path}\0{exc.errno}\n")
                continue
            if statmod.S_ISDIR(est.st_mode):  # a folder stands for its entries, not its own times
                lines.append(f"{entry.path}\0dir\n")
                if not skipped_folder(entry.name, folder):
                    walk(entry.path, est)
                elif entry.name == "blobs":  # a download under way there keeps its snapshot from being served
                    lines.extend(f"{path}\0incomplete\0{size}\n" for path, size in incomplete_in(entry.path))
                continue
            lines.append(f"{entry.path}\0{est.st_mode}\0{est.st_size}\0{est.st_mtime_ns}\0{est.st_ino}\n")

    for root in roots:
        lines.append(f"root\0{root}\n")
        top = os.path.realpath(root) if os.path.islink(root) else root
        try:
            st = os.stat(top)
        except OSError as exc:
            lines.append(f"error\0{top}\0{exc.errno}\n")
            continue
        walk(top, st)
    return xxhash.xxh3_128_hexdigest("".join(lines).encode("utf-8", "surrogatepass"))


def _entry_name(entry: os.DirEntry) -> str:
    return entry.name
