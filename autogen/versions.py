"""Engine version strings as tuples, for gating flags and parsers by the backend row's `version`."""

from __future__ import annotations

import re

_VERSION = re.compile(r"\s*v?(\d+(?:\.\d+)*)")


def parse_version(text: str | None) -> tuple[int, ...] | None:
    """Leading numeric part of a version string: "0.10.2" → (0, 10, 2), "v0.11.0rc1" →
    (0, 11, 0), "0.10.2+cu128" → (0, 10, 2); None when there is none ("", "main")."""
    match = _VERSION.match(text or "")
    if not match:
        return None
    return tuple(int(part) for part in match.group(1).split("."))


def format_version(version: tuple[int, ...]) -> str:
    return ".".join(map(str, version))
