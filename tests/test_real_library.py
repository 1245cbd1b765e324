"""End to end on a library shaped like real download folders (`tests/real_library.py`): every
file served with its role or listed with what it is, drafts only on identical vocabularies, a
second run re-emits nothing, ids stay put when new files arrive, and llama-swap loads the config."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from autogen.commands import cli, tasks
from autogen.discovery.pairing import same_vocabulary
from tests.real_library import SETTINGS, build, newcomers
from tests.runs import generate

WEIGHT_SUFFIXES = (".gguf", ".bin", ".onnx", ".safetensors", ".xml")


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    root = tmp_path_factory.mktemp("real")
    want = build(root)
    (root / "swapgen.yaml").write_text(SETTINGS)
    code, graph = generate(root / "swapgen.yaml")
    assert code == 0
    return root, want, graph.library, (root / "config.yaml").read_text()


def models(text: str) -> dict:
    return YAML(typ="safe").load(text)["models"]


def argv(entry) -> list[str]:
    return entry["cmd"].split()


def test_every_weight_file_is_served_with_its_role_or_listed_with_what_it_is(library):
    root, want, lib, text = library
    rows = {r.path: r for r in lib.discovery.models}
    listed = {i.path: i for i in lib.discovery.ignored}
    inputs = {p: r.id for r in rows.values() for p in r.inputs}
    served = models(text)
    for rel, what in want.items():
        path = str(root / "models" / rel)
        kind, _, words = what.partition(": ")
        if kind in ("ignored", "attached"):
            assert path in listed and listed[path].reason.startswith(words), (rel, listed.get(path))
            assert listed[path].attached == (kind == "attached"), rel
        elif kind == "skipped":
            assert f'# SKIPPED "{rows[path].id}": {words}' in text, rel
        elif kind == "input":
            assert inputs[path] == words, rel
        else:
            assert rows[path].id == what and what in served, rel
    # nothing else that holds weights goes unaccounted for
    claimed = set(rows) | set(listed) | set(inputs)
    for folder, _, names in os.walk(root / "models", followlinks=True):
        for name in names:
            path = os.path.join(folder, name)
            if name.endswith(WEIGHT_SUFFIXES) and "blobs" not in Path(path).parts:
                assert path in claimed or folder in claimed or os.path.dirname(folder) in claimed, path


def test_sidecars_adapters_and_drafts_reach_the_commands(library):
    root, _, _, text = library
    served = models(text)
    m = root / "models"
    for gemma in ("gemma-3-4b-it-q4_k_m", "gemma-3-4b-it-ud-q8_k_xl"):
        cmd = argv(served[gemma])
        assert cmd[cmd.index("--mmproj") + 1] == str(m / "unsloth/gemma-3-4b-it-GGUF/mmproj-F16.gguf")
    cmd = argv(served["smolvlm-500m-instruct-q8_0"])
    assert cmd[cmd.index("--mmproj") + 1].endswith("vision-encoder-f16.gguf")
    cmd = argv(served["qwen_qwen3-8b-q4_k_m+qwen3-8b-sql-lora"])
    assert cmd[cmd.index("--lora") + 1] == str(m / "loras/Qwen3-8B-sql-LoRA-F16.gguf")
    vllm = served["llama-3.1-8b-instruct-bf16"]
    assert f"llama-sql-lora={m / 'loras/llama-sql-lora'}" in argv(vllm) and vllm["aliases"] == ["llama-sql-lora"]
    assert not any("+" in key and "storyteller" in key for key in served)


def test_drafts_pair_only_identical_vocabularies(library):
    _, _, lib, text = library
    served = models(text)
    by_path = {r.path: r for r in lib.discovery.models}
    drafted = {key[: -len("-draft")]: entry for key, entry in served.items() if key.endswith("-draft")}
    # Qwen's own Qwen3-4B takes bartowski's Qwen_Qwen3-0.6B: a related family, the same vocabulary
    assert set(drafted) == {"qwen_qwen3-8b-q4_k_m", "qwen_qwen3-8b-q8_0", "qwen_qwen3-14b-q4_k_m", "qwen3-4b-q4_k_m"}
    for target, entry in drafted.items():
        cmd = argv(entry)
        draft = by_path[cmd[cmd.index("-md") + 1]]
        assert draft.id == "qwen_qwen3-0.6b-q8_0"  # never the look-alike beside the 14B
        assert same_vocabulary(lib.metas[target], lib.metas[draft.id])
    impostor = lib.metas["qwen_qwen3-0.5b-distill-q8_0"]
    assert impostor.vocab_size == lib.metas["qwen_qwen3-14b-q4_k_m"].vocab_size
    assert not same_vocabulary(impostor, lib.metas["qwen_qwen3-14b-q4_k_m"])


def test_the_list_shows_the_other_path_of_a_file_reached_twice(library, capsys):
    root, *_ = library
    assert cli.main(["--settings", str(root / "swapgen.yaml"), "list"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if "lmstudio/models" in x)
    assert "attached" in line and "(same file as " in line and "models--Qwen--Qwen3-4B-GGUF" in line


def test_a_second_run_re_emits_nothing(library):
    root, *_ = library
    graph = tasks.load(str(root / "swapgen.yaml"))
    assert tasks.run_doit(graph, []) == 0 and graph.stats["emitted"] == 0


def test_new_files_move_no_id(library, tmp_path):
    root, *_ = library
    copy = tmp_path / "lib"
    shutil.copytree(root, copy, symlinks=True)
    shutil.rmtree(copy / "cache")
    settings = copy / "swapgen.yaml"
    code, graph = generate(settings)
    before = {os.path.relpath(r.path, copy / "models"): r.id for r in graph.library.discovery.models}
    arrived = newcomers(copy)
    code, graph = generate(settings)
    assert code == 0
    after = {os.path.relpath(r.path, copy / "models"): r.id for r in graph.library.discovery.models}
    assert {p: after[p] for p in before} == before
    assert {p: after[p] for p in arrived} == arrived
    graph = tasks.load(str(settings))
    assert tasks.run_doit(graph, []) == 0 and graph.stats["emitted"] == 0


LOADCHECK = Path(os.environ.get("LLAMASWAP_LOADCHECK") or Path(os.environ.get("TMPDIR") or "/tmp")
                 / "llamaswap-loadcheck" / "bin" / "swapgen-loadcheck")


@pytest.mark.slow
@pytest.mark.skipif(not os.access(LOADCHECK, os.X_OK),
                    reason=f"{LOADCHECK} is absent: build it with tools/llamaswap-loadcheck/setup.sh "
                           "or point $LLAMASWAP_LOADCHECK at it")
def test_llama_swaps_own_loader_accepts_the_config(library):
    from tests.test_llamaswap_loader import accepted  # noqa: PLC0415 - its module skips without the checker

    root, *_ = library
    out = accepted(root / "config.yaml")
    assert out.startswith("OK ")
