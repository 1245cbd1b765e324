"""`swapgen show ID`: why each flag has its value, for people and (with --json) for scripts."""

from __future__ import annotations

import json

import pytest

from autogen.commands import cli
from autogen.commands.fit_params import DeviceFigures, parse
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
    assert "backend  llama (engine llama; ★ of class llm) → /opt/llama/llama-server" in out
    assert "bytes/token" in out and "sizing" in out
    assert "      -c " in out and "      --port ${PORT}" in out
    assert '"alpha-q4_k_m":' in out and "cmd: |" in out


def test_vllm_model_says_it_was_pinned(library, capsys):
    rc, out, _ = show(library, "llama-3.1-8b-instruct-q8_0", capsys=capsys)
    assert rc == 0 and "backend  vllm (engine vllm; pinned)" in out and "--max-model-len" in out


def test_skipped_model_shows_its_reason(library, capsys):
    rc, out, _ = show(library, "broken-q4_0", capsys=capsys)
    assert rc == 0 and "SKIPPED broken-q4_0:" in out and "magic" in out


def test_json_for_scripts(library, capsys):
    rc, out, _ = show(library, "alpha-q4_k_m", "--json", capsys=capsys)
    data = json.loads(out)
    assert rc == 0 and data["backend"]["why"] == "★ of class llm"
    assert data["entries"][0]["argv"][0] == "/opt/llama/llama-server"
    assert data["kv"]["bytes_per_token"] > 0 and data["metadata"]["arch"] == "llama"


def test_unknown_id_exits_1_with_a_hint(library, capsys):
    rc, _, err = show(library, "nope", capsys=capsys)
    assert rc == 1 and "no model 'nope'" in err and "swapgen list" in err


class TestEngineEstimate:
    """`show` prints llama.cpp's own estimate (`llama-fit-params`) beside swapgen's when the
    backend row's build ships it; generation never runs it."""

    def settings_with_estimator(self, tmp_path, script: str):
        bin_dir = tmp_path / "llama-build"
        bin_dir.mkdir()
        (bin_dir / "llama-server").write_text("#!/bin/sh\n")
        estimator = bin_dir / "llama-fit-params"
        estimator.write_text("#!/bin/sh\n" + script)
        estimator.chmod(0o755)
        (bin_dir / "args").write_text("")
        add_model(tmp_path / "models", "pub/A-GGUF/Alpha-Q4_K_M.gguf")
        settings = tmp_path / "swapgen.yaml"
        settings.write_text(SETTINGS.replace("/opt/llama/llama-server", str(bin_dir / "llama-server")))
        return settings, bin_dir

    def test_figures_beside_ours_with_the_difference(self, tmp_path, capsys):
        settings, bin_dir = self.settings_with_estimator(
            tmp_path, f'echo "$@" > {tmp_path}/llama-build/args\necho "CUDA0 50 600 100"\necho "Host 4 0 2"\n')
        rc, out, _ = show(settings, "alpha-q4_k_m", capsys=capsys)
        assert rc == 0
        assert "memory (MiB)   swapgen   llama-fit-params   difference" in out
        assert any(line.split()[:1] == ["context"] and line.split()[2] == "600" for line in out.splitlines())
        passed = (bin_dir / "args").read_text().split()
        assert passed[0] == "-m" and "-c" in passed and "-ngl" in passed and passed[-2:] == ["--fit-print", "on"]
        assert "--host" not in passed and "--port" not in passed

    def test_a_failing_estimator_is_reported_not_fatal(self, tmp_path, capsys):
        settings, _ = self.settings_with_estimator(tmp_path, 'echo "error: unknown arch" >&2\nexit 1\n')
        rc, out, _ = show(settings, "alpha-q4_k_m", capsys=capsys)
        assert rc == 0 and "llama-fit-params exited 1: error: unknown arch" in out

    def test_without_an_estimator_only_our_parts(self, library, capsys):
        rc, out, _ = show(library, "alpha-q4_k_m", capsys=capsys)
        assert rc == 0 and "memory (MiB): model" in out and "llama-fit-params" not in out
        assert "fit: -fit off, swapgen's sizing decides" in out


def test_parse_reads_each_device_line():
    text = "load: something\nCUDA0 5120 1024 300 \nHost 54 640 105 \n"
    assert parse(text) == (DeviceFigures("CUDA0", 5120, 1024, 300), DeviceFigures("Host", 54, 640, 105))
