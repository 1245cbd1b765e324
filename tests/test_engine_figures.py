"""The engine's own figures in the plan: llama-fit-params asked about every command written, the
budget decided by its accounting within a bounded number of calls, the answers kept with the
binary's identity in the fragment's key."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from autogen.commands import cli
from autogen.commands.library import Library
from autogen.figures import fit_params
from autogen.figures.plan import MAX_ROUNDS
from autogen.settings.load import load_settings
from tests.gguf_fixtures import Q, write_gguf

MIB = 1 << 20
#: A scripted llama-fit-params for a CUDA build: its context is twice swapgen's KV (as if the build
#: kept a second copy), its compute buffer a flat 900 MiB, the weights its own 3000 MiB on CUDA0
#: and 200 on the host. `-np` must be 1 (the auto slots asked as one sequence).
ESTIMATOR = r'''
import os, sys
a = sys.argv[1:]
open(os.environ["FAKE_CALLS"], "a").write(" ".join(a) + "\n")
c = int(a[a.index("-c") + 1])
assert a[a.index("-np") + 1] == "1" and a[-2:] == ["--fit-print", "on"]
per_token = 2 * 16 * 2 * 64 * 2 * 2   # two copies of 16 layers x 2 KV heads x 64 x (K, V) x f16
print(f"CUDA0 3000 {c * per_token // (1 << 20)} 900 ")
print("Host 200 0 12 ")
'''


@pytest.fixture
def lib(tmp_path, monkeypatch):
    build = tmp_path / "llama-build"
    build.mkdir()
    (build / "llama-server").write_text("#!/bin/sh\n")
    (build / "llama-server").chmod(0o755)
    estimator = build / "llama-fit-params"
    estimator.write_text(f"#!{sys.executable}\n{ESTIMATOR}")
    estimator.chmod(0o755)
    kv = {"{arch}.block_count": 16, "{arch}.context_length": 262144, "{arch}.embedding_length": 512,
          "{arch}.attention.head_count": 8, "{arch}.attention.head_count_kv": 2, "{arch}.feed_forward_length": 1024}
    (tmp_path / "models").mkdir()
    write_gguf(tmp_path / "models" / "Big-Q4_K_M.gguf", "llama", kv=kv, vocab=32,
               tensors=[("token_embd.weight", (512, 32), Q.F16)], sparse_size=3 << 30)
    settings = tmp_path / "swapgen.yaml"
    settings.write_text(f"roots: [models]\nvram_budget_gb: 8\ncard_vram_gb: 0\nbackends:\n"
                        f"  - {{id: llama, kind: llama, path: {build / 'llama-server'}, default: true, "
                        "variant: cuda}\n")
    monkeypatch.setenv("FAKE_CALLS", str(tmp_path / "calls"))
    return tmp_path


def calls(lib: Path) -> list[str]:
    path = lib / "calls"
    return path.read_text().splitlines() if path.exists() else []


def plan(lib: Path):
    library = Library.load(load_settings(lib / "swapgen.yaml"))
    (job,) = library.jobs
    return library, job, library.plan(job)


class TestSearch:
    def test_the_budget_holds_by_the_engines_own_accounting(self, lib):
        _, _, planned = plan(lib)
        (entry,) = planned.entries
        used = entry.footprint.memory
        assert used.source == "llama-fit-params" and used.devices[0].name == "CUDA0"
        budget = 8 << 30
        assert used.vram <= budget
        # the largest step that fits: 4096 more tokens would not, by the estimator's figures
        ctx = dict(entry.metadata)["ctx"]
        per_token = 2 * 16 * 2 * 64 * 2 * 2
        assert used.vram + 4096 * per_token > budget
        # and swapgen's model alone would have gone further (it does not know the second copy)
        assert entry.estimate.part("context") < used.part("context") and ctx < 262144
        assert 1 <= len(calls(lib)) <= MAX_ROUNDS

    def test_the_call_is_the_written_command(self, lib):
        _, _, planned = plan(lib)
        (entry,) = planned.entries
        asked = calls(lib)[-1].split()
        assert asked[:2] == ["-m", entry.argv[2]] and asked[asked.index("-c") + 1] == entry.argv[entry.argv.index("-c") + 1]
        assert asked[asked.index("-ngl") + 1] == entry.argv[entry.argv.index("-ngl") + 1]

    def test_a_later_run_asks_nothing_and_a_new_binary_asks_again(self, lib):
        plan(lib)
        first = len(calls(lib))
        plan(lib)
        assert len(calls(lib)) == first
        estimator = lib / "llama-build" / "llama-fit-params"
        os.utime(estimator, ns=(10**18, 10**18))
        plan(lib)
        assert len(calls(lib)) > first

    def test_the_binarys_identity_is_part_of_the_fragments_key(self, lib):
        library, job, _ = plan(lib)
        key = library.model_key(job.row.id)
        os.utime(lib / "llama-build" / "llama-fit-params", ns=(10**18, 10**18))
        again, job2, _ = plan(lib)
        assert again.model_key(job2.row.id) != key

    def test_fit_params_none_keeps_swapgens_model(self, lib):
        settings = lib / "swapgen.yaml"
        settings.write_text(settings.read_text().replace("variant: cuda}", "variant: cuda, fit_params: none}"))
        _, _, planned = plan(lib)
        assert planned.entries[0].footprint.memory.source == "estimate" and calls(lib) == []

    def test_a_failing_estimator_leaves_the_estimate(self, lib):
        (lib / "llama-build" / "llama-fit-params").write_text("#!/bin/sh\necho 'error: boom' >&2\nexit 1\n")
        _, _, planned = plan(lib)
        assert planned.entries[0].footprint.memory.source == "estimate"


def test_the_record_in_the_config_and_the_source_in_list(lib, capsys):
    assert cli.main(["--settings", str(lib / "swapgen.yaml")]) == 0
    config = YAML(typ="safe").load((lib / "config.yaml").read_text())
    memory = config["models"]["big-q4_k_m"]["metadata"]["memory"]
    assert memory["source"] == "llama-fit-params"
    assert memory["devices"][0]["device"] == "CUDA0" and memory["devices"][0]["compute_mib"] == 900
    assert memory["host_mib"] == 212
    capsys.readouterr()
    assert cli.main(["--settings", str(lib / "swapgen.yaml"), "list"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[5] == "memory" and "llama-fit-params" in out


def test_calls_are_bounded_even_when_the_engine_disagrees_every_time(lib, monkeypatch):
    """An estimator whose figures drift with each call still costs at most MAX_ROUNDS calls."""
    real = fit_params.run
    state = {"n": 0}

    def drifting(call, timeout=fit_params.TIMEOUT_S):
        state["n"] += 1
        figures, error = real(call, timeout)
        return figures.__class__(source=figures.source, devices=tuple(
            d.__class__(d.name, d.model, d.context, d.compute + state["n"] * 300 * MIB) for d in figures.devices),
            host=figures.host), error

    monkeypatch.setattr(fit_params, "run", drifting)
    plan(lib)
    assert state["n"] <= MAX_ROUNDS
