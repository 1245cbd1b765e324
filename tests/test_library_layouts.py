"""Real library layouts: half-downloaded HF models, hub caches with blobs, refs and several
revisions, vocabulary-only GGUFs, growing downloads and overlapping roots."""

from __future__ import annotations

import json
import os
import struct

import pytest

from autogen.commands import cli
from autogen.discovery.tree import walk_signature
from autogen.discovery.walk import VOCAB_ONLY, discover
from autogen.errors import ModelError
from autogen.metadata.cache import MetaCache
from autogen.metadata.safetensors_header import read_safetensors_size, read_weight_index
from tests.gguf_fixtures import Q, write_gguf, write_split_set
from tests.hf_fixtures import LLAMA_CONFIG, hub_snapshot, sharded, write_config, write_index, write_safetensors
from tests.runs import generate

GIB = 1 << 30
LLAMA_KV = {"{arch}.block_count": 2, "{arch}.context_length": 4096, "{arch}.embedding_length": 64,
            "{arch}.attention.head_count": 4}
TENSORS = [("token_embd.weight", (64, 256), Q.F16), ("blk.0.attn_q.weight", (64, 64), Q.F16)]
CONFIG = json.dumps(LLAMA_CONFIG)
WHOLE = {"config.json": CONFIG, "model.safetensors": GIB}


def gguf(path, **kw):
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_gguf(path, "llama", kv=LLAMA_KV, tensors=kw.pop("tensors", TENSORS), **kw)


def run(tmp_path, *roots):
    cache = MetaCache(str(tmp_path / "cache"))
    found = discover(tuple(str(r) for r in roots) or (str(tmp_path / "models"),), cache.gguf, cache.config,
                     safetensors=cache.safetensors)
    cache.save()
    return found


def only(found):
    (row,) = found.models
    return row, found.row_errors.get(row.id)


class TestSafetensorsHeader:
    def test_expected_size_is_the_header_and_the_furthest_tensor(self, tmp_path):
        path = write_safetensors(tmp_path / "m.safetensors", 5 * GIB)
        assert read_safetensors_size(str(path)).expected_size == 5 * GIB

    def test_a_file_ending_inside_its_header_must_be_at_least_the_header(self, tmp_path):
        path = write_safetensors(tmp_path / "m.safetensors", GIB, have=20)
        length = struct.unpack("<Q", path.read_bytes()[:8])[0]
        assert read_safetensors_size(str(path)).expected_size == 8 + length

    @pytest.mark.parametrize("content, words", [
        (b"\0" * 64, "header length 0"),
        (struct.pack("<Q", 4) + b"nope", "is not JSON"),
        (struct.pack("<Q", 2) + b"[]", "not a JSON object"),
        (struct.pack("<Q", 24) + b'{"w": {"data_offsets": 1}}'[:24], "is not JSON"),
        (struct.pack("<Q", 1 << 40), "header length 1099511627776"),
    ])
    def test_hostile_headers_name_the_file(self, tmp_path, content, words):
        path = tmp_path / "bad.safetensors"
        path.write_bytes(content)
        with pytest.raises(ModelError) as err:
            read_safetensors_size(str(path))
        assert str(path) in str(err.value) and words in str(err.value)

    def test_bad_offsets_are_refused(self, tmp_path):
        header = json.dumps({"w": {"dtype": "U8", "shape": [2], "data_offsets": [5, 2]}}).encode()
        path = tmp_path / "bad.safetensors"
        path.write_bytes(struct.pack("<Q", len(header)) + header)
        with pytest.raises(ModelError, match="no valid data_offsets"):
            read_safetensors_size(str(path))

    @pytest.mark.parametrize("text, words", [
        ("{", "not valid JSON"), ("{}", "no weight_map"), ('{"weight_map": {"a": "../x.safetensors"}}', "'../x"),
        ('{"weight_map": {"a": "/etc/passwd"}}', "not a file inside"),
    ])
    def test_a_bad_index_names_itself(self, tmp_path, text, words):
        path = tmp_path / "model.safetensors.index.json"
        path.write_text(text)
        with pytest.raises(ModelError) as err:
            read_weight_index(str(path))
        assert str(path) in str(err.value) and words in str(err.value)


class TestShardedHuggingFace:
    def test_two_of_four_shards_is_skipped_naming_the_missing_ones(self, tmp_path):
        sharded(tmp_path / "models/meta/Llama-3.1-8B", 4, 2 * GIB, present={1, 2})
        row, reason = only(run(tmp_path))
        assert reason == ("incomplete download: 2 of 4 files missing (model-00003-of-00004.safetensors, "
                          "model-00004-of-00004.safetensors) (8.00 GiB expected)")
        assert row.size_bytes == 4 * GIB and row.id == "llama-3.1-8b-bf16"

    def test_a_whole_sharded_model_has_no_reason_and_its_index_is_an_input(self, tmp_path):
        folder = sharded(tmp_path / "models/meta/Llama-3.1-8B", 4, 2 * GIB)
        row, reason = only(run(tmp_path))
        assert reason is None and row.size_bytes == 8 * GIB
        assert str(folder / "model.safetensors.index.json") in row.inputs

    def test_a_shard_cut_short_keeps_the_same_reason_while_it_grows(self, tmp_path):
        folder = sharded(tmp_path / "models/meta/Llama-3.1-8B", 2, 2 * GIB, have={2: GIB // 2})
        first = run(tmp_path)
        os.truncate(folder / "model-00002-of-00002.safetensors", GIB + GIB // 2)
        grown = run(tmp_path)
        reason = "incomplete download: model-00002-of-00002.safetensors cut short (4.00 GiB expected)"
        assert first.row_errors == grown.row_errors == {"llama-3.1-8b-bf16": reason}
        assert first.downloads["llama-3.1-8b-bf16"].have_bytes == 2 * GIB + GIB // 2
        assert grown.downloads["llama-3.1-8b-bf16"].have_bytes == 3 * GIB + GIB // 2

    def test_shard_names_alone_tell_a_missing_shard(self, tmp_path):
        sharded(tmp_path / "models/q/Qwen3-8B", 3, GIB, present={1, 3}, index=False)
        _, reason = only(run(tmp_path))
        assert reason == "incomplete download: 1 of 3 files missing (model-00002-of-00003.safetensors)"

    def test_the_index_decides_which_files_count(self, tmp_path):
        """A consolidated copy beside the shards is not loaded by vLLM, so not counted either."""
        folder = sharded(tmp_path / "models/mistralai/Mistral-7B", 2, GIB)
        write_safetensors(folder / "consolidated.safetensors", 2 * GIB)
        row, reason = only(run(tmp_path))
        assert reason is None and row.size_bytes == 2 * GIB
        assert str(folder / "consolidated.safetensors") not in row.inputs

    def test_a_preallocated_empty_shard_is_not_a_safetensors_file(self, tmp_path):
        folder = sharded(tmp_path / "models/meta/Llama", 2, GIB)
        path = folder / "model-00002-of-00002.safetensors"
        path.write_bytes(b"")
        os.truncate(path, GIB)  # a downloader that preallocates
        _, reason = only(run(tmp_path))
        assert str(path) in reason and "header length 0" in reason

    def test_a_broken_index_is_the_reason(self, tmp_path):
        folder = sharded(tmp_path / "models/meta/Llama", 2, GIB)
        (folder / "model.safetensors.index.json").write_text("{")
        _, reason = only(run(tmp_path))
        assert reason.startswith(f"{folder / 'model.safetensors.index.json'}: not valid JSON")

    def test_an_index_before_any_shard_is_a_skipped_model(self, tmp_path):
        sharded(tmp_path / "models/meta/Llama", 2, GIB, present=set())
        row, reason = only(run(tmp_path))
        assert row.size_bytes == 0 and reason.startswith("incomplete download: 2 of 2 files missing")


class TestHubCache:
    def test_a_broken_blob_symlink_skips_the_model_naming_the_file(self, tmp_path):
        hub_snapshot(tmp_path / "models", "meta-llama/Llama-3.1-8B", "aaaa1111",
                     {"config.json": CONFIG, "model-00001-of-00002.safetensors": GIB,
                      "model-00002-of-00002.safetensors": None}, main=True)
        found = run(tmp_path)
        _, reason = only(found)
        assert reason.startswith("broken symlink model-00002-of-00002.safetensors (its target ../../blobs/")
        assert not any("broken symlink" in p for p in found.problems)

    def test_an_incomplete_blob_skips_the_snapshot(self, tmp_path):
        snapshot = hub_snapshot(tmp_path / "models", "Qwen/Qwen3-8B", "bbbb2222",
                                {"config.json": CONFIG}, main=True)
        blob = snapshot.parents[1] / "blobs" / "7f3e.incomplete"
        write_safetensors(blob, 4 * GIB, have=GIB)
        found = run(tmp_path)
        row, reason = only(found)
        assert reason == ("download in progress or interrupted (blobs/7f3e.incomplete): finish it with "
                          "`hf download`, or delete the .incomplete files")
        assert found.downloads[row.id].have_bytes == GIB

    def test_a_broken_config_link_is_the_reason(self, tmp_path):
        snapshot = hub_snapshot(tmp_path / "models", "Qwen/Qwen3-8B", "aaaa", {"config.json": None,
                                                                               "model.safetensors": GIB})
        row, reason = only(run(tmp_path))
        assert row.path == str(snapshot) and reason.startswith("broken symlink config.json (its target ../../blobs/")

    def test_an_incomplete_blob_skips_even_a_whole_looking_snapshot(self, tmp_path):
        """Which file the blob will be is not known: tokenizer files matter to vLLM too."""
        snapshot = hub_snapshot(tmp_path / "models", "Qwen/Qwen3-8B", "aaaa", WHOLE, main=True)
        (snapshot.parents[1] / "blobs/9a.incomplete").write_bytes(b"{")
        _, reason = only(run(tmp_path))
        assert "blobs/9a.incomplete" in reason

    def test_an_incomplete_blob_leaves_the_whole_ggufs_of_the_repo_served(self, tmp_path):
        snapshot = hub_snapshot(tmp_path / "models", "unsloth/Qwen3-8B-GGUF", "aaaa", {}, main=True)
        gguf(snapshot / "Qwen3-8B-Q4_K_M.gguf")
        (snapshot.parents[1] / "blobs/9a.incomplete").write_bytes(b"GGUF")  # the Q8_0 still coming
        found = run(tmp_path)
        assert [r.id for r in found.models] == ["qwen3-8b-q4_k_m"] and found.row_errors == {}

    def test_the_revision_refs_main_names_gets_the_clean_id(self, tmp_path):
        old = hub_snapshot(tmp_path / "models", "Qwen/Qwen3-8B", "0000aaaa",
                           WHOLE)
        new = hub_snapshot(tmp_path / "models", "Qwen/Qwen3-8B", "ffff9999",
                           WHOLE, main=True)
        os.utime(old, ns=(2 * 10**18, 2 * 10**18))  # the older revision touched last: refs/main still decides
        found = run(tmp_path)
        row, _ = only(found)
        assert (row.id, row.path) == ("qwen3-8b-bf16", str(new))
        (ignored,) = found.ignored
        assert ignored.path == str(old)
        assert ignored.reason == "older revision of Qwen/Qwen3-8B: serving ffff9999 (refs/main)"

    def test_without_refs_the_newest_snapshot_is_served(self, tmp_path):
        a = hub_snapshot(tmp_path / "models", "Qwen/Qwen3-8B", "aaaa", WHOLE)
        b = hub_snapshot(tmp_path / "models", "Qwen/Qwen3-8B", "bbbb", WHOLE)
        os.utime(a, ns=(3 * 10**18, 3 * 10**18))
        os.utime(b, ns=(1 * 10**18, 1 * 10**18))
        found = run(tmp_path)
        assert only(found)[0].path == str(a)
        assert found.ignored[0].reason == ("older revision of Qwen/Qwen3-8B: serving aaaa "
                                           "(the newest snapshot, no refs/main)")
        os.utime(b, ns=(3 * 10**18, 3 * 10**18))  # a tie: the greater name
        assert only(run(tmp_path))[0].path == str(b)

    def test_refs_main_naming_a_snapshot_not_on_disk_falls_back_to_the_newest(self, tmp_path):
        old = hub_snapshot(tmp_path / "models", "Qwen/Qwen3-8B", "aaaa", WHOLE)
        (old.parents[1] / "refs").mkdir()
        (old.parents[1] / "refs/main").write_text("cccc")  # the download of cccc has not linked a file yet
        found = run(tmp_path)
        assert only(found)[0].path == str(old) and found.ignored == ()

    def test_list_shows_older_revisions_as_ignored(self, tmp_path, capsys):
        hub_snapshot(tmp_path / "models", "Qwen/Qwen3-8B", "aaaa", WHOLE)
        hub_snapshot(tmp_path / "models", "Qwen/Qwen3-8B", "bbbb", WHOLE,
                     main=True)
        (tmp_path / "swapgen.yaml").write_text(SETTINGS)
        assert cli.main(["--settings", str(tmp_path / "swapgen.yaml"), "list"]) == 0
        out = capsys.readouterr().out
        assert "snapshots/aaaa  (older revision of Qwen/Qwen3-8B: serving bbbb (refs/main))" in out
        assert "qwen3-8b-bf16 " in out and "1 ignored" in out

    def test_gguf_repos_keep_one_revision_too(self, tmp_path):
        for rev, main in (("1111", False), ("2222", True)):
            snap = hub_snapshot(tmp_path / "models", "unsloth/Qwen3-8B-GGUF", rev, {}, main=main)
            gguf(snap / "Qwen3-8B-Q4_K_M.gguf")
        found = run(tmp_path)
        served = [(r.id, os.path.basename(os.path.dirname(r.path))) for r in found.models]
        assert served == [("qwen3-8b-q4_k_m", "2222")]

    def test_a_growing_incomplete_blob_changes_the_walk_signature(self, tmp_path):
        snapshot = hub_snapshot(tmp_path / "models", "Qwen/Qwen3-8B", "bbbb", {"config.json": CONFIG})
        before = walk_signature((str(tmp_path / "models"),))
        blob = snapshot.parents[1] / "blobs" / "x.incomplete"
        blob.write_bytes(b"\0" * 10)
        started = walk_signature((str(tmp_path / "models"),))
        blob.write_bytes(b"\0" * 20)
        assert len({before, started, walk_signature((str(tmp_path / "models"),))}) == 3


class TestGgufTraps:
    def test_a_vocabulary_only_gguf_is_listed_as_what_it_is(self, tmp_path):
        path = gguf(tmp_path / "models/llama.cpp/ggml-vocab-llama-bpe.gguf", tensors=(), vocab=32)
        found = run(tmp_path)
        assert found.models == ()
        assert [(i.path, i.reason) for i in found.ignored] == [(str(path), VOCAB_ONLY + ", not a model")]

    def test_a_split_set_counts_the_tensors_of_every_shard(self, tmp_path):
        """Tensors are summed over the shards (gguf-split --no-tensor-first-split leaves shard 1 none)."""
        (tmp_path / "models/s").mkdir(parents=True)
        shards = write_split_set(tmp_path / "models/s", "Big-Q8_0", "llama", shards=2, kv=LLAMA_KV,
                                 tensors=[(f"blk.{i}.w", (64, 64), Q.F16) for i in range(2)])
        assert len(shards) == 2
        assert run(tmp_path).row_errors == {}

    def test_a_broken_projector_symlink_is_a_warning(self, tmp_path):
        gguf(tmp_path / "models/pub/repo/M-Q4_K_M.gguf")
        (tmp_path / "models/pub/repo/mmproj-F16.gguf").symlink_to("gone")
        found = run(tmp_path)
        assert found.row_errors == {}
        assert found.problems == (f"{tmp_path / 'models/pub/repo/mmproj-F16.gguf'}: broken symlink "
                                  "(its target gone is missing)",)

    def test_a_broken_gguf_symlink_is_a_skipped_row(self, tmp_path):
        folder = tmp_path / "models/pub/repo"
        folder.mkdir(parents=True)
        (folder / "Gone-Q4_K_M.gguf").symlink_to("../../blobs/missing")
        found = run(tmp_path)
        _, reason = only(found)
        assert reason == "broken symlink (its target ../../blobs/missing is missing)"


class TestRoots:
    def test_nested_roots_are_overlapping_not_a_loop(self, tmp_path):
        gguf(tmp_path / "models/m/A-Q4_0.gguf")
        found = run(tmp_path, tmp_path / "models", tmp_path / "models/m")
        assert [r.id for r in found.models] == ["a-q4_0"]
        assert found.problems == (f"overlapping roots: {tmp_path / 'models/m'} is inside {tmp_path / 'models'}; "
                                  "each folder is scanned once",)

    def test_a_real_symlink_loop_is_still_a_loop(self, tmp_path):
        (tmp_path / "models/m").mkdir(parents=True)
        (tmp_path / "models/m/up").symlink_to(tmp_path / "models")
        assert any("symlink loop" in p for p in run(tmp_path).problems)


SETTINGS = """roots: [models]
vram_budget_gb: 22
card_vram_gb: 24
backends:
  - {id: llama, kind: llama, path: /opt/llama/llama-server, default: true}
  - {id: vllm, kind: vllm, path: /opt/vllm/bin/vllm, version: "0.11.0"}
"""


class TestGrowingDownloadEndToEnd:
    def test_the_config_stays_put_and_list_shows_the_progress(self, tmp_path, capsys):
        gguf(tmp_path / "models/pub/G/Phi-Q4_K_M.gguf", tensors=[("blk.0.w", (4096, 4096 * 64), Q.F16)],
             sparse_size=GIB)
        (tmp_path / "swapgen.yaml").write_text(SETTINGS)
        assert generate(tmp_path / "swapgen.yaml")[0] == 0
        config = tmp_path / "config.yaml"
        first, mtime = config.read_bytes(), config.stat().st_mtime_ns
        assert b'# SKIPPED "phi-q4_k_m": incomplete download (2.00 GiB expected)' in first
        os.truncate(tmp_path / "models/pub/G/Phi-Q4_K_M.gguf", GIB + GIB // 2)
        assert generate(tmp_path / "swapgen.yaml")[0] == 0
        assert config.read_bytes() == first and config.stat().st_mtime_ns == mtime
        capsys.readouterr()
        assert cli.main(["--settings", str(tmp_path / "swapgen.yaml"), "list", "--json"]) == 0
        (row,) = json.loads(capsys.readouterr().out)
        assert row["download"] == {"have_gb": 1.5, "expected_gb": 2.0} and row["size_gb"] == 1.5
        assert cli.main(["--settings", str(tmp_path / "swapgen.yaml"), "list"]) == 0
        assert "(incomplete download (2.00 GiB expected); 1.50 of 2.00 GiB on disk)" in capsys.readouterr().out

    def test_list_rounds_size_as_the_config_does(self, tmp_path, capsys):
        """128 MiB is 0.125 GiB: half away from zero, as config.yaml's size_gb."""
        folder = tmp_path / "models/pub/M"
        write_config(folder)
        write_safetensors(folder / "model.safetensors", 128 << 20)
        (tmp_path / "swapgen.yaml").write_text(SETTINGS)
        generate(tmp_path / "swapgen.yaml")
        assert "size_gb: 0.13" in (tmp_path / "config.yaml").read_text()
        capsys.readouterr()
        cli.main(["--settings", str(tmp_path / "swapgen.yaml"), "list", "--json"])
        assert json.loads(capsys.readouterr().out)[0]["size_gb"] == 0.13


def test_write_index_names_every_shard(tmp_path):
    path = write_index(tmp_path, {"a.safetensors": 1, "b.safetensors": 2})
    assert read_weight_index(str(path)).files == ("a.safetensors", "b.safetensors")
