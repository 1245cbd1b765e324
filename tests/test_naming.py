"""Ids never move: generic stems take their repo's name, clashes are settled from each file's
own path, the file that had an id keeps it, and an id that changes all the same is said."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from autogen.discovery.ledger import Ledger, load_ledger, save_ledger
from autogen.discovery.naming import gguf_ids
from autogen.discovery.walk import discover
from autogen.ids import settle_names
from autogen.metadata.cache import MetaCache
from tests.gguf_fixtures import Q, write_gguf

LLAMA_KV = {"{arch}.block_count": 2, "{arch}.context_length": 4096, "{arch}.embedding_length": 64,
            "{arch}.attention.head_count": 4}
TENSORS = [("token_embd.weight", (64, 256), Q.F16), ("blk.0.attn_q.weight", (64, 64), Q.F16)]


def model(path):
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    return write_gguf(path, "llama", kv=LLAMA_KV, tensors=TENSORS)


def run(tmp_path) -> dict[str, str]:
    """One discovery as a run makes it: the previous ledger in, the new one saved. path → id."""
    cache_dir = str(tmp_path / "cache")
    cache = MetaCache(cache_dir)
    found = discover((str(tmp_path / "models"),), cache.gguf, previous=load_ledger(cache_dir))
    save_ledger(cache_dir, found.ledger)
    run.changes = found.id_changes
    return {os.path.relpath(r.path, tmp_path / "models"): r.id for r in found.models}


class TestGenericStems:
    @pytest.mark.parametrize("name, repo, expected", [
        ("model-Q4_K_M.gguf", "gemma-2-9b-it-GGUF", "gemma-2-9b-it-q4_k_m"),
        ("ggml-model-q4_0.gguf", "llama-2-7b", "llama-2-7b-q4_0"),
        ("unsloth.Q8_0.gguf", "Qwen3-4B-GGUF", "qwen3-4b-q8_0"),
        ("model.gguf", "Phi-4-mini", "phi-4-mini"),
        ("Qwen3-8B-Q4_K_M.gguf", "whatever-GGUF", "qwen3-8b-q4_k_m"),  # a real name stays
        ("model-Q4_K_M.gguf", "models", "model-q4_k_m"),  # a generic folder does not help
    ])
    def test_a_generic_file_name_takes_its_repo_folders_name(self, name, repo, expected):
        assert gguf_ids(name, repo)[0] == expected

    def test_two_publishers_generic_files_get_their_repos_names(self, tmp_path):
        model(tmp_path / "models/bartowski/gemma-2-9b-it-GGUF/model-Q4_K_M.gguf")
        model(tmp_path / "models/unsloth/Qwen3-4B-GGUF/model-Q4_K_M.gguf")
        assert sorted(run(tmp_path).values()) == ["gemma-2-9b-it-q4_k_m", "qwen3-4b-q4_k_m"]


class TestIdsNeverMove:
    def test_a_newcomer_that_sorts_first_does_not_take_an_id(self, tmp_path):
        model(tmp_path / "models/bartowski/gemma-2-9b-it-GGUF/model-Q4_K_M.gguf")
        first = run(tmp_path)
        assert first == {"bartowski/gemma-2-9b-it-GGUF/model-Q4_K_M.gguf": "gemma-2-9b-it-q4_k_m"}
        model(tmp_path / "models/aaa/gemma-2-9b-it-GGUF/model-Q4_K_M.gguf")
        second = run(tmp_path)
        assert second["bartowski/gemma-2-9b-it-GGUF/model-Q4_K_M.gguf"] == "gemma-2-9b-it-q4_k_m"
        assert second["aaa/gemma-2-9b-it-GGUF/model-Q4_K_M.gguf"] == "gemma-2-9b-it-q4_k_m-aaa"
        assert run.changes == ()

    def test_removing_the_holder_moves_no_other_id(self, tmp_path):
        a = model(tmp_path / "models/alice/repo/Same-Q4_0.gguf")
        model(tmp_path / "models/bob/repo/Same-Q4_0.gguf")
        assert sorted(run(tmp_path).values()) == ["same-q4_0", "same-q4_0-bob"]
        os.unlink(a)
        assert run(tmp_path) == {"bob/repo/Same-Q4_0.gguf": "same-q4_0-bob"}

    def test_past_publisher_and_repo_a_clash_takes_a_hash_of_its_own_path(self, tmp_path):
        for top in "bcde":
            model(tmp_path / f"models/{top}/pub/repo/Same-Q4_0.gguf")
        ids = run(tmp_path)
        assert [ids[f"{top}/pub/repo/Same-Q4_0.gguf"] for top in "bcd"] == [
            "same-q4_0", "same-q4_0-pub", "same-q4_0-pub-repo"]
        hashed = ids["e/pub/repo/Same-Q4_0.gguf"]
        assert re.fullmatch(r"same-q4_0-[0-9a-f]{8}", hashed)
        model(tmp_path / "models/a/pub/repo/Same-Q4_0.gguf")  # sorts before every other path
        again = run(tmp_path)
        assert {k: v for k, v in again.items() if k in ids} == ids
        assert re.fullmatch(r"same-q4_0-[0-9a-f]{8}", again["a/pub/repo/Same-Q4_0.gguf"])

    def test_every_run_without_change_gives_the_same_ids(self, tmp_path):
        for pub in ("alice", "bob"):
            model(tmp_path / f"models/{pub}/repo/Same-Q4_0.gguf")
        assert run(tmp_path) == run(tmp_path) == run(tmp_path)


class TestAnIdThatChangesIsSaid:
    def test_a_renamed_file_is_said_in_one_line(self, tmp_path):
        old = model(tmp_path / "models/pub/repo/Old-Name-Q4_0.gguf")
        run(tmp_path)
        old.rename(old.with_name("New-Name-Q4_0.gguf"))
        assert run(tmp_path) == {"pub/repo/New-Name-Q4_0.gguf": "new-name-q4_0"}
        (line,) = run.changes
        assert line.startswith("id 'old-name-q4_0' is now 'new-name-q4_0': ") and "was renamed to" in line

    def test_a_new_file_and_a_removed_one_are_not_a_rename(self, tmp_path):
        old = model(tmp_path / "models/pub/repo/Old-Q4_0.gguf")
        run(tmp_path)
        os.unlink(old)
        model(tmp_path / "models/pub/repo/Other-Q4_0.gguf")
        run(tmp_path)
        assert all("renamed" not in line for line in run.changes)

    def test_an_unreadable_ledger_is_an_empty_one(self, tmp_path):
        (tmp_path / "ids.json").write_text("{not json")
        assert load_ledger(str(tmp_path)) == Ledger()


class TestSettleNames:
    """The one rule model ids and adapter names settle a clash by (autogen/ids.py)."""

    def test_a_held_name_stays_and_the_others_take_their_first_free_candidate(self):
        names = settle_names([("m", "m-a", "m-1111"), ("m", "m-b", "m-2222")], [None, "m"])
        assert names == ["m-a", "m"], "the newcomer sorts first but the name stays with who held it"

    def test_a_held_name_no_longer_a_candidate_is_given_up(self):
        assert settle_names([("m", "m-a")], ["old"]) == ["m"]

    def test_names_are_unique_within_each_scope_only(self):
        names = settle_names([("x", "x-1"), ("x", "x-2"), ("x", "x-3")], [None] * 3, [("base-a",), ("base-b",),
                                                                                     ("base-a", "base-b")])
        assert names == ["x", "x", "x-3"]

    def test_only_a_tag_made_to_collide_gets_a_counter(self):
        assert settle_names([("t",), ("t",), ("t",)], [None] * 3) == ["t", "t-2", "t-3"]
