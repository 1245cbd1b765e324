"""Structuring settings data: ruamel.yaml → plain data → one strict cattrs converter → frozen
classes, with every error named by its exact place.

Imported only when a settings file is actually parsed (a cached run skips cattrs entirely).
"""

from __future__ import annotations

import gc
import math
import re
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any, get_args, get_origin
from urllib.parse import urlsplit

import attrs
import cattrs
from cattrs.cols import homogenous_tuple_structure_factory
from cattrs.errors import (
    AttributeValidationNote,
    ClassValidationError,
    ForbiddenExtraKeysError,
    IterableValidationError,
    IterableValidationNote,
)
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from autogen.bounds import SETTINGS, InputTooLarge, check_shape, read_input, too_deep
from autogen.engines import CUSTOM_KIND, ENGINE_OF_KIND
from autogen.errors import SettingsError, did_you_mean
from autogen.settings.fields import key_of, older_spellings
from autogen.settings.schema import KEEP_PATH, PathMapping, Settings

# ---------------------------------------------------------------------------------------------
# strict scalar hooks: "false" is not True, "600" is not a number


def describe(value: Any) -> str:
    if isinstance(value, str):
        return repr(value)
    if value is None:
        return "nothing"
    if isinstance(value, (dict, list)):
        return f"a {'mapping' if isinstance(value, dict) else 'list'}"
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**24:
        return f"a {len(str(abs(value)))}-digit integer"
    if isinstance(value, float) and not math.isfinite(value):  # as YAML spells them
        return ".nan" if math.isnan(value) else ("-.inf" if value < 0 else ".inf")
    return repr(value)


def _strict_str(value: Any, _type: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {describe(value)}")
    return value


def _strict_int(value: Any, _type: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"expected an integer, got {describe(value)}")
    return value


def _strict_float(value: Any, _type: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"expected a number, got {describe(value)}")
    try:
        return float(value)
    except OverflowError:  # an integer past float's range: past every bound, as infinity is
        return float("inf") if value > 0 else float("-inf")


def _strict_bool(value: Any, _type: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {describe(value)}")
    return value


def _args(value: Any, _type: Any) -> tuple[str, ...]:
    """Extra arguments: a list of strings, or one string split like a shell would."""
    if isinstance(value, str):
        try:
            return tuple(shlex.split(value))
        except ValueError as exc:
            raise ValueError(f"cannot split {value!r}: {exc}") from None
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise ValueError(f"expected a list of strings or one string, got {describe(value)}")


def _is_list_field(type_: Any) -> bool:
    """`tuple[X, ...]`: how every list-valued settings key is typed."""
    return get_origin(type_) is tuple and len(get_args(type_)) == 2 and get_args(type_)[1] is Ellipsis


def _list_only(type_: Any, conv: cattrs.Converter):
    """cattrs' tuple hook iterates whatever it gets, so `roots: models` would become
    ('m', 'o', …) and `match: "*qwen*"` a bare `*`; only a YAML list is a list here."""
    base = homogenous_tuple_structure_factory(type_, conv)

    def hook(value: Any, _type: Any) -> tuple:
        if not isinstance(value, (list, tuple)):
            raise ValueError(f"expected a list, got {describe(value)}")
        return base(value, _type)

    return hook


def _str_map(value: Any, _type: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        raise ValueError(f"expected a mapping of strings, got {describe(value)}")
    for k, v in value.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise ValueError(f"expected string keys and values, got {k!r}: {v!r}")
    return dict(value)


def _key_map(value: Any, _type: Any) -> dict[str, Any]:
    """A `llama_swap:` block: a mapping with string keys, kept as plain data (its values are
    checked against llama-swap's own rules in `router.passthrough`, where every place has a path)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"expected a mapping of llama-swap keys, got {describe(value)}")
    for key in value:
        if not isinstance(key, str):
            raise ValueError(f"llama-swap keys are strings, got {key!r}")
    return dict(value)


def _checked(base, check, message):
    def hook(value: Any, type_: Any):
        if value is None:
            return None
        result = base(value, type_)
        if not check(result):
            raise ValueError(f"{message}, got {describe(value)}")
        return result

    return hook


_nonblank = _checked(_strict_str, lambda v: v.strip() != "", "expected a non-empty string")
_KNOWN_KINDS = [*ENGINE_OF_KIND, CUSTOM_KIND]


def _kind(value: Any, type_: Any) -> str:
    """A kind docs/engines.md#kinds lists (any case), or `custom`: `vlm` is a typo, and
    `llama-server` names the executable (that is `path`), not the engine."""
    kind = _nonblank(value, type_)
    word = kind.strip().lower()
    if word in _KNOWN_KINDS:
        return kind
    engine = word.removesuffix("-server").removesuffix(".exe")
    hint = (f" (did you mean {engine!r}? `kind` names the engine, `path` the executable)"
            if engine in _KNOWN_KINDS else did_you_mean(word, _KNOWN_KINDS))
    raise ValueError(f"unknown kind {kind!r}{hint}; an engine swapgen does not know is kind {CUSTOM_KIND!r}")


_HOST_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_host_name = _checked(_strict_str, lambda v: _HOST_NAME.fullmatch(v) is not None,
                      "expected a host name of letters, digits, '.', '_' and '-' (it becomes the peer id "
                      "and the `<host>/<model>` prefix)")


def _env_name(value: Any, type_: Any) -> str | None:
    """The name of the variable holding a key; the value is never echoed (it may be the key)."""
    if value is None:
        return None
    if not isinstance(value, str) or _ENV_NAME.fullmatch(value) is None:
        raise ValueError("expected the name of an environment variable (letters, digits, '_'), "
                         "not the key itself (the value is not shown)")
    return value



def _host_url(value: Any, type_: Any) -> str:
    """The front's `proxy` for the host: an http(s) URL with a host name, as llama-swap parses it."""
    url = _strict_str(value, type_)
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"expected an http:// or https:// URL of the host's llama-swap, got {url!r}")
    return url


def _path_map(value: Any, _type: Any) -> tuple[PathMapping, ...]:
    """`{host folder: served folder}` in the user's order; a served folder is where a container
    sees the files, so it is absolute (a `~` there would be the container's home), or `keep`.
    The host side is resolved like `roots` when the settings load (`settings.load`)."""
    if value is None:
        return ()
    if not isinstance(value, dict):
        raise ValueError(f"expected a mapping of host folders to served folders, got {describe(value)}")
    pairs = []
    for host, served in value.items():
        if not isinstance(host, str) or not host.strip() or "\0" in host:
            raise ValueError(f"expected a host folder as each key, got {describe(host)}")
        if not isinstance(served, str) or not (served == KEEP_PATH or served.startswith("/")):
            raise ValueError(f"{host}: expected the absolute folder the container sees it as, or {KEEP_PATH!r}, "
                             f"got {describe(served)}")
        if "${" in served or "\n" in served or "\0" in served:
            raise ValueError(f"{host}: the served folder {served!r} cannot be carried in a command "
                             "(no '${', line breaks or NUL)")
        pairs.append(PathMapping(host=host, served=None if served == KEEP_PATH else served))
    return tuple(pairs)


#: Parsers of values with a shape of their own, by the name a field's `check` gives
#: (`settings.fields`).
PARSERS: dict[str, Any] = {
    "shell words": _args,
    "kind": _kind,
    "llama-swap keys": _key_map,
    "string map": _str_map,
    "path map": _path_map,
    "host name": _host_name,
    "url": _host_url,
    "variable name": _env_name,
}
_SCALARS = {str: _strict_str, int: _strict_int, float: _strict_float}


def _records(cls: type) -> list[type]:
    """`cls` and every attrs class its fields hold (alone, in a tuple or optional), once each."""
    found = [cls]
    for a in attrs.fields(cls):
        for inner in _inner_types(a.type):
            if attrs.has(inner) and inner not in found:
                found += [r for r in _records(inner) if r not in found]
    return found


def _inner_types(type_: Any) -> tuple[Any, ...]:
    """The types a field's value is made of: `X`, `X | None` and `tuple[X, ...]` give X."""
    args = [t for t in get_args(type_) if t is not type(None) and t is not Ellipsis]
    return tuple(t for arg in args for t in _inner_types(arg)) if args else (type_,)


def _hook(a: attrs.Attribute) -> Any:
    """The structure hook of a field whose `check` asks for more than its type; a list of
    numbers (`devices`, `ctx_profiles`) has each item checked, at its own index."""
    check = a.metadata.get("check")
    if isinstance(check, str):
        return PARSERS[check]
    (scalar,) = [t for t in _inner_types(a.type) if t in _SCALARS]
    if not any(_is_list_field(t) for t in (a.type, *get_args(a.type))):
        return _checked(_SCALARS[scalar], check.test, check.expected)
    return _checked_items(_SCALARS[scalar], check, optional=type(None) in get_args(a.type))


def _checked_items(base: Callable[[Any, Any], Any], check: Any, *, optional: bool) -> Callable[[Any, Any], Any]:
    """A list hook checking each item with `base` and `check` (a `settings.fields.Check`)."""
    def item(value: Any) -> Any:
        result = base(value, None)
        if not check.test(result):
            raise ValueError(f"{check.expected}, got {describe(value)}")
        return result

    def hook(value: Any, type_: Any) -> tuple | None:
        if value is None and optional:
            return None
        if not isinstance(value, list):
            raise ValueError(f"expected a list, got {describe(value)}")
        items, errors = [], []
        for i, v in enumerate(value):
            try:
                items.append(item(v))
            except ValueError as exc:
                exc.__notes__ = [IterableValidationNote(f"Structuring item @ index {i}", i, Any)]
                errors.append(exc)
        if errors:
            raise IterableValidationError("While structuring a list", errors, type_)
        return tuple(items)

    return hook


def _make_converter() -> cattrs.Converter:
    """One strict converter: every settings record with its fields' checks, and its YAML keys
    where the code names a field otherwise (`settings.fields.key_of`), both ways."""
    conv = cattrs.Converter(forbid_extra_keys=True)
    conv.register_structure_hook(str, _strict_str)
    conv.register_structure_hook(int, _strict_int)
    conv.register_structure_hook(float, _strict_float)
    conv.register_structure_hook(bool, _strict_bool)
    conv.register_structure_hook_factory(_is_list_field, _list_only)
    # nested records first: a record's structure function takes its fields' hooks as it is made
    for cls in reversed(_records(attrs.resolve_types(Settings))):
        attrs.resolve_types(cls)
        renames = {a.name: override(rename=key_of(a)) for a in attrs.fields(cls) if key_of(a) != a.name}
        hooks = {a.name: override(struct_hook=_hook(a), rename=key_of(a) if a.name in renames else None)
                 for a in attrs.fields(cls) if a.metadata.get("check") is not None}
        overrides = {**renames, **hooks}
        if cls is Settings:
            overrides["source"] = override(omit=True)
        structure_fn = make_dict_structure_fn(cls, conv, _cattrs_forbid_extra_keys=True, **overrides)
        if older := older_spellings(cls):
            structure_fn = _accepting_older(cls, structure_fn, older)
        conv.register_structure_hook(cls, structure_fn)
        if renames:
            conv.register_unstructure_hook(cls, make_dict_unstructure_fn(cls, conv, **renames))
    return conv


def _accepting_older(cls: type, structure_fn: Callable[[Any, Any], Any],
                     older: dict[str, str]) -> Callable[[Any, Any], Any]:
    """`structure_fn` reading each older spelling of a key as the key; both in one record is an
    error at the older one's place."""
    names = {new: attrs.fields_dict(cls)[new].name for new in older.values()}  # key → field (the same here)

    def structure_older(data: Any, type_: Any) -> Any:
        if not isinstance(data, dict) or not older.keys() & data.keys():
            return structure_fn(data, type_)
        data, written = dict(data), {}
        for old, new in older.items():
            if old not in data:
                continue
            if new in data:
                raise ClassValidationError(f"While structuring {cls.__name__}", [_at_key(ValueError(
                    f"the older spelling of {new!r}, which this place gives too; keep {new!r}"), old)], cls)
            data[new] = data.pop(old)
            written[names[new]] = old
        try:
            return structure_fn(data, type_)
        except ClassValidationError as exc:  # errors inside name the key the user wrote
            for inner in exc.exceptions:
                notes = getattr(inner, "__notes__", [])
                inner.__notes__ = [AttributeValidationNote(str(n), written[n.name], n.type)
                                   if isinstance(n, AttributeValidationNote) and n.name in written else n
                                   for n in notes]
            raise
    return structure_older


def _at_key(exc: Exception, key: str) -> Exception:
    """`exc` as raised at `key` of the record being structured (its error path ends there)."""
    exc.__notes__ = [AttributeValidationNote(f"Structuring @ attribute {key}", key, Any)]
    return exc


_CONVERTER = _make_converter()


# ---------------------------------------------------------------------------------------------
# error paths


def _format_path(path: str, record: type | None) -> str:
    """`$.backends[0].build` → `backends[0].variant` (from `record`, e.g.
    `Settings`): cattrs names fields, the user wrote keys (`settings.fields.key_of`)."""
    parts = []
    for name, index in re.findall(r"\.(\w+)|(\[[^\]]*\])", path.removeprefix("$")):
        field = attrs.fields_dict(record).get(name) if name and record is not None else None
        parts.append(index or f".{key_of(field) if field is not None else name}")
        if field is not None:
            record = next((t for t in _inner_types(field.type) if attrs.has(t)), None)
    return "".join(parts).removeprefix(".") or "(top level)"


def _format_exception(exc: BaseException, type_: Any) -> str:
    if isinstance(exc, KeyError):
        return "required key missing"
    if isinstance(exc, ForbiddenExtraKeysError):
        known = [key_of(a) for a in attrs.fields(exc.cl) if a.name != "source"]
        return "; ".join(f"unknown key {key!r}{did_you_mean(key, known)}" for key in sorted(exc.extra_fields))
    if isinstance(exc, ValueError):
        return str(exc)
    if isinstance(exc, TypeError) and type_ is not None:
        return f"expected {getattr(type_, '__name__', type_)}, got something else"
    return f"invalid value ({exc})"


def _error_lines(exc: ClassValidationError | IterableValidationError, cls: type) -> list[str]:
    lines = []
    for message in cattrs.transform_error(exc, path="$", format_exception=_format_exception):
        text, _, where = message.rpartition(" @ ")
        lines.append(f"{_format_path(where, cls)}: {text}")
    return lines


def structure(data: Any, cls: type, source: str):
    """Structure plain data into `cls`, raising SettingsError with one line per problem."""
    if not isinstance(data, dict):
        raise SettingsError(source, [f"(top level): expected a mapping of settings, got {describe(data)}"])
    try:
        return _CONVERTER.structure(data, cls)
    except (ClassValidationError, IterableValidationError) as exc:
        raise settings_error(source, _error_lines(exc, cls)) from None


# ---------------------------------------------------------------------------------------------
# line numbers: found again only when there is an error to report


def settings_error(source: str, problems: list[str]) -> SettingsError:
    """The error for `problems` (each `place: message`), with the line of each place in
    `source` (ruamel's round-trip loader keeps them; a settings file that loads cleanly never
    pays for it)."""
    return SettingsError(source, problems, lines=[_locate(p, _line_map(source)) for p in problems])


def _line_map(source: str) -> dict[str, int]:
    """`overrides[2].ctx` → its 1-based line, for every key and list item of the file (a file
    that is one list, as a backends file may be, is read as `backends`)."""
    from ruamel.yaml import YAML  # noqa: PLC0415 - deliberate lazy import: only on an error
    from ruamel.yaml.comments import CommentedMap, CommentedSeq  # noqa: PLC0415 - as above

    try:
        data = YAML(typ="rt", pure=True).load(read_input(source, SETTINGS).decode("utf-8"))
    except Exception:
        return {}
    lines: dict[str, int] = {}

    def walk(node: Any, path: str) -> None:
        if isinstance(node, CommentedMap):
            for key in node:
                child = f"{path}.{key}" if path else str(key)
                lines[child] = node.lc.key(key)[0] + 1
                walk(node[key], child)
        elif isinstance(node, CommentedSeq):
            for i, item in enumerate(node):
                lines[f"{path}[{i}]"] = node.lc.item(i)[0] + 1
                walk(item, f"{path}[{i}]")

    walk(data, "backends" if isinstance(data, CommentedSeq) else "")
    return lines


def _locate(problem: str, lines: dict[str, int]) -> int | None:
    """The line of the deepest place the problem names (an unknown key: the key's own line)."""
    where, sep, message = problem.partition(": ")
    if not sep or where == "(top level)":
        return None
    candidates = []
    unknown = re.match(r"unknown key '([^']*)'", message)
    if unknown:
        candidates.append(f"{where}.{unknown.group(1)}")
    while where:
        candidates.append(where)
        parent = re.sub(r"(\.[^.\[]*|\[\d+\])$", "", where)
        if parent == where:
            break
        where = parent
    return next((lines[c] for c in candidates if c in lines), None)


# ---------------------------------------------------------------------------------------------
# loading


def read_yaml(path: Path) -> Any:
    """Parse one YAML file with ruamel (safe, pure), errors as SettingsError naming the line.
    The file is read within `bounds.SETTINGS` (size, values once aliases expand, depth)."""
    # lazy: cattrs' converter is built at import, ruamel only when a settings file is parsed
    from ruamel.yaml import YAML  # noqa: PLC0415
    from ruamel.yaml.error import YAMLError  # noqa: PLC0415

    text = _read_text(path)
    collecting = gc.isenabled()
    gc.disable()  # every object the parse makes is kept: the collector would walk them again and again
    try:
        data = YAML(typ="safe", pure=True).load(text)
        check_shape(data, SETTINGS)
    except YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        line = mark.line + 1 if mark is not None else None
        raise SettingsError(str(path), [f"not valid YAML: {problem}"], lines=[line]) from None
    except RecursionError:  # ruamel composes nested nodes recursively
        raise SettingsError(str(path), [too_deep(SETTINGS)]) from None
    except ValueError as exc:  # ruamel's int(): Python reads at most 4300 digits
        raise SettingsError(str(path), [f"not valid YAML: a value swapgen cannot read ({str(exc).split(';')[0]})"]) \
            from None
    except InputTooLarge as exc:
        raise SettingsError(str(path), [str(exc)]) from None
    finally:
        if collecting:
            gc.enable()
    return data


def _read_text(path: Path) -> str:
    try:
        return read_input(str(path), SETTINGS).decode("utf-8")
    except FileNotFoundError:
        raise SettingsError(str(path), ["file not found (pass --settings PATH or set SWAPGEN_SETTINGS; "
                                        "`swapgen init` writes a starter)"]) from None
    except InputTooLarge as exc:
        raise SettingsError(str(path), [str(exc)]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsError(str(path), [f"cannot read: {exc}"]) from None


def unstructure(value: Any) -> Any:
    """Plain data (for up-to-date keys and `--json` output)."""
    return _CONVERTER.unstructure(value)

