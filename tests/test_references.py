"""Every swapgen module, class and function that a docstring, a comment or a maintainer doc names
exists: a reader who follows `emit.dispatch.build_plan` or `devices.place` finds it.

A dotted name is read as a reference to swapgen's code when its first part is `autogen`, the
name of one of the package's modules (`devices.place`) or a name a module had before the
package was laid out by stage (`profiles_llama.profile_owners`), or a stage followed by a module
or by a name the package defines (`emit.dispatch`, `discovery.walk_signature`). File names
(`walk.py`, `llama.cpp`, `config.json`) are not references, nor are keys after a stage's name
(`settings.ttl`, `metadata.est_vram_gb`). A key whose first part is a module's name is written
as its class field (`Watch.polling`, `Settings.backends`) or in words (the `devices` metadata key).
"""

from __future__ import annotations

import ast
import importlib
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "autogen"
STAGES = frozenset(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file())
MODULES = frozenset(
    ".".join(p.relative_to(ROOT).with_suffix("").parts[: -1 if p.name == "__init__.py" else None])
    for p in PACKAGE.rglob("*.py"))
#: Module name → the modules of that name (`llama` is both `emit.llama` and `sizing.llama`).
BASENAMES: dict[str, list[str]] = {}
for _module in sorted(MODULES):
    BASENAMES.setdefault(_module.rpartition(".")[2], []).append(_module)


def _top_level_names() -> frozenset[str]:
    names = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names.update(t.id for t in targets if isinstance(t, ast.Name))
    return frozenset(names)


#: Every class, function and constant the package defines at the top of a module.
TOP_NAMES = _top_level_names()
#: Names of modules that no longer exist under these names (before the layout by stage); a
#: reference through one of them points nowhere.
FORMER = frozenset({"emit_audio", "emit_llama", "emit_sam", "emit_sd", "emit_vllm", "emitcontext", "metacache",
                    "plan", "profiles_llama", "sizing_llama", "vllm_sizing"})
#: Endings of file names, which look like dotted names.
FILE_ENDINGS = frozenset({"py", "json", "md", "yaml", "yml", "go", "cpp", "h", "gguf", "so", "ini", "safetensors",
                          "sh", "txt", "sqlite3", "pickle", "toml", "ggml", "pt", "bin", "exe", "log"})

DOTTED = re.compile(r"(?<![\w./$-])([A-Za-z_]\w*(?:\.(?:[A-Za-z_]\w*|\*))+)")
#: A module named alone, in backticks: `llama_profiles`.
ALONE = re.compile(r"`([a-z_]\w*)`")

#: Where references live: the package, tests, benchmarks and scripts (docstrings and comments),
#: and the maintainer docs (the user guide, README.md and docs/*.md, speaks in settings keys:
#: `watch.polling` there is a key, not a module).
SOURCES = sorted(p for p in [*PACKAGE.rglob("*.py"), *(ROOT / "tests").rglob("*.py"),
                             *(ROOT / "benchmarks").rglob("*.py"), *(ROOT / "scripts").rglob("*.py"),
                             ROOT / "dodo.py"] if p.is_file() and p.resolve() != Path(__file__).resolve())
PROSE = sorted([*(ROOT / "docs" / "maintainers").glob("*.md"), PACKAGE / "README.md"])


def _prose_of(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every docstring and comment of a Python file."""
    source = path.read_text()
    found = [(tok.start[0], tok.string) for tok in tokenize.generate_tokens(io.StringIO(source).readline)
             if tok.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            found.append((node.lineno, node.value.value))
    return found


def _is_reference(name: str) -> bool:
    """`autogen.…`, a module or former module name first, or a stage followed by a module or a
    name the package defines; a stage followed by anything else is a key (`settings.ttl`,
    `metadata.est_vram_gb`), and a name with a file ending a file."""
    parts = name.removesuffix(".*").split(".")
    if len(parts) == 1:  # alone: a module's name, or a former one that no function took over
        return name in BASENAMES or (name in FORMER and name not in TOP_NAMES)
    if parts[-1] in FILE_ENDINGS:
        return False
    if parts[0] in STAGES:
        return parts[1] in BASENAMES or parts[1] in FORMER or parts[1] in TOP_NAMES
    return parts[0] == "autogen" or parts[0] in BASENAMES or parts[0] in FORMER


def _resolves_under(module: str, rest: list[str]) -> bool:
    while rest and f"{module}.{rest[0]}" in MODULES:
        module = f"{module}.{rest.pop(0)}"
    target: object = importlib.import_module(module)
    for attr in rest:
        if attr == "*":
            return True
        if not hasattr(target, attr):
            return False
        target = getattr(target, attr)
    return True


def resolves(name: str) -> bool:
    """The name is a module of the package, or an attribute (chain) of one."""
    first, *rest = name.split(".")
    if first == "autogen":
        starts = ["autogen"]
    elif first in STAGES:
        starts = [f"autogen.{first}"]
    else:
        starts = BASENAMES.get(first, [])
    return any(_resolves_under(start, list(rest)) for start in starts)


def references() -> list[tuple[str, str]]:
    """(where, name) for every reference in the sources' prose and the docs."""
    found = []
    for path in SOURCES:
        for line, text in _prose_of(path):
            found += [(f"{path.relative_to(ROOT)}:{line}", m.group(1)) for m in DOTTED.finditer(text)]
            found += [(f"{path.relative_to(ROOT)}:{line}", m.group(1)) for m in ALONE.finditer(text)]
    for path in PROSE:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            found += [(f"{path.relative_to(ROOT)}:{number}", m.group(1)) for m in DOTTED.finditer(line)]
            found += [(f"{path.relative_to(ROOT)}:{number}", m.group(1)) for m in ALONE.finditer(line)]
    return [(where, name.rstrip(".")) for where, name in found if _is_reference(name.rstrip("."))]


REFERENCES = references()


def test_every_named_module_class_and_function_exists():
    stale = sorted({f"{where}: {name}" for where, name in REFERENCES if not resolves(name)})
    assert stale == []


def test_the_reader_finds_references_of_every_shape():
    """The scan sees dotted names in docstrings, comments and docs, by stage, module and former name."""
    names = {name for _, name in REFERENCES}
    assert {"emit.dispatch.build_plan", "settings.load", "numfmt.size_gb"} <= names
    assert len(REFERENCES) > 100


@pytest.mark.parametrize(("name", "exists"), [
    ("emit.dispatch.build_plan", True), ("devices.Placement.gpus", True), ("autogen.emit", True),
    ("emit.sd.*", True), ("plan.build_plan", False), ("profiles_llama.profile_owners", False),
    ("sizing.kvcost.KV_TYPE_BYTES", False), ("emit.dispatch.no_such_function", False), ("llama_profiles", True),
    ("vllm_sizing", False)])
def test_resolution(name, exists):
    """A name resolves through modules then attributes; former module names never do."""
    assert _is_reference(name) and resolves(name) is exists


@pytest.mark.parametrize("name", ["walk.py", "llama.cpp", "config.json", "gguf.Keys", "os.truncate", "settings.ttl",
                                  "metadata.est_vram_gb", "emit_llama"])
def test_file_names_and_other_projects_are_not_references(name):
    assert not _is_reference(name)
