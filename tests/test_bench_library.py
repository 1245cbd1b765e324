"""The benchmark's synthetic library: hand-assembled headers are real GGUF, the mix is as stated."""

from __future__ import annotations

import gguf

from autogen.discovery.walk import discover
from autogen.metadata.cache import MetaCache
from autogen.metadata.gguf_header import read_gguf_header
from benchmarks import library


def test_a_hand_assembled_header_reads_the_same_in_gguf_reader_and_ours(tmp_path):
    library.build(tmp_path / "lib", models=4, n_vocab=2000)
    path = library.llm_path(tmp_path / "lib", 0)
    theirs = gguf.GGUFReader(path)
    ours = read_gguf_header(path)
    arch = ours.kv["general.architecture"]
    assert str(bytes(theirs.fields["general.architecture"].parts[-1]), "utf-8") == arch
    assert len(theirs.fields["tokenizer.ggml.tokens"].data) == ours.array_lengths["tokenizer.ggml.tokens"]
    assert len(theirs.tensors) == ours.tensor_count
    assert theirs.data_offset == ours.data_offset
    assert ours.expected_file_size == ours.file_size > 1 << 30  # sparse, GB-sized


def test_library_holds_the_planned_models_and_is_reused(tmp_path):
    stats = library.build(tmp_path / "lib", models=60, n_vocab=500)
    found = discover((str(tmp_path / "lib"),), MetaCache(str(tmp_path / "cache")).gguf)
    assert len(found.models) == stats["models"] == 60
    assert not found.row_errors and not found.problems
    assert sum(m.format == "hf" for m in found.models) == stats["hf"]
    assert sum(bool(m.shards) for m in found.models) == stats["split"]
    assert sum(bool(m.mmproj) for m in found.models) == stats["projectors"]
    marker = tmp_path / "lib" / library.MARKER
    before = marker.stat().st_mtime_ns
    assert library.build(tmp_path / "lib", models=60, n_vocab=500) == stats
    assert marker.stat().st_mtime_ns == before


def test_change_one_rewrites_model_zero_with_the_same_size(tmp_path):
    library.build(tmp_path / "lib", models=4, n_vocab=500)
    path = library.llm_path(tmp_path / "lib", 0)
    size = path.stat().st_size
    library.change_one(tmp_path / "lib", 500, 8192)
    h = read_gguf_header(path)
    assert h.kv[f"{h.kv['general.architecture']}.context_length"] == 8192
    assert path.stat().st_size == size
