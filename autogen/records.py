"""Every record swapgen keeps between runs, and every report it prints as JSON, as data: one
cattrs converter (`CONVERTER`) turns the frozen attrs classes into JSON-able values and back.

A stored record is written with a stamp: its kind, the kind's format version (`VERSIONS`, bumped
when a record's meaning changes while its shape stays) and its shape (every field's name and
type, nested classes included, `shape`), so a class that gains a field makes the old records
misses instead of misreads, without a hand-kept format string. Reading a record that does not
fit its class, for whatever reason (another stamp, a truncated file, a value of the wrong type,
a key the class does not have), is a cache miss: `loads` returns None, never raises.

No record is a pickle: a cache file is data, and loading it runs no code, whoever wrote it.

`read_record` and `write_record` are the file side: a record written or read by this process
is kept in memory under its file's identity (inode, size, modification time), so a process that
runs many times (`swapgen watch`'s worker) reads a file it wrote itself without parsing it again.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import json
import os
import typing
from typing import Any, TypeVar

import attrs
import cattrs
import xxhash
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from autogen.fsutil import read_bytes, write_if_changed

T = TypeVar("T")

#: Record kind → its format version. The shape of the record's class is part of every stamp
#: already; bump a version when what a field means changes while its name and type stay.
VERSIONS: dict[str, int] = {}


def _converter() -> cattrs.Converter:
    """Fields left at their default are not written (most of a model's metadata is 0), and a key
    the class does not have is an error, so a record from another shape is a miss. A field whose
    metadata names a `json` key is written and read under that key (`ListRow.kind` is `class`,
    a word Python keeps for itself)."""
    converter = cattrs.Converter(omit_if_default=True, forbid_extra_keys=True)

    def renamed(cls: type) -> dict[str, Any]:
        return {f.name: override(rename=f.metadata["json"]) for f in attrs.fields(cls) if "json" in f.metadata}

    def has_renames(cls: type) -> bool:
        return attrs.has(cls) and any("json" in f.metadata for f in attrs.fields(cls))

    converter.register_unstructure_hook_factory(has_renames, lambda cls: make_dict_unstructure_fn(
        cls, converter, _cattrs_omit_if_default=True, **renamed(cls)))
    converter.register_structure_hook_factory(has_renames, lambda cls: make_dict_structure_fn(
        cls, converter, _cattrs_forbid_extra_keys=True, **renamed(cls)))
    return converter


#: The one converter for every stored record and every JSON report.
CONVERTER = _converter()


@functools.cache
def shape(cls: type) -> str:
    """Every field's name and type of an attrs class, its nested attrs classes and enums
    included: the part of a record's stamp that changes with its class."""
    seen: set[type] = set()
    parts: list[str] = []

    def visit(tp: Any) -> None:
        for arg in typing.get_args(tp):
            visit(arg)
        if isinstance(tp, type) and tp not in seen:
            if attrs.has(tp):
                seen.add(tp)
                hints = typing.get_type_hints(tp)
                parts.append(tp.__qualname__ + "(" + ",".join(f"{f.name}:{hints.get(f.name, f.type)}"
                                                              for f in attrs.fields(tp)) + ")")
                for f in attrs.fields(tp):
                    visit(hints.get(f.name, f.type))
            elif issubclass(tp, enum.Enum):
                seen.add(tp)
                parts.append(tp.__qualname__ + "[" + ",".join(str(m.value) for m in tp) + "]")

    visit(cls)
    return ";".join(parts)


def stamp(kind: str, cls: type, *depends: object) -> str:
    """The stamp a record of `kind` is stored under: kind, version, shape, and whatever else the
    stored value was computed from (`depends`, e.g. the generator version)."""
    text = repr((kind, VERSIONS.get(kind, 0), shape(cls), depends))
    return f"{kind}:{VERSIONS.get(kind, 0)}:{xxhash.xxh3_64_hexdigest(text.encode())}"


def dumps(kind: str, record: Any, cls: type | None = None, *depends: object) -> bytes:
    """`record` as stamped JSON bytes (stable: keys sorted, no spaces)."""
    data = {"stamp": stamp(kind, cls or type(record), *depends), "record": CONVERTER.unstructure(record, cls)}
    return json.dumps(data, sort_keys=True, separators=(",", ":")).encode()


def loads(kind: str, cls: type[T], data: bytes | str | None, *depends: object) -> T | None:
    """The record stored by `dumps`, or None when it is absent or does not fit (a miss)."""
    if data is None:
        return None
    try:
        stored = json.loads(data)
        if stored["stamp"] != stamp(kind, cls, *depends):
            return None
        return CONVERTER.structure(stored["record"], cls)
    except (ValueError, TypeError, KeyError, AttributeError, cattrs.BaseValidationError):
        return None


#: path → (file identity, stamp, record): what this process last read or wrote there.
_KEPT: dict[str, tuple[tuple[int, int, int], str, Any]] = {}


def _identity(path: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


def read_record(path: str, kind: str, cls: type[T], *depends: object) -> T | None:
    """The record stored at `path` (`loads`), or None; from memory when this process read or
    wrote that very file last."""
    identity = _identity(path)
    kept = _KEPT.get(path)
    if identity is not None and kept is not None and kept[0] == identity and kept[1] == stamp(kind, cls, *depends):
        return kept[2]
    record = loads(kind, cls, read_bytes(path), *depends)
    if record is not None and identity is not None:
        _KEPT[path] = (identity, stamp(kind, cls, *depends), record)
    return record


def write_record(path: str, kind: str, record: Any, cls: type | None = None, *depends: object) -> None:
    """Store `record` at `path` (`dumps`, written only when its bytes change, without fsync: a
    lost cache record costs work, not correctness), and keep it in memory. Raises OSError."""
    cls = cls or type(record)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    write_if_changed(path, dumps(kind, record, cls, *depends), durable=False)
    identity = _identity(path)
    if identity is not None:
        _KEPT[path] = (identity, stamp(kind, cls, *depends), record)
    else:
        with contextlib.suppress(KeyError):
            del _KEPT[path]
