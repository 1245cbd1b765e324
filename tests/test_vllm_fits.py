"""vLLM fits or skips, however the card is known: the probe, `card_vram_gb`, `gpus` without
`devices`, or `devices`; a single card gives the numbers `devices: [0]` gives. Real config.json files of
models far larger than a 24 GiB card, in folders with sparse safetensors of their real size."""

from __future__ import annotations

import json
import shutil

import pytest
from ruamel.yaml import YAML

from autogen.emit.toolparsers import choose_tool_parser
from autogen.resolve import gpus
from autogen.settings.schema import Gpu
from tests.hf_fixtures import write_safetensors
from tests.runs import generate
from tests.shared import HF_CONFIGS

GIB = 1 << 30
#: Real configs and their weights on disk (GiB): none fits one 24 GiB card.
TOO_BIG = {"llama-3.1-70b-instruct-fp8-modelopt": 70, "deepseek-v3": 642, "mixtral-8x7b-v0.1": 87,
           "qwen3-30b-a3b": 57}
FITS = {"qwen3-8b": 15.3}

BACKENDS = """backends:
  - {id: vllm, kind: vllm, path: /opt/vllm/bin/vllm, version: "0.11.0", default: true}
"""
CARDS = {
    "probe": "",  # the probe answers one 24 GiB card (`probed_card`)
    "card_vram_gb": "card_vram_gb: 24\n",
    "gpus": "gpus: [{index: 0, vram_gb: 24, name: RTX 4090, vendor: nvidia}]\n",
    "devices": "gpus: [{index: 0, vram_gb: 24, name: RTX 4090, vendor: nvidia}]\ndevices: [0]\n",
}


@pytest.fixture(autouse=True)
def probed_card(monkeypatch):
    """The GPU probe of a host with one 24 GiB card (no GPU needed)."""
    monkeypatch.setattr(gpus, "_remembered", lambda cache_dir: (Gpu(index=0, vram_gb=24.0, name="RTX 4090",
                                                                      vendor="nvidia"),))


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    root = tmp_path_factory.mktemp("lib") / "models"
    for name, gib in {**TOO_BIG, **FITS}.items():
        folder = root / "real" / name
        folder.mkdir(parents=True)
        shutil.copy(HF_CONFIGS / name / "config.json", folder / "config.json")
        write_safetensors(folder / "model.safetensors", int(gib * GIB))
    return root


def run(tmp_path, library, card: str) -> dict:
    settings = tmp_path / "swapgen.yaml"
    settings.write_text(f"roots: [{library}]\nvram_budget_gb: 22\n{CARDS[card]}{BACKENDS}")
    assert generate(settings)[0] == 0
    return {"text": (tmp_path / "config.yaml").read_text(),
            "models": YAML(typ="safe").load((tmp_path / "config.yaml").read_text())["models"] or {}}


@pytest.mark.parametrize("card", list(CARDS))
def test_models_larger_than_the_card_are_skipped_with_the_arithmetic(tmp_path, library, card):
    out = run(tmp_path, library, card)
    assert list(out["models"]) == ["qwen3-8b-bf16"]
    skipped = [line for line in out["text"].splitlines() if "# SKIPPED" in line]
    assert len(skipped) == len(TOO_BIG)
    for line in skipped:
        assert "needs" in line and "GiB per GPU at max-model-len" in line and "24.0 GiB card" in line
        assert "vLLM cannot start it" in line


def test_a_single_card_gives_the_numbers_of_devices_0(tmp_path_factory, library):
    """The entry differs only in how the card is named and in the device pin."""
    out = {card: run(tmp_path_factory.mktemp(card), library, card)["models"]["qwen3-8b-bf16"] for card in CARDS}
    pinned = {k: v for k, v in out["devices"]["metadata"].items() if k != "devices"}
    for card in ("probe", "card_vram_gb", "gpus"):
        assert out[card]["metadata"] == pinned, card
        assert out[card]["cmd"] == out["devices"]["cmd"], card


def test_gpt_oss_gets_the_openai_parser_from_vllm_0_10_2():
    arch = json.loads((HF_CONFIGS / "gpt-oss-20b" / "config.json").read_text())["model_type"]
    assert choose_tool_parser(arch, "gpt-oss-20b-mxfp4").parser == "openai"
    assert choose_tool_parser("gpt-oss", "gpt-oss-20b-mxfp4").parser == "openai"  # llama.cpp's GGUF arch
    old = choose_tool_parser(arch, "gpt-oss-20b-mxfp4", version=(0, 10, 1))
    assert old.parser == "" and "openai needs vLLM 0.10.2" in old.note
