"""The tiny random-weight llama GGUF that llama-server b11434 really loads, written by the
repository's tools/llama-server-check/make_tiny_gguf.py: for the checks that start the engine."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "tools" / "llama-server-check" / "make_tiny_gguf.py"


def write_tiny(path: Path, *, seed: int = 0, ctx: int = 8192) -> Path:
    spec = importlib.util.spec_from_file_location("make_tiny_gguf", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main([str(path), "--ctx", str(ctx), "--seed", str(seed)]) == 0
    return path
