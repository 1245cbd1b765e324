"""The glob of `overrides[].match` and `groups[].match`, matched against a model's full path."""

from __future__ import annotations

import fnmatch
import re
from functools import lru_cache


@lru_cache(maxsize=1024)
def glob_pattern(pattern: str) -> re.Pattern[str]:
    """A settings glob: case-insensitive, `*` crosses folders, `?` is one character."""
    return re.compile(fnmatch.translate(pattern.replace("\\", "/")), re.IGNORECASE | re.DOTALL)
