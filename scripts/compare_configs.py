"""Same inputs, same config: generate with this tree and with another revision, compare bytes.

    python scripts/compare_configs.py [REV] [--models N] [--keep]

A refactor promises no behaviour change; this proves it. Both trees run over the same
libraries, each with its own cache, output and settings cache:

- the bundled sample library under the repo's own `swapgen.yaml`;
- the same library under settings that reach the other paths: declared GPUs and device pins,
  profiles (context tiers, variants, `default_variants`), groups, tool-parser and KV-type
  overrides, a skip, an unlisted model;
- a synthetic benchmark library (`benchmarks/library.py`) of N models: single, split,
  projector and HF folders, with the benchmark's overrides;
- a library of hostile file names (spaces, quotes, `$`, unicode, a `${` macro).

Prints one line per library and exits 1 when any config, or what `swapgen list` prints of it,
differs (a unified diff follows). REV defaults to HEAD, so `python scripts/compare_configs.py`
checks uncommitted changes. `--unit-labels` reads a size's unit label (`4.58 GB`, `4.58GB`,
`4.58 GiB`: every one of them GiB) as the same, for a change that only writes the unit as what it
is; such libraries print `same (labels)`.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from autogen.commands import sample  # noqa: E402
from benchmarks import library as bench_library  # noqa: E402
from benchmarks.bench_library import SETTINGS as BENCH_SETTINGS  # noqa: E402

RUN = """import sys
try:
    from autogen.commands.cli import main
except ImportError:  # a revision from before the package was laid out by stage
    from autogen.cli import main
sys.exit(main(sys.argv[1:]))
"""

#: Settings over the sample library that exercise devices, profiles, groups and overrides.
SAMPLE_VARIANTS = """\
vram_budget_gb: 22
ttl: 900
gpus:
  - {index: 0, name: RTX 4090, vram_gb: 24, vendor: nvidia}
  - {index: 1, name: RTX 3090, vram_gb: 24, vendor: nvidia}
backends:
  - {id: llama-cuda, kind: llama, path: llama-server, default: true, variant: cuda}
  - {id: llama-cpu, kind: llama, path: /opt/cpu/llama-server, variant: cpu}
  - {id: vllm, kind: vllm, path: vllm, version: "0.33.0"}
  - {id: sd-cuda, kind: sd, path: sd-server, default: true}
kv_type: f16
default_variants:
  - {name: fast, ctx: 8192, extra_args: ["-b", "1024"]}
overrides:
  - {match: "*Qwen3-30B-A3B*", ctx_variants: [8192, 32768], devices: [0, 1],
     variants: [{name: long, ctx: 65536, kv_type: q8_0}]}
  - {match: "*gemma-3-12b*", kv_type: q8_0, devices: [1]}
  - {match: "*Qwen3-8B*", vllm_tensor_parallel: 2, vllm_tool_parser: hermes}
  - {match: "*Mistral-7B-Instruct-v0.3*", backend: vllm, vllm_tokenizer: mistralai/Mistral-7B-Instruct-v0.3}
  - {match: "*nomic-embed*", unlisted: true}
  - {match: "*parakeet*", skip: true}
groups:
  - {name: chat, match: ["*Llama*", "*gemma*"], coexist: false}
"""

HOSTILE_NAMES = ("pub lisher/My Model Q4_0.gguf", "quote's/It's-Q4_0.gguf", "dollar/$HOME-Q4_0.gguf",
                 "unicode/Модель-日本-Q4_0.gguf", "macro/evil${PORT}-Q4_0.gguf", "semi;colon/a&b-Q4_0.gguf")


def _tree(rev: str, dest: Path) -> Path:
    """The files of `rev` (never the work tree's uncommitted state) under `dest`."""
    dest.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


def _write_hostile(root: Path) -> None:
    from tests.builders import add_model  # noqa: PLC0415 (the tests' GGUF writer; only this library needs it)

    for name in HOSTILE_NAMES:
        add_model(root, name)


def libraries(work: Path, models: int) -> dict[str, tuple[Path, str]]:
    """name → (folder, settings text without output/cache_dir)."""
    sample_dir = work / "sample"
    sample.build(sample_dir / sample.SAMPLE_DIR)
    repo_settings = (REPO / "swapgen.yaml").read_text()
    kept = [line for line in repo_settings.splitlines() if not line.startswith(("output:", "cache_dir:"))]
    bench_dir = work / "bench"
    bench_library.build(bench_dir / "library", models=models, n_vocab=2000)
    hostile = work / "hostile"
    _write_hostile(hostile / "models")
    bench_kept = [line for line in BENCH_SETTINGS.splitlines() if not line.startswith(("output:", "cache_dir:"))]
    return {
        "sample library, repo settings": (sample_dir, "\n".join(kept) + "\n"),
        "sample library, devices/profiles/groups": (sample_dir, f"roots: [{sample.SAMPLE_DIR}]\n"
                                                    "card_vram_gb: 24\n" + SAMPLE_VARIANTS),
        f"benchmark library, {models} models": (bench_dir, "\n".join(bench_kept) + "\n"),
        "hostile names": (hostile, "roots: [models]\ncard_vram_gb: 24\nbackends:\n"
                                   "  - {id: llama, kind: llama, path: 'my bin/llama-server', default: true}\n"),
    }


def generate(tree: Path, label: str, folder: Path, settings: str, work: Path) -> tuple[int, bytes, str]:
    """(exit code, config bytes followed by what `swapgen list` prints, stderr) of one run of
    `tree`'s swapgen."""
    path = folder / "swapgen.yaml"  # one name: the config's header names it
    path.write_text(settings + f"output: config-{label}.yaml\ncache_dir: cache-{label}\n")
    env = {**os.environ, "PYTHONPATH": str(tree), "XDG_CACHE_HOME": str(work / f"xdg-{label}")}
    env.pop("SWAPGEN_SETTINGS", None)
    done = subprocess.run([sys.executable, "-c", RUN, "--settings", str(path)], cwd=folder, env=env,
                          capture_output=True, text=True)
    listed = subprocess.run([sys.executable, "-c", RUN, "--settings", str(path), "list"], cwd=folder, env=env,
                            capture_output=True, text=True)
    out = folder / f"config-{label}.yaml"
    config = out.read_bytes() if out.exists() else b""
    return done.returncode, config + b"\n# swapgen list:\n" + listed.stdout.encode(), done.stderr


_UNIT = re.compile(rb"(\d) ?Gi?B\b")


def unit_free(text: bytes) -> bytes:
    """`text` with every size's unit label (`GB`, `GiB`, spaced or not) written one way."""
    return _UNIT.sub(rb"\1 <GiB>", text)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("rev", nargs="?", default="HEAD", help="the revision to compare with (default HEAD)")
    p.add_argument("--models", type=int, default=200, help="models in the synthetic library (default 200)")
    p.add_argument("--keep", action="store_true", help="keep the work folder and print its path")
    p.add_argument("--unit-labels", action="store_true",
                   help="lines whose only change is a size's unit label (GB → GiB) count as the same")
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="swapgen-compare-"))
    try:
        old = _tree(args.rev, work / "old")
        differ = 0
        for name, (folder, settings) in libraries(work, args.models).items():
            rc_old, before, err_old = generate(old, "old", folder, settings, work)
            rc_new, after, err_new = generate(REPO, "new", folder, settings, work)
            if (rc_old, before) == (rc_new, after):
                print(f"same      {name}: {len(after)} bytes, exit {rc_new}")
                continue
            if args.unit_labels and (rc_old, unit_free(before)) == (rc_new, unit_free(after)):
                print(f"same (labels) {name}: {len(after)} bytes, exit {rc_new}")
                continue
            differ += 1
            print(f"DIFFERENT {name}: exit {rc_old} → {rc_new}, {len(before)} → {len(after)} bytes")
            old_lines, new_lines = before.decode().splitlines(True), after.decode().splitlines(True)
            sys.stdout.writelines(difflib.unified_diff(old_lines, new_lines, f"{args.rev}/config.yaml",
                                                       "tree/config.yaml", n=1))
            for label, err in (("old", err_old), ("new", err_new)):
                if err.strip():
                    print(f"  {label} stderr: {err.strip()[-400:]}")
        return 1 if differ else 0
    finally:
        if args.keep:
            print(f"work folder: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
