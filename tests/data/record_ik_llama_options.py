#!/usr/bin/env python3
"""Record ik_llama.cpp's llama-server arguments into `autogen/flags/ik_llama_015.py`, the table
every command line for an ik_llama.cpp row is checked against. Not run by the tests; rerun it on
a new ik_llama.cpp source.

ik_llama.cpp parses its arguments the way llama.cpp did before common/arg.cpp: one chain of
`if (arg == "-x" || arg == "--xx") { … }` blocks in `gpt_params_find_arg` (common/common.cpp),
shared by every tool of the tree, so llama-server accepts each of them. Its `--help`
(`gpt_params_print_usage`) is not that list: it prints the options of every tool, leaves out
the GPU options on a build without GPU offload (`-ngl`, `-sm`, `-ts`, `-dev`, `-mg`:
`llama_supports_gpu_offload()`) and never names some it parses (`-ot`, `-rtr`). So the table is
read from the parser and `--help` of the same build only marks what it names:

- names: the literals of one block's condition;
- values taken: the block's `CHECK_ARG`s, `argv[++i]`s and `if (++i >= argc)`s (two for
  `--lora-scaled FNAME S`);
- the log options it passes on to common/log.h (`--log-disable`, `--log-file F`, …);
- negatives: a block whose long names are `--no-<x>` of another block's (`-no-fa,
  --no-flash-attn` of `-fa, --flash-attn`) is that option's off spelling; a `--no-…` without a
  counterpart (`-no-fmoe`) stays a switch of its own.

Usage: record_ik_llama_options.py IK_LLAMA_CPP_TREE HELP_TXT [--build 015]
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SDIST = "ik-llama-cpp-python 0.1.5"


def _code(text: str, start: int = 0):
    """(index, character) of C++ code from `start`: string and char literals and comments skipped."""
    i = start
    while i < len(text):
        if text[i] in "\"'":
            quote, i = text[i], i + 1
            while text[i] != quote:
                i += 2 if text[i] == "\\" else 1
            i += 1
        elif text.startswith("//", i):
            i = text.index("\n", i)
        elif text.startswith("/*", i):
            i = text.index("*/", i) + 2
        else:
            yield i, text[i]
            i += 1


def _block_end(text: str, start: int) -> int:
    """Index just past the brace block opening at `start`."""
    depth = 0
    for i, c in _code(text, start):
        depth += c == "{"
        depth -= c == "}"
        if c == "}" and depth == 0:
            return i + 1
    raise ValueError(f"unbalanced block at {start}")


_CONDITION = re.compile(r'\bif\s*\(\s*(arg\s*==\s*"[^"]+"(?:\s*\|\|\s*arg\s*==\s*"[^"]+")*)\s*\)\s*\{')
_TAKES = re.compile(r"CHECK_ARG|argv\[\+\+i\]|\+\+i\s*>=\s*argc")


def parse_options(source: str) -> list[dict]:
    """One dict per `arg == …` block of `gpt_params_find_arg`, in source order."""
    start = source.index("bool gpt_params_find_arg(")
    body = source[start:_block_end(source, source.index("{", start))]
    options = []
    for m in _CONDITION.finditer(body):
        block = body[m.end():_block_end(body, m.end() - 1)]
        options.append({"names": re.findall(r'"([^"]+)"', m.group(1)), "negatives": [],
                        "values": len(_TAKES.findall(block))})
    return _pair_negatives(options)


def log_options(header: str) -> list[dict]:
    """The log options `gpt_params_find_arg` hands to common/log.h at its end:
    `log_param_single_parse` (switches) and `log_param_pair_parse` (one value)."""
    options = []
    for function, values in (("log_param_single_parse", 0), ("log_param_pair_parse", 1)):
        start = header.index(f"inline bool {function}(")
        body = header[start:_block_end(header, header.index("{", start))]
        options += [{"names": [name], "negatives": [], "values": values}
                    for name in re.findall(r'param\s*==\s*"([^"]+)"', body)]
    return options


def _pair_negatives(options: list[dict]) -> list[dict]:
    """Fold each `--no-<x>` block into the block of `--<x>` as its negatives."""
    by_name = {n: o for o in options for n in o["names"]}
    kept = []
    for o in options:
        longs = [n for n in o["names"] if n.startswith("--no-")]
        owner = next((by_name[f"--{n[5:]}"] for n in longs if f"--{n[5:]}" in by_name), None)
        if owner is not None and o["values"] == 0:
            owner["negatives"] += o["names"]
        else:
            kept.append(o)
    return kept


def help_names(text: str) -> set[str]:
    """Every option name `--help` prints (its lines indent the short names)."""
    names = set()
    for line in text.splitlines():
        head = re.split(r"\s{2,}(?=[a-z(])", line.strip(), maxsplit=1)[0]
        names.update(w.rstrip(",") for w in head.split() if re.match(r"--?[A-Za-z]", w))
    return names


def arch_names(source: str) -> list[str]:
    """`LLM_ARCH_NAMES` of src/llama-arch.cpp: the architectures the build loads."""
    table = source[source.index("LLM_ARCH_NAMES"):]
    table = table[:table.index("};")]
    return sorted(n for n in re.findall(r'\{\s*LLM_ARCH_\w+\s*,\s*"([^"]+)"', table) if n != "(unknown)")


def render(options: list[dict], unlisted: list[str], build: str, archs: list[str]) -> str:
    rows = [f"    ({tuple(o['names'])!r}, {tuple(o['negatives'])!r}, {o['values']}, '', False),"
            for o in options]
    return (f'"""ik_llama.cpp\'s llama-server arguments ({SDIST}\'s vendored source), as its parser\n'
            "takes them (common/common.cpp `gpt_params_find_arg`), recorded by\n"
            "tests/data/record_ik_llama_options.py. Do not edit by hand: rerun the script on a new source.\n\n"
            "A row, as `flags.llama_b11434` writes one: (names, negative names, values taken (0, 1 or 2),\n"
            "env variable (none recorded), list (none recorded)).\n"
            '"""\n\n'
            f"BUILD = {build!r}\n\n"
            "OPTIONS: tuple[tuple[tuple[str, ...], tuple[str, ...], int, str, bool], ...] = (\n"
            + "\n".join(line for row in rows for line in _wrap(row)) + "\n)\n\n"
            "#: Names the parser takes and `--help` of a CPU build does not print (the GPU options, `-ot`, …).\n"
            "UNLISTED: frozenset[str] = frozenset({\n"
            + "\n".join(_chunks(unlisted)) + "\n})\n\n"
            "#: The architectures it loads (src/llama-arch.cpp `LLM_ARCH_NAMES`).\n"
            "ARCHS: frozenset[str] = frozenset({\n" + "\n".join(_chunks(archs)) + "\n})\n")


def _chunks(names: list[str]) -> list[str]:
    lines, line = [], "   "
    for name in names:
        item = f" {name!r},"
        if len(line) + len(item) > 118:
            lines.append(line)
            line = "   "
        line += item
    return [*lines, line] if line.strip() else lines


def _wrap(row: str) -> list[str]:
    if len(row) <= 120:
        return [row]
    cut = row.rindex("), ", 0, 118) + 2
    return [row[:cut], "     " + row[cut:].lstrip()]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("tree", type=Path, help="the ik_llama.cpp source tree (holds common/common.cpp)")
    p.add_argument("help", type=Path, help="`llama-server --help` of the same source")
    p.add_argument("--build", default="015", help="the module's suffix (flags/ik_llama_<build>.py)")
    args = p.parse_args(argv)
    options = parse_options((args.tree / "common" / "common.cpp").read_text(encoding="utf-8"))
    options += log_options((args.tree / "common" / "log.h").read_text(encoding="utf-8"))
    listed = help_names(args.help.read_text(encoding="utf-8"))
    names = {n for o in options for n in o["names"] + o["negatives"]}
    missing = sorted(n for n in listed - names if not n.startswith("--no-"))
    if missing:  # --help names options other tools parse themselves (perplexity, bench: -npp …)
        print(f"--help names no parser block for: {', '.join(missing)}", file=sys.stderr)
    out = REPO / "autogen" / "flags" / f"ik_llama_{args.build}.py"
    archs = arch_names((args.tree / "src" / "llama-arch.cpp").read_text(encoding="utf-8"))
    out.write_text(render(options, sorted(names - listed), f"{SDIST} (ik_llama.cpp)", archs), encoding="utf-8")
    print(f"{out}: {len(options)} options, {len(names - listed)} names --help does not print, {len(archs)} archs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
