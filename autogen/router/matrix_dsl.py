"""llama-swap's matrix set language: `a & b`, `a | b`, `( … )` and `+set`, as its compiler reads it.

Mirrors `internal/matrix/dsl.go` (tokenize, parseOrExpr / parseAndExpr / parseAtom) and
`Compile` in `internal/matrix/program.go` (every leaf resolves to a var or a model id, every
`+ref` names a defined set, no reference cycles), with the same messages, so `swapgen validate`
refuses exactly what llama-swap's `ValidateMatrix` refuses. `expand` lists the concrete model
sets an expression allows; llama-swap never expands (its solver projects), swapgen does so only
to check that each set it planned fits the cards (`router.matrix_plan`).
"""

from __future__ import annotations

from collections.abc import Callable

from attrs import frozen

AND, OR, LEAF, REF = "and", "or", "leaf", "ref"


class DslError(ValueError):
    """An expression llama-swap's compiler refuses; the message is its own. `set_name`: the
    set it concerns, when known."""

    def __init__(self, message: str, set_name: str | None = None):
        super().__init__(message)
        self.set_name = set_name


@frozen
class Node:
    kind: str
    #: A leaf's identifier or a reference's set name.
    name: str = ""
    children: tuple[Node, ...] = ()


def _ident_char(ch: str) -> bool:
    """dsl.go `isIdentChar`: unicode letters and digits, `_`, `-`, `.`."""
    return ch.isalnum() or ch in "_-."


def tokenize(text: str) -> list[tuple[str, str]]:
    """(kind, value) pairs; kinds are the operator characters, "ident", "ref" and "eof"."""
    tokens, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch.isspace():
            i += 1
        elif ch in "&|()":
            tokens.append((ch, ch))
            i += 1
        elif ch == "+":
            start = i = i + 1
            while i < len(text) and _ident_char(text[i]):
                i += 1
            if i == start:
                raise DslError(f"tokenize: expected set name after '+' at position {start}")
            tokens.append(("ref", text[start:i]))
        elif _ident_char(ch):
            start = i
            while i < len(text) and _ident_char(text[i]):
                i += 1
            tokens.append(("ident", text[start:i]))
        else:
            raise DslError(f"tokenize: unexpected character {ch!r} at position {i}")
    return [*tokens, ("eof", "")]


class _Parser:
    def __init__(self, tokens: list[tuple[str, str]]):
        self.tokens, self.pos = tokens, 0

    def peek(self) -> tuple[str, str]:
        return self.tokens[self.pos]

    def next(self) -> tuple[str, str]:
        token = self.tokens[self.pos]
        if token[0] != "eof":
            self.pos += 1
        return token

    def either(self) -> Node:
        children = [self.both()]
        while self.peek()[0] == "|":
            self.next()
            children.append(self.both())
        return children[0] if len(children) == 1 else Node(OR, children=tuple(children))

    def both(self) -> Node:
        children = [self.atom()]
        while self.peek()[0] == "&":
            self.next()
            children.append(self.atom())
        return children[0] if len(children) == 1 else Node(AND, children=tuple(children))

    def atom(self) -> Node:
        kind, value = self.next()
        if kind == "ident":
            return Node(LEAF, value)
        if kind == "ref":
            return Node(REF, value)
        if kind == "(":
            inner = self.either()
            if self.next()[0] != ")":
                raise DslError("parse: missing closing parenthesis")
            return inner
        raise DslError(f'parse: unexpected token "{value}"')


def parse(text: str) -> Node:
    """One set's expression; raises DslError with llama-swap's message."""
    if not text.strip():
        raise DslError("empty DSL expression")
    parser = _Parser(tokenize(text.strip()))
    root = parser.either()
    if parser.peek()[0] != "eof":
        raise DslError(f'parse: unexpected token "{parser.peek()[1]}" after expression')
    return root


def _walk(node: Node):
    yield node
    for child in node.children:
        yield from _walk(child)


def compile_sets(sets: list[tuple[str, str]], resolve: Callable[[str], str | None]) -> dict[str, Node]:
    """`Compile`: set name → its expression with every leaf resolved to a model id. Raises
    DslError (prefixed `set "<name>": ` where llama-swap says so) for the first problem, in
    definition order, as llama-swap stops at the first."""
    names = {name for name, _ in sets}
    roots: dict[str, Node] = {}
    deps: dict[str, list[str]] = {}
    for name, text in sets:
        try:
            root = parse(text)
        except DslError as exc:
            raise DslError(f'set "{name}": {exc}', name) from None
        deps[name] = []
        for node in _walk(root):
            if node.kind == LEAF and resolve(node.name) is None:
                raise DslError(f'set "{name}": unknown var or model "{node.name}"', name)
            if node.kind == REF:
                if node.name not in names:
                    raise DslError(f'set "{name}" references undefined set "{node.name}"', name)
                if node.name not in deps[name]:
                    deps[name].append(node.name)
        roots[name] = _resolved(root, resolve)
    state: dict[str, int] = {}

    def visit(name: str) -> None:  # program.go topologicalOrder
        if state.get(name) == 1:
            raise DslError(f'circular reference detected involving set "{name}"', name)
        if state.get(name) == 2:
            return
        state[name] = 1
        for dep in deps[name]:
            visit(dep)
        state[name] = 2

    for name, _ in sets:
        visit(name)
    return roots


def _resolved(node: Node, resolve: Callable[[str], str | None]) -> Node:
    if node.kind == LEAF:
        return Node(LEAF, resolve(node.name) or node.name)
    return Node(node.kind, node.name, tuple(_resolved(c, resolve) for c in node.children))


def expand(node: Node, roots: dict[str, Node]) -> set[frozenset[str]]:
    """The concrete model sets an expression allows (each also permits its subsets)."""
    if node.kind == LEAF:
        return {frozenset((node.name,))}
    if node.kind == REF:
        return expand(roots[node.name], roots)
    parts = [expand(child, roots) for child in node.children]
    if node.kind == OR:
        return set().union(*parts)
    combined = {frozenset()}
    for part in parts:
        combined = {a | b for a in combined for b in part}
    return combined


def can_contain_all(roots: dict[str, Node], models: list[str]) -> bool:
    """program.go `CanContainAll`: some expanded set holds every one of `models`. Sets are
    expanded over `models` only (another leaf adds nothing), so a wide `a | b | …` stays small."""
    keep = frozenset(models)

    def over(node: Node) -> set[frozenset[str]]:
        if node.kind == LEAF:
            return {frozenset((node.name,)) & keep}
        if node.kind == REF:
            return over(roots[node.name])
        parts = [over(child) for child in node.children]
        if node.kind == OR:
            return set().union(*parts)
        combined = {frozenset()}
        for part in parts:
            combined = {a | b for a in combined for b in part}
        return combined

    return any(keep <= found for root in roots.values() for found in over(root))
