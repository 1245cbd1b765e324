"""doit entry point: `doit` generates the llama-swap config; `doit list` shows the models.

Settings: `doit settings=PATH`, else $SWAPGEN_SETTINGS, else ./swapgen.yaml. Everything else
lives in `autogen/` (the repo's own swapgen.yaml builds the sample library on first use).
"""

import sys

from doit import get_var

from autogen.commands.tasks import load
from autogen.errors import SwapgenError

try:
    globals().update(load(get_var("settings", None)).namespace())
except SwapgenError as exc:
    print(f"swapgen: {exc}", file=sys.stderr)
    sys.exit(1)
