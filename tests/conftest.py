"""Shared test set-up: fixture builders importable as `tests.gguf_fixtures` or `gguf_fixtures`."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
