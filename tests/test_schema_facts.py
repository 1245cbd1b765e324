"""Our validator's tables state llama-swap's schema as `tests/data/llama-swap-schema.json` records
it, and the schema rebuilt from those facts is a valid Draft 7 schema (the one jsonschema applies
to generated configs in other tests). The cross-check of the record against upstream's file is
in `test_upstream_data.py`."""

from __future__ import annotations

import jsonschema
import pytest

from autogen.router.llamaswap_schema import TOP_SPEC
from tests import schema_facts

#: Where our tables knowingly differ from the schema, with why (path → our row's facts).
OURS_BEYOND_THE_SCHEMA = {
    "logRequests": ({"type": "boolean"}, "a field of llama-swap's Go Config struct the schema omits"),
    "startPort": ({"type": "integer", "minimum": 1}, "the loader refuses a start port below 1"),
}


def test_validator_tables_state_the_recorded_schema_facts():
    recorded = schema_facts.compared(schema_facts.load())
    ours = schema_facts.compared(schema_facts.from_spec(TOP_SPEC))
    for path, (row, _why) in OURS_BEYOND_THE_SCHEMA.items():
        assert ours.pop(path) == row, path
        recorded.pop(path, None)
    missing = sorted(set(recorded) - set(ours))
    extra = sorted(set(ours) - set(recorded))
    differ = {p: (ours[p], recorded[p]) for p in set(ours) & set(recorded) if ours[p] != recorded[p]}
    assert not missing and not extra and not differ, (
        f"llamaswap_schema.TOP_SPEC vs tests/data/llama-swap-schema.json: keys only recorded {missing}, "
        f"only ours {extra}, differing (ours, recorded) {differ}")


def test_the_rebuilt_schema_is_a_valid_draft7_schema():
    jsonschema.Draft7Validator.check_schema(schema_facts.to_json_schema(schema_facts.load()))


@pytest.mark.parametrize(("doc", "valid"), [
    ({"models": {"m": {"cmd": "srv --port ${PORT}", "ttl": -1}}}, True),
    ({"models": {"m": {"cmd": "srv", "ttl": -2}}}, False),
    ({"models": {"m": {"cmd": "srv", "checkendpoint": "/"}}}, True),  # an open object: llama-swap ignores it
    ({"models": {}, "hooks": {"on_startup": {"preloads": []}}}, False),  # a closed one
    ({"models": {}, "groups": {"g": {"members": []}}, "matrix": {"vars": {"a": "m"}, "sets": {"s": "a"}}}, False),
    ({"models": {}, "macros": {"PORT": "1"}}, False),
    ({"models": {}, "profiles": {"p": {"pins": {"chat": None}}}}, True),
])
def test_the_rebuilt_schema_judges_as_the_facts_say(doc, valid):
    validator = jsonschema.Draft7Validator(schema_facts.to_json_schema(schema_facts.load()))
    assert (not list(validator.iter_errors(doc))) == valid
