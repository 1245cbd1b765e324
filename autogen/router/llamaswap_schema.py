"""What llama-swap's JSON schema accepts, as tables, and `check` to apply them with lines.

Mirrors `config-schema.json` of mostlygeek/llama-swap (docs/maintainers/llama-swap.md#schema-rules), plus
the few keys its Go `Config` struct reads that the schema omits. Unknown keys in a closed
object are errors; in an open one llama-swap silently ignores them, reported as "ignored".
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable

from attrs import Factory, field, frozen

#: Severities: llama-swap refuses the file / silently ignores the key / depends on the host.
ERROR, IGNORED, WARNING = "error", "ignored", "warning"
#: Where problems go: `add(line, message, severity=ERROR)`.
AddProblem = Callable[..., object]


@frozen
class Spec:
    """One key's constraints, as its schema node states them."""

    kind: str  # str, strnull, int, bool, list, map, obj, free (any mapping), macros
    minimum: int | None = None
    min_len: int = 0
    max_len: int | None = None
    pattern: str | None = None
    enum: tuple[str, ...] = ()
    item: Spec | None = None  # list items, map values
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
#: What an `int` field of llama-swap's config structs holds: Go's int, 64 bits where llama-swap
#: runs (yaml.v3 decode.go refuses a larger !!int and any !!float past it: "cannot unmarshal").
GO_INT = range(-(1 << 63), 1 << 63)


def _obj(fields, required=(), closed=True):
    return Spec("obj", fields=fields, required=required, closed=closed)


def _list(item, **kw):
    return Spec("list", item=item, **kw)


def _map(item, **kw):
    return Spec("map", item=item, **kw)


STR, BOOL, INT, FREE, MACROS = (Spec(k) for k in ("str", "bool", "int", "free", "macros"))
INT0 = Spec("int", minimum=0)
_TIMEOUT_KEYS = ("connect", "keepalive", "responseHeader", "tlsHandshake", "expectContinue", "idleConn")
_MODALITIES = _list(Spec("str", enum=("text", "audio", "image")), min_items=1, unique=True)
_STRIP_PARAMS = Spec("str", pattern=r"^[a-zA-Z0-9_, ]*$")
DURATION = r"^[-+]?(\d+(\.\d+)?(ns|us|ms|s|m|h))+$"

MODEL_SPEC = _obj(
    {
        "macros": MACROS,
        "cmd": Spec("str", min_len=1),
        "cmdStop": STR,
        "name": Spec("str", max_len=128),
        "description": Spec("str", max_len=1024),
        "env": _list(Spec("str", pattern=r"^[A-Z_][A-Z0-9_]*=.*$")),
        "proxy": STR,
        "aliases": _list(Spec("str", min_len=1)),
        "checkEndpoint": Spec("str", pattern=r"^/.*$|^none$"),
        "ttl": Spec("int", minimum=-1),
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
        "evict_costs": _map(Spec("int", minimum=1)),
        "sets": _map(STR, min_items=1),
    },
    required=("vars", "sets"),
)
_PEER = _obj(
    {
        "proxy": STR,
        "apiKey": STR,
        "models": _list(Spec("str", min_len=1)),
        "filters": _obj({"stripParams": _STRIP_PARAMS, "setParams": FREE}),
        "timeouts": _obj(dict.fromkeys([k for k in _TIMEOUT_KEYS if k != "expectContinue"], INT0)),
    },
    required=("proxy", "models"),
    closed=False,
)
_SELECTOR = _obj(
    {
        "strategy": Spec("str", enum=("warm", "pin", "spillover")),
        "targets": _list(Spec("str", min_len=1), min_items=1),
        "settings": _obj({"spillover": Spec("int", minimum=1)}),
        "name": Spec("str", max_len=128),
        "description": Spec("str", max_len=1024),
        "unlisted": BOOL,
        "metadata": FREE,
    },
    required=("strategy", "targets"),
)
_PROFILE = _obj(
    {"description": Spec("str", max_len=1024), "pins": _map(Spec("strnull"), min_items=1)},
    required=("pins",),
)
_LOG_TIME_FORMATS = ("", "ansic", "unixdate", "rubydate", "rfc822", "rfc822z", "rfc850", "rfc1123")
_LOG_TIME_FORMATS += ("rfc1123z", "rfc3339", "rfc3339nano", "kitchen", "stamp", "stampmilli")
_LOG_TIME_FORMATS += ("stampmicro", "stampnano")
TOP_SPEC = _obj(
    {
        "healthCheckTimeout": Spec("int", minimum=15),
        "globalTTL": INT0,
        "unloadTimeout": INT0,
        "logLevel": Spec("str", enum=("debug", "info", "warn", "error")),
        "logTimeFormat": Spec("str", enum=_LOG_TIME_FORMATS),
        "logToStdout": Spec("str", enum=("proxy", "upstream", "both", "none")),
        "logRequests": BOOL,  # not in the schema, but a field of the Go Config struct
        "metricsMaxInMemory": INT,
        "captureBuffer": INT0,
        "store": _obj({"path": Spec("str", min_len=1)}, required=("path",)),
        "ui": _obj({"activity": _obj({"session_id": _list(STR)})}),
        "performance": _obj({"disabled": BOOL, "every": Spec("str", pattern=DURATION)}),
        "startPort": Spec("int", minimum=1),  # the loader's rule; the schema has none
        "sendLoadingState": BOOL,
        "includeAliasesInList": BOOL,
        "macros": MACROS,
        "profiles": _map(_PROFILE),
        "selectors": _map(_SELECTOR),
        "models": _map(MODEL_SPEC),
        "groups": _GROUPS,
        "matrix": _MATRIX,
        "hooks": _obj({"on_startup": _obj({"preload": _list(STR)})}),
        "apiKeys": _list(Spec("str", min_len=1)),
        "peers": _map(_PEER),
        "upstream": _obj({"ignorePaths": _list(STR)}),
        "routing": _obj(
            {
                "scheduler": _obj(
                    {
                        "use": Spec("str", enum=("fifo",)),
                        "settings": _obj({"fifo": _obj({"priority": _map(INT)})}),
                    }
                ),
                "router": _obj(
                    {
                        "use": Spec("str", enum=("group", "matrix")),
                        "settings": _obj({"groups": _GROUPS, "matrix": _MATRIX}),
                    }
                ),
            }
        ),
    },
    required=("models",),
    closed=False,
)


def show(value) -> str:
    """A value as a message quotes it: YAML words for null and booleans, kinds for containers."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return repr(value) if len(value) <= 80 else f"{value[:60]!r}… ({len(value)} characters)"
    return str(value)


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


def check(value, spec: Spec, path: str, line: int | None, add: AddProblem) -> None:
    """Report where `value` breaks `spec` (the schema's constraints for that key)."""
    if spec.simple and type(value) is _SIMPLE_TYPES[spec.kind] and (spec.kind != "int" or value in GO_INT):
        return
    if spec.kind == "macros":  # checked with the loader's rules: macro_entries
        return
    types, expected = _EXPECTED[spec.kind]
    if not isinstance(value, types) or (isinstance(value, bool) and spec.kind == "int"):
        add(line, f"{path}: expected {expected}, got {show(value)}")
        return
    if isinstance(value, str):
        _check_str(value, spec, path, line, add)
    elif spec.kind == "int" and value not in GO_INT:
        add(line, f"{path}: {value} is past the integers llama-swap reads (Go's int: {GO_INT.start} to "
                  f"{GO_INT.stop - 1})")
    elif spec.kind == "int" and spec.minimum is not None and value < spec.minimum:
        add(line, f"{path}: must be >= {spec.minimum} (got {value})")
    elif spec.kind in _CONTAINERS:
        _CONTAINERS[spec.kind](value, spec, path, line, add)


def _check_str(value: str, spec: Spec, path: str, line: int | None, add: AddProblem) -> None:
    if len(value) < spec.min_len:
        add(line, f"{path}: must not be empty")
    if spec.max_len is not None and len(value) > spec.max_len:
        add(line, f"{path}: must be at most {spec.max_len} characters (got {len(value)})")
    if spec.pattern and not re.search(spec.pattern, value):
        add(line, f"{path}: {show(value)} does not match {spec.pattern}")
    if spec.enum and value not in spec.enum:
        choices = ", ".join(repr(c) for c in spec.enum)
        add(line, f"{path}: must be one of {choices}; got {show(value)}")


def _check_list(value, spec: Spec, path: str, line: int | None, add: AddProblem) -> None:
    if len(value) < spec.min_items:
        add(line, f"{path}: must list at least {spec.min_items} item(s)")
    seen = set()
    for i, item in enumerate(value):
        item_line = value.lines[i]
        check(item, spec.item, f"{path}[{i}]", item_line, add)
        if spec.unique and isinstance(item, str):
            if item in seen:
                add(item_line, f"{path}[{i}]: {show(item)} is listed twice")
            seen.add(item)


def _check_map(value, spec: Spec, path: str, line: int | None, add: AddProblem) -> None:
    if len(value) < spec.min_items:
        add(line, f"{path}: must have at least {spec.min_items} entry")
    for key, item in value.items():
        if spec.key_pattern and not re.search(spec.key_pattern, key):
            add(value.lines[key], f"{path}: key {key!r} does not match {spec.key_pattern}")
        check(item, spec.item, f"{path}.{key}", value.lines[key], add)


def _check_obj(value, spec: Spec, path: str, line: int | None, add: AddProblem) -> None:
    for key in spec.required:
        if key not in value:
            add(line, f"{path + ': ' if path else ''}missing required key '{key}'")
    for key, item in value.items():
        sub = spec.fields.get(key)
        if sub is None:
            why = "not allowed here" if spec.closed else "llama-swap ignores it"
            where = f"{path}: " if path else ""
            msg = f"{where}unknown key '{key}' ({why}{_unknown_key(key, spec.fields)})"
            add(value.lines[key], msg, ERROR if spec.closed else IGNORED)
        else:
            check(item, sub, f"{path}.{key}" if path else key, value.lines[key], add)


_CONTAINERS = {"list": _check_list, "map": _check_map, "obj": _check_obj}


# --- macro declarations (macros.go: validateMacro) -------------------------------------------

_MACRO_NAME = re.compile(r"^[a-zA-Z0-9_-]+$")
_RESERVED = ("PORT", "MODEL_ID", "PID")


def macro_entries(block, path: str, line: int | None, add: AddProblem) -> list[tuple[str, object]]:
    """The declared macros in order, after reporting every broken declaration."""
    if block is None:
        return []
    if not isinstance(block, dict):
        add(line, f"{path}: macros must be a mapping")
        return []
    entries = []
    for name, value in block.items():
        at = block.lines[name]
        if len(name) >= 64:
            add(at, f"{path}: macro name '{name}' exceeds maximum length of 63 characters")
        elif not _MACRO_NAME.match(name):
            why = "contains invalid characters, must match ^[a-zA-Z0-9_-]+$"
            add(at, f"{path}: macro name '{name}' {why}")
        elif name in _RESERVED:
            add(at, f"{path}: macro name '{name}' is reserved")
        if value is None or isinstance(value, (dict, list)):
            why = f"a macro must be a string, number or boolean, got {show(value)}"
            add(at, f"{path}.{name}: {why}")
            continue
        if isinstance(value, str):
            if len(value) > 1024:
                add(at, f"{path}.{name}: must be at most 1024 characters (got {len(value)})")
            if "${" + name + "}" in value:
                add(at, f"{path}: macro '{name}' contains self-reference")
        entries.append((name, value))
    return entries
