"""whisper.cpp model files for the tests, written by the repository's
tools/whisper-server-check/make_tiny_whisper.py: sparse files of zero weights (`zeros=True`,
nothing generated: a large-v3-turbo of full depth in milliseconds) for discovery and sizing, and
random weights that whisper-server really runs for the checks that start it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "tools" / "whisper-server-check" / "make_tiny_whisper.py"


def _tool():
    spec = importlib.util.spec_from_file_location("make_tiny_whisper", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_whisper(path: Path, width: str = "tiny", audio_layers: int = 1, text_layers: int = 1, kind: str = "f16",
                  *, english: bool = False, zeros: bool = True, seed: int = 0) -> Path:
    """A whisper.cpp model at `path` (folders made), zero weights in a sparse file unless `zeros=False`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    _tool().write_model(str(path), width, audio_layers, text_layers, kind, english=english, zeros=zeros, seed=seed)
    return path


def write_silero(path: Path, *, seed: int = 0) -> Path:
    """A Silero VAD model in whisper.cpp's format (v6.2.0's shapes, random weights; 885 KB)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    _tool().write_silero(str(path), seed=seed)
    return path
