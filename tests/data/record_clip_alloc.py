#!/usr/bin/env python3
"""Record llama.cpp's CLIP compute buffer per projector shape into `clip_alloc_b11434.json`, the
table the projector charge is held to. Not run by the tests; rerun it when llama.cpp moves.

What it does:

1. Writes the projectors of `tests/clip_projectors.py` (real widths, sparse tensor data) and the
   tiny text model of `tests/tiny_model.py`.
2. Starts `llama-server -m tiny.gguf --mmproj PROJECTOR -lv 4` (CPU build) under each launch of
   `LAUNCHES`. The projector loads and warms up (tools/mtmd/clip.cpp `warmup`: the graph of its
   warmup image is built and the scheduler reserved, nothing is computed), then llama-server
   stops on the width mismatch with the tiny model: the figures are logged by then.
3. Keeps, per launch (flash attention on and off; a user's `--image-max-tokens` and
   `--image-min-tokens`), the warmup image side, whether clip's flash attention was on, the compute
   buffer it reserved (the last `reserve_compute_meta` line), the weights it loaded and
   llama-server's own estimate for the projector (`[mtmd] estimated worst-case memory usage`).

Rows of shapes and launches not recorded this time are kept from the existing table.

Usage: record_clip_alloc.py WORK_DIR [--server PATH] [--only NAME ...] [--launch NAME ...]
"""

from __future__ import annotations

import argparse
import json
import re
import socket
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from tests.clip_projectors import SHAPES, write_projector  # noqa: E402
from tests.tiny_model import write_tiny  # noqa: E402

OUT = HERE / "clip_alloc_b11434.json"
MIB = 1 << 20
#: Launches: name → llama-server flags (clip follows llama-server's `-fa`).
LAUNCHES: dict[str, list[str]] = {"fa-auto": [], "fa-off": ["-fa", "off"],
                                  "max-tokens-100": ["--image-max-tokens", "100"],
                                  "min-tokens-100": ["--image-min-tokens", "100"]}

WARMUP_RX = re.compile(r"warmup with image size = (\d+) x (\d+)")
COMPUTE_RX = re.compile(r"reserve_compute_meta:\s+(\S+) compute buffer size =\s+([\d.]+) MiB")
FLASH_RX = re.compile(r"warmup: flash attention is (enabled|disabled)")
WEIGHTS_RX = re.compile(r"load_hparams: model size:\s+([\d.]+) MiB")
ESTIMATE_RX = re.compile(r"estimated worst-case memory usage of mmproj is ([\d.]+) MiB")


def parse_log(text: str) -> dict:
    """The figures of one launch's log; the last reservation wins (auto flash attention reserves twice
    when the backend refuses it)."""
    def last(rx: re.Pattern) -> re.Match | None:
        found = list(rx.finditer(text))
        return found[-1] if found else None

    warmup, compute, flash = last(WARMUP_RX), last(COMPUTE_RX), last(FLASH_RX)
    weights, estimate = last(WEIGHTS_RX), last(ESTIMATE_RX)
    return {"warmup_image": int(warmup.group(1)) if warmup else None,
            "flash_attn": flash.group(1) == "enabled" if flash else None,
            "backend": compute.group(1) if compute else None,
            "compute_bytes": round(float(compute.group(2)) * MIB) if compute else None,
            "weights_bytes": round(float(weights.group(1)) * MIB) if weights else None,
            "server_estimate_bytes": round(float(estimate.group(1)) * MIB) if estimate else None}


def measure(server: str, model: Path, projector: Path, args: list[str], log: Path) -> dict:
    """One launch of llama-server on the projector; its log in `log`."""
    with socket.socket() as s:  # a free port: llama-server listens before it loads
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with open(log, "w") as out:
        subprocess.run([server, "-m", str(model), "--mmproj", str(projector), "--port", str(port), "-c", "512",
                        "-lv", "4", *args], stdout=out, stderr=subprocess.STDOUT, timeout=300, check=False)
    return parse_log(log.read_text(errors="replace"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("work", help="folder for the GGUFs and server logs")
    ap.add_argument("--server", default="/tmp/llama-e2e/bin/llama-server")
    ap.add_argument("--only", action="append", help="only these shape names")
    ap.add_argument("--launch", action="append", choices=sorted(LAUNCHES), help="only these launches")
    ap.add_argument("--out", default=str(OUT), help=f"the JSON table (default {OUT.name})")
    args = ap.parse_args(argv)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    tiny = work / "tiny.gguf"
    if not tiny.is_file():
        write_tiny(tiny)
    out = Path(args.out)
    rows = json.loads(out.read_text())["rows"] if out.is_file() else []
    for shape in SHAPES.values():
        if args.only and shape.name not in args.only:
            continue
        path = write_projector(shape, work / f"{shape.name}.gguf")
        for launch, flags in LAUNCHES.items():
            if args.launch and launch not in args.launch:
                continue
            rows = [r for r in rows if (r["projector"], r["launch"]) != (shape.name, launch)]
            rec = measure(args.server, tiny, path, flags, work / f"{shape.name}__{launch}.log")
            rows.append({"projector": shape.name, "mirrors": shape.mirrors, "keys": shape.keys,
                         "file_bytes": path.stat().st_size, "launch": launch, "args": flags, **rec})
            print(f"{shape.name:28s} {launch:8s} warmup {rec['warmup_image']} fa {rec['flash_attn']} "
                  f"compute {(rec['compute_bytes'] or 0) / MIB:9.2f} MiB", flush=True)
        path.unlink()
    order = {name: i for i, name in enumerate(SHAPES)}
    rows.sort(key=lambda r: (order.get(r["projector"], len(order)), list(LAUNCHES).index(r["launch"])))
    out.write_text(json.dumps({"llama_cpp": "b11434", "backend": "CPU", "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
