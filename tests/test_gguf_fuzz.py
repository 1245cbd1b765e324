"""Fuzz the header reader: whatever the bytes, only `GGUFError` escapes, and memory stays small."""

from __future__ import annotations

import struct
import tempfile
import tracemalloc
from pathlib import Path

import pytest
from gguf_fixtures import Q, write_gguf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autogen.metadata.gguf_header import GGUFError, read_gguf_header
from autogen.metadata.gguf_meta import meta_from_gguf

#: Peak Python allocation allowed for one read: read window + the largest decoded value.
MEMORY_BOUND = 4 << 20

FUZZ = settings(max_examples=300, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])


@pytest.fixture(scope="module")
def seed_header() -> bytes:
    """A valid header touching every value kind: scalars, strings, arrays, tensor infos."""
    with tempfile.TemporaryDirectory() as d:
        path = write_gguf(Path(d) / "seed.gguf", "qwen3next", vocab=40, chat_template="{{ x }}",
                          kv={"general.name": "Seed", "{arch}.block_count": 4,
                              "{arch}.attention.head_count_kv": [0, 0, 0, 2],
                              "{arch}.attention.head_count": 8,
                              "{arch}.rope.freq_base": 1e6,
                              "{arch}.full_attention_interval": 4},
                          tensors=[("token_embd.weight", (64, 40), Q.Q8_0),
                                   ("blk.0.ffn_up_exps.weight", (256, 32, 4), Q.Q4_K)])
        data_offset = read_gguf_header(path).data_offset
        return path.read_bytes()[:data_offset]


@pytest.fixture(scope="module")
def scratch():
    with tempfile.TemporaryDirectory() as d:
        yield Path(d) / "fuzz.gguf"


def _read_bounded(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    tracemalloc.start()
    try:
        header = read_gguf_header(path)
        meta_from_gguf(header)
    except GGUFError as e:
        assert str(e).isprintable()  # it becomes a one-line `# SKIPPED` comment
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert peak < MEMORY_BOUND


def test_seed_header_parses(seed_header, scratch):
    scratch.write_bytes(seed_header)
    assert meta_from_gguf(read_gguf_header(scratch)).head_count_kv == (0, 0, 0, 2)


@FUZZ
@given(data=st.data())
def test_mutated_header_raises_only_gguf_error(seed_header, scratch, data):
    blob = bytearray(seed_header)
    for _ in range(data.draw(st.integers(1, 8))):
        at = data.draw(st.integers(0, len(blob) - 1))
        kind = data.draw(st.sampled_from(["byte", "u64", "u32"]))
        if kind == "byte":
            blob[at] = data.draw(st.integers(0, 255))
        else:
            width = 8 if kind == "u64" else 4
            value = data.draw(st.integers(0, (1 << (8 * width)) - 1))
            blob[at:at + width] = value.to_bytes(width, "little")
    cut = data.draw(st.integers(0, len(blob)))
    _read_bounded(scratch, bytes(blob[:cut]))


@FUZZ
@given(body=st.binary(max_size=512), counts=st.tuples(st.integers(0, 4), st.integers(0, 6)))
def test_random_bytes_after_a_valid_preamble_raise_only_gguf_error(scratch, body, counts):
    _read_bounded(scratch, b"GGUF" + struct.pack("<IQQ", 3, *counts) + body)
