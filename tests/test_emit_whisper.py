"""whisper-server entries end to end (docs/whisper.md, docs/maintainers/whisper.md): the command
from the recorded parser's flags, the OpenAI route and its check endpoint, the GPU or the CPU from
the budget, flash attention, the VAD model, `whisper-1`, and the class default's rules beside
parakeet.cpp."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from autogen.cmdline import split_command
from autogen.flags.whisper import values_taken
from autogen.router.validate import validate_text
from tests.gguf_fixtures import Q, write_gguf
from tests.guide_pages import page, yaml_blocks
from tests.runs import generate
from tests.shared import DATA
from tests.whisper_fixtures import write_silero, write_whisper

WHISPER_ROW = "  - {id: whisper-cuda, kind: whisper, path: /opt/whisper/whisper-server, variant: cuda}\n"
PARAKEET_ROW = "  - {id: parakeet, kind: parakeet, path: /opt/parakeet/parakeet-server}\n"
BASE = """roots: [models]
vram_budget_gb: 8
card_vram_gb: 8
"""


def settings(*rows: str, extra: str = "", base: str = BASE) -> str:
    return base + extra + "backends:\n" + "".join(rows)
HELP = (DATA / "whisper_server_help_1.8.5.txt").read_text()


def library(tmp_path: Path) -> Path:
    folder = tmp_path / "models" / "whisper"
    write_whisper(folder / "ggml-tiny.bin", "tiny", 4, 4)
    write_whisper(folder / "ggml-base.en.bin", "base", 6, 6, english=True)
    write_whisper(folder / "ggml-large-v3-turbo-q5_0.bin", "large-v3-turbo", 32, 4, "q5_0")
    write_silero(folder / "ggml-silero-v6.2.0.bin")
    return folder


def parakeet(tmp_path: Path) -> None:
    (tmp_path / "models" / "asr").mkdir(parents=True)
    write_gguf(tmp_path / "models" / "asr" / "parakeet-tdt-0.6b-v3-Q8_0.gguf", "parakeet",
               kv={"{arch}.block_count": 2}, tensors=[("token_embd.weight", (64, 64), Q.F16)])


def generated(tmp_path: Path, settings: str) -> tuple[dict, str]:
    (tmp_path / "swapgen.yaml").write_text(settings)
    code, _ = generate(tmp_path / "swapgen.yaml")
    assert code == 0
    text = (tmp_path / "config.yaml").read_text()
    assert validate_text(text, "config.yaml") == []
    return YAML(typ="safe").load(text)["models"], text


def argv(entry: dict) -> list[str]:
    return split_command(entry["cmd"])


def flags_of(args: list[str]) -> list[str]:
    """The flags of a whisper-server command, each checked against the recorded parser."""
    known, found, i = values_taken(), [], 1
    while i < len(args):
        assert args[i] in known, f"whisper-server has no argument {args[i]!r}"
        found.append(args[i])
        i += 1 + known[args[i]]
    return found


class TestCommand:
    def test_every_entry_runs_whisper_server_with_flags_its_parser_reads(self, tmp_path):
        folder = library(tmp_path)
        models, _ = generated(tmp_path, settings(WHISPER_ROW))
        assert sorted(models) == ["whisper-base.en", "whisper-large-v3-turbo-q5_0", "whisper-tiny"]
        for entry in models.values():
            args = argv(entry)
            assert args[0] == "/opt/whisper/whisper-server"
            for flag in flags_of(args):
                assert re.search(rf"(^|\s){re.escape(flag)}[\s,]", HELP), f"{flag} is not in the recorded --help"
            assert args[args.index("--inference-path") + 1] == "/v1/audio/transcriptions"
            assert args[args.index("-vm") + 1] == str(folder / "ggml-silero-v6.2.0.bin") and "--vad" in args
            assert entry["checkEndpoint"] == "/health"
            assert entry["capabilities"] == {"in": ["audio"], "out": ["text"]}

    def test_a_multilingual_model_detects_the_language_an_english_one_does_not(self, tmp_path):
        library(tmp_path)
        models, _ = generated(tmp_path, settings(WHISPER_ROW))
        assert argv(models["whisper-tiny"])[-5:-3] == ["-l", "auto"]
        assert "-l" not in argv(models["whisper-base.en"])

    def test_sizes_are_what_whisper_cpp_allocates_on_the_gpu(self, tmp_path):
        library(tmp_path)
        models, text = generated(tmp_path, settings(WHISPER_ROW))
        memory = models["whisper-large-v3-turbo-q5_0"]["metadata"]["memory"]
        (gpu,) = memory["devices"]
        # printed by whisper.cpp 1.8.5 for this shape: model 573.40, caches 10.49 + 31.46 + 7.86 and
        # compute 36.15 + 55.35 + 9.27 + 99.12 MB
        assert (gpu["model_mib"], gpu["context_mib"], gpu["compute_mib"]) == (547, 48, 191)
        assert models["whisper-large-v3-turbo-q5_0"]["metadata"]["est_vram_gb"] == 1.1
        assert "# whisper.cpp · Q5_0 · 32+4 layers, width 1280" in text

    def test_flash_attention_off_is_written_and_sized(self, tmp_path):
        library(tmp_path)
        models, _ = generated(tmp_path, settings(WHISPER_ROW, extra="flash_attn: \"off\"\n"))
        entry = models["whisper-tiny"]
        assert "-nfa" in argv(entry) and entry["metadata"]["flash_attn"] is False
        # printed without flash attention: 13.21 + 64.81 (6 heads of F32 scores) + 3.89 + 95.91 MB
        assert entry["metadata"]["memory"]["devices"][0]["compute_mib"] == 170

    def test_over_the_budget_it_runs_on_the_cpu(self, tmp_path):
        library(tmp_path)
        models, text = generated(tmp_path, settings(WHISPER_ROW, base=BASE.replace("vram_budget_gb: 8", "vram_budget_gb: 0.75")))
        turbo = models["whisper-large-v3-turbo-q5_0"]
        assert "-ng" in argv(turbo) and "est_vram_gb" not in turbo["metadata"]
        assert turbo["metadata"]["est_ram_gb"] == 0.8
        assert "does not fit the 0.75 GiB budget: on the CPU" in text
        assert "-ng" not in argv(models["whisper-tiny"])

    def test_a_cpu_build_needs_no_flag_and_ngl_0_asks_for_the_cpu(self, tmp_path):
        library(tmp_path)
        cpu = WHISPER_ROW.replace("variant: cuda", "variant: cpu")
        override = "overrides:\n  - {match: '*tiny*', ngl: 0, threads: 3}\n"
        models, _ = generated(tmp_path, settings(cpu, extra=override))
        assert not any("-ng" in argv(e) for e in models.values())
        assert models["whisper-tiny"]["metadata"]["memory"]["devices"][0]["device"] == "Host"
        models, _ = generated(tmp_path, settings(WHISPER_ROW, extra=override))
        assert argv(models["whisper-tiny"])[-6:-3] == ["-ng", "-t", "3"]

    def test_the_vad_model_can_be_chosen_or_turned_off(self, tmp_path):
        library(tmp_path)
        other = write_silero(tmp_path / "vad" / "ggml-silero-v5.1.2.bin")
        overrides = f"overrides:\n  - {{match: '*tiny*', vad_model: none}}\n  - {{match: '*base*', vad_model: {other}}}\n"
        models, _ = generated(tmp_path, settings(WHISPER_ROW, extra=overrides))
        assert "--vad" not in argv(models["whisper-tiny"]) and models["whisper-tiny"]["metadata"]["vad"] is False
        assert argv(models["whisper-base.en"])[-1] == str(other)

    def test_extra_args_are_checked_against_the_parser(self, tmp_path):
        library(tmp_path)
        overrides = ("overrides:\n  - {match: '*tiny*', extra_args: '--threads=2 -bo 1 --request-path /w'}\n"
                     "  - {match: '*base*', extra_args: '--m /x'}\n")
        models, text = generated(tmp_path, settings(WHISPER_ROW, extra=overrides))
        assert argv(models["whisper-tiny"])[-6:] == ["--threads", "2", "-bo", "1", "--request-path", "/w"]
        assert models["whisper-tiny"]["checkEndpoint"] == "/w/health"
        assert re.search(r'# SKIPPED "whisper-base.en": extra_args: whisper-server 1.8.5 has no argument \'--m\'',
                         text)

    def test_extra_args_pin_what_is_sized(self, tmp_path):
        library(tmp_path)
        overrides = "overrides:\n  - {match: '*tiny*', extra_args: '-nfa -ng'}\n"
        models, _ = generated(tmp_path, settings(WHISPER_ROW, extra=overrides))
        tiny = models["whisper-tiny"]
        assert argv(tiny)[-2:] == ["-nfa", "-ng"] and argv(tiny).count("-ng") == 1
        assert tiny["metadata"]["flash_attn"] is False and "est_vram_gb" not in tiny["metadata"]

    @pytest.mark.parametrize(("extra", "words"), [
        ("-bo", "whisper-server's -bo needs a value"),
        ("--vad=on", "whisper-server's --vad takes no value, got '--vad=on'"),
        ("--flash-attn on", "has no argument 'on'"),
    ])
    def test_a_command_whisper_server_would_refuse_is_a_skip_reason(self, tmp_path, extra, words):
        library(tmp_path)
        overrides = f"overrides:\n  - {{match: '*tiny*', extra_args: '{extra}'}}\n"
        _, text = generated(tmp_path, settings(WHISPER_ROW, extra=overrides))
        (line,) = [ln for ln in text.splitlines() if ln.strip().startswith('# SKIPPED "whisper-tiny"')]
        assert words in line

    def test_without_a_whisper_row_the_model_still_runs_whisper_server(self, tmp_path):
        library(tmp_path)
        models, text = generated(tmp_path, settings(PARAKEET_ROW))
        assert {argv(e)[0] for e in models.values()} == {"whisper-server"}
        assert "WARNING: no whisper.cpp backend registered (a row of kind whisper)" in text

    def test_two_gpus_pinned_it_runs_on_the_larger(self, tmp_path):
        library(tmp_path)
        gpus = "gpus:\n  - {index: 0, name: a, vram_gb: 8}\n  - {index: 1, name: b, vram_gb: 24}\ndevices: [0, 1]\n"
        models, _ = generated(tmp_path, settings(WHISPER_ROW, extra=gpus))
        entry = models["whisper-tiny"]
        assert entry["env"] == ["CUDA_DEVICE_ORDER=PCI_BUS_ID", "CUDA_VISIBLE_DEVICES=1"]
        assert entry["metadata"]["devices"] == "1"


class TestWhisper1:
    def test_the_largest_model_of_the_default_engine_answers_whisper_1(self, tmp_path):
        library(tmp_path)
        models, _ = generated(tmp_path, settings(WHISPER_ROW))
        assert {m: e.get("aliases") for m, e in models.items()} == {
            "whisper-tiny": None, "whisper-base.en": None, "whisper-large-v3-turbo-q5_0": ["whisper-1"]}

    def test_a_larger_model_added_later_takes_it_and_the_replayed_folder_keeps_its_entries(self, tmp_path):
        """A run after a change replays the unchanged whisper folder (its metadata from the cache)
        and moves `whisper-1` to the larger newcomer, re-keying the model that had it."""
        library(tmp_path)
        generated(tmp_path, settings(WHISPER_ROW))
        write_whisper(tmp_path / "models" / "large" / "ggml-large-v3.bin", "large-v3", 32, 32)
        models, text = generated(tmp_path, settings(WHISPER_ROW))
        assert "SKIPPED" not in text and len(models) == 4
        assert [m for m, e in models.items() if e.get("aliases")] == ["whisper-large-v3"]
        assert "-l" in argv(models["whisper-tiny"])  # its header read again, from the cache

    def test_a_model_named_whisper_1_keeps_its_name(self, tmp_path):
        write_whisper(library(tmp_path) / "whisper-1.bin", "base")
        models, _ = generated(tmp_path, settings(WHISPER_ROW))
        assert "whisper-1" in models and not any(e.get("aliases") for e in models.values())

    def test_the_users_own_alias_takes_it(self, tmp_path):
        library(tmp_path)
        overrides = "overrides:\n  - {match: '*tiny*', llama_swap: {aliases: [whisper-1]}}\n"
        models, _ = generated(tmp_path, settings(WHISPER_ROW, extra=overrides))
        assert [m for m, e in models.items() if e.get("aliases")] == ["whisper-tiny"]

    def test_parakeet_keeps_its_own_models_and_the_star_decides_who_answers(self, tmp_path):
        library(tmp_path)
        parakeet(tmp_path)
        models, _ = generated(tmp_path, settings(WHISPER_ROW, PARAKEET_ROW.replace("}", ", default: true}")))
        assert argv(models["parakeet-tdt-0.6b-v3-q8_0"])[0] == "/opt/parakeet/parakeet-server"
        assert argv(models["whisper-tiny"])[0] == "/opt/whisper/whisper-server"
        assert models["parakeet-tdt-0.6b-v3-q8_0"]["aliases"] == ["whisper-1"]
        models, _ = generated(tmp_path, settings(WHISPER_ROW.replace("}", ", default: true}"), PARAKEET_ROW))
        assert models["whisper-large-v3-turbo-q5_0"]["aliases"] == ["whisper-1"]
        assert "aliases" not in models["parakeet-tdt-0.6b-v3-q8_0"]


def test_the_llama_server_router_says_in_one_line_why_it_leaves_them_out(tmp_path):
    library(tmp_path)
    (tmp_path / "swapgen.yaml").write_text(settings(WHISPER_ROW, extra="target: llama-server\n"))
    code, _ = generate(tmp_path / "swapgen.yaml")
    text = (tmp_path / "models.ini").read_text()
    assert code == 0
    assert ('; SKIPPED "whisper-tiny": a whisper.cpp model: llama.cpp\'s router starts llama-server only '
            "(target: llama-swap serves it)") in text


def test_the_guide_pages_example_is_what_its_library_gives(tmp_path):
    """docs/whisper.md: the folder it shows, with its settings, gives the entry it shows (the
    library under tmp_path instead of /models) and lists the encoder as it says."""
    guide = page("whisper.md")
    (settings_text, _), = yaml_blocks("# swapgen.yaml", guide)
    (excerpt, _), = yaml_blocks("# config.yaml (excerpt)", guide)
    folder = tmp_path / "models" / "whisper"
    write_whisper(folder / "ggml-large-v3-turbo-q5_0.bin", "large-v3-turbo", 32, 4, "q5_0")
    write_whisper(folder / "ggml-base.en.bin", "base", 6, 6, english=True)
    write_whisper(folder / "ggml-base.en-q5_1.bin", "base", 6, 6, "q5_1", english=True)
    write_silero(folder / "ggml-silero-v6.2.0.bin")
    (folder / "ggml-base.en-encoder.mlmodelc").mkdir()
    models, text = generated(tmp_path, settings_text.replace("/models", str(tmp_path / "models")))
    (name, shown), = YAML(typ="safe").load(excerpt)["models"].items()
    entry = models[name]
    assert {k: entry[k] for k in shown} == {
        k: v.replace("/models", str(tmp_path / "models")) if isinstance(v, str) else v for k, v in shown.items()}
    assert sorted(models) == ["whisper-base.en", "whisper-base.en-q5_1", "whisper-large-v3-turbo-q5_0"]
    assert "Core ML encoder of whisper-base.en, whisper-base.en-q5_1" in guide.read_text()
    assert "# encoder ggml-base.en-encoder.mlmodelc beside it" in text
