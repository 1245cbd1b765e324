"""doit entry point: `doit` generates the llama-swap config; `doit list` shows the models.

Settings: `doit settings=PATH`, else $SWAPGEN_SETTINGS, else ./swapgen.yaml. Everything else
lives in `autogen/`.
"""

import sys
from pathlib import Path

from doit import get_var

from autogen.errors import SwapgenError
from autogen.sample import ensure_for_settings
from autogen.settings import find_settings
from autogen.tasks import load

_settings = find_settings(get_var("settings", None))
try:
    ensure_for_settings(_settings, Path(__file__).parent)
    globals().update(load(str(_settings)).namespace())
except SwapgenError as exc:
    print(f"swapgen: {exc}", file=sys.stderr)
    sys.exit(1)
