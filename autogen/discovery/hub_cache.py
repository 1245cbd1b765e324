"""The Hugging Face hub cache layout: `models--<owner>--<repo>/{blobs,refs,snapshots}`.

Each snapshot folder is one revision of the repo, its files symlinks into `blobs/`
(huggingface_hub `file_download.py`, `_create_symlink`). One revision is served per repo: the
one `refs/main` names, else (no `refs/main`, or it names a snapshot that is not on disk) the
newest snapshot folder, by modification time, then by name. The others are older revisions,
listed as ignored. A blob is downloaded as `blobs/<sha>.incomplete` and renamed when whole.
"""

from __future__ import annotations

import os

CACHE_PREFIX = "models--"
SNAPSHOTS = "snapshots"
MAIN_REF = os.path.join("refs", "main")
INCOMPLETE_SUFFIX = ".incomplete"


def hf_cache_repo(folder: str) -> tuple[str, str] | None:
    """`models--owner--repo/snapshots/<rev>` → (owner, repo)."""
    parent = os.path.dirname(folder)
    grand = os.path.basename(os.path.dirname(parent))
    if os.path.basename(parent).lower() != SNAPSHOTS or not grand.startswith(CACHE_PREFIX):
        return None
    owner, sep, repo = grand[len(CACHE_PREFIX):].partition("--")
    return (owner, repo) if sep and owner and repo else None


def is_snapshots_folder(folder: str) -> bool:
    return (os.path.basename(folder) == SNAPSHOTS
            and os.path.basename(os.path.dirname(folder)).startswith(CACHE_PREFIX))


def repo_label(snapshots: str) -> str:
    """"owner/repo" of a `snapshots` folder."""
    owner, _, repo = os.path.basename(os.path.dirname(snapshots))[len(CACHE_PREFIX):].partition("--")
    return f"{owner}/{repo}" if repo else owner


def main_ref(snapshots: str) -> str | None:
    """The commit `refs/main` names, or None (no such file, unreadable, empty)."""
    try:
        with open(os.path.join(os.path.dirname(snapshots), MAIN_REF), encoding="utf-8") as f:
            return f.read(256).strip() or None
    except (OSError, UnicodeDecodeError):
        return None


def served_revision(snapshots: str, revisions: dict[str, int]) -> tuple[str, str]:
    """(the revision served, why) among `revisions` (snapshot folder name → mtime_ns)."""
    ref = main_ref(snapshots)
    if ref is not None and ref in revisions:
        return ref, "refs/main"
    newest = max(revisions, key=lambda name: (revisions[name], name))
    why = ("the newest snapshot; refs/main names none on disk" if ref is not None
           else "the newest snapshot, no refs/main")
    return newest, why


def incomplete_blobs(snapshot: str) -> tuple[tuple[str, int], ...]:
    """(path, size) of every `blobs/*.incomplete` of the repo a snapshot folder belongs to."""
    return incomplete_in(os.path.join(os.path.dirname(os.path.dirname(snapshot)), "blobs"))


def incomplete_in(blobs: str) -> tuple[tuple[str, int], ...]:
    """(path, size) of every `*.incomplete` file in a `blobs` folder, sorted."""
    found = []
    try:
        with os.scandir(blobs) as it:
            for entry in it:
                if entry.name.endswith(INCOMPLETE_SUFFIX):
                    try:
                        found.append((entry.path, entry.stat().st_size))
                    except OSError:
                        found.append((entry.path, 0))
    except OSError:
        return ()
    return tuple(sorted(found))
