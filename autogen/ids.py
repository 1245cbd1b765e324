"""How names become parts of ids: the slug that clash suffixes and profile names share."""

from __future__ import annotations

import re


def slugify(name: str) -> str:
    """Lowercase, each run of characters other than [a-z0-9] → one `-`, trimmed:
    `"Bartowski/Qwen3 GGUF"` → `"bartowski-qwen3-gguf"`."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
