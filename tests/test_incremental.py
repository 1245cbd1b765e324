"""A run after a change redoes only what changed, and writes exactly what a cold run writes: a
library shaped like real downloads is changed one way after another (files added, removed,
renamed, rewritten in place, touched, symlinks pointed elsewhere, permissions flipped, folders
added and removed, a projector and a draft arriving, an override and a backend edited), and
after each change the config and `swapgen list` equal those of a run with an empty cache (and
the same id ledger: ids never move, docs/model-files.md)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from autogen.commands import cli
from autogen.discovery import walk
from tests.gguf_fixtures import Q, write_gguf
from tests.ollama_fixtures import pull
from tests.real_library import GEMMA, GEMMA_TOKENS, LLAMA, LLAMA_TOKENS, SETTINGS, build, chat, projector

MODELS = "models"


def settings_text(root: Path, cache: Path, output: Path, extra: str = "") -> str:
    return (SETTINGS.replace("roots: [models]", f"roots: [{root / MODELS}]")
            + f"cache_dir: {cache}\noutput: {output}\n" + extra)


class Runs:
    """The library's own run (cache kept between changes) and a cold run of the same state."""

    def __init__(self, root: Path):
        self.root = root
        self.extra = ""
        self.warm = root / "warm"
        self.warm.mkdir()

    def _run(self, folder: Path) -> tuple[str, str]:
        settings = folder / "swapgen.yaml"
        settings.write_text(settings_text(self.root, folder / "cache", folder / "config.yaml", self.extra))
        assert cli.main(["--settings", str(settings)]) == 0
        return (folder / "config.yaml").read_text(), self._listing(settings)

    @staticmethod
    def _listing(settings: Path) -> str:
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            assert cli.main(["--settings", str(settings), "list", "--json"]) == 0
        return buffer.getvalue()

    def warm_run(self) -> tuple[str, str]:
        return self._run(self.warm)

    def cold_run(self, ledger: bytes | None) -> tuple[str, str]:
        cold = self.root / "cold"
        shutil.rmtree(cold, ignore_errors=True)
        (cold / "cache").mkdir(parents=True)
        if ledger is not None:
            (cold / "cache" / "ids.json").write_bytes(ledger)
        return self._run(cold)

    def ledger(self) -> bytes | None:
        path = self.warm / "cache" / "ids.json"
        return path.read_bytes() if path.exists() else None


def _later(path: Path) -> None:
    """A modification time the file system cannot confuse with the previous one."""
    later = time.time() + 10
    os.utime(path, (later, later), follow_symlinks=False)


def add_file(m: Path) -> None:
    chat(m / "bartowski/Qwen_Qwen3-8B-GGUF/Qwen_Qwen3-8B-Q6_K.gguf", "qwen3", blocks=8, embd=256, name="Qwen3 8B")


def add_folder(m: Path) -> None:
    chat(m / "newpub/Fresh-3B-GGUF/Fresh-3B-Q4_K_M.gguf", "llama", blocks=4, embd=128, tokens=LLAMA_TOKENS,
         tokenizer=LLAMA)


def remove_file(m: Path) -> None:
    (m / "bartowski/Qwen_Qwen3-8B-GGUF/Qwen_Qwen3-8B-Q8_0.gguf").unlink()


def rename_file(m: Path) -> None:
    folder = m / "second-state/gemma-2-9b-it-GGUF"
    (folder / "model-Q4_K_M.gguf").rename(folder / "gemma-2-9b-it-Q4_K_M.gguf")


def rewrite_in_place(m: Path) -> None:
    """Same name, same size, new bytes (another trained context), a later time."""
    path = m / "bartowski/Qwen_Qwen3-14B-GGUF/Qwen_Qwen3-14B-Q4_K_M.gguf"
    size = path.stat().st_size
    tensors = [("token_embd.weight", (256, 384), Q.Q8_0)]
    tensors += [(f"blk.{i}.attn_q.weight", (256, 256), Q.Q8_0) for i in range(12)]
    write_gguf(path, "qwen3", kv={"{arch}.block_count": 12, "{arch}.context_length": 4096,
                                  "{arch}.embedding_length": 256, "{arch}.attention.head_count": 8},
               tensors=tensors, sparse_size=size)
    _later(path)


def touch(m: Path) -> None:
    _later(m / "unsloth/gemma-3-4b-it-GGUF/gemma-3-4b-it-Q4_K_M.gguf")


def add_symlink(m: Path) -> None:
    (m / "links").mkdir()
    (m / "links/chosen-Q4_K_M.gguf").symlink_to(m / "bartowski/Qwen_Qwen3-0.6B-GGUF/Qwen_Qwen3-0.6B-Q8_0.gguf")


def retarget_symlink(m: Path) -> None:
    link = m / "links/chosen-Q4_K_M.gguf"
    link.unlink()
    link.symlink_to(m / "newpub/Fresh-3B-GGUF/Fresh-3B-Q4_K_M.gguf")


def flip_permission(m: Path) -> None:
    (m / "QuantFactory/Phi-3-mini-4k-instruct-GGUF/ggml-model-q4_0.gguf").chmod(0o000)


def restore_permission(m: Path) -> None:
    (m / "QuantFactory/Phi-3-mini-4k-instruct-GGUF/ggml-model-q4_0.gguf").chmod(0o644)


def add_projector(m: Path) -> None:
    projector(m / "newpub/Fresh-3B-GGUF/mmproj-Fresh-3B-F16.gguf", "idefics3")


def add_draft(m: Path) -> None:
    """A small model of the Gemma 3 vocabulary beside its big ones: their draft from now on."""
    chat(m / "unsloth/gemma-3-4b-it-GGUF/gemma-3-270m-it-Q8_0.gguf", "gemma3", blocks=2, embd=32,
         tokens=GEMMA_TOKENS, tokenizer=GEMMA)


def remove_folder(m: Path) -> None:
    shutil.rmtree(m / "ggml-org")


def ollama_pull(m: Path) -> None:
    pull(m / "ollama", "llama3.2:3b")


def ollama_pull_another(m: Path) -> None:
    """A store's manifests lie below folders the walk does not enter: the store is read every time."""
    pull(m / "ollama", "qwen3:8b")


#: (what changed, how): applied in order, each on the library the previous ones left.
FILE_CHANGES: list[tuple[str, Callable[[Path], None]]] = [
    ("a new file in a folder", add_file), ("a new folder", add_folder), ("a file removed", remove_file),
    ("a file renamed", rename_file), ("a file rewritten in place", rewrite_in_place), ("a file touched", touch),
    ("a symlink added", add_symlink), ("a symlink pointed elsewhere", retarget_symlink),
    ("a permission flipped", flip_permission), ("a permission restored", restore_permission),
    ("a projector arriving", add_projector), ("a draft arriving", add_draft), ("a folder removed", remove_folder),
    ("an Ollama pull", ollama_pull), ("another Ollama pull", ollama_pull_another),
]
#: Settings changes: extra settings text after each.
OVERRIDE = "  - {match: '*Qwen3-14B*', ctx: %d}\n"
SETTINGS_CHANGES = [
    ("an override added", "overrides:\n" + OVERRIDE % 4096),
    ("the override edited", "overrides:\n" + OVERRIDE % 2048),
    ("an override put first", "overrides:\n  - {match: '*gemma-2*', kv_type: q8_0}\n" + OVERRIDE % 2048),
    ("a setting every fragment reads", "ttl: 300\n"),
    ("a setting every model's job reads", "gpus: [{index: 0, name: RTX 4090, vram_gb: 24, vendor: nvidia}]\n"),
    ("a vLLM model put to sleep", "host_ram_gb: 64\noverrides:\n  - {match: '*Llama-3.1-8B-Instruct*', vllm_sleep: true}\n"),
]


@pytest.fixture
def runs(tmp_path):
    build(tmp_path)
    found = Runs(tmp_path)
    found.warm_run()
    return found


def test_after_every_change_the_config_and_listing_are_a_cold_runs(runs):
    m = runs.root / MODELS
    steps = [(what, change, None) for what, change in FILE_CHANGES] + [(w, None, s) for w, s in SETTINGS_CHANGES]
    for what, change, extra in steps:
        ledger = runs.ledger()
        if change is not None:
            change(m)
        if extra is not None:
            runs.extra = extra
        warm = runs.warm_run()
        cold = runs.cold_run(ledger)
        assert warm[0] == cold[0], f"config after {what}"
        assert json.loads(warm[1]) == json.loads(cold[1]), f"swapgen list after {what}"


def test_a_run_after_a_change_reads_only_the_changed_folders(runs, monkeypatch):
    """Every other folder's record is replayed: the probes see the new folder's files only."""
    add_folder(runs.root / MODELS)
    opened = []
    real = walk._Walker._folder

    def spy(self, folder):
        opened.append(folder.path)
        return real(self, folder)

    monkeypatch.setattr(walk._Walker, "_folder", spy)
    runs.warm_run()
    read = {os.path.relpath(p, runs.root / MODELS) for p in opened}
    # the new folders, their parent (a new entry), and the folders that are always read
    assert {"newpub", "newpub/Fresh-3B-GGUF", "."} <= read
    assert not any(p.startswith(("bartowski/", "unsloth/gemma")) for p in read), read


def test_a_run_after_a_change_lists_each_folder_once(runs, monkeypatch):
    """The listing the run's key is made from is the one the walk reads (`tree.scanned`)."""
    add_folder(runs.root / MODELS)
    listed = []
    real = os.scandir

    def spy(path="."):
        listed.append(os.fspath(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", spy)
    assert cli.main(["--settings", str(runs.warm / "swapgen.yaml")]) == 0
    # below the root (the run first checks the root itself can be listed, `checks.check_roots`)
    under = [p for p in listed if p.startswith(str(runs.root / MODELS) + os.sep) and not p.endswith("blobs")]
    assert under and len(under) == len(set(under)), sorted(p for p in under if under.count(p) > 1)
