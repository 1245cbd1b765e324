#!/usr/bin/env python3
"""Record whisper-server's arguments into `autogen/flags/whisper_1_8_5.py`, the table every
emitted whisper-server command is checked against. Not run by the tests; rerun it when
whisper.cpp moves.

It reads the parser itself, `whisper_params_parse` in examples/server/server.cpp: every
`arg == "-x" || arg == "--xx"` branch, taking one value when its body reads `argv[++i]` and none
otherwise. The parser, not the help text, is what the binary accepts: `--tmp-dir` takes a value
its help line does not show, and `-fp`/`--font-path` is parsed but not listed. An argument the
parser does not know makes whisper-server print its usage and exit with status 0, so a wrong
flag is a server that quietly never starts. The same build's `--help` is kept beside this script
(`whisper_server_help_<version>.txt`, printed on a 2-core machine: the `-t` default is
min(4, cores)); the tests check the table against it.

Usage: record_whisper_options.py WHISPER_CPP_TREE [--version 1.8.5]
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
BRANCH = re.compile(r'else if \(\s*((?:arg == "[^"]+"\s*(?:\|\|\s*)?)+)\)\s*\{([^}]*)\}')
NAME = re.compile(r'arg == "([^"]+)"')


def parse_options(source: str) -> list[tuple[tuple[str, ...], int]]:
    """(names, values taken) per branch of `whisper_params_parse`, in the parser's order."""
    body = source[source.index("bool whisper_params_parse("):]
    body = body[: body.index("\n}\n")]
    options = [(("-h", "--help"), 0)]
    for m in BRANCH.finditer(body):
        names = tuple(NAME.findall(m.group(1)))
        options.append((names, 1 if "argv[++i]" in m.group(2) else 0))
    return options


def render(options: list[tuple[tuple[str, ...], int]], version: str) -> str:
    rows = "\n".join(f"    ({names!r}, {values})," for names, values in options)
    return f'''"""whisper-server {version}'s arguments as its parser reads them (whisper.cpp
examples/server/server.cpp `whisper_params_parse`), recorded by
tests/data/record_whisper_options.py. Do not edit by hand: rerun the script on a new build.

A row: (names, values taken: 0 or 1).
"""

VERSION = {version!r}

OPTIONS: tuple[tuple[tuple[str, ...], int], ...] = (
{rows}
)
'''


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tree", type=Path, help="a whisper.cpp source tree")
    parser.add_argument("--version", default="1.8.5")
    args = parser.parse_args()
    source = (args.tree / "examples" / "server" / "server.cpp").read_text(encoding="utf-8")
    out = REPO / "autogen" / "flags" / f"whisper_{args.version.replace('.', '_')}.py"
    out.write_text(render(parse_options(source), args.version), encoding="utf-8")
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
