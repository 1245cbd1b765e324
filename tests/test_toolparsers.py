"""Tool-call parser choice (docs/maintainers/backends.md#tool-call-parser-choice) and vLLM version knowledge."""

import json
import subprocess

import pytest

from autogen.emit.toolparsers import (
    AMBIGUOUS,
    FAMILY_RULES,
    TOOL_PARSERS,
    VLLM_CURRENT,
    VLLM_PARSERS_BY_VERSION,
    choose_tool_parser,
    known_at,
    template_parser,
)
from autogen.metadata.chat_template import TEMPLATE_MARKERS, template_markers
from autogen.versions import parse_version
from tests.shared import VLLM_VENV, not_set_up

#: The 58 built-in names of vLLM 0.33.0 (`--tool-call-parser` help text; vllm/tool_parsers/__init__.py).
VLLM_0_33_0_PARSERS = ["apertus", "beam", "cohere_command3", "cohere_command4", "deepseek_v3", "deepseek_v31", "deepseek_v32", "deepseek_v4", "deepseek_v41", "dots", "ernie45", "functiongemma", "gemma4", "gigachat3", "glm45", "glm47", "granite", "granite-20b-fc", "granite4", "hermes", "hf", "hunyuan_a13b", "hy_v3", "hy_v4", "inkling", "internlm", "jamba", "k2_horizon", "kimi_k2", "kimi_k3", "lfm2", "ling3", "llama3_json", "llama4_json", "llama4_pythonic", "longcat", "mimo", "minicpm5", "minimax_m2", "minimax_m3", "mistral", "muse", "muse_glimmer", "musespark1x", "olmo3", "openai", "phi4_mini_json", "plamo3", "poolside_v1", "pythonic", "qwen3_coder", "qwen3_json", "qwen3_xml", "seed_oss", "step3", "step3p5", "step5", "xlam"]



class TestTables:
    def test_version_table_is_exactly_vllm_0_33_0s_registry(self):
        assert len(VLLM_0_33_0_PARSERS) == 58
        assert sorted(VLLM_PARSERS_BY_VERSION) == sorted(VLLM_0_33_0_PARSERS)

    def test_every_table_value_is_a_registered_name(self):
        """The coverage walk (as vLLM's tests/tool_parsers/test_parser_test_coverage.py): a parser we emit
        must be a name vLLM registers."""
        unknown = {arch: p for arch, p in TOOL_PARSERS.items() if p not in VLLM_PARSERS_BY_VERSION}
        assert unknown == {}
        assert [r.parser for r in FAMILY_RULES if r.parser and r.parser not in VLLM_PARSERS_BY_VERSION] == []

    def test_an_ambiguous_arch_has_no_table_default(self):
        """Its key alone never picks a parser; only a family rule can."""
        assert set(AMBIGUOUS).isdisjoint(TOOL_PARSERS)
        assert all(arch in {a for r in FAMILY_RULES for a in r.arches} for arch in AMBIGUOUS)

    def test_table_keys_are_lower_case_and_trimmed(self):
        assert all(key == key.strip().lower() for key in TOOL_PARSERS)

    def test_no_first_version_is_newer_than_the_registry_it_came_from(self):
        assert all(since <= VLLM_CURRENT for since in VLLM_PARSERS_BY_VERSION.values())

    def test_openai_is_gated_to_0_10_2(self):
        """recipes#83: 0.10.1 answered `invalid tool call parser: openai`."""
        assert known_at("openai", (0, 10, 1)) is False
        assert known_at("openai", (0, 10, 2)) is True

    @pytest.mark.slow
    @pytest.mark.skipif(not (VLLM_VENV / "bin" / "python").exists(),
                        reason=not_set_up(f"vLLM's CPU venv ({VLLM_VENV})"))
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
            ("mistral-7b-instruct-v0.3", "mistral", "mistral"),
            ("glm-4.5-air-q4_k_m", "glm4moe", "glm45"),
            ("glm-4.5-air", "glm4_moe", "glm45"),
            ("minimax-m2-q4_k_m", "minimax-m2", "minimax_m2"),
            ("minimax-m2", "minimax_m2", "minimax_m2"),
            ("mistral-small-3.2", "mistral3", "mistral"),
            ("granite-3.3-8b", "granite", "granite"),
            ("gemma-4-31b-it", "gemma4", "gemma4"),
            ("olmo-3-7b", "olmo3", "olmo3"),
            ("deepseek-v3", "deepseek_v3", "deepseek_v3"),
            # the coder rule only rewrites hermes on a qwen3 architecture (qwen2: FAMILY_RULES)
            ("Qwen3-CODER-480B", "qwen3_moe", "qwen3_coder"),
            # case and whitespace of the architecture do not matter
            ("llama-3.1-8b", " Llama ", "llama3_json"),
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
        assert choose_tool_parser("llama", "llama-3.1-8b", pin="  ").parser == "llama3_json"


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
        assert choose_tool_parser("llama", "llama-3.1-8b", table={"qwen3": "qwen3_xml"}).parser == "llama3_json"

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


class TestFamilyRules:
    """An architecture that several tool formats share is decided by the model's names, one
    FAMILY_RULES row at a time; when no row decides, no parser (docs/maintainers/backends.md#tool-call-parser-choice)."""

    @pytest.mark.parametrize(
        ("model_id", "arch", "parser"),
        [
            # Nous Hermes finetunes speak hermes whatever their base (vLLM docs: Hermes 2 Pro/3)
            ("Hermes-3-Llama-3.1-8B-Q4_K_M", "llama", "hermes"),
            ("hermes-2-pro-mistral-7b", "mistral", "hermes"),
            # Salesforce xLAM (vLLM docs: xlam)
            ("Llama-xLAM-2-8b-fc-r", "llama", "xlam"),
            ("xLAM-2-32b-fc-r", "qwen2", "xlam"),
            # finetunes with their own chat format: no parser, even when a base name follows
            ("DeepSeek-R1-Distill-Llama-8B", "llama", ""),
            ("DeepSeek-R1-Distill-Qwen-7B", "qwen2", ""),
            ("DeepSeek-R1-0528-Qwen3-8B", "qwen3", ""),
            ("Llama-3.1-Nemotron-Nano-8B-v1", "llama", ""),
            ("openhermes-2.5-mistral-7b", "mistral", ""),
            ("zephyr-7b-beta", "mistral", ""),
            # Llama 3.x (vLLM docs: llama3_json), 3.0's name included (docs/maintainers/sizing.md#vllm-worked-examples, example G)
            ("Meta-Llama-3.1-8B-Instruct-Q4_K_M", "llama", "llama3_json"),
            ("llama-3.3-70b-instruct", "llama", "llama3_json"),
            ("Llama-3-8B-Instruct", "llama", "llama3_json"),
            ("Llama3.2-3B", "llama", "llama3_json"),
            # Mistral AI's models: GGUF arch llama (llama.cpp's conversion), HF mistral/mixtral
            ("Mistral-7B-Instruct-v0.3-Q4_K_M", "llama", "mistral"),
            ("Devstral-Small-2505-Q4_K_M", "llama", "mistral"),
            ("Mistral-Nemo-Instruct-2407", "mistral", "mistral"),
            ("Mixtral-8x22B-Instruct-v0.1", "mixtral", "mistral"),
            # Qwen2.5-Coder does not emit hermes (vllm#32926); Qwen2/2.5/QwQ do
            ("Qwen2.5-Coder-7B-Instruct", "qwen2", ""),
            ("QwQ-32B-Q4_K_M", "qwen2", "hermes"),
            ("Qwen2-7B-Instruct", "qwen2", "hermes"),
            # DeepSeek-V3.1 ships as model_type deepseek_v3 (vLLM docs: deepseek_v31)
            ("DeepSeek-V3.1-Terminus", "deepseek_v3", "deepseek_v31"),
            ("DeepSeek-V3-0324", "deepseek_v3", "deepseek_v3"),
            # GLM-4.7 ships as glm4_moe (vLLM docs: glm47)
            ("GLM-4.7-Q4_K_M", "glm4moe", "glm47"),
            ("glm-4.6", "glm4_moe", "glm45"),
            # dense Granite 4.0 ships as granite (vLLM docs: granite4)
            ("granite-4.0-micro", "granite", "granite4"),
            ("granite-3.3-8b-instruct", "granite", "granite"),
        ],
    )
    def test_row(self, model_id, arch, parser):
        assert choose_tool_parser(arch, model_id).parser == parser

    @pytest.mark.parametrize(
        ("model_id", "arch"),
        [
            ("model-q4_k_m", "llama"),  # nothing in the name
            ("llama-2-7b-chat", "llama"),  # Llama 2: no tool format
            ("llama-30b", "llama"),  # LLaMA 1 30B is not "llama 3"
            ("codellama-34b-instruct", "llama"),
            ("tinyllama-1.1b-chat", "llama"),
            ("neural-chat-7b-v3-1", "mistral"),
            ("mixtral-finetune", "qwen2"),  # a row only applies to its architectures
            ("Qwen2.5-7B-Instruct", "llama"),
            ("sky-t1-32b", "qwen2"),
        ],
    )
    def test_undecided_gets_no_parser(self, model_id, arch):
        assert choose_tool_parser(arch, model_id).parser == ""

    def test_undecided_note_says_why_and_how_to_pin(self):
        assert choose_tool_parser("llama", "model-q4_k_m").note == (
            "arch llama covers several tool formats and no name says which; pin one in an override "
            "(vllm_tool_parser: llama3_json for Llama 3.x, mistral for Mistral/Mixtral)")

    def test_a_rule_saying_none_names_itself(self):
        assert choose_tool_parser("qwen2", "Qwen2.5-Coder-7B").note == (
            "Qwen2.5-Coder does not emit the hermes format, arch qwen2; pin one in an override "
            "(vllm_tool_parser: <name>)")

    def test_a_rule_parser_names_its_reason(self):
        assert choose_tool_parser("llama", "Mistral-7B-Instruct-v0.3").note == "auto, a Mistral AI model: llama"

    def test_any_name_can_decide(self):
        """A file named by its quant only still has its folder and `general.name`."""
        names = ("model-Q4_K_M.gguf", "bartowski", "Meta Llama 3.1 8B Instruct")
        assert choose_tool_parser("llama", "model-q4_k_m", names=names).parser == "llama3_json"
        folder_only = ("", "Mistral-7B-Instruct-v0.3-GGUF")
        assert choose_tool_parser("llama", "model-q4_k_m", names=folder_only).parser == "mistral"

    def test_rows_apply_in_order(self):
        """A Hermes finetune of Llama 3.1 is Hermes, not Llama; a distill is neither."""
        assert choose_tool_parser("llama", "m", names=("Hermes-3-Llama-3.1-8B",)).parser == "hermes"
        assert choose_tool_parser("llama", "deepseek-r1-distill-llama-3.1-8b").parser == ""

    def test_hostile_names_decide_nothing(self):
        for names in [("",), ("\n\t",), ("Ｌｌａｍａ-3.1",), ("x" * 10_000,), ("llama\u00003.1",)]:
            assert choose_tool_parser("llama", "", names=names).parser == ""

    def test_settings_table_overrides_the_rules(self):
        """The user's `tool_parsers` entry is their word for every model of the architecture."""
        assert choose_tool_parser("llama", "model-q4_k_m", table={"llama": "llama3_json"}).parser == "llama3_json"
        assert choose_tool_parser("llama", "DeepSeek-R1-Distill-Llama-8B", table={"llama": "hermes"}).parser == "hermes"

    def test_pin_overrides_the_rules(self):
        assert choose_tool_parser("qwen2", "Qwen2.5-Coder-7B", pin="hermes").parser == "hermes"

    def test_coder_rule_leaves_a_finetunes_hermes_alone(self):
        assert choose_tool_parser("qwen3", "hermes-4-14b-coder").parser == "hermes"

    def test_rule_parser_is_version_gated(self):
        choice = choose_tool_parser("granite", "granite-4.0-micro", version=(0, 11, 0))
        assert choice.parser == ""
        assert choice.note == "granite4 needs vLLM 0.33.0 or newer, backend is 0.11.0"
        assert choose_tool_parser("deepseek_v3", "DeepSeek-V3.1", version=(0, 10, 1)).parser == ""


class TestEvidenceFromTheFile:
    @pytest.mark.parametrize(
        ("vocab_size", "parser"),
        [
            (32000, ""),  # Mistral 7B v0.1/v0.2, Mixtral 8x7B: no [TOOL_CALLS]
            (32002, ""),  # ChatML finetunes
            (32768, "mistral"),  # tokenizer v3
            (131072, "mistral"),  # tekken
            (0, "mistral"),  # unknown
        ],
    )
    def test_mistral_needs_the_tool_call_token(self, vocab_size, parser):
        assert choose_tool_parser("mistral", "Mistral-7B-Instruct", vocab_size=vocab_size).parser == parser

    def test_vocab_note(self):
        note = choose_tool_parser("llama", "Mixtral-8x7B-Instruct-v0.1", vocab_size=32000).note
        assert note.startswith("a 32000-token vocabulary has no [TOOL_CALLS] token")

    def test_vocab_check_leaves_the_users_table_alone(self):
        choice = choose_tool_parser("mistral", "x", vocab_size=32000, table={"mistral": "mistral"})
        assert choice.parser == "mistral"

    def test_no_chat_template_no_parser(self):
        """Without a template vLLM cannot put the tools in the prompt."""
        choice = choose_tool_parser("qwen3", "qwen3-8b", has_chat_template=False)
        assert choice.parser == ""
        assert choice.note.startswith("no chat template, so vLLM cannot show the model its tools")
        assert choose_tool_parser("qwen3", "qwen3-8b", has_chat_template=False, table={"qwen3": "hermes"}).parser == ""

    def test_template_unknown_or_present_changes_nothing(self):
        for template in (None, True):
            assert choose_tool_parser("qwen3", "qwen3-8b", has_chat_template=template).parser == "hermes"

    def test_pin_wins_over_a_missing_template(self):
        assert choose_tool_parser("qwen3", "q", has_chat_template=False, pin="hermes").parser == "hermes"


# Trimmed real chat templates (the lines that carry the tool format), as published in each model's
# tokenizer_config.json; copies in llama.cpp models/templates/ under the names given.
#: meta-llama-Llama-3.3-70B-Instruct.jinja (Llama 3.1 has the same tool parts)
LLAMA_3_3 = """{%- if custom_tools is defined %}{%- set tools = custom_tools %}{%- endif %}
{%- if not tools is defined %}{%- set tools = none %}{%- endif %}
{%- if builtin_tools is defined or tools is not none %}{{- "Environment: ipython\\n" }}{%- endif %}
{{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.' }}
{%- for t in tools %}{{- t | tojson(indent=4) }}{%- endfor %}
{%- if builtin_tools is defined and tool_call.name in builtin_tools %}
{{- "<|python_tag|>" + tool_call.name + ".call(" }}{%- endif %}"""
#: meta-llama-Llama-3.2-3B-Instruct.jinja: the JSON instruction, no <|python_tag|>
LLAMA_3_2 = """{%- if not tools is defined %}{%- set tools = none %}{%- endif %}
{%- if tools is not none %}{{- "Environment: ipython\\n" }}{%- endif %}
{{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.' }}
{{- '{"name": "' + tool_call.name + '", ' }}"""
#: Meta-Llama-3-8B-Instruct (3.0): no tools at all
LLAMA_3_0 = """{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = \
'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' %}\
{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}\
{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}"""
#: mistralai-Mistral-Nemo-Instruct-2407.jinja (Mistral-7B-Instruct-v0.3 has the same tool parts)
MISTRAL_V3 = """{%- if not tools is defined %}{%- set tools = none %}{%- endif %}
{%- if tools is not none and (message == user_messages[-1]) %}{{- "[AVAILABLE_TOOLS][" }}
{%- for tool in tools %}{%- set tool = tool.function %}{{- '{"type": "function", "function": {' }}{%- endfor %}
{{- "[/AVAILABLE_TOOLS]" }}{%- endif %}
{%- elif (message.tool_calls is defined and message.tool_calls is not none) %}{{- "[TOOL_CALLS][" }}"""
#: Mistral-7B-Instruct-v0.1 / v0.2: [INST] only
MISTRAL_V1 = """{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}\
{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}\
{{ message['content'] + eos_token}}{% endif %}{% endfor %}"""
#: Qwen-QwQ-32B.jinja (Qwen2.5-7B-Instruct has the same tool parts)
QWEN2_5 = """{%- if tools %}{{- '<|im_start|>system\\n' }}
{{- "\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided \
with function signatures within <tools></tools> XML tags:\\n<tools>" }}
{%- for tool in tools %}{{- "\\n" }}{{- tool | tojson }}{%- endfor %}
{{- "\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within \
<tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}\\n\
</tool_call><|im_end|>\\n" }}{%- endif %}"""
#: NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja (GGUF arch llama)
HERMES_3 = """{{- "You are a function calling AI model. You are provided with function signatures within \
<tools></tools> XML tags. Here are the available tools: <tools> " }}
{%- for tool in tools %}{%- if tool.function is defined %}{%- set tool = tool.function %}{%- endif %}
{%- endfor %}{{- "<tool_call>\\n" }}{{- '{"name": <function-name>, "arguments": <args-dict>}\\n' }}
{{- '</tool_call><|im_end|>\\n' }}"""
#: deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja: renders past tool calls, never the tools
R1_DISTILL = """{%- for tool in message['tool_calls']%}{%- if not ns.is_first %}
{{'<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>' + tool['type'] + '<｜tool▁sep｜>' + \
tool['function']['name'] + '\\n' + '```json' + '\\n' + tool['function']['arguments'] + '\\n' + '```' + \
'<｜tool▁call▁end｜>'}}
{%- endif %}{%- endfor %}"""
#: meetkai-functionary-medium-v3.1.jinja (a Llama 3.1 finetune): python_tag beside <function=
FUNCTIONARY_3_1 = """{%- if not tools is defined -%}{%- set tools = none -%}{%- endif -%}
{%- if tools %}{{- "\\nYou have access to the following functions:\\n\\n" }}{%- endif %}
{{ '<|start_header_id|>ipython<|end_header_id|>\\n\\n' + message['content'] + '<|eot_id|>' }}
{%- if tool_call["function"]["name"] == "python" -%}{{ '<|python_tag|>' + tool_call['function']['arguments'] }}
{%- else -%}{{ '<function=' + tool_call['function']['name'] + '>' + tool_call['function']['arguments'] + \
'</function>' }}
{%- endif -%}"""


class TestTemplateMarkers:
    @pytest.mark.parametrize(
        ("template", "markers"),
        [
            (LLAMA_3_3, ("llama3_json_prompt", "python_tag", "tools_var")),
            (LLAMA_3_2, ("llama3_json_prompt", "tools_var")),
            (LLAMA_3_0, ()),
            (MISTRAL_V3, ("tool_calls_token", "tools_var")),
            (MISTRAL_V1, ()),
            (QWEN2_5, ("tool_call_xml", "tools_var")),
            (HERMES_3, ("tool_call_xml", "tools_var")),
            (R1_DISTILL, ()),
            (FUNCTIONARY_3_1, ("function_xml", "python_tag", "tools_var")),
        ],
    )
    def test_real_templates(self, template, markers):
        assert template_markers(template) == markers

    @pytest.mark.parametrize(
        ("template", "names_tools"),
        [
            ("{%- if tools %}", True),
            ("{{-tools|tojson}}", True),
            ("{% for t in tools %}", True),
            ("{{ '<tools></tools>' }}", False),  # the tag in a string is not the variable
            ("{{ message.tool_calls }}", False),
            ("{% if custom_tools is defined %}", False),
            ("{{ kwargs['tools'] }}", False),
            ("Tools are great", False),  # case matters: Jinja names are case-sensitive
            ("", False),
        ],
    )
    def test_the_tools_variable(self, template, names_tools):
        assert ("tools_var" in template_markers(template)) is names_tools

    def test_hostile_text_costs_nothing_special(self):
        assert template_markers("\x00\ufffd" * 50_000 + "[TOOL_CALLS") == ()
        assert template_markers("{{" * 100_000 + "tools") == ("tools_var",)

    def test_template_parser_needs_agreeing_format_markers(self):
        assert template_parser(("python_tag", "llama3_json_prompt", "tools_var")) == (
            "llama3_json", "<|python_tag|>, dictionary of argument name and its value")
        assert template_parser(("tool_calls_token",)) == ("mistral", "[TOOL_CALLS]")
        assert template_parser(("function_xml",)) == ("", "<function=")
        assert template_parser(("tools_var",)) is None
        assert template_parser(("tool_call_xml", "function_xml")) is None  # Qwen3-Coder's XML
        assert template_parser(("no_such_marker", "tool_call_xml")) == ("hermes", "<tool_call>")

    def test_every_implied_parser_is_a_registered_name(self):
        assert {parser for _, parser in TEMPLATE_MARKERS.values()} - {""} <= set(VLLM_PARSERS_BY_VERSION)


class TestTemplateEvidence:
    """choose_tool_parser with the served template's markers (read whole from the GGUF)."""

    @pytest.mark.parametrize(
        ("arch", "template", "parser"),
        [
            ("llama", LLAMA_3_3, "llama3_json"),
            ("llama", LLAMA_3_2, "llama3_json"),
            ("llama", MISTRAL_V3, "mistral"),
            ("mistral", MISTRAL_V3, "mistral"),
            ("llama", HERMES_3, "hermes"),
            ("qwen2", QWEN2_5, "hermes"),
        ],
    )
    def test_the_template_decides_when_no_name_does(self, arch, template, parser):
        choice = choose_tool_parser(arch, "model-q4_k_m", template_markers=template_markers(template))
        assert choice.parser == parser
        assert choice.note.startswith("auto, chat template has ")

    def test_note_names_the_evidence(self):
        choice = choose_tool_parser("llama", "m", template_markers=template_markers(MISTRAL_V3))
        assert choice.note == "auto, chat template has [TOOL_CALLS]: llama"

    @pytest.mark.parametrize("template", [LLAMA_3_0, MISTRAL_V1, R1_DISTILL])
    def test_a_template_that_never_mentions_tools_gets_no_parser(self, template):
        """Llama 3.0 is named like 3.x and Mistral v0.1 like a Mistral, but neither template shows
        the model any tools."""
        for arch, model_id in (("llama", "Meta-Llama-3-8B-Instruct"), ("llama", "Mistral-7B-Instruct-v0.1"),
                               ("qwen3", "qwen3-8b")):
            choice = choose_tool_parser(arch, model_id, template_markers=template_markers(template))
            assert choice.parser == ""
            assert choice.note.startswith("the chat template never mentions tools")

    def test_no_tools_beats_the_settings_table_but_not_a_pin(self):
        markers = template_markers(LLAMA_3_0)
        assert choose_tool_parser("llama", "m", template_markers=markers, table={"llama": "llama3_json"}).parser == ""
        assert choose_tool_parser("llama", "m", template_markers=markers, pin="llama3_json").parser == "llama3_json"

    def test_template_overrides_a_contradicting_name(self):
        """A file named like a Llama 3.1 distill whose template is Mistral's: the template is the
        format the model was trained on, the name only a label."""
        choice = choose_tool_parser("llama", "DeepSeek-R1-Distill-Llama-8B",
                                    template_markers=template_markers(LLAMA_3_3))
        assert choice.parser == "llama3_json"
        assert "over the name rule: a finetune with its own chat format" in choice.note
        choice = choose_tool_parser("llama", "Meta-Llama-3.1-8B", template_markers=template_markers(HERMES_3))
        assert choice.parser == "hermes"

    def test_qwen25_coder_ignores_its_hermes_template(self):
        """vllm-project/vllm#32926: the template asks for <tool_call>, the model answers in code blocks."""
        choice = choose_tool_parser("qwen2", "Qwen2.5-Coder-7B-Instruct", template_markers=template_markers(QWEN2_5))
        assert choice.parser == ""
        assert choice.note.startswith("Qwen2.5-Coder does not emit the hermes format")

    def test_disagreeing_markers_leave_it_to_the_names(self):
        markers = template_markers(FUNCTIONARY_3_1)
        choice = choose_tool_parser("llama", "functionary-medium-v3.1", template_markers=markers)
        assert choice.parser == ""
        assert "neither a name nor the chat template says which" in choice.note
        assert choose_tool_parser("llama", "Meta-Llama-3.1-8B", template_markers=markers).parser == "llama3_json"

    def test_a_format_no_parser_reads_gets_none(self):
        choice = choose_tool_parser("llama", "Meta-Llama-3.1-8B", template_markers=("function_xml", "tools_var"))
        assert choice.parser == ""
        assert choice.note.startswith("auto, chat template has <function= (over the name rule: Llama 3.x JSON "
                                      "format), a format no parser reads on arch llama")

    def test_markers_only_decide_shared_architectures(self):
        """qwen3's table row stands: markers are evidence between formats an arch shares."""
        markers = template_markers(MISTRAL_V3)
        assert choose_tool_parser("qwen3", "qwen3-8b", template_markers=markers).parser == "hermes"
        assert choose_tool_parser("granite", "granite-3.3-8b", template_markers=markers).parser == "granite"

    def test_the_template_does_not_skip_the_vocabulary_check(self):
        choice = choose_tool_parser("llama", "m", vocab_size=32000, template_markers=template_markers(MISTRAL_V3))
        assert choice.parser == ""

    def test_unknown_markers_change_nothing(self):
        for markers in (None, ("tools_var",), ("tools_var", "from_a_newer_swapgen")):
            assert choose_tool_parser("llama", "Mistral-7B-Instruct-v0.3", template_markers=markers).parser == "mistral"
            assert choose_tool_parser("llama", "model-q4_k_m", template_markers=markers).parser == ""
