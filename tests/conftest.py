"""Shared test set-up: fixture builders importable as `tests.gguf_fixtures` or `gguf_fixtures`."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))


import pytest


@pytest.fixture(autouse=True)
def _private_user_cache(tmp_path_factory, monkeypatch):
    """The settings cache lives in the user's cache folder: keep tests out of the real one."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-cache")))
