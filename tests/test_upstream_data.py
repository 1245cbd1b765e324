"""Optional cross-checks: `tests/data` still says what the upstream files it was recorded from say.

The default suite reads only `tests/data`. These compare it with the originals when they are at
hand (`<repo>/../shared/data`, or `$SWAPGEN_SHARED/data`; tests/shared.py): llama-swap's
`config-schema.json` and the public models' `config.json` files. Run with `pytest -m slow`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from autogen.metadata.hf_config import read_config_json
from tests import schema_facts
from tests.shared import HF_CONFIGS, REPO, UPSTREAM_HF_CONFIGS, UPSTREAM_SCHEMA, upstream

pytestmark = pytest.mark.slow

#: Kept although swapgen does not read it: the non-standard `Infinity` token real files carry.
KEPT_FOR_ITS_TOKEN = {"time_step_limit"}


def test_recorded_schema_facts_are_upstreams():
    path = upstream(UPSTREAM_SCHEMA, "llama-swap's config-schema.json (mostlygeek/llama-swap at commit 0bdb3720)")
    assert schema_facts.from_json_schema(json.loads(path.read_text())) == schema_facts.load(), (
        "llama-swap's schema moved: record it again (tests/schema_facts.py from_json_schema) and update the tables")


def _read_by_swapgen() -> set[str]:
    """Every string literal of the package: a config key swapgen reads is quoted where it is read."""
    return {m for p in (REPO / "autogen").rglob("*.py") for m in re.findall(r"[\"']([A-Za-z_][\w]*)[\"']", p.read_text())}


def _expected_shape(config: dict, read: set[str]) -> dict:
    return {k: _expected_shape(v, read) if isinstance(v, dict) else v
            for k, v in config.items() if k in read or k in KEPT_FOR_ITS_TOKEN}


@pytest.mark.parametrize("name", sorted(p.name for p in HF_CONFIGS.iterdir()))
def test_recorded_shapes_are_the_upstream_config_files_trimmed_to_what_swapgen_reads(name):
    """Same values; and a key swapgen starts to read must be recorded too."""
    original = upstream(UPSTREAM_HF_CONFIGS / name / "config.json", "the public model's config.json")
    recorded = read_config_json(str(HF_CONFIGS / name / "config.json"))
    assert recorded == _expected_shape(read_config_json(str(original)), _read_by_swapgen()), (
        f"record tests/data/hf-configs/{name}/config.json again from {original}")


def test_every_upstream_config_has_its_shape():
    folder = upstream(UPSTREAM_HF_CONFIGS, "the public models' config.json files")
    assert sorted(p.name for p in Path(folder).iterdir()) == sorted(p.name for p in HF_CONFIGS.iterdir())
