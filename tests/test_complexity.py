"""Every function in autogen/ stays under the complexity limit, conditional expressions counted.

ruff's C901 (the PyCQA mccabe rule, `max-complexity = 15` in pyproject.toml) counts the branches
of statements: `if`/`elif`, loops, `except` clauses, `match` cases, nested functions. It does not
count a conditional expression (`a if c else b`), so a function written as a chain of them passes
however many branches it hides. This check counts exactly what ruff counts (`mccabe_complexity`
mirrors ruff's `get_complexity_number`, crates/ruff_linter/src/rules/mccabe) plus one per
conditional expression, against the same limit of 15.

Why not `radon cc`: radon also counts every `and`/`or` operand and comprehension, so its number
measures something else than the limit ruff holds the code to (61 functions were over 15 by
radon's count, 13 by this one, when the check was added), and its grades (C = 11–20) are coarser
than the number. One number, one limit, and ruff's count stays exactly ruff's.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 15


def mccabe_complexity(statements: list[ast.stmt]) -> int:
    """The branches ruff's C901 counts in a body (without the function's own 1)."""
    n = 0
    for s in statements:
        if isinstance(s, ast.If):
            n += 1 + mccabe_complexity(s.body)
            rest = s.orelse
            while len(rest) == 1 and isinstance(rest[0], ast.If):  # an elif clause
                n += 1 + mccabe_complexity(rest[0].body)
                rest = rest[0].orelse
            n += mccabe_complexity(rest)
        elif isinstance(s, (ast.For, ast.AsyncFor, ast.While)):
            n += 1 + mccabe_complexity(s.body) + mccabe_complexity(s.orelse)
        elif isinstance(s, (ast.With, ast.AsyncWith, ast.ClassDef)):
            n += mccabe_complexity(s.body)
        elif isinstance(s, ast.Match):
            n += sum(1 + mccabe_complexity(case.body) for case in s.cases)
        elif isinstance(s, (ast.Try, ast.TryStar)):
            n += mccabe_complexity(s.body) + mccabe_complexity(s.orelse) + mccabe_complexity(s.finalbody)
            n += sum(1 + mccabe_complexity(h.body) for h in s.handlers)
        elif isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
            n += 1 + mccabe_complexity(s.body)
    return n


def complexity(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """ruff's count for the function plus one per conditional expression in it."""
    conditional = sum(isinstance(node, ast.IfExp) for node in ast.walk(function))
    return 1 + mccabe_complexity(function.body) + conditional


def functions() -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    found = []
    for path in sorted((ROOT / "autogen").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found.append((f"{path.relative_to(ROOT)}:{node.lineno} {node.name}", node))
    return found


def test_every_function_is_under_the_limit():
    over = [f"{where} ({n})" for where, node in functions() if (n := complexity(node)) > LIMIT]
    assert over == []


def _body(source: str) -> ast.FunctionDef:
    return ast.parse(source).body[0]


@pytest.mark.parametrize(("source", "expected"), [
    ("def f():\n    return 1\n", 1),
    ("def f(x):\n    if x:\n        return 1\n    elif x > 1:\n        return 2\n    else:\n        return 3\n", 3),
    ("def f(x):\n    for i in x:\n        while i:\n            i -= 1\n", 3),
    ("def f(x):\n    try:\n        pass\n    except ValueError:\n        pass\n    except OSError:\n        pass\n", 3),
    ("def f(x):\n    return 1 if x else 2 if x > 1 else 3\n", 3),
    ("def f(x):\n    y = [a for a in x if a]\n    return x and y or None\n", 1),  # neither counts, as in ruff
    ("def f(x):\n    def g():\n        return 1 if x else 2\n    return g\n", 3),
])
def test_the_count(source, expected):
    assert complexity(_body(source)) == expected
