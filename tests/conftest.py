"""Shared test set-up: the `library` fixture, a private user cache, and whether the upstream files
of the optional cross-checks are at hand."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))


import pytest

from tests.builders import GIB, SETTINGS, add_model


@pytest.fixture(autouse=True)
def _private_user_cache(tmp_path_factory, monkeypatch):
    """The settings cache lives in the user's cache folder: keep tests out of the real one."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-cache")))


def pytest_report_header(config):
    from tests.shared import UPSTREAM  # noqa: PLC0415 - conftest puts tests/ on sys.path first

    found = "present" if UPSTREAM.exists() else "absent: the optional cross-checks (pytest -m slow) skip"
    return f"upstream files for cross-checks: {UPSTREAM} ({found})"


@pytest.fixture
def library(tmp_path):
    """Two llama GGUFs under `models/` and a settings file beside them; returns the folder."""
    root = tmp_path / "models"
    add_model(root, "pub/A-GGUF/Alpha-Q4_K_M.gguf")
    add_model(root, "pub/B-GGUF/Beta-Q8_0.gguf", size=GIB)
    settings = tmp_path / "swapgen.yaml"
    settings.write_text(SETTINGS)
    return tmp_path


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    """A tiny llama GGUF the real llama-server loads (`tests/tiny_model.py`), with a space in its
    name to prove quoting."""
    from tests.tiny_model import write_tiny  # noqa: PLC0415 - numpy only for the slow checks

    return write_tiny(tmp_path_factory.mktemp("models") / "tiny random llama.gguf")
