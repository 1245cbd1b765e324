"""YAML text → dicts and lists that remember the line of every key and item, read as Go does.

llama-swap parses its config with gopkg.in/yaml.v3, whose plain scalars follow YAML 1.2 core
(`yes` stays a string, `017` is 15: `resolve.go`); PyYAML's resolver is YAML 1.1, so it is
switched off and `plain_scalar` applies yaml.v3's rules instead. Speed matters (the validator
runs before every write): libyaml composes the node tree and one pass converts it (1,000
models: ~0.1 s of CPU in all). Problems go to an `add(line, message)` callable.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

from autogen.bounds import CONFIG, InputTooLarge, Limits, too_deep, too_many_values

#: Where problems go: `add(line, message)`, line 1-based or None.
AddProblem = Callable[[int | None, str], object]


class LineMap(dict):
    """A mapping whose `lines[key]` is the 1-based line of that key."""

    __slots__ = ("lines",)

    def __init__(self):
        super().__init__()
        self.lines = {}


class LineSeq(list):
    """A sequence whose `lines[i]` is the 1-based line of item i."""

    __slots__ = ("lines",)


_NULLS = frozenset(("", "~", "null", "Null", "NULL"))
_BOOLS = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}
# yaml.v3 resolve.go: ints via strconv.ParseInt(base 0) after dropping "_", then YAML floats.
_INT = re.compile(r"[-+]?(0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)")
_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
_SPECIAL_FLOATS = dict.fromkeys((".inf", ".Inf", ".INF"), "inf") | dict.fromkeys((".nan", ".NaN", ".NAN"), "nan")


#: yaml.v3 resolves an integer with ParseInt, else ParseUint (64 bits): past both it is a float.
_GO_INTS = range(-(1 << 63), 1 << 64)


def plain_scalar(text: str):
    """A plain scalar's value by yaml.v3's rules (YAML 1.2 core: no yes/no/on/off). An integer
    outside 64 bits is a float, as a float past float64 is a string (`strconv` says out of range)."""
    if text in _NULLS:
        return None
    if text in _BOOLS:
        return _BOOLS[text]
    if text[0] in "+-.0123456789":
        digits = text.replace("_", "")
        if _INT.fullmatch(digits) and (value := _go_int(digits)) is not None:
            return value
        if _FLOAT.fullmatch(digits if _INT.fullmatch(digits) else text):
            value = float(digits)
            return value if math.isfinite(value) else text
        special = _SPECIAL_FLOATS.get(text.lstrip("+-"))
        if special and not (special == "nan" and text[0] in "+-"):
            return float(("-" if text[0] == "-" else "") + special)
    return text


def _go_int(digits: str) -> int | None:
    """ParseInt(base 0), then ParseUint: None past 64 bits (and for thousands of digits, which
    Python's int() refuses to read and are past them too)."""
    sign, body = (-1, digits[1:]) if digits[0] == "-" else (1, digits.lstrip("+"))
    octal = body[:1] == "0" and body[1:2].isdigit()  # Go's ParseInt(base 0): 017 == 15
    if len(body) > 4000:
        return None
    value = sign * int(body, 8 if octal else 0)
    return value if value in _GO_INTS else None


_GO_TAGS = {type(None): "!!null", bool: "!!bool", int: "!!int", float: "!!float", str: "!!str"}


def node_scalar(node, value) -> tuple[str, str]:
    """A scalar node's text and tag as yaml.v3's parser sets `Node.Value` and `Node.Tag`
    (parser.go `node`): an explicit tag shortened, `!!str` when quoted or a block, else the tag
    its plain text resolves to."""
    if node.tag and node.tag != "!":
        tag = node.tag.replace("tag:yaml.org,2002:", "!!")
    elif node.style:
        tag = "!!str"
    else:
        tag = _GO_TAGS[type(value)]
    return node.value, tag


class Converter:
    """Node tree → `LineMap`/`LineSeq`/scalars, recording duplicate keys as problems. Aliases
    are expanded as they are met, so values and depth are counted against `limits` on the way
    (`bounds`: "billion laughs" grows nine times per level); `InputTooLarge` past them."""

    def __init__(self, add: AddProblem, scalars: dict | None = None, limits: Limits = CONFIG):
        self.add = add
        self.count = 0
        self.depth = 0
        self.limits = limits
        #: When given, `(id(mapping), key) → (text, tag)` of every scalar value of a mapping, as
        #: yaml.v3's Node holds it (`Value`, `Tag`): llama-swap's merge compares scalars by them.
        self.scalars = scalars

    def value(self, node):
        self.count += 1
        if self.count > self.limits.max_values:
            raise InputTooLarge(too_many_values(self.limits))
        kind = node.id
        if kind == "scalar":  # tag "" = no explicit tag (see compose)
            return plain_scalar(node.value) if not node.style and not node.tag else node.value
        self.depth += 1
        if self.depth > self.limits.max_depth:
            raise InputTooLarge(too_deep(self.limits))
        try:
            if kind == "sequence":
                seq = LineSeq(self.value(item) for item in node.value)
                seq.lines = [item.start_mark.line + 1 for item in node.value]
                return seq
            return self.mapping(node)
        finally:
            self.depth -= 1

    def mapping(self, node) -> LineMap:
        out = LineMap()
        lines = out.lines
        merges = []
        for key_node, value_node in node.value:
            line = key_node.start_mark.line + 1
            if key_node.id != "scalar":
                self.add(line, "mapping keys must be scalars")
                continue
            if key_node.value == "<<" and not key_node.style and not key_node.tag:
                merges += value_node.value if value_node.id == "sequence" else [value_node]
                continue
            key = key_node.value
            if key in lines:
                self.add(line, f"mapping key '{key}' already defined at line {lines[key]}")
                continue
            out[key] = self.value(value_node)
            lines[key] = line
            if self.scalars is not None and value_node.id == "scalar":
                self.scalars[id(out), key] = node_scalar(value_node, out[key])
        for merged_node in merges:  # `<<: *anchor`: explicit keys win
            if merged_node.id != "mapping":
                self.add(merged_node.start_mark.line + 1, "'<<' must merge a mapping")
                continue
            merged = self.mapping(merged_node)
            for key, val in merged.items():
                if key not in lines:
                    out[key], lines[key] = val, merged.lines[key]
                    if self.scalars is not None:  # every scalar of `out` has its own entry
                        self.scalars[id(out), key] = self.scalars.get((id(merged), key))
        return out


class _NoResolver:
    """Leaves implicit tags empty: yaml.v3's rules are applied later, in `plain_scalar`.

    PyYAML's own resolver is YAML 1.1 (`yes` is true) and costs half the compose time.
    """

    def descend_resolver(self, *args):
        pass

    def ascend_resolver(self, *args):
        pass

    def resolve(self, kind, value, implicit):
        return ""

    def dispose(self):
        pass


def compose(text: str, add: AddProblem):
    """The document's node tree via libyaml (PyYAML's C parser; pure Python if absent).

    None for an empty document; False (after adding the problem) when it does not parse.
    """
    # lazy: PyYAML (a dependency of gguf) only loads when a config is validated
    import yaml  # noqa: PLC0415

    try:
        from yaml._yaml import CParser  # noqa: PLC0415

        loader = type("_CLoader", (_NoResolver, CParser), {})
    except ImportError:
        from yaml.composer import Composer  # noqa: PLC0415
        from yaml.parser import Parser  # noqa: PLC0415
        from yaml.reader import Reader  # noqa: PLC0415
        from yaml.scanner import Scanner  # noqa: PLC0415

        class loader(_NoResolver, Reader, Scanner, Parser, Composer):
            def __init__(self, stream):
                Reader.__init__(self, stream)
                Scanner.__init__(self)
                Parser.__init__(self)
                Composer.__init__(self)

    try:
        return yaml.compose(text, Loader=loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        add(mark.line + 1 if mark else None, f"YAML does not parse: {exc.problem}")
    except (yaml.YAMLError, RecursionError) as exc:
        add(None, f"YAML does not parse: {exc}")
    return False


