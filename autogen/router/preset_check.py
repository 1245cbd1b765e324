"""`swapgen validate FILE.ini`: a llama.cpp models preset read as llama.cpp's router reads it.

The line grammar is `parse_ini_from_file` in llama.cpp common/preset.cpp (a section header or a
`key = value` line starts in the first column; a value ends at `;` or `#`; anything else fails
the whole file); the keys are the arguments of the llama-server that will read it: its
`--help` when it can be run, else the recorded b11434 table (`llama_options`); the router's own
rules are tools/server/server-models.cpp (`add_model`, `unset_reserved_args`, `load_models`).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable

from attrs import frozen

from autogen.errors import did_you_mean
from autogen.flags.llama import OptionTable, recorded_table
from autogen.router.llama_options import ALIAS_ENV, PRESET_KEYS, VERSION_KEY, help_keys, owner_of
from autogen.router.validate import WARNING, Problem, read_config

_HEADER = re.compile(r"\[[ \t]*([^\]]+)\][ \t]*(?:[;#].*)?")
_KEY_VALUE = re.compile(r"([a-zA-Z_][a-zA-Z0-9_.-]*)[ \t]*=[ \t]*([^;#]*?)[ \t]*(?:[;#].*)?")
_IGNORED_LINE = re.compile(r"[ \t]*(?:[;#].*)?")
_LINE_BREAK = re.compile(r"\r\n|\n|\r")
#: The preset-only keys' values (`server_models::load_models`: `std::stoi`, `is_truthy`).
_BOOL_WORDS = ("true", "false", "on", "off", "1", "0", "enabled", "disabled")
#: The keys that say where a section's model is (`update_caps`): without one, only a model of
#: llama.cpp's own cache can fill the section.
MODEL_ENVS = frozenset({"LLAMA_ARG_MODEL", "LLAMA_ARG_HF_REPO", "LLAMA_ARG_MODEL_URL"})
#: A line llama.cpp's reader fails on: the file is not read at all.
UNREADABLE = "unreadable"
#: The section llama.cpp gives keys written before any header, and the one shared by all.
DEFAULT_SECTION, GLOBAL_SECTION = "default", "*"


@frozen
class Keys:
    """The keys one llama-server accepts in a preset, and where that list came from."""

    allowed: frozenset[str]
    #: e.g. "/opt/llama/bin/llama-server --help", "llama-server b11434's recorded arguments".
    source: str


def recorded_keys(table: OptionTable | None = None) -> Keys:
    table = table or recorded_table()
    return Keys(allowed=frozenset(table.by_key) | PRESET_KEYS,
                source=f"llama-server {table.build}'s recorded arguments")


def build_keys(exe: str | None) -> Keys:
    """The keys of the build at `exe` (its `--help`), else the recorded table's."""
    path = shutil.which(exe) if exe else None
    if path is None:
        return recorded_keys()
    try:
        st = os.stat(path)
    except OSError:
        return recorded_keys()
    found = _help_of(path, st.st_size, st.st_mtime_ns)
    return Keys(allowed=found | PRESET_KEYS, source=f"{path} --help") if found else recorded_keys()


@functools.cache
def _help_of(path: str, size: int, mtime_ns: int) -> frozenset[str]:
    """The preset keys in `path --help` (empty when it does not run or print options)."""
    try:
        done = subprocess.run([path, "--help"], capture_output=True, text=True, errors="replace", timeout=60,
                              check=False)
    except (OSError, subprocess.SubprocessError):
        return frozenset()
    keys = help_keys(done.stdout)
    return keys if "ctx-size" in keys else frozenset()


@frozen
class _Line:
    number: int
    key: str
    value: str


def parse(text: str, source: str) -> tuple[list[tuple[int | None, str, list[_Line]]], list[Problem]]:
    """((header line, name, its key lines) per section as written, the first being the keys
    before any header; problems of the file's shape)."""
    sections: list[tuple[int | None, str, list[_Line]]] = [(None, DEFAULT_SECTION, [])]
    problems: list[Problem] = []
    for number, line in enumerate(_LINE_BREAK.split(text), start=1):
        if _IGNORED_LINE.fullmatch(line):
            continue
        header = _HEADER.fullmatch(line)
        if header:
            name = header.group(1)
            earlier = next((n for n, other, _ in sections if other == name and n is not None), None)
            if earlier is not None:
                problems.append(Problem(number, f"section [{name}] again (line {earlier}): llama.cpp keeps only "
                                                "the keys after its last header", source))
            sections.append((number, name, []))
            continue
        pair = _KEY_VALUE.fullmatch(line)
        if pair:
            sections[-1][2].append(_Line(number, pair.group(1), pair.group(2)))
            continue
        problems.append(Problem(number, f"llama.cpp cannot read this line ({line.strip()[:60]!r}): a header "
                                        "`[name]` or a `key = value` starts in the first column; it refuses "
                                        "the whole file", source, UNREADABLE))
    return sections, problems


def check_preset_text(text: str, source: str = "models.ini", keys: Keys | None = None,
                      table: OptionTable | None = None) -> list[Problem]:
    """Every reason llama.cpp's router would refuse this preset or run something else than it says."""
    keys = keys or recorded_keys(table)
    table = table or recorded_table()
    sections, problems = parse(text, source)
    if any(p.severity == UNREADABLE for p in problems):
        return problems
    for _, name, lines in sections:
        problems += _section_problems(name, lines, keys, table, source)
    problems += _name_problems(sections, table, source)
    return sorted(problems, key=lambda p: (p.line or 0, p.message))


def _section_problems(name: str, lines: list[_Line], keys: Keys, table: OptionTable, source: str) -> list[Problem]:
    problems, seen = [], {}
    for line in lines:
        if line.key == VERSION_KEY:
            continue
        message = _key_problem(name, line, keys, table)
        if message:
            problems.append(Problem(line.number, f"[{name}] {line.key}: {message}", source))
            continue
        option = table.by_key.get(line.key)
        which = option.names if option is not None else (line.key,)
        if which in seen:
            problems.append(Problem(line.number, f"[{name}] {line.key}: the same setting as line {seen[which]}; "
                                                 "llama.cpp keeps the last one", source))
        seen[which] = line.number
    own = [ln for ln in lines if ln.key != VERSION_KEY]
    has_model = any((o := table.by_key.get(ln.key)) is not None and o.env in MODEL_ENVS for ln in own)
    if name not in (GLOBAL_SECTION, DEFAULT_SECTION) and not has_model:
        line = own[0].number if own else None
        problems.append(Problem(line, f"[{name}] has no model key: only a model of llama.cpp's own cache "
                                      "by that name can use it", source, WARNING))
    if name == DEFAULT_SECTION and own:
        problems.append(Problem(own[0].number, "keys before the first section make a model named "
                                               f"{DEFAULT_SECTION!r}; put them under [*] for every model", source))
    return problems


def _key_problem(section: str, line: _Line, keys: Keys, table: OptionTable) -> str | None:
    """Why `key = value` cannot stand in this section (None: it can)."""
    key, value = line.key, line.value
    if key not in keys.allowed:
        return f"not an argument of llama-server ({keys.source}){did_you_mean(key, sorted(keys.allowed))}"
    if key in PRESET_KEYS:
        if not _preset_value_ok(key, value):
            return f"{value!r}: expected {'an integer' if key == 'stop-timeout' else 'true or false'}"
        return None
    option = table.by_key.get(key)
    if option is None:
        return None
    owner = owner_of(table, key)
    if owner:
        return f"llama.cpp's router owns it: {owner}; remove it"
    if option.env == ALIAS_ENV and section == GLOBAL_SECTION:
        return "every model would get the same names; give each section its own alias"
    if option.values == 2:
        return "takes two values, which a preset key cannot hold (llama.cpp refuses to start the model)"
    if option.values == 0 and value not in _BOOL_WORDS:
        return f"{value!r}: expected true or false"
    return None


def _preset_value_ok(key: str, value: str) -> bool:
    if key == "stop-timeout":
        return value.lstrip("-").isdigit()
    return value in _BOOL_WORDS


def _name_problems(sections: list[tuple[int | None, str, list[_Line]]], table: OptionTable,
                   source: str) -> list[Problem]:
    """Names the router lists: its tag rule (`canonical_tag`), and aliases that clash."""
    headers = [(line, name, lines) for line, name, lines in sections if line is not None]
    problems, taken = [], {name: (line, name) for line, name, _ in headers}
    for line, name, _ in headers:
        listed = listed_name(name)
        if listed != name:
            problems.append(Problem(line, f"[{name}] is listed as {listed!r} (llama.cpp upper-cases the tag after "
                                          "the last ':')", source, WARNING))
    for _, name, lines in headers:
        for alias_line in (ln for ln in lines if _is_alias(ln.key, table)):
            for alias in (a.strip() for a in alias_line.value.split(",")):
                if not alias:
                    continue
                if alias in taken and taken[alias][1] != name:
                    other = taken[alias][1]
                    what = "a section" if other == alias else f"an alias of [{other}]"
                    problems.append(Problem(alias_line.number, f"[{name}] alias {alias!r} is already {what}: "
                                                               "llama.cpp's router refuses the file", source))
                taken.setdefault(alias, (alias_line.number, name))
    return problems


def _is_alias(key: str, table: OptionTable) -> bool:
    option = table.by_key.get(key)
    return option is not None and option.env == ALIAS_ENV


def listed_name(section: str) -> str:
    """The name the router lists a section under (common/preset.cpp `canonical_tag`)."""
    if section in (GLOBAL_SECTION, DEFAULT_SECTION) or ":" not in section:
        return section
    head, tag = section.rsplit(":", 1)
    m = re.search(r"[-.]([A-Z0-9_]+)$", tag, re.IGNORECASE)
    return f"{head}:{(m.group(1) if m else tag).upper()}"


def section_count(text: str) -> int:
    return len({name for line, name, _ in parse(text, "")[0] if line is not None and name != GLOBAL_SECTION})


def main_validate_presets(paths: Iterable[str], keys: Keys) -> int:
    """`swapgen validate FILE.ini …`: one line per problem and exit 1, else a summary line."""
    failed = False
    for path in paths:
        text, problem = read_config(path)
        if problem is not None:
            print(problem)
            failed = True
            continue
        problems = check_preset_text(text, path, keys)
        for p in problems:
            print(p)
        if any(p.fatal for p in problems):
            failed = True
            continue
        n = section_count(text)
        print(f"{path}: valid llama.cpp models preset ({n} model{'' if n == 1 else 's'}; keys of {keys.source})")
    sys.stdout.flush()
    return 1 if failed else 0

