#!/usr/bin/env python3
"""Record llama-server's arguments into `autogen/flags/llama_b11434.py`, the table a
models preset is written and checked with. Not run by the tests; rerun it when llama.cpp moves.

It reads llama.cpp's own definitions, `common_params_parser_init` in common/arg.cpp (every
`add_opt(common_arg(…))`) and `common_params_add_preset_options` (the preset-only keys), and
keeps the options `llama-server --help` of the same build lists (the server's example filter):

- names: the `args` list, and `args_neg` for an on/off option (`{"--foo"}, {"--no-foo"}`);
- how many values: from the handler's signature (`common_params &` alone or with a `bool`: 0,
  with an `int` or a string: 1, with two strings: 2);
- env: `.set_env("LLAMA_ARG_…")`;
- list: the handler splits its value on commas and appends each item (`--lora a.gguf,b.gguf`),
  so two occurrences of the option join into one comma-separated value.

Usage: record_llama_options.py LLAMA_CPP_TREE HELP_TXT [--build b11434]
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


def _code(text: str, start: int = 0):
    """(index, character) of C++ code from `start`: string and char literals and line comments
    skipped."""
    i = start
    while i < len(text):
        if text[i] in "\"'":
            quote, i = text[i], i + 1
            while text[i] != quote:
                i += 2 if text[i] == "\\" else 1
            i += 1
        elif text.startswith("//", i):
            i = text.index("\n", i)
        else:
            yield i, text[i]
            i += 1


def _balanced(text: str, start: int) -> int:
    """Index just past the parenthesis group opening at `start`."""
    depth = 0
    for i, c in _code(text, start):
        depth += c in "({["
        depth -= c in ")}]"
        if depth == 0:
            return i + 1
    raise ValueError(f"unbalanced group at {start}")


def _top_level_items(body: str) -> list[str]:
    """The constructor's arguments, split on commas outside groups and strings."""
    items, depth, start = [], 0, 0
    for i, c in _code(body):
        depth += c in "({["
        depth -= c in ")}]"
        if c == "," and depth == 0:
            items.append(body[start:i].strip())
            start = i + 1
    items.append(body[start:].strip())
    return items


_LITERAL = re.compile(r'"((?:[^"\\]|\\.)*)"')
_LAMBDA = re.compile(r"^\[\]\s*\(([^)]*)\)")


def _values(signature: str) -> int:
    params = [p.strip() for p in signature.split(",")][1:]  # after `common_params & params`
    if not params or params[0].startswith("bool"):
        return 0
    return len(params)


def _for_server(chain: str, source: str) -> bool:
    """`add_opt`'s filter for llama-server: its example or the common ones, and not excluded."""
    examples = re.search(r"\.set_examples\(\s*([^)]*)\)", chain)
    excludes = re.search(r"\.set_excludes\(\s*([^)]*)\)", chain)
    listed = _example_names(examples.group(1), source) if examples else {"LLAMA_EXAMPLE_COMMON"}
    if excludes and "LLAMA_EXAMPLE_SERVER" in _example_names(excludes.group(1), source):
        return False
    return bool(listed & {"LLAMA_EXAMPLE_SERVER", "LLAMA_EXAMPLE_COMMON"})


def _example_names(text: str, source: str) -> set[str]:
    """`{LLAMA_EXAMPLE_A, …}` or a named list (`mmproj_examples`) defined in the file."""
    names = set(re.findall(r"LLAMA_EXAMPLE_\w+", text))
    for word in re.findall(r"\b[a-z_]+_examples\b", text):
        defined = re.search(rf"{word}\s*=\s*\{{([^}}]*)\}}", source)
        names |= set(re.findall(r"LLAMA_EXAMPLE_\w+", defined.group(1))) if defined else set()
    return names


def parse_options(source: str) -> list[dict]:
    options = []
    for m in re.finditer(r"(?:add_opt|args\.push_back)\(common_arg\(", source):
        if "//" in source[source.rfind("\n", 0, m.start()):m.start()]:
            continue  # commented out
        open_at = m.end() - 1
        end = _balanced(source, open_at)
        items = [re.sub(r"//[^\n]*", "", item).strip() for item in _top_level_items(source[open_at + 1:end - 1])]
        names = _LITERAL.findall(items[0])
        negatives = _LITERAL.findall(items[1]) if items[1].startswith("{") else []
        handler = next(item for item in items if item.startswith("[]"))
        values = _values(_LAMBDA.match(handler).group(1))
        chain = source[end:_balanced(source, m.start() + m.group(0).index("("))]
        env = re.search(r'\.set_env\(\s*"([^"]+)"\s*\)', chain)
        preset_only = ".set_preset_only()" in chain
        if not preset_only and not _for_server(chain, source):
            continue
        splits = "parse_tensor_buffer_overrides" in handler or "parse_csv_row(value)" in handler or "string_split<std::string>(value, ',')" in handler
        appends = "parse_tensor_buffer_overrides" in handler or "push_back" in handler or "emplace_back" in handler or "string_parse_kv_override" in handler
        options.append({"names": names, "negatives": negatives, "values": values,
                        "env": env.group(1) if env else "", "list": splits and appends and values == 1,
                        "preset_only": preset_only})
    return options


def help_names(text: str) -> set[str]:
    """Every name `llama-server --help` prints at the start of an option line."""
    names = set()
    for line in text.splitlines():
        if not line.startswith("-") or line.startswith("-----"):
            continue
        head = re.split(r"\s{2,}", line, maxsplit=1)[0]
        names.update(word.rstrip(",") for word in head.split() if word.startswith("-"))
    return names


def render(options: list[dict], build: str) -> str:
    rows = []
    for o in options:
        rows.append(f"    ({tuple(o['names'])!r}, {tuple(o['negatives'])!r}, {o['values']}, {o['env']!r}, "
                    f"{o['list']!r}),")
    preset_rows = [f"    {o['names'][0]!r}," for o in options if o["preset_only"]]
    return (f'"""llama-server {build}\'s arguments as llama.cpp defines them (common/arg.cpp,\n'
            "`common_params_parser_init` filtered to the options `llama-server --help` lists), recorded by\n"
            "tests/data/record_llama_options.py. Do not edit by hand: rerun the script on a new build.\n\n"
            "A row: (names, negative names, values taken (0, 1 or 2), env variable, list: the values of\n"
            'repeated occurrences join with commas).\n"""\n\n'
            f"BUILD = {build!r}\n\n"
            "OPTIONS: tuple[tuple[tuple[str, ...], tuple[str, ...], int, str, bool], ...] = (\n"
            + "\n".join(line for row in rows for line in _wrap(row)) + "\n)\n\n"
            "#: Keys only a preset has (`common_params_add_preset_options`): not arguments of the instance.\n"
            "PRESET_ONLY: tuple[str, ...] = (\n" + "\n".join(preset_rows) + "\n)\n")


def _wrap(row: str) -> list[str]:
    if len(row) <= 120:
        return [row]
    cut = row.rindex("), ", 0, 118) + 2
    return [row[:cut], "     " + row[cut:].lstrip()]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("tree", type=Path, help="the llama.cpp source tree (holds common/arg.cpp)")
    p.add_argument("help", type=Path, help="`llama-server --help` of the same build")
    p.add_argument("--build", default="b11434")
    args = p.parse_args(argv)
    options = parse_options((args.tree / "common" / "arg.cpp").read_text(encoding="utf-8"))
    listed = help_names(args.help.read_text(encoding="utf-8"))
    kept, seen = [], set()
    for o in options:  # a name defined twice is an if/else on the example (`-np`): the first is the server's
        if (o["preset_only"] or any(n in listed for n in o["names"])) and o["names"][0] not in seen:
            kept.append(o)
            seen.add(o["names"][0])
    covered = {n for o in kept for n in o["names"] + o["negatives"]}
    missing = sorted(listed - covered)
    if missing:
        print(f"--help names no definition was found for: {', '.join(missing)}", file=sys.stderr)
        return 1
    out = REPO / "autogen" / "flags" / f"llama_{args.build}.py"
    out.write_text(render(kept, args.build), encoding="utf-8")
    print(f"{out}: {len(kept)} options")
    return 0


if __name__ == "__main__":
    sys.exit(main())
