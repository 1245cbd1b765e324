"""How names become ids: the slug that clash suffixes and profile names share, and the rule
that settles a clash from each name's own path (model ids, adapter names)."""

from __future__ import annotations

import re
from collections.abc import Sequence

import xxhash


def slugify(name: str) -> str:
    """Lowercase, each run of characters other than [a-z0-9] → one `-`, trimmed:
    `"Bartowski/Qwen3 GGUF"` → `"bartowski-qwen3-gguf"`."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def path_tag(path: str) -> str:
    """Eight hex digits of a hash of `path`: the last, always distinct, part of a clashing name."""
    return xxhash.xxh3_64_hexdigest(path.encode("utf-8", "surrogatepass"))[:8]


def settle_names(candidates: Sequence[Sequence[str]], held: Sequence[str | None],
                 scopes: Sequence[Sequence[str]] | None = None) -> list[str]:
    """One name per item, in the items' order, unique within each of the item's `scopes` (one
    scope for all when None). An item keeps its `held` name (the previous run's) while that is
    still one of its `candidates` and free; the others take their first free candidate, so an
    item that arrives never takes or moves another's name. Candidates are made from each item's
    own path, ending with its `path_tag`; only a tag made to collide gets `-2`, `-3`, …"""
    scopes = scopes if scopes is not None else [("",)] * len(candidates)
    taken: set[tuple[str, str]] = set()
    chosen: list[str | None] = [None] * len(candidates)

    def free(i: int, name: str) -> bool:
        return all((scope, name) not in taken for scope in scopes[i])

    def take(i: int, name: str) -> None:
        chosen[i] = name
        taken.update((scope, name) for scope in scopes[i])

    for i, name in enumerate(held):
        if name is not None and name in candidates[i] and free(i, name):
            take(i, name)
    for i, options in enumerate(candidates):
        if chosen[i] is None:
            name = next((c for c in options if free(i, c)), None)
            n = 2
            while name is None:
                name = f"{options[-1]}-{n}" if free(i, f"{options[-1]}-{n}") else None
                n += 1
            take(i, name)
    return [name for name in chosen if name is not None]
