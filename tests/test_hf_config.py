"""`autogen.metadata.hf_config`: reading config.json, the causal-LM test, quant label, metadata mapping."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autogen.errors import ModelError
from autogen.metadata import hf_config, hf_layout
from autogen.metadata.hf_config import (
    hf_model_reason,
    hf_quant,
    meta_from_config_file,
    meta_from_hf_config,
    read_config_json,
)
from autogen.metadata.kvcost import kv_cost
from tests.shared import HF_CONFIGS


def _write(tmp_path: Path, text: str | bytes) -> str:
    path = tmp_path / "config.json"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return str(path)


class TestReadConfigJson:
    def test_infinity_and_nan_tokens_are_accepted(self, tmp_path):
        """Nemotron-H ships `"time_step_limit": [0.0, Infinity]`; Python's json takes it."""
        data = read_config_json(_write(tmp_path, '{"a": [0.0, Infinity, -Infinity], "b": NaN}'))
        assert data["a"][1] == float("inf") and data["a"][2] == float("-inf")
        assert data["b"] != data["b"]

    def test_real_nemotron_config_parses(self):
        path = HF_CONFIGS / "nemotron-h-56b-base-8k" / "config.json"
        assert read_config_json(str(path))["time_step_limit"] == [0.0, float("inf")]

    def test_utf8_bom_is_accepted(self, tmp_path):
        assert read_config_json(_write(tmp_path, b'\xef\xbb\xbf{"model_type": "llama"}')) == {
            "model_type": "llama"}

    def test_broken_json_names_file_and_position(self, tmp_path):
        path = _write(tmp_path, '{"model_type": "llama",\n  "x": }')
        with pytest.raises(ModelError, match=r"config\.json: not valid JSON: .* line 2 column"):
            read_config_json(path)

    @pytest.mark.parametrize("text, kind", [("[1, 2]", "a list"), ('"llama"', "a string"),
                                            ("null", "null"), ("42", "a number")])
    def test_non_object_is_refused(self, tmp_path, text, kind):
        with pytest.raises(ModelError, match=f"expected a JSON object, got {kind}"):
            read_config_json(_write(tmp_path, text))

    def test_missing_file_is_a_model_error(self, tmp_path):
        with pytest.raises(ModelError, match="cannot read"):
            read_config_json(str(tmp_path / "config.json"))

    def test_directory_is_a_model_error(self, tmp_path):
        with pytest.raises(ModelError, match="cannot read"):
            read_config_json(str(tmp_path))

    def test_non_utf8_is_refused(self, tmp_path):
        with pytest.raises(ModelError, match="not UTF-8"):
            read_config_json(_write(tmp_path, b'{"name": "\xff\xfe"}'))

    def test_deep_nesting_is_refused_not_crashed(self, tmp_path):
        with pytest.raises(ModelError, match=r"config\.json: "):
            read_config_json(_write(tmp_path, "[" * 100_000 + "]" * 100_000))

    def test_oversized_file_is_refused_unread(self, tmp_path, monkeypatch):
        monkeypatch.setattr(hf_config, "MAX_CONFIG_BYTES", 64)
        with pytest.raises(ModelError, match="larger than 64 bytes"):
            read_config_json(_write(tmp_path, '{"pad": "' + "x" * 100 + '"}'))


class TestHfModelReason:
    @pytest.mark.parametrize("config", [
        {"architectures": ["LlamaForCausalLM"]},
        {"architectures": ["Gemma3ForConditionalGeneration"], "text_config": {}},
        {"architectures": ["Qwen3_5ForConditionalGeneration"], "vision_config": None},
        # docs/maintainers/discovery.md#hf-folders: the first entry is skipped, the second is decisive
        {"architectures": ["GPT2LMHeadModel", "XForCausalLM"]},
        # ChatGLM3-6B names its base class; vLLM registers it as a text generator
        {"architectures": ["ChatGLMModel"], "model_type": "chatglm"},
        {"architectures": [7, None, "MistralForCausalLM"]},
    ])
    def test_causal_lms_are_accepted(self, config):
        assert hf_model_reason(config) is None

    @pytest.mark.parametrize("config, reason", [
        ({"architectures": ["T5ForConditionalGeneration"], "model_type": "t5"},
         "T5ForConditionalGeneration has no text_config: a seq2seq model"),
        ({"architectures": ["WhisperForConditionalGeneration"]},
         "WhisperForConditionalGeneration has no text_config: a seq2seq model"),
        ({"architectures": ["BertModel"], "model_type": "bert"}, "BertModel is not a causal LM"),
        ({"architectures": ["ModernBertForMaskedLM"]}, "ModernBertForMaskedLM is not a causal LM"),
        ({"architectures": ["DINOv3ViTModel"]}, "DINOv3ViTModel is not a causal LM"),
        ({"architectures": ["RobertaForCausalLM"], "model_type": "roberta"},
         "RobertaForCausalLM is an encoder-only roberta model"),
        ({"architectures": ["BartForCausalLM"], "is_encoder_decoder": True},
         "BartForCausalLM is an encoder-decoder (seq2seq) model"),
        ({}, "config.json names no architectures"),
        ({"architectures": []}, "architectures names no model class"),
        ({"architectures": "LlamaForCausalLM"}, "architectures must be a list (got a string)"),
        ({"architectures": {"a": 1}}, "architectures must be a list (got an object)"),
        ({"architectures": [1, 2.5, None]}, "architectures names no model class"),
        # a text_config that is not an object does not make a wrapper
        ({"architectures": ["XForConditionalGeneration"], "text_config": "llama"},
         "XForConditionalGeneration has no text_config: a seq2seq model"),
    ])
    def test_others_get_a_reason(self, config, reason):
        assert hf_model_reason(config) == reason

    def test_suffix_test_is_case_sensitive(self):
        assert hf_model_reason({"architectures": ["LlamaForCausallm"]}) == "LlamaForCausallm is not a causal LM"


class TestHfQuant:
    @pytest.mark.parametrize("config, label", [
        ({"quantization_config": {"quant_method": " awq "}, "torch_dtype": "float16"}, "AWQ"),
        ({"quantization_config": {"quant_method": "fp8"}}, "FP8"),
        ({"compression_config": {"quant_method": "compressed-tensors"}}, "COMPRESSED-TENSORS"),
        ({"quantization_config": {"quant_method": ""}, "torch_dtype": "bfloat16"}, "BF16"),
        ({"quantization_config": "gptq", "torch_dtype": "BFloat16"}, "BF16"),
        ({"torch_dtype": "float16"}, "F16"),
        ({"dtype": "float32"}, "F32"),
        ({"torch_dtype": "", "dtype": "bfloat16"}, "BF16"),
        ({"torch_dtype": "int8"}, ""),
        ({"torch_dtype": 16}, ""),
        ({"text_config": {"dtype": "bfloat16"}}, ""),  # top level only (docs/maintainers/discovery.md#hf-folders)
        ({}, ""),
    ])
    def test_label(self, config, label):
        assert hf_quant(config) == label


# Llama-3-8B shape of docs/maintainers/discovery.md#configjson--metadata's worked example.
LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
         "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 32,
         "max_position_embeddings": 131072, "torch_dtype": "bfloat16", "vocab_size": 128256,
         "intermediate_size": 14336}


class TestMetaFromHfConfig:
    def test_llama_mapping(self):
        m = meta_from_hf_config(LLAMA)
        assert (m.source, m.arch, m.architectures) == ("hf", "llama", ("LlamaForCausalLM",))
        assert (m.block_count, m.head_count, m.head_count_kv) == (32, 32, (8,) * 32)
        assert (m.key_length, m.value_length, m.context_length) == (128, 128, 131072)
        assert (m.quant_label, m.vocab_size, m.feed_forward_length) == ("BF16", 128256, 14336)
        assert m.layout_note == "" and m.kv_lora_rank == 0

    def test_mha_config_without_kv_heads_uses_heads(self):
        """Seed case: GPT2LMHeadModel + XForCausalLM, 4 layers, 16 heads, hidden 1024."""
        m = meta_from_hf_config({"architectures": ["GPT2LMHeadModel", "XForCausalLM"],
                                 "num_hidden_layers": 4, "num_attention_heads": 16,
                                 "hidden_size": 1024})
        assert m.head_count_kv == (16,) * 4 and m.key_length == 64

    def test_explicit_head_dim_beats_hidden_over_heads(self):
        """Mistral-Nemo: 5120 / 32 = 160, but head_dim says 128."""
        m = meta_from_hf_config({"model_type": "mistral", "hidden_size": 5120, "head_dim": 128,
                                 "num_attention_heads": 32, "num_key_value_heads": 8,
                                 "num_hidden_layers": 40, "sliding_window": None})
        assert (m.key_length, m.value_length, m.sliding_window) == (128, 128, 0)

    def test_hybrid_layer_types_zero_the_linear_layers(self):
        """Seed case: 4 layers, 2 KV heads, head_dim 256, 3× linear + full."""
        m = meta_from_hf_config({"num_hidden_layers": 4, "num_attention_heads": 8,
                                 "num_key_value_heads": 2, "head_dim": 256,
                                 "layer_types": ["linear_attention"] * 3 + ["full_attention"]})
        assert m.head_count_kv == (0, 0, 0, 2)
        assert m.layout_note == "layer_types: 1 of 4 layers keep KV"

    def test_mismatched_layer_types_are_ignored_and_said(self):
        m = meta_from_hf_config({"num_hidden_layers": 4, "num_attention_heads": 8,
                                 "num_key_value_heads": 2, "hidden_size": 512,
                                 "layer_types": ["linear_attention", "full_attention"]})
        assert m.head_count_kv == (2,) * 4
        assert "2 entries for 4 layers: ignored" in m.layout_note

    @pytest.mark.parametrize("entry, keeps", [
        ("full_attention", True), ("sliding_attention", True), ("attention", True),
        ("chunked_attention", True), ("linear_attention", False), ("mamba", False),
        ("conv", False), ("ssm", False), ("recurrent", False), ("moe", False), ("mlp", False),
    ])
    def test_layer_type_names(self, entry, keeps):
        m = meta_from_hf_config({"num_hidden_layers": 1, "num_attention_heads": 4,
                                 "hidden_size": 256, "layer_types": [entry]})
        assert m.head_count_kv == ((4,) if keeps else (0,))

    def test_jamba_period_and_offset(self):
        m = meta_from_hf_config({"model_type": "jamba", "num_hidden_layers": 16,
                                 "num_attention_heads": 32, "num_key_value_heads": 8,
                                 "hidden_size": 4096, "attn_layer_period": 8, "attn_layer_offset": 4})
        assert [i for i, h in enumerate(m.head_count_kv) if h] == [4, 12]

    def test_zamba2_counts_only_hybrid_blocks(self):
        m = meta_from_hf_config({"model_type": "zamba2", "num_hidden_layers": 4,
                                 "num_attention_heads": 32, "num_key_value_heads": 32,
                                 "hidden_size": 2560, "attention_head_dim": 160,
                                 "layers_block_type": ["mamba", "hybrid", "mamba", "mamba"]})
        assert m.head_count_kv == (0, 32, 0, 0) and m.key_length == 160

    def test_pattern_string_marks_attention_with_star(self):
        m = meta_from_hf_config({"model_type": "nemotron_h", "num_hidden_layers": 6,
                                 "num_attention_heads": 8, "num_key_value_heads": 2,
                                 "hidden_size": 512, "hybrid_override_pattern": "M-M*-M"})
        assert m.head_count_kv == (0, 0, 0, 2, 0, 0)

    def test_minimax_attn_type_list_and_bamba_indices(self):
        base = {"num_hidden_layers": 3, "num_attention_heads": 4, "hidden_size": 256}
        assert meta_from_hf_config({**base, "attn_type_list": [0, 1, 0]}).head_count_kv == (0, 4, 0)
        assert meta_from_hf_config({**base, "attn_layer_indices": [2]}).head_count_kv == (0, 0, 4)

    def test_full_attention_interval(self):
        m = meta_from_hf_config({"num_hidden_layers": 8, "num_attention_heads": 4,
                                 "num_key_value_heads": 2, "hidden_size": 256,
                                 "full_attention_interval": 4})
        assert m.head_count_kv == (0, 0, 0, 2, 0, 0, 0, 2)

    def test_state_space_model_has_no_kv_layers(self):
        m = meta_from_hf_config({"architectures": ["MambaForCausalLM"], "model_type": "mamba",
                                 "hidden_size": 2560, "num_hidden_layers": 64})
        assert m.head_count_kv == (0,) * 64 and "state-space" in m.layout_note

    def test_mla_fields_follow_the_gguf_layout(self):
        m = meta_from_hf_config({"model_type": "deepseek_v2", "num_hidden_layers": 27,
                                 "num_attention_heads": 16, "num_key_value_heads": 16,
                                 "hidden_size": 2048, "kv_lora_rank": 512, "qk_rope_head_dim": 64,
                                 "qk_nope_head_dim": 128, "v_head_dim": 128, "q_lora_rank": None})
        assert (m.kv_lora_rank, m.qk_rope_head_dim) == (512, 64)
        assert (m.head_count_kv, m.key_length, m.value_length) == ((1,) * 27, 192, 128)

    def test_kv_lora_rank_outside_mla_families_is_plain_attention(self):
        """MiniCPM3 has kv_lora_rank but vLLM runs it as ordinary attention."""
        m = meta_from_hf_config({"model_type": "minicpm3", "num_hidden_layers": 2,
                                 "num_attention_heads": 4, "hidden_size": 256, "kv_lora_rank": 64})
        assert m.kv_lora_rank == 0 and m.head_count_kv == (4, 4)

    def test_falcon_flags(self):
        falcon7 = {"model_type": "falcon", "hidden_size": 4544, "num_attention_heads": 71,
                   "num_hidden_layers": 32, "multi_query": True, "new_decoder_architecture": False}
        falcon40 = {"model_type": "falcon", "hidden_size": 8192, "num_attention_heads": 128,
                    "num_hidden_layers": 60, "num_kv_heads": 8, "multi_query": True,
                    "new_decoder_architecture": True}
        refinedweb = {"model_type": "RefinedWeb", "n_embd": 8192, "n_head": 128, "n_head_kv": 8,
                      "n_layer": 60}
        assert meta_from_hf_config(falcon7).head_count_kv == (1,) * 32
        assert meta_from_hf_config(falcon40).head_count_kv == (8,) * 60
        m = meta_from_hf_config(refinedweb)
        assert (m.head_count_kv, m.key_length) == ((8,) * 60, 64)

    def test_falcon_without_context_key_gets_no_invented_window(self):
        m = meta_from_hf_config({"model_type": "falcon", "multi_query": True})
        assert (m.block_count, m.head_count, m.key_length) == (32, 71, 64)  # FalconConfig defaults
        assert m.context_length == 0

    def test_defaults_never_override_another_spelling(self):
        """A falcon config written with GPT-style `n_layer` keeps its 60 layers."""
        m = meta_from_hf_config({"model_type": "falcon", "n_layer": 60, "n_head": 128,
                                 "n_embd": 8192, "num_kv_heads": 8, "new_decoder_architecture": True})
        assert (m.block_count, m.head_count, m.embedding_length) == (60, 128, 8192)

    def test_chatglm_keys(self):
        m = meta_from_hf_config({"model_type": "chatglm", "num_layers": 28, "hidden_size": 4096,
                                 "num_attention_heads": 32, "multi_query_attention": True,
                                 "multi_query_group_num": 2, "kv_channels": 128,
                                 "seq_length": 8192, "padded_vocab_size": 65024})
        assert (m.block_count, m.head_count_kv[0], m.key_length) == (28, 2, 128)
        assert (m.context_length, m.vocab_size) == (8192, 65024)

    def test_chatglm_without_grouping_is_mha(self):
        m = meta_from_hf_config({"num_layers": 2, "hidden_size": 256, "num_attention_heads": 4,
                                 "multi_query_attention": False, "multi_query_group_num": 2})
        assert m.head_count_kv == (4, 4)

    def test_smallest_context_key_wins(self):
        m = meta_from_hf_config({**LLAMA, "seq_length": 8192})
        assert m.context_length == 8192

    def test_wrapper_reads_text_tower_with_library_defaults(self):
        """llava-hf/llava-1.5-7b-hf: the text tower names only its context and vocab."""
        m = meta_from_hf_config({"architectures": ["LlavaForConditionalGeneration"],
                                 "model_type": "llava", "torch_dtype": "float16",
                                 "text_config": {"max_position_embeddings": 4096,
                                                 "vocab_size": 32064}, "vision_config": {}})
        assert (m.arch, m.architectures) == ("llava", ("LlavaForConditionalGeneration",))
        assert (m.block_count, m.head_count, m.head_count_kv) == (32, 32, (32,) * 32)
        assert (m.key_length, m.context_length, m.quant_label) == (128, 4096, "F16")

    def test_wrapper_context_fills_a_gap_in_the_tower(self):
        m = meta_from_hf_config({"model_type": "x", "max_position_embeddings": 8192,
                                 "llm_config": {"num_hidden_layers": 2, "num_attention_heads": 4,
                                                "hidden_size": 256}})
        assert (m.block_count, m.context_length) == (2, 8192)

    def test_top_level_layer_count_keeps_the_top_level(self):
        m = meta_from_hf_config({**LLAMA, "text_config": {"num_hidden_layers": 2}})
        assert m.block_count == 32

    def test_use_sliding_window_false_drops_the_window(self):
        m = meta_from_hf_config({**LLAMA, "sliding_window": 4096, "use_sliding_window": False})
        assert m.sliding_window == 0
        assert meta_from_hf_config({**LLAMA, "sliding_window": 4096}).sliding_window == 4096

    def test_integral_float_is_accepted(self):
        assert meta_from_hf_config({**LLAMA, "num_hidden_layers": 32.0}).block_count == 32

    @pytest.mark.parametrize("key, value", [
        ("num_hidden_layers", -1), ("num_hidden_layers", "32"), ("num_hidden_layers", True),
        ("num_hidden_layers", 32.5), ("num_key_value_heads", float("inf")),
        ("max_position_embeddings", float("nan")), ("head_dim", [128, "x"]),
    ])
    def test_impossible_values_name_the_key(self, key, value):
        with pytest.raises(ModelError, match=f"^{key} must be a non-negative integer"):
            meta_from_hf_config({**LLAMA, key: value})

    def test_errors_inside_a_tower_carry_its_prefix(self):
        with pytest.raises(ModelError, match=r"^text_config\.num_attention_heads must be"):
            meta_from_hf_config({"text_config": {"num_hidden_layers": 2, "num_attention_heads": "8"}})

    @pytest.mark.parametrize("extra, message", [
        ({"layer_types": "full_attention"}, "layer_types must be a list of strings"),
        ({"layer_types": [1, 2]}, "layer_types must be a list of strings"),
        ({"attn_type_list": [1, -1]}, "attn_type_list must be a list of non-negative integers"),
        ({"multi_query": "yes"}, "multi_query must be true or false"),
        ({"hybrid_override_pattern": 5}, "hybrid_override_pattern must be a string"),
        ({"model_type": ["llama"]}, "model_type must be a string"),
    ])
    def test_wrong_types_are_model_errors(self, extra, message):
        with pytest.raises(ModelError, match=message):
            meta_from_hf_config({**LLAMA, **extra})

    def test_absurd_layer_count_is_refused_before_allocating(self):
        with pytest.raises(ModelError, match="num_hidden_layers: 1000000 layers"):
            meta_from_hf_config({**LLAMA, "num_hidden_layers": 10**6})

    def test_null_values_count_as_absent(self):
        m = meta_from_hf_config({**LLAMA, "num_key_value_heads": None, "head_dim": None})
        assert (m.head_count_kv[0], m.key_length) == (32, 128)

    def test_expert_counts_and_nextn(self):
        m = meta_from_hf_config({**LLAMA, "n_routed_experts": 256, "num_experts_per_tok": 8,
                                 "n_shared_experts": 1, "num_nextn_predict_layers": 1})
        assert (m.expert_count, m.expert_used_count, m.expert_shared_count, m.nextn_layers) == (256, 8, 1, 1)

    @pytest.mark.parametrize("key, value", [
        ("num_key_value_heads", 1e308), ("num_key_value_heads", 2**31), ("hidden_size", 2.0**40),
        ("num_attention_heads", 10**30), ("max_position_embeddings", 2**40),
        ("max_position_embeddings", 1e300), ("vocab_size", 2**63), ("sliding_window", 2**41),
        ("head_dim", [128, 2**31]), ("n_routed_experts", 2**31),
    ])
    def test_out_of_range_numbers_name_the_key(self, key, value):
        """1e308 passed once and overflowed float arithmetic in the vLLM emitter."""
        with pytest.raises(ModelError, match=f"^{key} must be a non-negative integer below "):
            meta_from_hf_config({**LLAMA, key: value})

    def test_largest_accepted_numbers_still_map(self):
        m = meta_from_hf_config({**LLAMA, "vocab_size": 2**31 - 1, "max_position_embeddings": 2**40 - 1,
                                 "num_key_value_heads": float(2**20)})
        assert (m.vocab_size, m.context_length, m.head_count_kv[0]) == (2**31 - 1, 2**40 - 1, 2**20)

    def test_out_of_range_list_entries_are_refused(self):
        with pytest.raises(ModelError, match=r"^attn_layer_indices must be a list of non-negative integers below"):
            meta_from_hf_config({**LLAMA, "attn_layer_indices": [1, 2**40]})

    def test_architectures_string_is_not_split_into_letters(self):
        assert meta_from_hf_config({**LLAMA, "architectures": "LlamaForCausalLM"}).architectures == ()


class TestConfigFile:
    def test_mapping_errors_name_the_config_file(self, tmp_path):
        path = _write(tmp_path, json.dumps({**LLAMA, "num_key_value_heads": 1e308}))
        with pytest.raises(ModelError, match=rf"^{path}: num_key_value_heads must be a non-negative"):
            meta_from_config_file(path)

    def test_read_errors_name_the_file_once(self, tmp_path):
        path = _write(tmp_path, "{")
        with pytest.raises(ModelError) as info:
            meta_from_config_file(path)
        assert str(info.value).startswith(f"{path}: not valid JSON") and str(info.value).count(path) == 1

    def test_a_good_file_maps(self, tmp_path):
        assert meta_from_config_file(_write(tmp_path, json.dumps(LLAMA))).block_count == 32


_GEMMA4_LAYERS = (["sliding_attention"] * 5 + ["full_attention"]) * 2
GEMMA4_TEXT = {"model_type": "gemma4_text", "hidden_size": 5376, "num_hidden_layers": 12,
               "num_attention_heads": 32, "num_key_value_heads": 16,
               "num_global_key_value_heads": 4, "head_dim": 256, "global_head_dim": 512,
               "attention_k_eq_v": True, "sliding_window": 1024, "layer_types": _GEMMA4_LAYERS}


class TestGemma4:
    """transformers `Gemma4TextConfig` / vLLM `Gemma4DecoderLayer`: full layers use
    global_head_dim and, with attention_k_eq_v, num_global_key_value_heads."""

    def wrap(self, **text):
        return {"architectures": ["Gemma4ForConditionalGeneration"], "model_type": "gemma4",
                "text_config": {**GEMMA4_TEXT, **text}, "vision_config": {}}

    def test_full_layers_get_global_width_and_heads(self):
        m = meta_from_hf_config(self.wrap())
        assert (m.key_length, m.value_length, m.key_length_swa, m.value_length_swa) == (512, 512, 256, 256)
        assert m.head_count_kv[:6] == (16, 16, 16, 16, 16, 4)
        assert m.sliding_layers == tuple(t == "sliding_attention" for t in _GEMMA4_LAYERS)

    def test_global_heads_need_attention_k_eq_v(self):
        assert meta_from_hf_config(self.wrap(attention_k_eq_v=False)).head_count_kv == (16,) * 12

    def test_absent_global_head_dim_defaults_to_512(self):
        text = {k: v for k, v in GEMMA4_TEXT.items() if k != "global_head_dim"}
        m = meta_from_hf_config({"model_type": "gemma4", "text_config": text})
        assert (m.key_length, m.key_length_swa) == (512, 256)

    def test_unmarked_layers_take_the_larger_head_count(self):
        m = meta_from_hf_config(self.wrap(layer_types=None, num_global_key_value_heads=32))
        assert (m.head_count_kv, m.sliding_layers) == ((32,) * 12, ())

    def test_equal_global_width_is_not_a_second_width(self):
        m = meta_from_hf_config(self.wrap(global_head_dim=256))
        assert (m.key_length, m.key_length_swa) == (256, 0)


class TestRecurrentState:
    def test_nemotron_h_sizes_from_mamba_heads(self):
        path = HF_CONFIGS / "nemotron-h-56b-base-8k" / "config.json"
        m = meta_from_hf_config(read_config_json(str(path)))
        assert m.recurrent_layers == 54  # 'M' only: '-' MLP and '*' attention hold no state
        assert (m.ssm_conv_kernel, m.ssm_inner_size, m.ssm_state_size, m.ssm_group_count) == (4, 16384, 256, 8)

    def test_qwen35_gated_delta_net_sizes(self):
        path = HF_CONFIGS / "qwen3.5-27b" / "config.json"
        m = meta_from_hf_config(read_config_json(str(path)))
        assert m.recurrent_layers == 48
        assert (m.ssm_conv_kernel, m.ssm_inner_size, m.ssm_state_size, m.ssm_group_count) == (4, 6144, 128, 16)

    def test_bamba_sizes_from_prefixed_keys(self):
        """ibm-ai-platform/Bamba-9B: d_inner = mamba_expand × hidden; mamba_d_head may be "auto"."""
        m = meta_from_hf_config({"model_type": "bamba", "num_hidden_layers": 4, "hidden_size": 4096,
                                 "num_attention_heads": 32, "num_key_value_heads": 8,
                                 "attn_layer_indices": [2], "mamba_d_conv": 4, "mamba_d_state": 128,
                                 "mamba_expand": 2, "mamba_n_groups": 1, "mamba_n_heads": 128,
                                 "mamba_d_head": "auto"})
        assert m.recurrent_layers == 3
        assert (m.ssm_conv_kernel, m.ssm_inner_size, m.ssm_state_size, m.ssm_group_count) == (4, 8192, 128, 1)

    def test_lfm2_short_conv(self):
        m = meta_from_hf_config({"model_type": "lfm2", "num_hidden_layers": 4, "hidden_size": 2048,
                                 "num_attention_heads": 32, "num_key_value_heads": 8,
                                 "conv_L_cache": 3, "layer_types": ["conv", "conv", "full_attention", "conv"]})
        assert (m.recurrent_layers, m.ssm_conv_kernel, m.ssm_inner_size, m.ssm_state_size) == (3, 3, 2048, 0)

    def test_mlp_and_moe_blocks_are_not_recurrent(self):
        m = meta_from_hf_config({"num_hidden_layers": 4, "num_attention_heads": 4, "hidden_size": 256,
                                 "layers_block_type": ["mamba", "moe", "attention", "mlp"],
                                 "conv_kernel": 4, "ssm_state_size": 16, "mamba_expand": 2})
        assert m.recurrent_layers == 1

    def test_zamba2_and_falcon_h1_recur_on_every_layer(self):
        zamba = meta_from_hf_config({"model_type": "zamba2", "num_hidden_layers": 3, "hidden_size": 256,
                                     "num_attention_heads": 4, "layers_block_type": ["mamba", "hybrid", "mamba"]})
        falcon = meta_from_hf_config({"model_type": "falcon_h1", "num_hidden_layers": 3, "hidden_size": 256,
                                      "num_attention_heads": 4, "mamba_d_ssm": 512})
        assert (zamba.recurrent_layers, falcon.recurrent_layers, falcon.ssm_inner_size) == (3, 3, 512)

    def test_absurd_inner_width_product_is_refused(self):
        with pytest.raises(ModelError, match=r"^SSM inner width 4611686014132420609 \(a product"):
            meta_from_hf_config({"model_type": "nemotron_h", "num_hidden_layers": 1, "hidden_size": 256,
                                 "num_attention_heads": 4, "hybrid_override_pattern": "M",
                                 "mamba_num_heads": 2**31 - 1, "mamba_head_dim": 2**31 - 1})

    def test_attention_only_models_read_no_ssm_keys(self):
        """A stray conv_kernel list (an audio tower's) is never read when nothing recurs."""
        m = meta_from_hf_config({**LLAMA, "conv_kernel": [[3, 3]], "state_size": "x"})
        assert (m.recurrent_layers, m.ssm_conv_kernel) == (0, 0)


def test_library_defaults_table_is_complete():
    """Every defaults row can size a model on its own: layers, heads and a head width."""
    for model_type, _row in hf_config.LIBRARY_DEFAULTS.items():
        m = meta_from_hf_config({"model_type": model_type})
        assert m.block_count > 0 and m.head_count > 0 and m.key_length > 0, model_type
    for wrapper, text_type in hf_config.WRAPPER_TEXT_TYPE.items():
        assert text_type in hf_config.LIBRARY_DEFAULTS, wrapper


@pytest.mark.parametrize("name", sorted(p.name for p in HF_CONFIGS.iterdir()))
def test_every_shared_config_is_a_causal_lm_and_maps(name):
    config = read_config_json(str(HF_CONFIGS / name / "config.json"))
    assert hf_model_reason(config) is None
    m = meta_from_hf_config(config)
    assert m.block_count == len(m.head_count_kv) > 0 and m.context_length > 0
    assert json.dumps(config)  # Infinity survives a round trip for metadata hashing


# Every key the mapping reads, so generated configs hit the real code paths.
READ_KEYS = sorted({
    "architectures", "model_type", "text_config", "llm_config", "language_config",
    "vision_config", "is_encoder_decoder", "quantization_config", "torch_dtype", "dtype",
    "layer_types", "layers_block_type", "hybrid_override_pattern", "attn_type_list",
    "attn_layer_indices", "attn_layer_period", "attn_layer_offset", "full_attention_interval",
    "multi_query", "new_decoder_architecture", "multi_query_attention", "kv_lora_rank",
    "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "sliding_window", "use_sliding_window",
    "global_head_dim", "num_global_key_value_heads", "attention_k_eq_v", "linear_conv_kernel_dim",
    "linear_num_value_heads", "linear_value_head_dim", "linear_key_head_dim", "linear_num_key_heads",
    "conv_L_cache", "mamba_num_heads", "mamba_head_dim", "mamba_d_ssm", "mamba_expand", "expand",
    "intermediate_size", *hf_layout.SSM_CONV_KEYS, *hf_layout.SSM_STATE_KEYS, *hf_layout.SSM_GROUP_KEYS,
    *hf_config.LAYERS_KEYS, *hf_config.HIDDEN_KEYS, *hf_config.HEADS_KEYS,
    *hf_config.KV_HEADS_KEYS, *hf_config.HEAD_DIM_KEYS, *hf_config.CONTEXT_KEYS,
    *hf_config.EXPERT_KEYS, *hf_config.VOCAB_KEYS, *hf_config.NEXTN_KEYS,
})
_scalars = (st.none() | st.booleans() | st.integers(-3, 70) | st.integers(-(2**70), 2**70)
            | st.floats() | st.sampled_from([1e308, 2**31, 2**40, 2.0**31, 2**31 - 1])
            | st.sampled_from(["llama", "mamba", "deepseek_v3", "zamba2", "M*-", "gemma4_text",
                               "falcon_h1", "full_attention", "sliding_attention",
                               "LlamaForCausalLM", "bfloat16"]))
_values = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=5)
                       | st.dictionaries(st.sampled_from(READ_KEYS), inner, max_size=5),
                       max_leaves=25)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(READ_KEYS), _values, max_size=15))
def test_any_config_gives_a_meta_or_a_model_error(config):
    """Hostile values never crash: a reason, a label, a record, or a ModelError."""
    reason = hf_model_reason(config)
    assert reason is None or isinstance(reason, str)
    assert isinstance(hf_quant(config), str)
    try:
        meta = meta_from_hf_config(config)
    except ModelError as e:
        assert str(e)
        return
    counts = (meta.block_count, meta.embedding_length, meta.head_count, meta.key_length,
              meta.value_length, meta.vocab_size, meta.expert_count, meta.ssm_inner_size,
              meta.ssm_state_size, meta.ssm_conv_kernel, *meta.head_count_kv)
    assert all(type(n) is int and 0 <= n < hf_config.MAX_COUNT for n in counts)
    assert all(type(n) is int and 0 <= n < hf_config.MAX_TOKENS for n in (meta.context_length, meta.sliding_window))
    cost = kv_cost(meta)
    assert cost.bytes_per_token is None or cost.bytes_per_token >= 0
    assert cost.state_bytes_per_seq >= 0
