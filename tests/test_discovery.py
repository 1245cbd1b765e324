"""Discovery: ids and quants from names, split sets, sidecars, HF folders and the cache layout."""

from __future__ import annotations

import json
import os
from typing import ClassVar

import pytest

import autogen.metadata.probes as discovery
from autogen.discovery.walk import discover, gguf_ids, quant_from_name
from autogen.metadata.cache import MetaCache
from tests.gguf_fixtures import Q, write_gguf, write_split_set
from tests.hf_fixtures import write_safetensors

LLAMA_KV = {"{arch}.block_count": 2, "{arch}.context_length": 4096, "{arch}.embedding_length": 64,
            "{arch}.attention.head_count": 4}
TENSORS = [("token_embd.weight", (64, 256), Q.F16), ("blk.0.attn_q.weight", (64, 64), Q.F16)]


def model(path, arch="llama", **kw):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    return write_gguf(path, arch, kv=kw.pop("kv", LLAMA_KV), tensors=kw.pop("tensors", TENSORS), **kw)


def hf_folder(path, config, weights=("model.safetensors",), size=4096):
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "config.json"), "w") as f:
        f.write(config if isinstance(config, str) else json.dumps(config))
    for name in weights:
        if size:
            write_safetensors(os.path.join(path, name), size)
        else:
            open(os.path.join(path, name), "wb").close()


def run(tmp_path, *roots):
    cache = MetaCache(str(tmp_path / "cache"))
    return discover(tuple(str(r) for r in roots) or (str(tmp_path / "models"),), cache.gguf)


def ids(found):
    return [m.id for m in found.models]


LLAMA_CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "torch_dtype": "bfloat16",
                "num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 64, "max_position_embeddings": 4096}


class TestNames:
    @pytest.mark.parametrize("name, quant", [
        ("Qwen3.8-27B-Q4_K_M.gguf", "Q4_K_M"), ("Qwen3.8-27B-UD-Q4_K_XL.gguf", "Q4_K_XL"),
        ("Qwen3.8-27B-NVFP4-MTP-MID-HIGH.gguf", "NVFP4"), ("gpt-oss-20b-MXFP4_MOE.gguf", "MXFP4_MOE"),
        ("Bitnet-2B-TQ1_0.gguf", "TQ1_0"), ("Kokoro-v1_0-fp16.gguf", "FP16"),
        ("Qwen3.6-27B-Q4_K_M-MTP-Preserved.gguf", "Q4_K_M"), ("Llama-3.1-8B-Instruct.gguf", ""),
    ])
    def test_quant_from_name(self, name, quant):
        """The Go original's table (docs/maintainers/discovery.md#model-ids)."""
        assert quant_from_name(name) == quant

    @pytest.mark.parametrize("name, expected", [
        ("Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf", "meta-llama-3.1-8b-instruct-q4_k_m"),
        ("Qwen3.8-27B-NVFP4-MTP-MID-HIGH.gguf", "qwen3.8-27b-nvfp4-mtp-mid-high"),
        ("Foo-GGUF.gguf", "foo"),
        ("My Model (v2) Q4_K_M.gguf", "my-model-v2-q4_k_m"),
        ("模型-Q8_0.gguf", "模型-q8_0"),
        ("$weird'name\".gguf", "weird-name"),
    ])
    def test_ids(self, name, expected):
        assert gguf_ids(name)[0] == expected


class TestGguf:
    def test_plain_model_row(self, tmp_path):
        path = model(tmp_path / "models/bartowski/Llama-GGUF/Llama-3-8B-Q4_K_M.gguf")
        found = run(tmp_path)
        (row,) = found.models
        assert (row.id, row.quant, row.publisher, row.repo) == ("llama-3-8b-q4_k_m", "Q4_K_M", "bartowski", "Llama-GGUF")
        assert row.path == str(path) and row.size_bytes == os.path.getsize(path) and row.inputs == (str(path),)

    def test_split_set_is_one_row_with_the_whole_size(self, tmp_path):
        folder = tmp_path / "models/big"
        folder.mkdir(parents=True)
        tensors = [(f"blk.{i}.w", (64, 64), Q.F16) for i in range(6)]
        shards = write_split_set(folder, "Big-Q8_0", "llama", shards=3, kv=LLAMA_KV, tensors=tensors)
        found = run(tmp_path)
        (row,) = found.models
        assert row.id == "big-q8_0" and row.path == str(shards[0]) and row.is_split
        assert row.size_bytes == sum(os.path.getsize(s) for s in shards)
        assert row.inputs == tuple(str(s) for s in shards)
        assert found.row_errors == {}

    def test_missing_shard_is_a_skip_reason(self, tmp_path):
        folder = tmp_path / "models/big"
        folder.mkdir(parents=True)
        tensors = [(f"blk.{i}.w", (64, 64), Q.F16) for i in range(6)]
        shards = write_split_set(folder, "Big-Q8_0", "llama", shards=3, kv=LLAMA_KV, tensors=tensors)
        os.unlink(shards[1])
        found = run(tmp_path)
        assert found.row_errors == {"big-q8_0": "split set is missing 1 of 3 shards (Big-Q8_0-00002-of-00003.gguf)"}

    def test_projector_and_draft_pair_with_the_models_of_their_folder(self, tmp_path):
        a = model(tmp_path / "models/g/gemma-3-12b-Q4_K_M.gguf", "gemma3")
        b = model(tmp_path / "models/g/gemma-3-12b-Q8_0.gguf", "gemma3")
        proj = model(tmp_path / "models/g/mmproj-F16.gguf", "clip", kv={"clip.has_vision_encoder": True})
        draft = model(tmp_path / "models/g/mtp-gemma.gguf")
        other = model(tmp_path / "models/h/other-Q4_0.gguf")
        found = run(tmp_path)
        rows = {r.id: r for r in found.models}
        assert set(rows) == {"gemma-3-12b-q4_k_m", "gemma-3-12b-q8_0", "other-q4_0"}
        for row, path in ((rows["gemma-3-12b-q4_k_m"], a), (rows["gemma-3-12b-q8_0"], b)):
            assert (row.mmproj, row.draft) == (str(proj), str(draft))
            assert row.inputs == (str(path), str(proj), str(draft))
        assert rows["other-q4_0"].mmproj is None and rows["other-q4_0"].path == str(other)

    def test_encoders_and_diffusion_components_are_not_models(self, tmp_path):
        model(tmp_path / "models/flux/t5xxl-Q8_0.gguf", "t5encoder")
        model(tmp_path / "models/flux/ae.gguf")
        model(tmp_path / "models/x/umt5-encoder-thing.gguf", "umt5")
        found = run(tmp_path)
        assert ids(found) == []
        assert len(found.ignored) == 3

    def test_unreadable_header_is_a_row_with_its_reason(self, tmp_path):
        bad = tmp_path / "models/bad/Broken-Q4_K_M.gguf"
        bad.parent.mkdir(parents=True)
        bad.write_bytes(b"NOPE" + b"\0" * 100)
        found = run(tmp_path)
        assert ids(found) == ["broken-q4_k_m"]
        assert "magic" in found.row_errors["broken-q4_k_m"]

    def test_interrupted_download_is_reported_with_the_size_expected(self, tmp_path):
        """The reason holds no progress (it stays put while the file grows); the progress is kept apart."""
        big = [("blk.0.w", (4096, 4096 * 64), Q.F16)]  # 2 GiB declared
        path = model(tmp_path / "models/d/Half-F16.gguf", tensors=big, sparse_size=1 << 30)
        found = run(tmp_path)
        assert found.row_errors["half-f16"] == "incomplete download (2.00 GiB expected)"
        os.truncate(path, 3 << 29)
        grown = run(tmp_path)
        assert grown.row_errors == found.row_errors
        assert (found.downloads["half-f16"].have_bytes, grown.downloads["half-f16"].have_bytes) == (1 << 30, 3 << 29)
        assert grown.downloads["half-f16"].want_bytes > 2 << 30

    @pytest.mark.parametrize("marker", [".aria2", ".st"])
    def test_a_preallocated_download_is_incomplete_while_its_downloader_writes_it(self, tmp_path, marker):
        """aria2c and axel give the file its full size first: its header and size look whole."""
        path = model(tmp_path / "models/d/Big-Q4_0.gguf")
        (tmp_path / f"models/d/Big-Q4_0.gguf{marker}").write_bytes(b"\0" * 64)
        found = run(tmp_path)
        assert found.row_errors == {"big-q4_0": f"download in progress: Big-Q4_0.gguf{marker} beside Big-Q4_0.gguf "
                                                "says its downloader is still writing it"}
        folder = tmp_path / "models/hf/Llama-3-8B"
        hf_folder(folder, LLAMA_CONFIG, weights=("model-00001-of-00002.safetensors",
                                                 "model-00002-of-00002.safetensors"))
        (folder / f"model-00002-of-00002.safetensors{marker}").write_bytes(b"\0" * 64)
        os.unlink(f"{path}{marker}")
        found = run(tmp_path)
        assert "big-q4_0" not in found.row_errors
        assert found.row_errors["llama-3-8b-bf16"] == (
            f"download in progress: model-00002-of-00002.safetensors{marker} beside model-00002-of-00002.safetensors "
            "says its downloader is still writing it")

    def test_hostile_names_keep_exact_paths(self, tmp_path):
        names = ["a b'c\"d-Q4_0.gguf", "$HOME-${PORT}-Q4_0.gguf", "ünïcödé-Q4_0.gguf", "-dash-Q4_0.gguf"]
        paths = [model(tmp_path / "models/x" / n) for n in names]
        found = run(tmp_path)
        assert sorted(r.path for r in found.models) == sorted(str(p) for p in paths)
        assert len(set(ids(found))) == 4

    def test_id_clashes_resolve_deterministically(self, tmp_path):
        for pub in ("alice", "bob"):
            model(tmp_path / f"models/{pub}/repo/Same-Q4_0.gguf")
        model(tmp_path / "models/bob/repo2/Same-Q4_0.gguf")
        first = ids(run(tmp_path))
        assert first == ["same-q4_0", "same-q4_0-bob", "same-q4_0-bob-repo2"]
        assert ids(run(tmp_path)) == first


class TestWalk:
    def test_hidden_folders_and_hf_blobs_are_not_walked(self, tmp_path):
        model(tmp_path / "models/.trash/Old-Q4_0.gguf")
        model(tmp_path / "models/models--a--b/blobs/Blob-Q4_0.gguf")
        assert ids(run(tmp_path)) == []

    def test_symlinked_root_is_followed(self, tmp_path):
        model(tmp_path / "real/m/A-Q4_0.gguf")
        (tmp_path / "link").symlink_to(tmp_path / "real")
        assert ids(run(tmp_path, tmp_path / "link")) == ["a-q4_0"]

    def test_symlink_loop_is_reported_not_followed_forever(self, tmp_path):
        model(tmp_path / "models/m/A-Q4_0.gguf")
        (tmp_path / "models/m/loop").symlink_to(tmp_path / "models")
        found = run(tmp_path)
        assert ids(found) == ["a-q4_0"]
        assert any("symlink loop" in p for p in found.problems)

    def test_unlistable_folder_is_reported(self, tmp_path):
        if os.geteuid() == 0:
            pytest.skip("root can list any folder")
        model(tmp_path / "models/ok/A-Q4_0.gguf")
        locked = tmp_path / "models/locked"
        locked.mkdir()
        locked.chmod(0)
        try:
            found = run(tmp_path)
        finally:
            locked.chmod(0o755)
        assert ids(found) == ["a-q4_0"] and any("cannot list" in p for p in found.problems)

    def test_missing_root_is_a_problem(self, tmp_path):
        found = run(tmp_path, tmp_path / "nope")
        assert found.models == () and found.problems == (f"{tmp_path / 'nope'}: model root does not exist",)

    def test_same_file_under_two_roots_is_one_row(self, tmp_path):
        model(tmp_path / "models/m/A-Q4_0.gguf")
        assert ids(run(tmp_path, tmp_path / "models", tmp_path / "models/m")) == ["a-q4_0"]


class TestHuggingFace:
    def test_folder_row(self, tmp_path):
        hf_folder(tmp_path / "models/meta/Llama-3-8B-Instruct", LLAMA_CONFIG,
                  weights=("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"), size=2048)
        (row,) = run(tmp_path).models
        assert (row.id, row.quant, row.publisher, row.format, row.size_bytes) == (
            "llama-3-8b-instruct-bf16", "BF16", "meta", "hf", 4096)
        assert [os.path.basename(p) for p in row.inputs] == [
            "config.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]

    def test_quant_method_wins_over_dtype(self, tmp_path):
        hf_folder(tmp_path / "models/q/Qwen2.5-7B-Instruct", {**LLAMA_CONFIG, "quantization_config": {"quant_method": "awq"}})
        assert ids(run(tmp_path)) == ["qwen2.5-7b-instruct-awq"]

    def test_cache_layout_gives_the_repo_name(self, tmp_path):
        repo = tmp_path / "models/models--Qwen--Qwen3-4B--Instruct"
        snap = repo / "snapshots/0123abcd"
        snap.mkdir(parents=True)
        (snap / "config.json").write_text(json.dumps(LLAMA_CONFIG))
        blob = write_safetensors(repo / "blobs/abc", 1000)
        (snap / "model.safetensors").symlink_to(blob)
        found = run(tmp_path)
        (row,) = found.models
        assert (row.id, row.publisher, row.repo, row.size_bytes) == ("qwen3-4b--instruct-bf16", "Qwen", "Qwen3-4B--Instruct", 1000)
        assert found.row_errors == {}

    @pytest.mark.parametrize("config", [
        {"architectures": ["ModernBertForMaskedLM"], "model_type": "modernbert"},
        {"architectures": ["T5ForConditionalGeneration"], "model_type": "t5"},
        {"architectures": ["WhisperForConditionalGeneration"], "model_type": "whisper"},
        {"architectures": ["DINOv3ViTModel"]},
    ])
    def test_non_causal_folders_are_ignored_with_a_reason(self, tmp_path, config):
        hf_folder(tmp_path / "models/x/thing", config)
        found = run(tmp_path)
        assert ids(found) == [] and len(found.ignored) == 1 and found.ignored[0].reason

    def test_gguf_beside_safetensors_wins(self, tmp_path):
        hf_folder(tmp_path / "models/x/M", LLAMA_CONFIG)
        model(tmp_path / "models/x/M/M-Q4_0.gguf")
        assert ids(run(tmp_path)) == ["m-q4_0"]

    def test_walk_continues_below_an_hf_folder(self, tmp_path):
        hf_folder(tmp_path / "models/x/M", LLAMA_CONFIG)
        model(tmp_path / "models/x/M/gguf/M-Q4_0.gguf")
        assert ids(run(tmp_path)) == ["m-bf16", "m-q4_0"]

    def test_zero_byte_weights_or_no_weights_are_not_a_model(self, tmp_path):
        hf_folder(tmp_path / "models/x/Empty", LLAMA_CONFIG, size=0)
        hf_folder(tmp_path / "models/x/NoWeights", LLAMA_CONFIG, weights=())
        assert ids(run(tmp_path)) == []

    @pytest.mark.parametrize("text", ["{not json", "[1, 2]", ""])
    def test_broken_config_is_a_row_with_its_reason(self, tmp_path, text):
        hf_folder(tmp_path / "models/x/Broken", text)
        found = run(tmp_path)
        assert ids(found) == ["broken"] and "config.json" in found.row_errors["broken"]


def test_modelopt_quant_config_beside_config_json_names_the_quant(tmp_path):
    folder = tmp_path / "models/nvidia/Llama-3.1-70B-Instruct-FP8"
    hf_folder(folder, LLAMA_CONFIG)
    (folder / "hf_quant_config.json").write_text('{"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "FP8"}}')
    (row,) = run(tmp_path).models
    assert row.quant == "FP8" and row.id == "llama-3.1-70b-instruct-fp8"
    assert str(folder / "hf_quant_config.json") in row.inputs


def test_permission_errors_are_reported_not_fatal(tmp_path, monkeypatch):
    """Root can list everything, so the refusal is simulated where discovery meets it."""
    model(tmp_path / "models/ok/A-Q4_0.gguf")
    model(tmp_path / "models/locked/B-Q4_0.gguf")
    real_scandir = os.scandir

    def scandir(path):
        if str(path).endswith("locked"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    found = run(tmp_path)
    assert ids(found) == ["a-q4_0"]
    assert found.problems == (f"{tmp_path / 'models/locked'}: cannot list folder (Permission denied)",)


def test_unreadable_model_file_is_a_row_with_its_reason(tmp_path, monkeypatch):
    path = model(tmp_path / "models/m/A-Q4_0.gguf")
    real_open = open

    def guarded_open(file, *args, **kwargs):
        if str(file) == str(path):
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr("builtins.open", guarded_open)
    found = run(tmp_path)
    assert ids(found) == ["a-q4_0"] and "Permission denied" in found.row_errors["a-q4_0"]


class TestSplitSets:
    """Every shard counts: a set without shard 1 is still a row, a later shard cut short is seen."""

    GIB_TENSORS: ClassVar[list] = [(f"blk.{i}.w", (4096, 4096 * 32), Q.F16) for i in range(3)]  # 1 GiB each, sparse

    def _set(self, tmp_path, tensors=None):
        folder = tmp_path / "models/big"
        folder.mkdir(parents=True)
        return write_split_set(folder, "Big-Q8_0", "llama", shards=3, kv=LLAMA_KV,
                               tensors=tensors or [(f"blk.{i}.w", (64, 64), Q.F16) for i in range(6)])

    def test_missing_first_shard_is_a_row_named_after_the_set(self, tmp_path):
        shards = self._set(tmp_path)
        os.unlink(shards[0])
        found = run(tmp_path)
        (row,) = found.models
        assert row.id == "big-q8_0" and row.quant == "Q8_0"
        assert row.path == str(shards[1]) and row.inputs == (str(shards[1]), str(shards[2]))
        assert row.size_bytes == os.path.getsize(shards[1]) + os.path.getsize(shards[2])
        assert found.row_errors == {"big-q8_0": "split set is missing 1 of 3 shards (Big-Q8_0-00001-of-00003.gguf)"}

    def test_every_missing_shard_is_named(self, tmp_path):
        shards = self._set(tmp_path)
        os.unlink(shards[0])
        os.unlink(shards[1])
        found = run(tmp_path)
        assert found.row_errors == {"big-q8_0": "split set is missing 2 of 3 shards "
                                                "(Big-Q8_0-00001-of-00003.gguf, Big-Q8_0-00002-of-00003.gguf)"}

    def test_a_later_shard_cut_short_is_an_incomplete_download_of_the_set(self, tmp_path):
        shards = self._set(tmp_path, self.GIB_TENSORS)
        full = [os.path.getsize(s) for s in shards]
        os.truncate(shards[2], full[2] - (1 << 29))  # half a GiB never arrived
        found = run(tmp_path)
        assert found.row_errors == {
            "big-q8_0": "incomplete download: Big-Q8_0-00003-of-00003.gguf cut short (3.00 GiB expected)"}

    def test_a_whole_set_of_gigabyte_shards_has_no_reason(self, tmp_path):
        self._set(tmp_path, self.GIB_TENSORS)
        assert run(tmp_path).row_errors == {}

    def test_a_corrupt_later_shard_is_named_in_the_reason(self, tmp_path):
        shards = self._set(tmp_path)
        with open(shards[1], "r+b") as f:
            f.write(b"NOPE")
        reason = run(tmp_path).row_errors["big-q8_0"]
        assert reason.startswith("Big-Q8_0-00002-of-00003.gguf: ") and "magic" in reason

    def test_later_shards_are_probed_through_the_cache_once(self, tmp_path):
        self._set(tmp_path, self.GIB_TENSORS)
        cache = MetaCache(str(tmp_path / "cache"))
        discover((str(tmp_path / "models"),), cache.gguf, cache.config, cache.head)
        assert cache.reads == 3
        cache.save()
        warm = MetaCache(str(tmp_path / "cache"))
        assert discover((str(tmp_path / "models"),), warm.gguf, warm.config, warm.head).row_errors == {}
        assert warm.reads == 0


class TestThroughTheCache:
    """With the pipeline's cache, a no-op discovery parses no config.json and every model input
    has its head recorded for the doit file checker."""

    def _discover(self, tmp_path):
        cache = MetaCache(str(tmp_path / "cache"))
        found = discover((str(tmp_path / "models"),), cache.gguf, cache.config, cache.head)
        cache.save()
        return found, cache

    def _count_config_reads(self, monkeypatch):
        opened = []
        real = discovery.read_config_json
        monkeypatch.setattr(discovery, "read_config_json", lambda p: opened.append(p) or real(p))
        return opened

    def test_a_warm_run_reads_no_config_json(self, tmp_path, monkeypatch):
        folder = tmp_path / "models/nvidia/Llama-FP8"
        hf_folder(folder, {**LLAMA_CONFIG, "quantization_config": {"quant_method": "awq"}})
        (folder / "hf_quant_config.json").write_text('{"quantization": {"quant_algo": "FP8"}}')
        hf_folder(tmp_path / "models/x/bert", {"architectures": ["BertModel"], "model_type": "bert"})
        opened = self._count_config_reads(monkeypatch)
        first, _ = self._discover(tmp_path)
        assert len(opened) == 3
        opened.clear()
        again, cache = self._discover(tmp_path)
        assert opened == [] and cache.reads == 0
        assert again == first and ids(again) == ["llama-fp8"] and again.models[0].quant == "FP8"
        assert len(again.ignored) == 1

    def test_a_touched_config_is_not_parsed_again_and_a_changed_one_is(self, tmp_path, monkeypatch):
        folder = tmp_path / "models/meta/M"
        hf_folder(folder, LLAMA_CONFIG)
        self._discover(tmp_path)
        opened = self._count_config_reads(monkeypatch)
        os.utime(folder / "config.json", ns=(1, 1))
        assert ids(self._discover(tmp_path)[0]) == ["m-bf16"] and opened == []
        (folder / "config.json").write_text(json.dumps({**LLAMA_CONFIG, "torch_dtype": "float16"}))
        assert ids(self._discover(tmp_path)[0]) == ["m-f16"] and len(opened) == 1

    def test_a_broken_config_is_remembered_with_its_reason(self, tmp_path):
        hf_folder(tmp_path / "models/x/Broken", "{not json")
        first, _ = self._discover(tmp_path)
        again, cache = self._discover(tmp_path)
        assert cache.reads == 0 and again.row_errors == first.row_errors
        assert "not valid JSON" in again.row_errors["broken"]

    def test_every_model_input_gets_its_head_recorded(self, tmp_path):
        hf_folder(tmp_path / "models/meta/M", LLAMA_CONFIG, weights=("a.safetensors", "b.safetensors"))
        model(tmp_path / "models/g/gemma-Q4_0.gguf", "gemma3")
        model(tmp_path / "models/g/mmproj-F16.gguf", "clip", kv={"clip.has_vision_encoder": True})
        found, cache = self._discover(tmp_path)
        inputs = {p for row in found.models for p in row.inputs}
        assert len(inputs) == 5
        assert all(cache.entries[p]["head"] for p in inputs)
