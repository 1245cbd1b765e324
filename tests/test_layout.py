"""The package reads as its data flow: stages import only downwards, no module imports itself
back, the code stamp covers every module, and the engine table is whole: every role is served
and every resolution reaches an emitter or a stated reason."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

from autogen.discovery.rows import ModelRow
from autogen.emit.dispatch import emitter_for, emitting_engine
from autogen.engines import CUSTOM_KIND, ENGINES, Engine, Role, imported
from autogen.errors import ModelError
from autogen.figures.logs import LogReader
from autogen.fsutil import code_stamp
from autogen.resolve.backends import resolve_backend
from autogen.resolve.job import resolve_for
from autogen.settings.schema import BackendRow, Override, Settings

PACKAGE = Path(__file__).resolve().parent.parent / "autogen"
#: Top to bottom: a stage may import its own modules and those of the stages below it.
STAGES = ("commands", "figures", "router", "emit", "sizing", "resolve", "discovery", "metadata", "flags", "settings")
LEAF = "(leaf)"


def _modules() -> dict[str, ast.Module]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = ast.parse(path.read_text(), str(path))
    return found


def _imports(tree: ast.Module, *, top_level_only: bool) -> set[str]:
    nodes = tree.body if top_level_only else ast.walk(tree)
    names = set()
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("autogen"):
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names if a.name.startswith("autogen"))
    return names


def _stage(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 else LEAF


MODULES = _modules()


def test_every_module_sits_in_a_known_stage_or_is_a_leaf():
    stages = {_stage(m) for m in MODULES} - {LEAF, "autogen"}
    assert stages <= set(STAGES), stages - set(STAGES)


def test_imports_only_run_down_the_stages():
    rank = {stage: i for i, stage in enumerate(STAGES)}
    rank[LEAF] = len(STAGES)
    upward = []
    for module, tree in MODULES.items():
        for target in _imports(tree, top_level_only=False):
            source_stage, target_stage = _stage(module), _stage(target)
            if source_stage == LEAF and target_stage != LEAF:
                upward.append(f"{module} (a leaf) imports {target}")
            elif rank[target_stage] < rank.get(source_stage, len(STAGES)):
                upward.append(f"{module} ({source_stage}) imports {target} ({target_stage})")
    assert upward == []


def test_no_import_cycles():
    graph = {m: {t for t in _imports(tree, top_level_only=False) if t in MODULES}
             for m, tree in MODULES.items()}
    cycles, state = [], {}

    def visit(module: str, path: list[str]) -> None:
        state[module] = "open"
        for target in sorted(graph[module]):
            if state.get(target) == "open":
                cycles.append(" → ".join([*path[path.index(target):], target]))
            elif target not in state:
                visit(target, [*path, target])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert cycles == []


def test_the_code_stamp_covers_every_module_in_every_folder():
    stamped = {path for path, _size, _mtime in code_stamp()}
    on_disk = {os.path.relpath(p, PACKAGE) for p in map(str, PACKAGE.rglob("*.py"))}
    assert stamped == on_disk and any(os.sep in p for p in stamped)


# --- the engine table -------------------------------------------------------------------------

#: A row of every engine swapgen knows (its first kind spelling), and a custom one.
ROWS = (*(BackendRow(id=f"{engine}-row", kind=row.kinds[0], path=f"/opt/{engine}") for engine, row in ENGINES.items()),
        BackendRow(id="custom-row", kind=CUSTOM_KIND, path="/opt/custom"))
GGUF = ModelRow(id="m", format="gguf", path="/m/model.gguf")
HF = ModelRow(id="h", format="hf", path="/m/folder")
#: The engines a model file of each role can ask for first (`roles.preferred_engine`; a whisper.cpp
#: model asks for whisper.cpp).
PREFERS = {Role.TTS: (Engine.TTS, Engine.TTSCPP, Engine.AUDIOCPP), Role.ASR: (None, Engine.WHISPER, Engine.AUDIOCPP)}
#: Roles whose custom-kind rows run with the role's one emitter (its engines' forks share flags).
CUSTOM_SERVED = {Role.IMAGE, Role.SEGMENT, Role.TTS, Role.ASR}


def test_every_engine_reference_loads_and_every_role_is_served():
    for engine, row in ENGINES.items():
        for reference in (row.emitter, row.probe, row.config_file or None):
            assert reference is None or callable(imported(reference)), (engine, reference)
        assert not row.log_reader or isinstance(imported(row.log_reader), LogReader), engine
    assert {role for row in ENGINES.values() for role in row.roles} == set(Role)


def test_every_kind_spelling_names_one_engine():
    spellings = [kind for row in ENGINES.values() for kind in row.kinds]
    assert len(spellings) == len(set(spellings)) and CUSTOM_KIND not in spellings
    assert all(kind == kind.strip().lower() for kind in spellings)


def _reachable() -> set[tuple[Role, str, str | None]]:
    """Every (role, engine, preferred engine) resolution can hand to the dispatch: each role
    under a pin to every row of every engine, and unpinned."""
    reached = set()
    for row, role in [(GGUF, r) for r in Role] + [(HF, Role.LLM)]:
        for prefer in PREFERS.get(role, (None,)) if row is GGUF else (Engine.VLLM,):
            for pin in [None, *(r.id for r in ROWS)]:
                settings = Settings(roots=("/m",), backends=ROWS)
                override = Override(match="*", backend=pin) if pin else None
                try:
                    engine = (resolve_for(settings, override, row, role) if role == Role.EMBEDDING
                              else resolve_backend(settings, override, role, prefer)).engine
                except ModelError:
                    continue  # a pin to another role: refused with a reason
                reached.add((role, engine, prefer))
    return reached


@pytest.mark.parametrize(("role", "engine", "prefer"), sorted(_reachable(), key=str))
def test_every_resolution_reaches_an_emitter_or_a_stated_reason(role, engine, prefer):
    if role in (Role.UPSCALE, Role.THREE_D):
        assert emitter_for(role, engine, prefer) is None  # registry-only: no model of the role is found
        return
    if engine == CUSTOM_KIND and role not in CUSTOM_SERVED:
        # several engines' flags for one role: a custom engine gets the plain reason, never a guess
        assert emitter_for(role, engine, prefer) is None
        return
    assert emitter_for(role, engine, prefer) is not None, f"{role} on {engine} (prefers {prefer}): no emitter"


def test_no_emitter_is_out_of_reach():
    reached = {emitting_engine(role, engine, prefer) for role, engine, prefer in _reachable()}
    assert {row.emitter for row in ENGINES.values()} == {row.emitter for row in reached if row}
