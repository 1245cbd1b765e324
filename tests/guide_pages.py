"""The pages a user reads, as the tests that keep them true read them: README.md (the quick
start and the sample tour) and the user guide, docs/*.md (built by Zensical from mkdocs.yml). The
maintainer notes in docs/maintainers/ hold no examples.

Conventions these helpers read:
- a settings table has the columns key | type | default | meaning, the key and the default in
  backticks, under a heading that names its class in backticks ("## Override rows (`Override`)");
- the first line of a ```yaml block says what it is: `# swapgen.yaml` (or a settings file of
  another name or folder, `# fleet.yaml: the front's settings`, `# hosts/a/swapgen.yaml`), `# backends.yaml`,
  `# config.yaml` (a whole llama-swap config), `# config.yaml (excerpt)`, `# config.yaml (with
  mistakes)` (one `swapgen validate` refuses), `# swapgen.yaml (with mistakes)` (settings a run
  refuses), or one of the other `MARKERS`;
- a transcript is a ```text block whose first line is the command (`$ swapgen list`); `…` on a
  line of its own stands for lines left out.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
GUIDE = REPO / "docs"
#: Every page with examples: the README, then the guide's pages.
PAGES = (README, *sorted(GUIDE.glob("*.md")))

MARKERS = ("# swapgen.yaml", "# backends.yaml", "# config.yaml", "# config.yaml (excerpt)", "# config.yaml (routing)",
           "# config.yaml (container)", "# compose.yaml", "# config.yaml (with mistakes)",
           "# swapgen.yaml (with mistakes)", "# .pre-commit-config.yaml")
#: File names of settings files; a block headed `# <folder>/<one of them>[: what it is]` is a settings example.
SETTINGS_FILES = ("swapgen.yaml", "fleet.yaml")

_FENCE = re.compile(r"^```([\w.+-]*)\n(.*?)^```\s*$", re.MULTILINE | re.DOTALL)
_HEADING = re.compile(r"^(#{1,6}) (.*)$")


def page(name: str) -> Path:
    """A guide page by file name (`settings.md`)."""
    path = GUIDE / name
    assert path.is_file(), f"docs/{name} is not in the repository"
    return path


@functools.cache
def page_text(path: Path = README) -> str:
    return path.read_text(encoding="utf-8")


def page_name(path: Path) -> str:
    """How a failure names a page: `README.md`, `docs/settings.md`."""
    return str(path.relative_to(REPO))


def marker(first_line: str) -> str:
    """What a block's first line says it is: `# swapgen.yaml` for every settings file, else the line."""
    name = first_line.strip().removeprefix("# ").split(":", 1)[0]
    return "# swapgen.yaml" if first_line.startswith("# ") and name.rsplit("/", 1)[-1] in SETTINGS_FILES else first_line


def code_blocks(path: Path = README) -> list[tuple[str, str, int]]:
    """(language, body, line number) of every fenced block of the page, in order."""
    body = page_text(path)
    return [(m.group(1), m.group(2), body.count("\n", 0, m.start()) + 1) for m in _FENCE.finditer(body)]


def section_lines(heading: str, path: Path = README) -> tuple[int, int]:
    """The first and the last line number of the section `heading` (a whole heading line,
    `## Name`): up to the next heading of its level or above."""
    level = len(heading) - len(heading.lstrip("#"))
    lines, fenced, first = page_text(path).splitlines(), False, None
    for number, line in enumerate(lines, 1):
        fenced ^= line.startswith("```")
        if fenced or not (m := _HEADING.match(line)):
            continue
        if first is None and line == heading:
            first = number
        elif first is not None and len(m.group(1)) <= level:
            return first, number - 1
    assert first is not None, f"{page_name(path)} has no heading {heading!r}"
    return first, len(lines)


def section(heading: str, path: Path = README) -> str:
    """The text of the section `heading`, its heading line included."""
    first, last = section_lines(heading, path)
    return "\n".join(page_text(path).splitlines()[first - 1:last]) + "\n"


def section_blocks(heading: str, path: Path = README) -> list[tuple[str, str, int]]:
    """The fenced blocks of the section `heading`."""
    first, last = section_lines(heading, path)
    return [b for b in code_blocks(path) if first < b[2] <= last]


def yaml_blocks(wanted: str, path: Path = README) -> list[tuple[str, int]]:
    """(body, line) of the page's ```yaml blocks whose first line's `marker` is `wanted`."""
    return [(body, line) for lang, body, line in code_blocks(path)
            if lang == "yaml" and marker(body.splitlines()[0].strip()) == wanted]


def prose(path: Path = README) -> str:
    """The page with its lines joined by single spaces, for a quoted line that the text wraps."""
    return " ".join(page_text(path).split())


def _separator(line: str) -> bool:
    return line.startswith("|") and set(line) <= set("|-: ")


def table_rows_under(wanted, path: Path = README) -> list[list[str]]:
    """Cells of the body rows of the tables in sections whose heading `wanted` accepts (a
    callable on the heading line, or that exact heading line)."""
    accept = (lambda h: h == wanted) if isinstance(wanted, str) else wanted
    lines = page_text(path).splitlines()
    rows, inside, in_fence = [], False, False
    for i, line in enumerate(lines):
        if line.startswith("```"):
            in_fence = not in_fence
        elif in_fence:
            continue
        elif _HEADING.match(line):
            inside = accept(line)
        elif inside and line.startswith("|") and not _separator(line):
            is_header = i + 1 < len(lines) and _separator(lines[i + 1])
            if not is_header:
                rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return rows


def chunks(transcript: str) -> list[str]:
    """A shown file or output cut at its `…` lines: each piece appears verbatim in the real one."""
    pieces, current = [], []
    for line in transcript.splitlines():
        if line.strip() == "…":
            pieces.append("\n".join(current) + "\n")
            current = []
        else:
            current.append(line)
    return [p for p in [*pieces, "\n".join(current) + "\n"] if p.strip()]


def in_order(pieces: list[str], actual: str) -> str | None:
    """The first piece that is not in `actual` after the ones before it, or None."""
    position = 0
    for piece in pieces:
        found = actual.find(piece, position)
        if found < 0:
            return piece
        position = found + len(piece)
    return None
