"""Where tests find what they need. The default suite needs nothing outside the repository: its
data is in `tests/data` (real `config.json` shapes, llama-swap's schema facts, engines' recorded
figures). Two kinds of test reach further, and skip saying how to get what they miss:

- the slow checks run real engines (vLLM's parser on CPU, llama-server, llama-swap's loader):
  `bash scripts/setup-slow-checks.sh` builds them outside the repository and prints the
  variables to export;
- the optional cross-checks compare `tests/data` with the upstream files it was recorded from,
  found beside the repository (`<repo>/../shared/data`) or under `$SWAPGEN_SHARED/data`.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"
#: The shapes of real `config.json` files of public models, one folder each (tests/data/README.md).
HF_CONFIGS = DATA / "hf-configs"
#: The repository's tools the slow checks run (the vLLM argument check, the tiny-model writer).
TOOLS = REPO / "tools"
SETUP = "scripts/setup-slow-checks.sh"
#: vLLM 0.33's CPU venv, built by `tools/vllm-argcheck/vllm_cpu_env.sh` (through SETUP).
VLLM_VENV = Path(os.environ.get("VLLM_CPU_VENV") or Path(os.environ.get("TMPDIR") or "/tmp") / "vllm-cpu")
#: The upstream files `tests/data` was recorded from, for the optional cross-checks.
UPSTREAM = Path(os.environ.get("SWAPGEN_SHARED") or REPO.parent / "shared") / "data"
UPSTREAM_HF_CONFIGS = UPSTREAM / "hf-configs"
UPSTREAM_SCHEMA = UPSTREAM / "llama-swap-config-schema.json"


def not_set_up(what: str) -> str:
    """A slow check's skip reason: what is missing and the command that provides it."""
    return f"{what} is not set up: run `bash {SETUP}` and export the variables it prints"


def upstream(path: Path, what: str) -> Path:
    """`path`, or skip the calling cross-check naming it and how to get it."""
    if not path.exists():
        pytest.skip(f"{path} is absent: {what}; put it there (or under $SWAPGEN_SHARED/data) to cross-check "
                    "tests/data against it")
    return path
