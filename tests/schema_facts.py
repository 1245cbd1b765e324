"""llama-swap's config schema as facts, one row per key, kept in `tests/data/llama-swap-schema.json`.

The rows say what llama-swap's `config-schema.json` (mostlygeek/llama-swap, the commit named in
the file) states about each key: its type and its constraints, in the project's own form. Three
views read them:

- `to_json_schema`: a Draft 7 schema rebuilt from the rows, so `jsonschema` (a validator that is
  not ours) checks generated configs in the default suite;
- `from_spec`: the same rows computed from our validator's tables (`llamaswap_schema.TOP_SPEC`),
  to compare with the recorded ones;
- `from_json_schema`: the rows of an upstream schema file, for the optional cross-check that the
  recorded facts are still upstream's (and to record them again when llama-swap moves).

A path names a key the way messages do: `models.*.ttl` (`*`: any name of a mapping),
`apiKeys[]` (an item of a list), `""` (the top level).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FACTS = Path(__file__).resolve().parent / "data" / "llama-swap-schema.json"
#: The facts `from_spec` can express; the others (`format`, key lengths, macro names) are the
#: schema's alone, and `to_json_schema` still applies them.
COMPARED = ("type", "minimum", "minLength", "maxLength", "pattern", "enum", "required", "closed", "minItems",
            "uniqueItems", "keyPattern")

Row = dict[str, Any]


def load() -> dict[str, Row]:
    return json.loads(FACTS.read_text())["keys"]


# -- upstream JSON schema → rows -------------------------------------------------------------------


def from_json_schema(schema: dict) -> dict[str, Row]:
    rows: dict[str, Row] = {}
    _walk_schema(schema, schema, "", rows)
    # `allOf: [{if: {required: [groups]}, then: {not: {required: [matrix]}}}, …the other way]`
    pairs = {tuple(sorted(c["if"]["required"] + c["then"]["not"]["required"])) for c in schema.get("allOf", ())}
    if pairs:
        rows[""]["exclusive"] = [list(p) for p in sorted(pairs)]
    return rows


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _walk_schema(node: dict, root: dict, path: str, rows: dict[str, Row]) -> None:
    ref = node.get("$ref")
    if ref == "#/definitions/macros":
        rows[path] = _macros_row(root["definitions"]["macros"])
        return
    if ref:
        node = root["definitions"][ref.rsplit("/", 1)[1]]
    if "oneOf" in node and sorted(o.get("type") for o in node["oneOf"]) == ["null", "string"]:
        rows[path] = {"type": "string-or-null"}
        return
    kind = node.get("type")
    row: Row = {}
    if kind == "object":
        _object_row(node, root, path, row, rows)
    elif kind == "array":
        row.update(type="list", **_pick(node, "minItems", "uniqueItems"))
        _walk_schema(node["items"], root, f"{path}[]", rows)
    else:
        row.update(type=kind, **_pick(node, "minimum", "maxLength", "pattern", "enum", "format"))
        if node.get("minLength"):
            row["minLength"] = node["minLength"]
    rows[path] = row


def _object_row(node: dict, root: dict, path: str, row: Row, rows: dict[str, Row]) -> None:
    names = node.get("propertyNames", {})
    if "pattern" in names:
        row["keyPattern"] = names["pattern"]
    if names.get("minLength"):
        row["keyMinLength"] = names["minLength"]
    if "minProperties" in node:
        row["minItems"] = node["minProperties"]
    extra = node.get("additionalProperties", True)
    if "properties" in node:
        row.update(type="object", closed=extra is False, **_pick(node, "required"))
        for key, sub in node["properties"].items():
            _walk_schema(sub, root, _child(path, key), rows)
    elif isinstance(extra, dict):
        row["type"] = "map"
        _walk_schema(extra, root, _child(path, "*"), rows)
    else:
        row["type"] = "any-object"


def _macros_row(node: dict) -> Row:
    names = node["propertyNames"]
    value_types = sorted(o["type"] for o in node["additionalProperties"]["oneOf"])
    string = next(o for o in node["additionalProperties"]["oneOf"] if o["type"] == "string")
    return {"type": "macros", "keyPattern": names["pattern"], "keyMinLength": names["minLength"],
            "keyMaxLength": names["maxLength"], "reservedKeys": names["not"]["enum"], "valueTypes": value_types,
            "valueMaxLength": string["maxLength"]}


def _pick(node: dict, *names: str) -> Row:
    return {n: node[n] for n in names if n in node}


# -- our validator's tables → rows ----------------------------------------------------------------

_KINDS = {"str": "string", "strnull": "string-or-null", "int": "integer", "bool": "boolean", "list": "list",
          "map": "map", "obj": "object", "free": "any-object", "macros": "macros"}


def from_spec(spec, path: str = "", rows: dict[str, Row] | None = None) -> dict[str, Row]:
    rows = {} if rows is None else rows
    row: Row = {"type": _KINDS[spec.kind]}
    for fact, value, unset in (("minimum", spec.minimum, None), ("minLength", spec.min_len, 0),
                               ("maxLength", spec.max_len, None), ("pattern", spec.pattern, None),
                               ("enum", list(spec.enum), []), ("required", list(spec.required), []),
                               ("minItems", spec.min_items, 0), ("uniqueItems", spec.unique, False),
                               ("keyPattern", spec.key_pattern, None)):
        if value != unset:
            row[fact] = value
    if spec.kind == "obj":
        row["closed"] = spec.closed
        for key, sub in spec.fields.items():
            from_spec(sub, _child(path, key), rows)
    elif spec.kind == "map":
        from_spec(spec.item, _child(path, "*"), rows)
    elif spec.kind == "list":
        from_spec(spec.item, f"{path}[]", rows)
    rows[path] = row
    return rows


def compared(rows: dict[str, Row]) -> dict[str, Row]:
    """The facts both forms state (`COMPARED`), per path; of a `macros` block only that it is one
    (its names and values are checked by the loader's rules, `validate.macro_entries`)."""
    return {path: {k: v for k, v in row.items() if k in COMPARED and (k == "type" or row["type"] != "macros")}
            for path, row in rows.items()}


# -- rows → a JSON schema, for jsonschema ----------------------------------------------------------

_JSON_TYPES = {"string": "string", "integer": "integer", "boolean": "boolean", "list": "array"}
_AS_IS = ("minimum", "minLength", "maxLength", "pattern", "enum", "format", "minItems", "uniqueItems")


def to_json_schema(rows: dict[str, Row]) -> dict:
    schema = _node(rows, "")
    for pair in rows[""].get("exclusive", ()):
        schema.setdefault("allOf", []).append({"not": {"required": pair}})
    return schema


def _node(rows: dict[str, Row], path: str) -> dict:
    row = rows[path]
    kind = row["type"]
    if kind == "string-or-null":
        return {"type": ["string", "null"]}
    if kind == "macros":
        value = {"oneOf": [{"type": "string", "maxLength": row["valueMaxLength"]}, {"type": "number"},
                           {"type": "boolean"}]}
        names = {"pattern": row["keyPattern"], "minLength": row["keyMinLength"], "maxLength": row["keyMaxLength"],
                 "not": {"enum": row["reservedKeys"]}}
        return {"type": "object", "propertyNames": names, "additionalProperties": value}
    if kind in ("object", "map", "any-object"):
        return _object_node(rows, path, row)
    node = {"type": _JSON_TYPES[kind], **{k: row[k] for k in _AS_IS if k in row}}
    if kind == "list":
        node = {"type": "array", **{k: row[k] for k in ("minItems", "uniqueItems") if k in row},
                "items": _node(rows, f"{path}[]")}
    return node


def _object_node(rows: dict[str, Row], path: str, row: Row) -> dict:
    node: dict = {"type": "object"}
    names = {**({"pattern": row["keyPattern"]} if "keyPattern" in row else {}),
             **({"minLength": row["keyMinLength"]} if "keyMinLength" in row else {})}
    if names:
        node["propertyNames"] = names
    if "minItems" in row:
        node["minProperties"] = row["minItems"]
    if row["type"] == "map":
        node["additionalProperties"] = _node(rows, _child(path, "*"))
    elif row["type"] == "object":
        prefix = f"{path}." if path else ""
        keys = [p[len(prefix):] for p in rows if p.startswith(prefix) and p != path
                and "." not in p[len(prefix):] and not p[len(prefix):].endswith("[]") and p[len(prefix):] != "*"]
        node["properties"] = {k: _node(rows, _child(path, k)) for k in keys}
        node["additionalProperties"] = not row["closed"]
        if row.get("required"):
            node["required"] = row["required"]
    return node
