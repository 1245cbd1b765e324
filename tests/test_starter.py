"""`swapgen init` and `swapgen doctor` on machines laid out in a temporary HOME: the starter
names what is there (and nothing that is not), the file it writes runs, and doctor says what is
still missing."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from autogen.commands import cli, detect, starter
from autogen.resolve import gpus
from autogen.router.validate import validate_text
from autogen.settings.load import load_settings
from autogen.settings.schema import Gpu
from tests.builders import add_model
from tests.hf_fixtures import LLAMA_CONFIG, hub_snapshot
from tests.ollama_fixtures import pull
from tests.test_detect import LLAMA_CUDA, VLLM, engine

RTX = Gpu(index=0, name="NVIDIA GeForce RTX 4090", vram_gb=23.99, vendor="nvidia")


@pytest.fixture
def machine(tmp_path, monkeypatch):
    """An empty HOME, PATH = tmp/bin only, no model variables, no GPU: tests add what they need."""
    home = tmp_path / "home"
    home.mkdir()
    (tmp_path / "bin").mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    for name in ("HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "OLLAMA_MODELS", "SWAPGEN_SETTINGS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(detect, "SYSTEM_PLACES", ("~/.local/bin", "~/*/build/bin"))
    monkeypatch.setattr(starter, "OLLAMA_SERVICE_STORE", str(tmp_path / "usr-share-ollama-models"))
    monkeypatch.setattr(gpus, "probe_gpus", lambda: ())
    (tmp_path / "config-repo").mkdir()
    monkeypatch.chdir(tmp_path / "config-repo")
    return tmp_path


def run(*argv: str, capsys) -> tuple[int, str, str]:
    rc = cli.main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def hf_cache_model(hub: Path) -> None:
    hub_snapshot(hub, "meta-llama/Llama-3.2-1B", "a" * 40,
                 {"config.json": json.dumps(LLAMA_CONFIG), "model.safetensors": 2 << 30}, main=True)


def models_in_the_four_places(home: Path) -> None:
    """A model in the HF cache, in LM Studio's folder, in Ollama's store and in ~/models."""
    hf_cache_model(home / ".cache" / "huggingface" / "hub")
    add_model(home / ".lmstudio" / "models", "lmstudio-community/Qwen3-8B-GGUF/Qwen3-8B-Q4_K_M.gguf")
    pull(home / ".ollama" / "models", "llama3.2:3b")
    add_model(home / "models", "pub/Alpha-GGUF/Alpha-Q4_K_M.gguf")


def roots_of(path: Path) -> list[str]:
    return YAML(typ="safe", pure=True).load(path.read_text())["roots"]


class TestInit:
    def test_every_usual_place_that_exists_becomes_a_root_named_in_a_comment(self, machine, capsys):
        models_in_the_four_places(machine / "home")
        rc, out, _ = run("init", capsys=capsys)
        assert rc == 0 and out.startswith(f"wrote {machine / 'config-repo' / 'swapgen.yaml'}: 4 roots, 0 GPUs")
        text = (machine / "config-repo" / "swapgen.yaml").read_text()
        assert roots_of(machine / "config-repo" / "swapgen.yaml") == [
            "~/.cache/huggingface/hub", "~/.lmstudio/models", "~/.ollama/models", "~/models"]
        for comment in ("# the Hugging Face cache", "# LM Studio's models folder", "# Ollama's models",
                        "# your own models folder"):
            assert comment in text
        assert "lm-studio" not in text  # the folder of LM Studio before 0.3 is not there

    def test_variables_that_move_the_stores_are_followed_and_named(self, machine, capsys, monkeypatch):
        hf_home, store = machine / "data" / "hf", machine / "data" / "ollama"
        hf_cache_model(hf_home / "hub")
        pull(store, "qwen3:8b")
        monkeypatch.setenv("HF_HOME", str(hf_home))
        monkeypatch.setenv("OLLAMA_MODELS", str(store))
        assert run("init", capsys=capsys)[0] == 0
        text = (machine / "config-repo" / "swapgen.yaml").read_text()
        assert roots_of(machine / "config-repo" / "swapgen.yaml") == [str(hf_home / "hub"), str(store)]
        assert "# the Hugging Face cache ($HF_HOME/hub)" in text and "# Ollama's models ($OLLAMA_MODELS)" in text
        monkeypatch.setenv("HF_HUB_CACHE", str(machine / "data" / "hub-elsewhere"))
        (machine / "data" / "hub-elsewhere").mkdir()
        assert run("--settings", "second.yaml", "init", capsys=capsys)[0] == 0
        assert roots_of(machine / "config-repo" / "second.yaml")[0] == str(machine / "data" / "hub-elsewhere")

    def test_a_folder_inside_another_root_is_not_listed_twice(self, machine, capsys, monkeypatch):
        """The outer folder scans the inner one; one folder under two names is one root."""
        (machine / "home" / "models" / "hf" / "hub").mkdir(parents=True)
        monkeypatch.setenv("HF_HUB_CACHE", str(machine / "home" / "models" / "hf" / "hub"))
        assert run("init", capsys=capsys)[0] == 0
        assert roots_of(machine / "config-repo" / "swapgen.yaml") == ["~/models"]
        (machine / "home" / ".ollama").mkdir()
        (machine / "home" / ".ollama" / "models").symlink_to(machine / "home" / "models")
        monkeypatch.setenv("HF_HUB_CACHE", str(machine / "elsewhere"))
        assert run("--settings", "b.yaml", "init", capsys=capsys)[0] == 0
        assert roots_of(machine / "config-repo" / "b.yaml") == ["~/.ollama/models"]

    def test_no_gpu_is_one_clear_line_with_what_to_set(self, machine, capsys):
        (machine / "home" / "models").mkdir()
        assert run("init", capsys=capsys)[0] == 0
        text = (machine / "config-repo" / "swapgen.yaml").read_text()
        assert "# No GPU found (no NVIDIA or AMD driver answered: NVML, nvidia-smi, rocm-smi, sysfs).\n" in text
        assert "\n# vram_budget_gb: 8\n# card_vram_gb: 8\n" in text

    def test_gpus_seen_are_listed_with_a_budget_to_start_from(self, machine, capsys, monkeypatch):
        monkeypatch.setattr(gpus, "probe_gpus", lambda: (RTX, Gpu(index=1, name="iGPU", vram_gb=0.5)))
        (machine / "home" / "models").mkdir()
        rc, out, _ = run("init", capsys=capsys)
        assert rc == 0 and ", 1 GPU, " in out
        text = (machine / "config-repo" / "swapgen.yaml").read_text()
        assert "#   0: NVIDIA GeForce RTX 4090, 24 GiB\n#   1: iGPU, 0.5 GiB\n" in text
        assert "default: the GPUs' total, 24 GiB" in text and "\n# vram_budget_gb: 22\n" in text

    def test_engines_detect_finds_are_the_backends(self, machine, capsys):
        (machine / "home" / "models").mkdir()
        engine(machine / "bin", "llama-server", LLAMA_CUDA)
        engine(machine / "home" / "venvs" / "vllm" / "bin", "vllm", VLLM)
        engine(machine / "home" / ".local" / "bin", "vllm", VLLM)
        assert run("init", capsys=capsys)[0] == 0
        text = (machine / "config-repo" / "swapgen.yaml").read_text()
        assert (f"  - {{id: llama-cuda, kind: llama, path: {machine}/bin/llama-server, default: true, version: b11434, "
                "variant: cuda}\n") in text
        assert f'  - {{id: vllm, kind: vllm, path: {machine}/home/.local/bin/vllm, version: "0.11.0", variant: cuda}}\n' in text
        rows = load_settings(machine / "config-repo" / "swapgen.yaml").backends
        assert [(r.id, r.default, r.managed) for r in rows] == [("llama-cuda", True, False), ("vllm", False, False)]

    def test_no_engine_says_what_to_install_and_still_runs(self, machine, capsys):
        add_model(machine / "home" / "models", "pub/Alpha-GGUF/Alpha-Q4_K_M.gguf")
        assert run("init", capsys=capsys)[0] == 0
        text = (machine / "config-repo" / "swapgen.yaml").read_text()
        assert "# No engine found where `swapgen backends detect` looks" in text and "\nbackends: []\n" in text
        assert run(capsys=capsys)[0] == 0
        assert "llama-server" in (machine / "config-repo" / "config.yaml").read_text()

    def test_it_never_replaces_a_file(self, machine, capsys):
        (machine / "home" / "models").mkdir()
        (machine / "config-repo" / "swapgen.yaml").write_text("roots: [mine]\n")
        rc, _, err = run("init", capsys=capsys)
        assert rc == 1 and "swapgen.yaml exists; `swapgen init` never replaces a file" in err
        assert (machine / "config-repo" / "swapgen.yaml").read_text() == "roots: [mine]\n"

    def test_no_model_folder_anywhere_writes_nothing_and_says_where_it_looked(self, machine, capsys):
        rc, _, err = run("init", capsys=capsys)
        assert rc == 1 and "no model folder found in the usual places (~/.cache/huggingface/hub, " in err
        assert "mkdir ~/models" in err and not (machine / "config-repo" / "swapgen.yaml").exists()

    def test_the_file_it_writes_runs_and_serves_every_model_it_found(self, machine, capsys):
        """A machine with models in all four places, llama-server and vLLM: init, doctor, run."""
        models_in_the_four_places(machine / "home")
        engine(machine / "bin", "llama-server", LLAMA_CUDA)
        engine(machine / "bin", "vllm", VLLM)
        assert run("init", capsys=capsys)[0] == 0
        rc, out, _ = run("doctor", capsys=capsys)
        assert rc == 1 and "  missing  budget: no GPU found" in out  # the one thing left to set
        assert run(capsys=capsys)[0] == 0
        config = (machine / "config-repo" / "config.yaml").read_text()
        assert [p for p in validate_text(config) if p.fatal] == []
        served = YAML(typ="safe", pure=True).load(config)["models"]
        assert sorted(served) == ["alpha-q4_k_m", "llama-3.2-1b-bf16", "llama3.2-3b", "qwen3-8b-q4_k_m"]

    def test_a_run_without_settings_points_to_init(self, machine, capsys):
        rc, _, err = run(capsys=capsys)
        assert rc == 1 and "file not found (pass --settings PATH or set SWAPGEN_SETTINGS; `swapgen init` writes a starter)" in err

    def test_init_takes_no_argument(self, machine, capsys):
        with pytest.raises(SystemExit):
            cli.main(["init", "~/models"])
        assert "init takes no argument" in capsys.readouterr().err


class TestDoctor:
    def test_a_ready_library_has_nothing_missing(self, machine, capsys):
        add_model(machine / "models", "pub/Alpha-GGUF/Alpha-Q4_K_M.gguf")
        llama = engine(machine / "bin", "llama-server", LLAMA_CUDA)
        (machine / "config-repo" / "swapgen.yaml").write_text(
            f"roots: [../models]\nvram_budget_gb: 22\nbackends:\n  - {{id: llama, kind: llama, path: {llama}}}\n")
        rc, out, _ = run("doctor", capsys=capsys)
        assert rc == 0
        assert out.splitlines() == [
            str(machine / "config-repo" / "swapgen.yaml"),
            f"  ok       root {machine}/models: 1 model",
            "  ok       budget: 22 GiB per model (vram_budget_gb)",
            f"  ok       engine llama: {llama} serves 1 model (alpha-q4_k_m)",
            "nothing missing: `swapgen` writes the config"]

    def test_missing_engines_budget_and_empty_roots_are_each_one_line(self, machine, capsys):
        add_model(machine / "models", "pub/Alpha-GGUF/Alpha-Q4_K_M.gguf")
        hf_cache_model(machine / "hub")
        (machine / "empty").mkdir()
        (machine / "config-repo" / "swapgen.yaml").write_text(
            "roots: [../models, ../hub, ../empty, ../gone]\ncard_vram_gb: 0\n"
            "backends:\n  - {id: llama-cuda, kind: llama, path: /opt/none/llama-server}\n"
            "  - {id: sd, kind: sd, path: sd-server}\n")
        rc, out, _ = run("doctor", capsys=capsys)
        assert rc == 1
        lines = out.splitlines()
        assert lines[1:] == [
            f"  ok       root {machine}/models: 1 model",
            f"  ok       root {machine}/hub: 1 model",
            f"  empty    root {machine}/empty: holds no model swapgen can serve (`swapgen list` shows what it found "
            "and ignored)",
            f"  missing  root {machine}/gone: does not exist or cannot be listed",
            "  missing  budget: card_vram_gb: 0 (no card reading) and no vram_budget_gb: every model is sized to a "
            "budget of 8 GiB. Set `vram_budget_gb` (the GiB one model may use) and `card_vram_gb` (the card's total) "
            "in swapgen.yaml, or declare `gpus:`",
            "  missing  engine llama-cuda: /opt/none/llama-server does not exist or is not executable; it would serve "
            "1 model (alpha-q4_k_m). Install it, fix the row's path, or set `backends_file: backends.yaml` and run "
            "`swapgen backends detect`",
            "  missing  engine sd: sd-server is not on PATH; it would serve no model yet. Install it, fix the row's "
            "path, or set `backends_file: backends.yaml` and run `swapgen backends detect`",
            "  missing  engine vllm: no backend row of kind vllm to serve 1 safetensors folder "
            "(llama-3.2-1b-bf16). Install vLLM and add its row (or set `backends_file: backends.yaml` and run "
            "`swapgen backends detect`)",
            "6 things missing"]

    def test_models_without_a_row_name_the_engine_they_fall_back_to(self, machine, capsys):
        """A starter file with `backends: []`: the line names llama-server, not an internal slot, and
        says to add a row; with `backends_file` set, `backends detect` is the plain way."""
        add_model(machine / "models", "pub/Alpha-GGUF/Alpha-Q4_K_M.gguf")
        settings = machine / "config-repo" / "swapgen.yaml"
        settings.write_text("roots: [../models]\nvram_budget_gb: 22\nbackends: []\n")
        rc, out, _ = run("doctor", capsys=capsys)
        assert rc == 1 and out.splitlines()[3] == (
            "  missing  engine llama-server (no backend row): llama-server is not on PATH; it would serve 1 model "
            "(alpha-q4_k_m). Install it, add its row to `backends:`, or set `backends_file: backends.yaml` and run "
            "`swapgen backends detect`")
        settings.write_text(settings.read_text() + "backends_file: backends.yaml\n")
        _, out, _ = run("doctor", capsys=capsys)
        assert out.splitlines()[3].endswith("Install it, add its row to `backends:`, or run `swapgen backends detect`")

    def test_an_empty_library_still_says_no_engine_is_installed(self, machine, capsys):
        """Before the first model: the engine it will need is checked too, not only the roots."""
        (machine / "models").mkdir()
        (machine / "config-repo" / "swapgen.yaml").write_text("roots: [../models]\nvram_budget_gb: 22\nbackends: []\n")
        rc, out, _ = run("doctor", capsys=capsys)
        assert rc == 1 and out.splitlines()[3:] == [
            "  missing  engine llama-server (no backend row): llama-server is not on PATH; it would serve no model "
            "yet. Install it, add its row to `backends:`, or set `backends_file: backends.yaml` and run "
            "`swapgen backends detect`",
            "2 things missing"]
        llama = engine(machine / "bin", "llama-server", LLAMA_CUDA)
        rc, out, _ = run("doctor", capsys=capsys)
        assert rc == 1 and out.splitlines()[3] == (
            f"  ok       engine llama-server (no backend row): {llama} serves no model yet")

    def test_each_host_of_a_fleet_is_its_own_library(self, machine, capsys):
        for host in ("gpu-a", "gpu-b"):
            add_model(machine / host / "models", "pub/Alpha-GGUF/Alpha-Q4_K_M.gguf")
            (machine / host / "swapgen.yaml").write_text(
                "roots: [models]\ncard_vram_gb: 24\nbackends:\n  - {id: llama, kind: llama, path: llama-server}\n")
        (machine / "config-repo" / "swapgen.yaml").write_text(
            "roots: []\nhosts:\n"
            f"  - {{name: gpu-a, settings: {machine}/gpu-a/swapgen.yaml, url: 'http://a.lan:8080'}}\n"
            f"  - {{name: gpu-b, settings: {machine}/gpu-b/swapgen.yaml, url: 'http://b.lan:8080'}}\n")
        engine(machine / "bin", "llama-server", LLAMA_CUDA)
        rc, out, _ = run("doctor", capsys=capsys)
        titles = [line for line in out.splitlines() if not line.startswith(" ")]
        assert rc == 0 and titles == [f"gpu-a: {machine}/gpu-a/swapgen.yaml", f"gpu-b: {machine}/gpu-b/swapgen.yaml",
                                      "nothing missing: `swapgen` writes the config"]
        assert "  ok       budget: 24 GiB per model (the GPUs' total; vram_budget_gb sets less)" in out


def test_places_follow_huggingface_hub_precedence(tmp_path):
    """HF_HUB_CACHE, then the legacy HUGGINGFACE_HUB_CACHE, then HF_HOME/hub, then the XDG cache."""
    home = str(tmp_path)
    env = {"HF_HUB_CACHE": "/a", "HUGGINGFACE_HUB_CACHE": "/b", "HF_HOME": "/c", "XDG_CACHE_HOME": "/d"}
    firsts = []
    for drop in ([], ["HF_HUB_CACHE"], ["HUGGINGFACE_HUB_CACHE"], ["HF_HOME"], ["XDG_CACHE_HOME"]):
        for name in drop:
            env.pop(name)
        firsts.append(starter._candidates(env, home)[0].path)
    assert firsts == ["/a", "/b", "/c/hub", "/d/huggingface/hub", os.path.join(home, ".cache", "huggingface", "hub")]


# -- docs/getting-started.md ---------------------------------------------------------------------

#: HOME as the guide shows it.
SHOWN_HOME = "/home/me"


def guide_machine(machine: Path, monkeypatch) -> Path:
    """The machine the section describes; returns the config repo (HOME/llm)."""
    home = machine / "home"
    hf_cache_model(home / ".cache" / "huggingface" / "hub")
    pull(home / ".ollama" / "models", "llama3.2:3b")
    add_model(home / "models", "bartowski/Qwen2.5-7B-Instruct-GGUF/Qwen2.5-7B-Instruct-Q4_K_M.gguf")
    (home / ".lmstudio" / "models").mkdir(parents=True)
    cuda = engine(home / "llama.cpp" / "build" / "bin", "llama-server", LLAMA_CUDA)
    (cuda.parent / "libggml-cuda.so").write_bytes(b"")
    engine(home / ".local" / "bin", "vllm", VLLM)
    monkeypatch.setattr(gpus, "probe_gpus", lambda: (RTX,))
    (home / "llm").mkdir()
    monkeypatch.chdir(home / "llm")
    return home / "llm"


def guide_runs(machine: Path, monkeypatch, capsys) -> dict[str, str]:
    """`$ swapgen init`, the file, `$ swapgen doctor` and `$ swapgen` as the section shows them."""
    repo = guide_machine(machine, monkeypatch)
    shown = {}
    for command in (["init"], ["doctor"], []):
        rc, out, err = run(*command, capsys=capsys)
        assert rc == (1 if command == ["doctor"] else 0), err
        text = out if command else out.splitlines()[-1] + "\n"
        shown[" ".join(["$ swapgen", *command])] = text.replace(str(machine / "home"), SHOWN_HOME)
        if command == ["init"]:
            shown["# swapgen.yaml"] = (repo / "swapgen.yaml").read_text().replace(str(machine / "home"), SHOWN_HOME)
    return shown


def test_getting_started_is_a_real_run(machine, monkeypatch, capsys):
    """The page's `$ swapgen init`, starter file, `$ swapgen doctor` and `$ swapgen` blocks."""
    from tests.guide_pages import code_blocks, page  # noqa: PLC0415 - the guide's helpers, only here

    blocks = {body.split("\n", 1)[0]: body.split("\n", 1)[1] for _, body, _ in code_blocks(page("getting-started.md"))}
    runs = guide_runs(machine, monkeypatch, capsys)
    assert runs == {first: blocks.get(first) for first in runs}
