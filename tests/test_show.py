"""`swapgen show ID`: one model's plan as a report (each fact once, GiB, the three memory sources
in one table), for people and, with --json, for scripts."""

from __future__ import annotations

import json
import re

import pytest

from autogen.commands import cli
from tests.builders import SETTINGS, add_model

VLLM_ROW = "  - {id: vllm, kind: vllm, path: /opt/vllm/bin/vllm, version: '0.11.0'}\n"


@pytest.fixture
def library(tmp_path):
    add_model(tmp_path / "models", "pub/A-GGUF/Alpha-Q4_K_M.gguf")
    add_model(tmp_path / "models", "pub/V-GGUF/Llama-3.1-8B-Instruct-Q8_0.gguf")
    (tmp_path / "models/bad").mkdir()
    (tmp_path / "models/bad/Broken-Q4_0.gguf").write_bytes(b"nope")
    settings = tmp_path / "swapgen.yaml"
    settings.write_text(SETTINGS + VLLM_ROW + "overrides:\n  - {match: '*Llama-3.1*', backend: vllm}\n")
    return settings


def show(settings, *args, capsys):
    rc = cli.main(["--settings", str(settings), "show", *args])
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def test_llama_model_shows_backend_kv_sizing_argv_and_fragment(library, capsys):
    rc, out, _ = show(library, "alpha-q4_k_m", capsys=capsys)
    assert rc == 0
    assert "backend   llama (engine llama; ★ of class llm) → /opt/llama/llama-server" in out
    assert "  KV cost   " in out and " KiB per token at f16" in out and "sizing" in out
    assert "      -c " in out and "      --port ${PORT}" in out
    assert '"alpha-q4_k_m":' in out and "cmd: |" in out


def test_each_fact_once_in_one_unit(library, capsys):
    """The KV derivation is printed once, under the KV cost, never again under `fit:`, and the
    bytes per token once, at its end; sizes are GiB, written as such, llama.cpp's cache and
    compute lines too."""
    _, out, _ = show(library, "alpha-q4_k_m", capsys=capsys)
    report = out.split("  fragment")[0]
    derivation = [line for line in report.splitlines() if "× 2 B =" in line]
    assert len(derivation) == 1
    per_token = derivation[0].split("= ")[1].split(" B")[0]
    assert len(re.findall(rf"\b{per_token} B\b|\b{int(per_token):,} bytes", report)) == 1
    assert " GB" not in report and "GiB" in report and not re.search(r"\d MiB", report)
    assert "KV full attention " in report and "compute buffer " in report
    assert "budget    8 GiB (no card reading)" in report


def test_a_vllm_report_says_the_card_the_budget_and_the_estimate_once(library, capsys):
    _, out, _ = show(library, "llama-3.1-8b-instruct-q8_0", capsys=capsys)
    report = out.split("  argv of")[0]
    assert "budget    8 GiB (no card reading)" in report
    assert not re.search(r"^    (card|budget|est_vram_gb) ", report, re.M)
    assert len(re.findall(r"^    estimate ", report, re.M)) == 1


def test_context_sentence_says_what_fits_and_what_more_would_need(library, capsys):
    _, out, _ = show(library, "alpha-q4_k_m", capsys=capsys)
    line = next(line for line in out.splitlines() if "KV:" in line and "tokens fit" in line)
    assert line.strip().startswith("f16 KV: ") and "," in line.split("tokens")[0]


def test_memory_table_has_each_source_once_with_devices_first(library, capsys):
    _, out, _ = show(library, "alpha-q4_k_m", capsys=capsys)
    lines = out.splitlines()
    head = next(i for i, line in enumerate(lines) if line.strip().startswith("device  source"))
    assert lines[head].split() == ["device", "source", "model", "context", "compute", "other", "total", "vs",
                                   "estimate"]
    assert lines[head + 1].split()[:2] == ["GPU0", "estimate"]
    assert "measured: not measured (swapgen calibrate alpha-q4_k_m)" in out
    assert "llama-fit-params: no llama-fit-params beside /opt/llama/llama-server" in out


def test_vllm_model_says_it_was_pinned(library, capsys):
    rc, out, _ = show(library, "llama-3.1-8b-instruct-q8_0", capsys=capsys)
    assert rc == 0 and "backend   vllm (engine vllm; pinned)" in out and "--max-model-len" in out
    assert "vLLM version 0.11.0" in out


def test_skipped_model_shows_its_reason(library, capsys):
    rc, out, _ = show(library, "broken-q4_0", capsys=capsys)
    assert rc == 0 and "SKIPPED broken-q4_0:" in out and "magic" in out


def test_json_for_scripts(library, capsys):
    rc, out, _ = show(library, "alpha-q4_k_m", "--json", capsys=capsys)
    data = json.loads(out)
    assert rc == 0 and data["backend"]["why"] == "★ of class llm"
    assert data["entries"][0]["argv"][0] == "/opt/llama/llama-server"
    assert data["kv"]["bytes_per_token"] > 0 and data["metadata"]["arch"] == "llama"
    memory = {m["source"]: m for m in data["entries"][0]["memory"]}
    assert list(memory) == ["estimate", "llama-fit-params", "measured"]
    estimate = memory["estimate"]
    assert estimate["used"] and estimate["devices"][0]["device"] == "GPU0" and not memory["measured"]["used"]
    assert memory["measured"]["missing"] == "not measured (swapgen calibrate alpha-q4_k_m)"


def test_json_parts_add_up_to_each_devices_total(library, capsys):
    """Every device's parts (weights, KV and state, compute, projector, runtime, base, …) add up
    to its total, and the runtime and base are swapgen's charges for them."""
    _, out, _ = show(library, "alpha-q4_k_m", "--json", capsys=capsys)
    (device,) = json.loads(out)["entries"][0]["memory"][0]["devices"]
    parts = ("weights", "kv_state", "compute", "projector", "runtime", "base", "draft", "other", "margin")
    assert sum(device[p] for p in parts) == device["total"] and device["vs_estimate"] is None
    assert device["runtime"] == 429496729 and device["base"] == 1 << 29 and device["projector"] == 0


def test_json_context_plan_marks_the_emitted_context(library, capsys):
    """An LLM entry's context: the `-c` it was given, its trained length, a curve per cache type
    it may use, each passing through the budget no later than its largest fitting context."""
    _, out, _ = show(library, "alpha-q4_k_m", "--json", capsys=capsys)
    entry = json.loads(out)["entries"][0]
    plan = entry["context"]
    argv = entry["argv"]
    assert plan["chosen"] == int(argv[argv.index("-c") + 1]) and plan["kv_type"] == "f16"
    assert [c["kv_type"] for c in plan["curves"]] == ["f16", "q8_0"]
    for curve in plan["curves"]:
        xs = [x for x, _ in curve["points"]]
        assert xs == sorted(xs) and xs[-1] == plan["trained"] and plan["chosen"] in xs
        assert all(y <= plan["budget"] for x, y in curve["points"] if x <= curve["fits"])
        assert all(y > plan["budget"] for x, y in curve["points"] if x > curve["fits"])


def test_unknown_id_exits_1_with_a_hint(library, capsys):
    rc, _, err = show(library, "nope", capsys=capsys)
    assert rc == 1 and "no model 'nope'" in err and "swapgen list" in err


class TestBudget:
    """Per GPU where there are several: a split model's budget is each card's, and the sum."""

    def test_two_gpus_show_the_budget_of_each(self, tmp_path, capsys):
        add_model(tmp_path / "models", "pub/A-GGUF/Alpha-Q4_K_M.gguf")
        settings = tmp_path / "swapgen.yaml"
        settings.write_text(SETTINGS.replace("vram_budget_gb: 8\n", "vram_budget_gb: 22\n")
                            + "gpus:\n  - {index: 0, vram_gb: 24, name: A, vendor: nvidia}\n"
                              "  - {index: 1, vram_gb: 24, name: B, vendor: nvidia}\n"
                              "devices: [0, 1]\n")
        _, out, _ = show(settings, "alpha-q4_k_m", capsys=capsys)
        budget = next(line for line in out.splitlines() if line.startswith("  budget"))
        assert "22 GiB" in budget and ("per GPU" in budget or "on GPU" in budget)


    def test_two_gpus_without_devices_say_the_card_reading_is_their_total(self, tmp_path, capsys):
        """No `devices:`: the model is sized against the pooled reading, and the line says what it
        is made of, not a 24 GiB card the machine does not have."""
        add_model(tmp_path / "models", "pub/A-GGUF/Alpha-Q4_K_M.gguf")
        settings = tmp_path / "swapgen.yaml"
        settings.write_text(SETTINGS.replace("vram_budget_gb: 8\n", "vram_budget_gb: 22\n")
                            .replace("card_vram_gb: 0\n", "")
                            + "gpus:\n  - {index: 0, vram_gb: 12, name: A, vendor: nvidia}\n"
                              "  - {index: 1, vram_gb: 12, name: B, vendor: nvidia}\n")
        _, out, _ = show(settings, "alpha-q4_k_m", capsys=capsys)
        budget = next(line for line in out.splitlines() if line.startswith("  budget"))
        assert budget == "  budget    22 GiB (card reading 24 GiB: 2 GPUs of 12 + 12 GiB together)"


class TestEngineEstimate:
    """`show` puts llama.cpp's own estimate (`llama-fit-params`) beside swapgen's when the
    backend row's build ships it."""

    def settings_with_estimator(self, tmp_path, script: str):
        bin_dir = tmp_path / "llama-build"
        bin_dir.mkdir()
        (bin_dir / "llama-server").write_text("#!/bin/sh\n")
        (bin_dir / "llama-server").chmod(0o755)
        estimator = bin_dir / "llama-fit-params"
        estimator.write_text("#!/bin/sh\n" + script)
        estimator.chmod(0o755)
        add_model(tmp_path / "models", "pub/A-GGUF/Alpha-Q4_K_M.gguf")
        settings = tmp_path / "swapgen.yaml"
        settings.write_text(SETTINGS.replace("/opt/llama/llama-server", str(bin_dir / "llama-server")))
        return settings, bin_dir

    def test_figures_beside_ours_with_the_difference(self, tmp_path, capsys):
        settings, bin_dir = self.settings_with_estimator(
            tmp_path, f'echo "$@" > {tmp_path}/llama-build/args\necho "CUDA0 50 600 100 "\necho "Host 4 0 2 "\n')
        rc, out, _ = show(settings, "alpha-q4_k_m", capsys=capsys)
        assert rc == 0
        rows = [line.split() for line in out.splitlines()]
        cuda = next(r for r in rows if r[:1] == ["CUDA0"])
        assert cuda[1] == "llama-fit-params" and cuda[2:5] == ["*", "0.05", "0.59"]  # used; 50 and 600 MiB in GiB
        assert any(r[:2] == ["Host", "llama-fit-params"] for r in rows)
        passed = (bin_dir / "args").read_text().split()
        assert passed[0] == "-m" and "-c" in passed and "-ngl" in passed and passed[-2:] == ["--fit-print", "on"]
        assert "--host" not in passed and "--port" not in passed and passed[passed.index("-np") + 1] == "1"

    def test_a_failing_estimator_is_reported_not_fatal(self, tmp_path, capsys):
        settings, _ = self.settings_with_estimator(tmp_path, 'echo "error: unknown arch" >&2\nexit 1\n')
        rc, out, _ = show(settings, "alpha-q4_k_m", capsys=capsys)
        assert rc == 0 and "llama-fit-params: llama-fit-params exited 1: error: unknown arch" in out

    def test_without_an_estimator_only_our_parts(self, library, capsys):
        rc, out, _ = show(library, "alpha-q4_k_m", capsys=capsys)
        assert rc == 0 and "fit: -fit off, swapgen's sizing decides" in out
        assert not any(line.split()[1:2] == ["llama-fit-params"] for line in out.splitlines() if line.split())


def test_a_multi_node_model_shows_each_gpus_budget(tmp_path, capsys):
    """Each GPU of the two nodes holds 22 GiB; the 88 GiB is their sum, said as such."""
    from tests.fleet_fixtures import build_fleet  # noqa: PLC0415 - the fleet's data is optional

    front = build_fleet(tmp_path)
    rc, out, _ = show(front, "gpu-a/llama-3.1-70b-instruct-fp8-bf16", capsys=capsys)
    budget = next(line for line in out.splitlines() if line.startswith("  budget"))
    assert rc == 0 and budget == ("  budget    22 GiB per GPU × 4 GPUs on 2 nodes (24, 24, 24, 24 GiB cards), "
                                  "88 GiB in all")
