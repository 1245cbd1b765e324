#!/usr/bin/env python3
"""Record what whisper-server prints about its memory at start into `whisper_alloc_1.8.5.json`, the
table the whisper sizing tests hold swapgen's estimates to. Not run by the tests; rerun it when
whisper.cpp moves (`scripts/setup-slow-checks.sh whisper` builds the server).

For each shape of `SHAPES` it writes a model with tools/whisper-server-check/make_tiny_whisper.py
(zero weights in a sparse file: the sizes do not depend on the values), starts whisper-server on
it (CPU build) with flash attention on or off, and keeps the figures whisper.cpp prints before it
listens (src/whisper.cpp `whisper_model_load`, `whisper_init_state`), in MB of 10^6 bytes:
`model`, `kv_self`, `kv_cross`, `kv_pad` and the compute buffers `conv`, `encode`, `cross`, `decode`.

Usage: record_whisper_alloc.py WORK_DIR --server PATH
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "whisper_alloc_1.8.5.json"
TOOL = HERE.parents[1] / "tools" / "whisper-server-check" / "make_tiny_whisper.py"
LINE = re.compile(r"(model size|kv self size|kv cross size|kv pad  size|compute buffer \((\w+)\))\s*=\s*([\d.]+) MB")
#: (width, audio layers, text layers, weight type, flash attention, English-only): tiny, base and
#: large-v3-turbo widths with a layer or two, every other width once, each weight type the
#: converters write, and flash attention both ways.
SHAPES = [
    ("tiny", 1, 1, "f16", True, False), ("tiny", 1, 1, "f16", False, False), ("tiny", 2, 2, "f16", True, False),
    ("tiny", 4, 4, "f16", True, False), ("tiny", 4, 4, "f16", False, False), ("tiny", 1, 1, "q5_1", True, False),
    ("tiny", 1, 1, "f32", True, False), ("tiny", 1, 1, "f32", False, False),
    ("base", 1, 1, "f16", True, False), ("base", 2, 2, "f16", False, False), ("base", 1, 1, "q4_0", False, False),
    ("base", 2, 1, "q8_0", True, True),
    ("small", 1, 1, "f16", True, False), ("small", 1, 1, "f16", False, False),
    ("medium", 1, 1, "f16", True, False), ("medium", 1, 1, "f16", False, False),
    ("large-v3", 1, 1, "f16", True, False), ("large-v3", 1, 1, "f16", False, False),
    ("large-v3", 2, 2, "q5_0", True, False), ("large-v3", 1, 1, "q8_0", True, False),
    ("large-v3-turbo", 2, 1, "f16", True, False), ("large-v3-turbo", 1, 2, "q5_0", False, False),
]


def _tool():
    spec = importlib.util.spec_from_file_location("make_tiny_whisper", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def printed(server: str, model: Path, flash: bool) -> dict[str, float]:
    """The figures whisper-server prints before it listens (it is stopped after the last)."""
    argv = [server, "-m", str(model), "--port", "0", *([] if flash else ["-nfa"])]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    found: dict[str, float] = {}
    assert proc.stderr is not None
    for line in proc.stderr:
        if m := LINE.search(line):
            found[m.group(2) or m.group(1).replace("  ", " ").removesuffix(" size").replace(" ", "_")] = float(m.group(3))
        if "compute buffer (decode)" in line or "error" in line:
            break
    proc.kill()
    proc.wait()
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("work", type=Path)
    parser.add_argument("--server", required=True)
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    tool, rows = _tool(), []
    for width, audio, text, kind, flash, english in SHAPES:
        model = args.work / f"{width}-{audio}-{text}-{kind}{'-en' if english else ''}.bin"
        tool.write_model(str(model), width, audio, text, kind, english=english, zeros=True)
        rows.append({"width": width, "audio_layers": audio, "text_layers": text, "type": kind, "english": english,
                     "flash_attn": flash, "printed_mb": printed(args.server, model, flash)})
        print(json.dumps(rows[-1]), file=sys.stderr)
    OUT.write_text(json.dumps({"whisper.cpp": "1.8.5", "shapes": rows}, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
