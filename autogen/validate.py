"""Check a llama-swap config as llama-swap would: its JSON schema, then its loader's rules.

Mirrors `config-schema.json` and `internal/config/{load.go,macros.go,config.go}` of
mostlygeek/llama-swap (reference `anchors.md` §1.1–1.5). Every problem is collected, not
just the first, each with the line of the key it concerns. Keys llama-swap silently ignores
are reported too: a generator must never write them.

Speed matters (it runs before every write): libyaml composes the node tree without PyYAML's
YAML 1.1 resolver, and one pass turns it into dicts that remember each key's line (1,000
models: ~0.1 s of CPU in all).
"""

from __future__ import annotations

import difflib
import os
import re
import sys
from decimal import Decimal
from pathlib import Path
from urllib.parse import urlsplit

from attrs import Factory, field, frozen

from autogen.cmdline import split_command, strip_comment_lines

ERROR, IGNORED, WARNING = "error", "ignored", "warning"


@frozen
class Problem:
    """One finding; `str()` gives `FILE:LINE: message`.

    `severity`: "error" (llama-swap refuses the file), "ignored" (llama-swap silently
    ignores the key or id; still fails `swapgen validate`), "warning" (depends on where
    llama-swap runs, e.g. an unset `${env.X}`; does not fail).
    """

    line: int | None
    message: str
    source: str = "config.yaml"
    severity: str = ERROR

    @property
    def fatal(self) -> bool:
        return self.severity != WARNING

    def __str__(self) -> str:
        where = self.source if self.line is None else f"{self.source}:{self.line}"
        prefix = "warning: " if self.severity == WARNING else ""
        return f"{where}: {prefix}{self.message}"


# --- YAML → dicts and lists that remember lines -------------------------------------------


class _Map(dict):
    """A mapping whose `lines[key]` is the 1-based line of that key."""

    __slots__ = ("lines",)


class _Seq(list):
    """A sequence whose `lines[i]` is the 1-based line of item i."""

    __slots__ = ("lines",)


_NULLS = frozenset(("", "~", "null", "Null", "NULL"))
_BOOLS = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}
# yaml.v3 resolve.go: ints via strconv.ParseInt(base 0) after dropping "_", then YAML floats.
_INT = re.compile(r"[-+]?(0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)")
_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
_SPECIAL_FLOATS = dict.fromkeys((".inf", ".Inf", ".INF"), "inf") | dict.fromkeys((".nan", ".NaN", ".NAN"), "nan")
_MAX_VALUES = 2_000_000  # YAML aliases can expand exponentially ("billion laughs")


def _plain_scalar(text: str):
    """A plain scalar's value by yaml.v3's rules (YAML 1.2 core: no yes/no/on/off)."""
    if text in _NULLS:
        return None
    if text in _BOOLS:
        return _BOOLS[text]
    if text[0] in "+-.0123456789":
        digits = text.replace("_", "")
        if _INT.fullmatch(digits):
            sign, body = (-1, digits[1:]) if digits[0] == "-" else (1, digits.lstrip("+"))
            octal = body[:1] == "0" and body[1:2].isdigit()  # Go's ParseInt(base 0): 017 == 15
            return sign * int(body, 8 if octal else 0)
        if _FLOAT.fullmatch(text):
            return float(text)
        special = _SPECIAL_FLOATS.get(text.lstrip("+-"))
        if special and not (special == "nan" and text[0] in "+-"):
            return float(("-" if text[0] == "-" else "") + special)
    return text


class _Converter:
    """Node tree → `_Map`/`_Seq`/scalars, recording duplicate keys as problems."""

    def __init__(self, report: _Report):
        self.report = report
        self.count = 0

    def value(self, node):
        self.count += 1
        if self.count > _MAX_VALUES:
            raise _TooBig
        kind = node.id
        if kind == "scalar":  # tag "" = no explicit tag (see _compose)
            return _plain_scalar(node.value) if not node.style and not node.tag else node.value
        if kind == "sequence":
            seq = _Seq(self.value(item) for item in node.value)
            seq.lines = [item.start_mark.line + 1 for item in node.value]
            return seq
        return self.mapping(node)

    def mapping(self, node) -> _Map:
        out = _Map()
        out.lines = lines = {}
        merges = []
        for key_node, value_node in node.value:
            line = key_node.start_mark.line + 1
            if key_node.id != "scalar":
                self.report.add(line, "mapping keys must be scalars")
                continue
            if key_node.value == "<<" and not key_node.style and not key_node.tag:
                merges += value_node.value if value_node.id == "sequence" else [value_node]
                continue
            key = key_node.value
            if key in lines:
                self.report.add(line, f"mapping key '{key}' already defined at line {lines[key]}")
                continue
            out[key] = self.value(value_node)
            lines[key] = line
        for merged_node in merges:  # `<<: *anchor`: explicit keys win
            if merged_node.id != "mapping":
                self.report.add(merged_node.start_mark.line + 1, "'<<' must merge a mapping")
                continue
            merged = self.mapping(merged_node)
            for key, val in merged.items():
                if key not in lines:
                    out[key], lines[key] = val, merged.lines[key]
        return out


class _TooBig(Exception):
    pass


class _NoResolver:
    """Leaves implicit tags empty: yaml.v3's rules are applied later, in `_plain_scalar`.

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


def _compose(text: str, report: _Report):
    """The document's node tree via libyaml (PyYAML's C parser; pure Python if absent)."""
    import yaml  # PyYAML (a dependency of gguf); imported here to keep `import` cheap

    try:
        from yaml._yaml import CParser

        loader = type("_CLoader", (_NoResolver, CParser), {})
    except ImportError:
        from yaml.composer import Composer
        from yaml.parser import Parser
        from yaml.reader import Reader
        from yaml.scanner import Scanner

        class loader(_NoResolver, Reader, Scanner, Parser, Composer):  # noqa: N801
            def __init__(self, stream):
                Reader.__init__(self, stream)
                Scanner.__init__(self)
                Parser.__init__(self)
                Composer.__init__(self)

    try:
        return yaml.compose(text, Loader=loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        report.add(mark.line + 1 if mark else None, f"YAML does not parse: {exc.problem}")
    except (yaml.YAMLError, RecursionError) as exc:
        report.add(None, f"YAML does not parse: {exc}")
    return False


# --- schema: the shape of every known key (config-schema.json) ----------------------------


@frozen
class _Spec:
    kind: str  # str, strnull, int, bool, list, map, obj, free (any mapping), macros
    minimum: int | None = None
    min_len: int = 0
    max_len: int | None = None
    pattern: str | None = None
    enum: tuple[str, ...] = ()
    item: _Spec | None = None  # list items, map values
    fields: dict | None = None  # obj
    required: tuple[str, ...] = ()
    closed: bool = True  # obj: additionalProperties false (else unknown keys are "ignored")
    min_items: int = 0
    unique: bool = False
    key_pattern: str | None = None
    #: A string/bool/int leaf with no constraint: the right type is all there is to check.
    simple: bool = field(
        init=False,
        default=Factory(
            lambda s: s.kind in ("str", "bool", "int")
            and s.minimum is None
            and not (s.min_len or s.max_len or s.pattern or s.enum),
            takes_self=True,
        ),
    )


_SIMPLE_TYPES = {"str": str, "bool": bool, "int": int}


def _obj(fields, required=(), closed=True):
    return _Spec("obj", fields=fields, required=required, closed=closed)


def _list(item, **kw):
    return _Spec("list", item=item, **kw)


def _map(item, **kw):
    return _Spec("map", item=item, **kw)


STR, BOOL, INT, FREE, MACROS = (_Spec(k) for k in ("str", "bool", "int", "free", "macros"))
INT0 = _Spec("int", minimum=0)
_TIMEOUT_KEYS = ("connect", "keepalive", "responseHeader", "tlsHandshake", "expectContinue", "idleConn")
_MODALITIES = _list(_Spec("str", enum=("text", "audio", "image")), min_items=1, unique=True)
_STRIP_PARAMS = _Spec("str", pattern=r"^[a-zA-Z0-9_, ]*$")
_DURATION = r"^[-+]?(\d+(\.\d+)?(ns|us|ms|s|m|h))+$"

MODEL_SPEC = _obj(
    {
        "macros": MACROS,
        "cmd": _Spec("str", min_len=1),
        "cmdStop": STR,
        "name": _Spec("str", max_len=128),
        "description": _Spec("str", max_len=1024),
        "env": _list(_Spec("str", pattern=r"^[A-Z_][A-Z0-9_]*=.*$")),
        "proxy": STR,
        "aliases": _list(_Spec("str", min_len=1)),
        "checkEndpoint": _Spec("str", pattern=r"^/.*$|^none$"),
        "ttl": _Spec("int", minimum=-1),
        "unloadTimeout": INT0,
        "useModelName": STR,
        "filters": _obj({"stripParams": _STRIP_PARAMS, "setParams": FREE, "setParamsByID": _map(FREE)}),
        "metadata": FREE,
        "concurrencyLimit": INT0,
        "sendLoadingState": BOOL,
        "unlisted": BOOL,
        "timeouts": _obj(dict.fromkeys(_TIMEOUT_KEYS, INT0)),
        "compat": _obj({"ignoreWebsockets": BOOL}),
        "capabilities": _obj(
            {"in": _MODALITIES, "out": _MODALITIES, "tools": BOOL, "reranker": BOOL, "context": INT0}
        ),
    },
    required=("cmd",),
    closed=False,
)
_GROUP = {"swap": BOOL, "exclusive": BOOL, "persistent": BOOL, "members": _list(STR)}
_GROUPS = _map(_obj(_GROUP, required=("members",), closed=False))
_MATRIX = _obj(
    {
        "vars": _map(STR, min_items=1, key_pattern=r"^[a-zA-Z0-9]{1,8}$"),
        "evict_costs": _map(_Spec("int", minimum=1)),
        "sets": _map(STR, min_items=1),
    },
    required=("vars", "sets"),
)
_PEER = _obj(
    {
        "proxy": STR,
        "apiKey": STR,
        "models": _list(_Spec("str", min_len=1)),
        "filters": _obj({"stripParams": _STRIP_PARAMS, "setParams": FREE}),
        "timeouts": _obj(dict.fromkeys([k for k in _TIMEOUT_KEYS if k != "expectContinue"], INT0)),
    },
    required=("proxy", "models"),
    closed=False,
)
_SELECTOR = _obj(
    {
        "strategy": _Spec("str", enum=("warm", "pin", "spillover")),
        "targets": _list(_Spec("str", min_len=1), min_items=1),
        "settings": _obj({"spillover": _Spec("int", minimum=1)}),
        "name": _Spec("str", max_len=128),
        "description": _Spec("str", max_len=1024),
        "unlisted": BOOL,
        "metadata": FREE,
    },
    required=("strategy", "targets"),
)
_PROFILE = _obj(
    {"description": _Spec("str", max_len=1024), "pins": _map(_Spec("strnull"), min_items=1)},
    required=("pins",),
)
_LOG_TIME_FORMATS = ("", "ansic", "unixdate", "rubydate", "rfc822", "rfc822z", "rfc850", "rfc1123")
_LOG_TIME_FORMATS += ("rfc1123z", "rfc3339", "rfc3339nano", "kitchen", "stamp", "stampmilli")
_LOG_TIME_FORMATS += ("stampmicro", "stampnano")
TOP_SPEC = _obj(
    {
        "healthCheckTimeout": _Spec("int", minimum=15),
        "globalTTL": INT0,
        "unloadTimeout": INT0,
        "logLevel": _Spec("str", enum=("debug", "info", "warn", "error")),
        "logTimeFormat": _Spec("str", enum=_LOG_TIME_FORMATS),
        "logToStdout": _Spec("str", enum=("proxy", "upstream", "both", "none")),
        "logRequests": BOOL,  # not in the schema, but a field of the Go Config struct
        "metricsMaxInMemory": INT,
        "captureBuffer": INT0,
        "store": _obj({"path": _Spec("str", min_len=1)}, required=("path",)),
        "ui": _obj({"activity": _obj({"session_id": _list(STR)})}),
        "performance": _obj({"disabled": BOOL, "every": _Spec("str", pattern=_DURATION)}),
        "startPort": _Spec("int", minimum=1),  # the loader's rule; the schema has none
        "sendLoadingState": BOOL,
        "includeAliasesInList": BOOL,
        "macros": MACROS,
        "profiles": _map(_PROFILE),
        "selectors": _map(_SELECTOR),
        "models": _map(MODEL_SPEC),
        "groups": _GROUPS,
        "matrix": _MATRIX,
        "hooks": _obj({"on_startup": _obj({"preload": _list(STR)})}),
        "apiKeys": _list(_Spec("str", min_len=1)),
        "peers": _map(_PEER),
        "upstream": _obj({"ignorePaths": _list(STR)}),
        "routing": _obj(
            {
                "scheduler": _obj(
                    {
                        "use": _Spec("str", enum=("fifo",)),
                        "settings": _obj({"fifo": _obj({"priority": _map(INT)})}),
                    }
                ),
                "router": _obj(
                    {
                        "use": _Spec("str", enum=("group", "matrix")),
                        "settings": _obj({"groups": _GROUPS, "matrix": _MATRIX}),
                    }
                ),
            }
        ),
    },
    required=("models",),
    closed=False,
)


class _Report:
    def __init__(self, source: str):
        self.source = source
        self.problems: list[Problem] = []

    def add(self, line: int | None, message: str, severity: str = ERROR) -> None:
        self.problems.append(Problem(line, message, self.source, severity))


def _show(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return repr(value) if isinstance(value, str) else str(value)


def _unknown_key(key: str, known) -> str:
    lowered = {k.lower(): k for k in known}
    guess = lowered.get(key.lower()) or next(iter(difflib.get_close_matches(key, known, 1, 0.75)), None)
    return f"; did you mean '{guess}'?" if guess else ""


_EXPECTED = {
    "str": (str, "a string"),
    "strnull": ((str, type(None)), "a string or null"),
    "int": (int, "an integer"),
    "bool": (bool, "true or false"),
    "list": (list, "a list"),
    "map": (dict, "a mapping"),
    "obj": (dict, "a mapping"),
    "free": (dict, "a mapping"),
}


def _check(value, spec: _Spec, path: str, line: int | None, report: _Report) -> None:
    """Report where `value` breaks `spec` (the schema's constraints for that key)."""
    if spec.simple and type(value) is _SIMPLE_TYPES[spec.kind]:
        return
    if spec.kind == "macros":  # checked with the loader's rules in _macro_entries
        return
    types, expected = _EXPECTED[spec.kind]
    if not isinstance(value, types) or (isinstance(value, bool) and spec.kind == "int"):
        report.add(line, f"{path}: expected {expected}, got {_show(value)}")
        return
    if isinstance(value, str):
        if len(value) < spec.min_len:
            report.add(line, f"{path}: must not be empty")
        if spec.max_len is not None and len(value) > spec.max_len:
            report.add(line, f"{path}: must be at most {spec.max_len} characters (got {len(value)})")
        if spec.pattern and not re.search(spec.pattern, value):
            report.add(line, f"{path}: {_show(value)} does not match {spec.pattern}")
        if spec.enum and value not in spec.enum:
            choices = ", ".join(repr(c) for c in spec.enum)
            report.add(line, f"{path}: must be one of {choices}; got {_show(value)}")
    elif spec.kind == "int" and spec.minimum is not None and value < spec.minimum:
        report.add(line, f"{path}: must be >= {spec.minimum} (got {value})")
    elif spec.kind == "list":
        if len(value) < spec.min_items:
            report.add(line, f"{path}: must list at least {spec.min_items} item(s)")
        seen = set()
        for i, item in enumerate(value):
            item_line = value.lines[i]
            _check(item, spec.item, f"{path}[{i}]", item_line, report)
            if spec.unique and isinstance(item, str):
                if item in seen:
                    report.add(item_line, f"{path}[{i}]: {_show(item)} is listed twice")
                seen.add(item)
    elif spec.kind == "map":
        if len(value) < spec.min_items:
            report.add(line, f"{path}: must have at least {spec.min_items} entry")
        for key, item in value.items():
            if spec.key_pattern and not re.search(spec.key_pattern, key):
                report.add(value.lines[key], f"{path}: key {key!r} does not match {spec.key_pattern}")
            _check(item, spec.item, f"{path}.{key}", value.lines[key], report)
    elif spec.kind == "obj":
        for key in spec.required:
            if key not in value:
                report.add(line, f"{path + ': ' if path else ''}missing required key '{key}'")
        for key, item in value.items():
            sub = spec.fields.get(key)
            if sub is None:
                why = "not allowed here" if spec.closed else "llama-swap ignores it"
                where = f"{path}: " if path else ""
                msg = f"{where}unknown key '{key}' ({why}{_unknown_key(key, spec.fields)})"
                report.add(value.lines[key], msg, ERROR if spec.closed else IGNORED)
            else:
                _check(item, sub, f"{path}.{key}" if path else key, value.lines[key], report)


# --- macros (macros.go: validateMacro, resolveConfigMacros, validateConfigMacroUses) -------

_MACRO_NAME = re.compile(r"^[a-zA-Z0-9_-]+$")
_MACRO_USE = re.compile(r"\$\{([a-zA-Z0-9_-]+)\}")
_ENV_MACRO = re.compile(r"\$\{env\.([a-zA-Z_][a-zA-Z0-9_]*)\}")
_RESERVED = ("PORT", "MODEL_ID", "PID")
_DEFAULT_PROXY = "http://localhost:${PORT}"


def _macro_entries(block, path: str, line: int | None, report: _Report) -> list[tuple[str, object]]:
    """The declared macros in order, after reporting every broken declaration."""
    if block is None:
        return []
    if not isinstance(block, dict):
        report.add(line, f"{path}: macros must be a mapping")
        return []
    entries = []
    for name, value in block.items():
        at = block.lines[name]
        if len(name) >= 64:
            report.add(at, f"{path}: macro name '{name}' exceeds maximum length of 63 characters")
        elif not _MACRO_NAME.match(name):
            why = "contains invalid characters, must match ^[a-zA-Z0-9_-]+$"
            report.add(at, f"{path}: macro name '{name}' {why}")
        elif name in _RESERVED:
            report.add(at, f"{path}: macro name '{name}' is reserved")
        if value is None or isinstance(value, (dict, list)):
            why = f"a macro must be a string, number or boolean, got {_show(value)}"
            report.add(at, f"{path}.{name}: {why}")
            continue
        if isinstance(value, str):
            if len(value) > 1024:
                report.add(at, f"{path}.{name}: must be at most 1024 characters (got {len(value)})")
            if "${" + name + "}" in value:
                report.add(at, f"{path}: macro '{name}' contains self-reference")
        entries.append((name, value))
    return entries


def _go_format(value) -> str:
    """Go's `fmt.Sprintf("%v", v)` for a macro value interpolated into a string."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if not isinstance(value, float):
        return str(value)
    if value != value or value in (float("inf"), float("-inf")):
        return "NaN" if value != value else ("+Inf" if value > 0 else "-Inf")
    if value == 0:
        return "0"
    # Shortest round-trip digits (Python's repr and Go agree), then strconv's 'g' layout:
    # exponent form when exp < -4 or exp >= 6 (the precision used for shortest output).
    sign, digit_tuple, exponent = Decimal(repr(value)).normalize().as_tuple()
    digits, neg = "".join(map(str, digit_tuple)), "-" if sign else ""
    point = len(digits) + exponent
    exp = point - 1
    if exp < -4 or exp >= 6:
        frac = f".{digits[1:]}" if len(digits) > 1 else ""
        return f"{neg}{digits[0]}{frac}e{'+' if exp >= 0 else '-'}{abs(exp):02d}"
    if point <= 0:
        return f"{neg}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return neg + digits + "0" * (point - len(digits))
    return f"{neg}{digits[:point]}.{digits[point:]}"


def _expand(text: str, macros):
    """Apply macros last-declared first, as llama-swap does; `${x}` alone keeps x's type."""
    value = text
    for name, macro in reversed(macros):
        slug = "${" + name + "}"
        if value == slug:
            value = macro
            if not isinstance(value, str):
                return value
        elif slug in value:
            value = value.replace(slug, _go_format(macro))
    return value


_HINTS = {
    "PORT": " (${PORT} is only set when cmd uses it)",
    "PID": " (${PID} is only allowed in cmdStop)",
    "MODEL_ID": " (${MODEL_ID} is only set inside a model)",
}


def _resolve(value, macros, path: str, line, report: _Report, declared, allow_pid=False):
    """Expand macros in every string under `value` (in place for containers; keys are not
    targets) and report what stays unresolved (validateConfigMacroUses)."""
    if isinstance(value, str):
        if "${" in value:
            value = _expand(value, macros)
            for match in _MACRO_USE.finditer(value) if isinstance(value, str) else ():
                name = match[1]
                if not (name == "PID" and allow_pid):
                    why = "a macro may only use macros defined before it"
                    hint = _HINTS.get(name, f" ({why})" if name in declared else "")
                    report.add(line, f"{path}: unknown macro '${{{name}}}'{hint}")
                    break
    elif isinstance(value, dict):
        for key, item in value.items():
            at = value.lines[key]
            value[key] = _resolve(item, macros, f"{path}.{key}", at, report, declared, allow_pid)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            at = value.lines[i]
            value[i] = _resolve(item, macros, f"{path}[{i}]", at, report, declared, allow_pid)
    return value


def _resolve_param_keys(model: _Map, macros, path: str, report: _Report) -> None:
    """`filters.setParamsByID` keys are the one kind of key llama-swap expands."""
    filters = model.get("filters")
    params = filters.get("setParamsByID") if isinstance(filters, dict) else None
    if not isinstance(params, dict):
        return
    out = _Map()
    out.lines = {}
    where = f"{path}.filters.setParamsByID"
    for key, value in params.items():
        new, line = key, params.lines[key]
        for name, macro in reversed(macros):
            new = new.replace("${" + name + "}", _go_format(macro))
        if match := _MACRO_USE.search(new):
            report.add(line, f"{where}: unknown macro '${{{match[1]}}}' in key '{key}'")
        if new in out:
            report.add(line, f"{where}: keys '{key}' and '{new}' resolve to the same value")
        out[new], out.lines[new] = value, line
    filters["setParamsByID"] = out


def _resolve_macros(doc: _Map, report: _Report) -> None:
    """resolveConfigMacros: global macros outside `models`, then each model's own scope."""
    global_macros = _macro_entries(doc.get("macros"), "macros", doc.lines.get("macros"), report)
    declared = {name for name, _ in global_macros}
    for key in doc.keys() & TOP_SPEC.fields.keys() - {"models", "macros"}:
        doc[key] = _resolve(doc[key], global_macros, key, doc.lines[key], report, declared)
    models = doc.get("models")
    port = 5800  # any number: validity does not depend on it
    for model_id in sorted(models) if isinstance(models, dict) else ():
        model, path, line = models[model_id], f"models.{model_id}", models.lines[model_id]
        if not isinstance(model, dict):
            continue
        local = _macro_entries(model.get("macros"), f"{path}.macros", model.lines.get("macros"), report)
        merged = [("MODEL_ID", model_id), *global_macros]
        for name, value in local:  # mergeModelMacros: a model macro replaces a global one
            names = [n for n, _ in merged]
            if name in names:
                merged[names.index(name)] = (name, value)
            else:
                merged.append((name, value))
        for field in ("cmd", "cmdStop"):  # comment lines go before any expansion
            if isinstance(model.get(field), str) and strip_comment_lines(model[field]).strip():
                model[field] = strip_comment_lines(model[field])
        cmd = _expand(model["cmd"], merged) if isinstance(model.get("cmd"), str) else None
        if isinstance(cmd, str) and "${PORT}" in cmd:
            merged.insert(0, ("PORT", port))  # expanded after every other macro
            port += 1
        explicit_proxy = model.get("proxy") is not None
        proxy = _expand(model["proxy"] if explicit_proxy else _DEFAULT_PROXY, merged)
        model["proxy"], model.lines["proxy"] = proxy, model.lines.get("proxy", line)
        if isinstance(cmd, str) and isinstance(proxy, str) and "${PORT}" in proxy:
            why = "" if explicit_proxy else f" (no proxy set, so the default {_DEFAULT_PROXY} applies)"
            msg = "proxy uses ${PORT} but cmd does not - ${PORT} is only available when used in cmd"
            report.add(model.lines["proxy"], f"{path}: {msg}{why}")
        known = declared | {name for name, _ in local}
        _resolve_param_keys(model, merged, path, report)
        for field, value in model.items():
            if field not in ("macros", "proxy"):
                where, at = f"{path}.{field}", model.lines[field]
                model[field] = _resolve(value, merged, where, at, report, known, field == "cmdStop")


# --- the loader's cross-references (load.go, internal/router/group.go) --------------------


def _check_models(models: _Map, report: _Report) -> dict[str, str]:
    """cmd splits to a program, proxy parses, aliases unique; returns alias → model id."""
    owner: dict[str, str] = {}
    for model_id in sorted(models):
        model, path = models[model_id], f"models.{model_id}"
        if not isinstance(model, dict):
            continue
        cmd = model.get("cmd")
        if isinstance(cmd, str) and cmd and not split_command(cmd):
            report.add(model.lines["cmd"], f"{path}.cmd: empty command (only comment lines or blanks)")
        proxy = model.get("proxy")
        if isinstance(proxy, str) and "${" not in proxy and not _parses_as_url(proxy):
            report.add(model.lines["proxy"], f"{path}.proxy: invalid proxy URL {proxy!r}")
        aliases = model.get("aliases")
        for i, alias in enumerate(aliases if isinstance(aliases, list) else ()):
            if not isinstance(alias, str):
                continue
            at = aliases.lines[i]
            if alias in owner:
                why = f"duplicate alias '{alias}' (already used by model '{owner[alias]}')"
                report.add(at, f"{path}.aliases[{i}]: {why}")
            elif alias in models and alias != model_id:
                why = f"alias '{alias}' is the id of another model, which wins"
                report.add(at, f"{path}.aliases[{i}]: {why}")
            owner.setdefault(alias, model_id)
    for model_id in sorted(models):  # setParamsByID keys become aliases after explicit ones
        model = models[model_id]
        filters = model.get("filters") if isinstance(model, dict) else None
        params = filters.get("setParamsByID") if isinstance(filters, dict) else None
        for key in params if isinstance(params, dict) else ():
            where = f"models.{model_id}.filters.setParamsByID"
            if key == model_id:
                continue
            if key in models:
                report.add(params.lines[key], f"{where}: key '{key}' conflicts with an existing model ID")
            elif owner.setdefault(key, model_id) != model_id:
                why = f"duplicate alias '{key}', already used by model {owner[key]}"
                report.add(params.lines[key], f"{where}: {why}")
    return owner


def _parses_as_url(text: str) -> bool:
    """Roughly Go's url.Parse: no control characters or spaces, a numeric port."""
    if any(ch <= " " or ch == "\x7f" for ch in text):
        return False
    try:
        urlsplit(text).port
    except ValueError:
        return False
    return True


def _check_groups(groups, path: str, models, report: _Report) -> None:
    """load.go's member rules, and group.go's "no model config for" at router start."""
    used_in: dict[str, str] = {}
    for group_id, group in groups.items():
        members = group.get("members") if isinstance(group, dict) else None
        if not isinstance(members, list):
            continue
        seen = set()
        for i, member in enumerate(members):
            at, where = members.lines[i], f"{path}.{group_id}.members[{i}]"
            if not isinstance(member, str):
                continue
            if member in seen:
                report.add(at, f"{where}: duplicate model member {member} found in group: {group_id}")
                continue
            seen.add(member)
            if member in used_in:
                why = f"is used in multiple groups: {used_in[member]} and {group_id}"
                report.add(at, f"{where}: model member {member} {why}")
            used_in.setdefault(member, group_id)
            if member not in models:
                why = f'llama-swap fails to start: no model config for "{member}"'
                report.add(at, f"{where}: {member!r} is not a model id ({why})")


def _duration_seconds(text: str) -> float:
    units = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
    total = sum(float(n) * units[u] for n, u in re.findall(r"(\d+(?:\.\d+)?)(ns|us|ms|s|m|h)", text))
    return -total if text.startswith("-") else total


def _at(node, *keys, kind=dict):
    """The value at `keys` below `node` when every step is a mapping and it is a `kind`."""
    for key in keys:
        node = node.get(key) if isinstance(node, dict) else None
    return node if isinstance(node, kind) else kind()


def _check_references(doc: _Map, report: _Report) -> None:
    models = _at(doc, "models")
    owner = _check_models(models, report)
    router, settings = _at(doc, "routing", "router"), _at(doc, "routing", "router", "settings")
    legacy = doc.get("matrix") is not None or bool(doc.get("groups"))
    if legacy and (router.get("use") or settings.get("matrix") is not None or settings.get("groups")):
        msg = "config uses both the legacy top-level 'matrix'/'groups' keys and the new 'routing.router' block"
        report.add(doc.lines["routing"], msg)
    if doc.get("groups") and doc.get("matrix") is not None:
        report.add(doc.lines["matrix"], "config cannot use both 'groups' and 'matrix'")
    if router.get("use") == "matrix" and settings.get("matrix") is None:
        msg = "routing.router.use is 'matrix' but routing.router.settings.matrix is not set"
        report.add(router.lines["use"], msg)
    for where, block in (("", doc), ("routing.router.settings.", settings)):
        _check_groups(_at(block, "groups"), f"{where}groups", models, report)
        variables = _at(block, "matrix", "vars")
        for var, model_id in variables.items():
            if isinstance(model_id, str) and model_id not in models:
                report.add(variables.lines[var], f"{where}matrix.vars.{var}: {model_id!r} is not a model id")
    known_ids = models.keys() | owner.keys()
    preload = _at(doc, "hooks", "on_startup", "preload", kind=list)
    for i, model_id in enumerate(preload):
        if isinstance(model_id, str) and model_id.strip() and model_id.strip() not in known_ids:
            why = "is not a model id or alias (llama-swap drops it)"
            report.add(preload.lines[i], f"hooks.on_startup.preload[{i}]: {model_id!r} {why}", IGNORED)
    priority = _at(doc, "routing", "scheduler", "settings", "fifo", "priority")
    for model_id in priority.keys() - known_ids:
        msg = f"routing.scheduler.settings.fifo.priority references unknown model {model_id!r}"
        report.add(priority.lines[model_id], msg)
    keys = _at(doc, "apiKeys", kind=list)
    for i, key in enumerate(keys):
        if isinstance(key, str) and " " in key:
            report.add(keys.lines[i], f"apiKeys[{i}]: api key cannot contain spaces")
    every = _at(doc, "performance").get("every")
    if isinstance(every, str) and re.search(_DURATION, every) and _duration_seconds(every) < 5:
        report.add(doc["performance"].lines["every"], f"performance.every: must be at least 5s (got {every})")


# --- entry points ------------------------------------------------------------------------


def _env_substituted(text: str, report: _Report) -> str:
    """Phase 1 of the loader: `${env.X}` is replaced in the raw text before YAML parsing."""
    scratch = _Report(report.source)
    root = _compose(text, scratch)
    if not root:
        return text
    found: dict[str, int] = {}

    def collect(value, line):
        if isinstance(value, str):
            for name in _ENV_MACRO.findall(value):
                found.setdefault(name, line)
        elif isinstance(value, (dict, list)):
            pairs = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in pairs:
                collect(key if isinstance(value, dict) else None, value.lines[key])
                collect(item, value.lines[key])

    try:
        collect(_Converter(scratch).value(root), 1)
    except (_TooBig, RecursionError):
        return text
    for name, line in found.items():
        value = os.environ.get(name)
        if value is None:
            why = "llama-swap refuses the file unless it is set where it runs"
            report.add(line, f"environment variable '{name}' is not set ({why})", WARNING)
        elif any(ch in value for ch in "\n\r\0"):
            why = "contains newlines or null bytes which are not allowed in YAML substitution"
            report.add(line, f"environment variable '{name}' {why}")
        else:
            escaped = value.replace("\\", "\\\\").replace('"', '\\"')
            text = text.replace("${env." + name + "}", escaped)
    return text


def _validate(text: str, source: str) -> tuple[list[Problem], _Map | None]:
    report = _Report(source)
    if "${env." in text:
        text = _env_substituted(text, report)
    root = _compose(text, report)
    doc = None
    if root is None:  # an empty file
        doc = _Map()
        doc.lines = {}
    elif root is not False:
        try:
            doc = _Converter(report).value(root)
        except _TooBig:
            report.add(None, "YAML aliases expand to too many values")
        except RecursionError:
            report.add(None, "YAML nests too deeply (or an alias refers to itself)")
    if isinstance(doc, _Map):
        _resolve_macros(doc, report)
        _check(doc, TOP_SPEC, "", 1, report)
        _check_references(doc, report)
    elif doc is not None:
        report.add(1, f"the top level must be a mapping, got {_show(doc)}")
        doc = None
    return sorted(report.problems, key=lambda p: p.line or 0), doc


def validate_text(text: str, source: str = "config.yaml") -> list[Problem]:
    """Every reason llama-swap would refuse (or silently ignore part of) this config."""
    return _validate(text, source)[0]


def _read(path: str) -> tuple[str | None, Problem | None]:
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        return None, Problem(None, f"cannot read: {exc.strerror or exc}", path)
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        return None, Problem(None, f"not valid UTF-8 (byte {exc.start})", path)


def validate_file(path: str) -> list[Problem]:
    """`validate_text` on a file; an unreadable file is one problem."""
    text, problem = _read(path)
    return [problem] if problem else validate_text(text, path)


def main_validate(paths: list[str]) -> int:
    """`swapgen validate [FILE…]`: one line per problem and exit 1, else a summary, exit 0."""
    failed = False
    for path in paths or ["config.yaml"]:
        text, problem = _read(path)
        problems, doc = ([problem], None) if problem else _validate(text, path)
        for p in problems:
            print(p)
        if any(p.fatal for p in problems) or doc is None:
            failed = True
            continue
        groups = _at(doc, "groups") or _at(doc, "routing", "router", "settings", "groups")
        n, g = len(_at(doc, "models")), len(groups)
        print(f"{path}: valid llama-swap config ({n} model{'s' * (n != 1)}, {g} group{'s' * (g != 1)})")
    sys.stdout.flush()
    return 1 if failed else 0
