"""`autogen.metadata.kvcost`: bytes per token as vLLM and llama.cpp allocate them.

Expected values are vLLM's page size per token (`vllm/v1/kv_cache_interface.py`):
full attention = kv_heads × (head_size + head_size_v) × 2 B per layer; MLA = 1 × (kv_lora_rank +
qk_rope_head_dim) × 2 B per layer; mamba / linear-attention layers add nothing per token. Their
state is per sequence, in llama.cpp's f32 element counts (`n_embd_r` + `n_embd_s` per layer).
"""

from __future__ import annotations

import gguf
import pytest

from autogen.errors import ModelError
from autogen.metadata.hf_config import meta_from_hf_config, read_config_json
from autogen.metadata.kvcost import KV_TYPE_BYTES, KvCost, kv_bytes, kv_cost
from autogen.metadata.model_meta import ModelMeta
from tests.shared import HF_CONFIGS

#: The shared real configs. Arithmetic: attention layers × kv heads × (key + value) × 2 B.
REAL_CONFIG_BYTES = {
    "llama-3.1-8b": 131072,  # 32 × 8 × (128 + 128) × 2; head 4096 / 32
    "llama-3.1-70b-instruct-fp8-modelopt": 327680,  # 80 × 8 × (128 + 128) × 2
    "mixtral-8x7b-v0.1": 131072,  # 32 × 8 × (128 + 128) × 2
    "qwen3-8b": 147456,  # 36 × 8 × (128 + 128) × 2; head_dim 128
    "qwen3-32b-fp8": 262144,  # 64 × 8 × (128 + 128) × 2
    "qwen3-30b-a3b": 98304,  # 48 × 4 × (128 + 128) × 2
    "deepseek-v3": 70272,  # MLA: 61 × 1 × (512 + 64) × 2
    "gpt-oss-20b": 49152,  # 24 × 8 × (64 + 64) × 2; sliding layers charged in full
    "nemotron-h-56b-base-8k": 40960,  # 10 '*' of 118 × 8 × (128 + 128) × 2
    "qwen3.5-27b": 65536,  # 16 full_attention of 64 × 4 × (256 + 256) × 2
}


@pytest.mark.parametrize("name, expected", sorted(REAL_CONFIG_BYTES.items()))
def test_real_configs_match_vllm_page_sizes(name, expected):
    path = HF_CONFIGS / name / "config.json"
    assert kv_cost(meta_from_hf_config(read_config_json(str(path)))).bytes_per_token == expected


# Real config shapes trimmed to the keys that matter (source model named on each).
MISTRAL_NEMO = {  # mistralai/Mistral-Nemo-Instruct-2407: head_dim 128 ≠ 5120 / 32 = 160
    "architectures": ["MistralForCausalLM"], "model_type": "mistral", "hidden_size": 5120,
    "head_dim": 128, "num_attention_heads": 32, "num_key_value_heads": 8,
    "num_hidden_layers": 40, "max_position_embeddings": 1024000, "sliding_window": None}
FALCON_7B = {  # tiiuae/falcon-7b: multi_query, one KV head
    "architectures": ["FalconForCausalLM"], "model_type": "falcon", "hidden_size": 4544,
    "num_attention_heads": 71, "num_hidden_layers": 32, "multi_query": True,
    "new_decoder_architecture": False}
FALCON_40B = {  # tiiuae/falcon-40b: new_decoder_architecture, num_kv_heads groups
    "architectures": ["FalconForCausalLM"], "model_type": "falcon", "hidden_size": 8192,
    "num_attention_heads": 128, "num_hidden_layers": 60, "num_kv_heads": 8,
    "multi_query": True, "new_decoder_architecture": True}
CHATGLM3 = {  # THUDM/chatglm3-6b
    "architectures": ["ChatGLMModel"], "model_type": "chatglm", "num_layers": 28,
    "hidden_size": 4096, "num_attention_heads": 32, "kv_channels": 128,
    "multi_query_attention": True, "multi_query_group_num": 2, "seq_length": 8192}
STARCODER = {  # bigcode/starcoder: GPT-BigCode multi_query
    "architectures": ["GPTBigCodeForCausalLM"], "model_type": "gpt_bigcode", "n_embd": 6144,
    "n_head": 48, "n_layer": 40, "n_positions": 8192, "multi_query": True}
JAMBA = {  # ai21labs/Jamba-v0.1: attention on layers 4, 12, 20, 28, mamba-1 elsewhere
    "architectures": ["JambaForCausalLM"], "model_type": "jamba", "hidden_size": 4096,
    "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 32,
    "attn_layer_period": 8, "attn_layer_offset": 4, "max_position_embeddings": 262144,
    "mamba_d_conv": 4, "mamba_d_state": 16, "mamba_expand": 2, "mamba_dt_rank": 256}
LLAVA_15 = {  # llava-hf/llava-1.5-7b-hf: text tower = LlamaConfig defaults
    "architectures": ["LlavaForConditionalGeneration"], "model_type": "llava",
    "text_config": {"architectures": ["LlamaForCausalLM"], "max_position_embeddings": 4096,
                    "model_type": "llama", "vocab_size": 32064},
    "vision_config": {"model_type": "clip_vision_model"}, "torch_dtype": "float16"}
GEMMA2_9B = {  # google/gemma-2-9b-it: every other layer sliding (4096), charged in full
    "architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2", "head_dim": 256,
    "hidden_size": 3584, "num_attention_heads": 16, "num_key_value_heads": 8,
    "num_hidden_layers": 42, "max_position_embeddings": 8192, "sliding_window": 4096}
GEMMA3_4B = {  # google/gemma-3-4b-it: heads, KV heads, head_dim from Gemma3TextConfig defaults
    "architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
    "text_config": {"hidden_size": 2560, "intermediate_size": 10240, "model_type": "gemma3_text",
                    "num_hidden_layers": 34, "sliding_window": 1024},
    "vision_config": {"model_type": "siglip_vision_model"}, "torch_dtype": "bfloat16"}
GEMMA3_27B = {  # google/gemma-3-27b-it
    "architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
    "text_config": {"head_dim": 128, "hidden_size": 5376, "model_type": "gemma3_text",
                    "num_attention_heads": 32, "num_hidden_layers": 62,
                    "num_key_value_heads": 16, "sliding_window": 1024},
    "vision_config": {}}
MAMBA = {  # state-spaces/mamba-2.8b-hf
    "architectures": ["MambaForCausalLM"], "model_type": "mamba", "hidden_size": 2560,
    "num_hidden_layers": 64, "state_size": 16, "expand": 2, "conv_kernel": 4}
_GEMMA4_31B_LAYERS = (["sliding_attention"] * 5 + ["full_attention"]) * 10
GEMMA4_31B = {  # google/gemma-4-31B-it: full layers 4 KV heads of 512 (k_eq_v), sliding 16 of 256
    "architectures": ["Gemma4ForConditionalGeneration"], "model_type": "gemma4",
    "text_config": {"model_type": "gemma4_text", "hidden_size": 5376, "num_hidden_layers": 60,
                    "num_attention_heads": 32, "num_key_value_heads": 16,
                    "num_global_key_value_heads": 4, "head_dim": 256, "global_head_dim": 512,
                    "attention_k_eq_v": True, "sliding_window": 1024,
                    "max_position_embeddings": 262144, "num_kv_shared_layers": 0,
                    "layer_types": _GEMMA4_31B_LAYERS},
    "vision_config": {"model_type": "gemma4_vision"}}
_GEMMA4_E2B_LAYERS = (["sliding_attention"] * 4 + ["full_attention"]) * 7
GEMMA4_E2B = {  # google/gemma-4-E2B-it: one KV head everywhere, 512 wide on the full layers
    "architectures": ["Gemma4ForConditionalGeneration"], "model_type": "gemma4",
    "text_config": {"model_type": "gemma4_text", "hidden_size": 1536, "num_hidden_layers": 35,
                    "num_attention_heads": 8, "num_key_value_heads": 1,
                    "num_global_key_value_heads": None, "head_dim": 256, "global_head_dim": 512,
                    "attention_k_eq_v": False, "sliding_window": 512,
                    "max_position_embeddings": 131072, "layer_types": _GEMMA4_E2B_LAYERS},
    "vision_config": {}}

SHAPE_BYTES = [
    (MISTRAL_NEMO, 163840),  # 40 × 8 × (128 + 128) × 2 (hidden / heads would give 204800)
    (FALCON_7B, 8192),  # 32 × 1 × (64 + 64) × 2; 4544 / 71 = 64
    (FALCON_40B, 122880),  # 60 × 8 × (64 + 64) × 2
    (CHATGLM3, 28672),  # 28 × 2 × (128 + 128) × 2
    (STARCODER, 20480),  # 40 × 1 × (128 + 128) × 2; 6144 / 48 = 128
    (JAMBA, 16384),  # 4 × 8 × (128 + 128) × 2
    (LLAVA_15, 524288),  # 32 × 32 × (128 + 128) × 2 (LlamaConfig: 32 layers, MHA, 4096 / 32)
    (GEMMA2_9B, 344064),  # 42 × 8 × (256 + 256) × 2
    (GEMMA3_4B, 139264),  # 34 × 4 × (256 + 256) × 2
    (GEMMA3_27B, 507904),  # 62 × 16 × (128 + 128) × 2
    (MAMBA, 0),  # attention-free: recurrent state only
    (GEMMA4_31B, 901120),  # (50 × 16 × (256 + 256) + 10 × 4 × (512 + 512)) × 2
    (GEMMA4_E2B, 43008),  # (28 × 1 × (256 + 256) + 7 × 1 × (512 + 512)) × 2
]


@pytest.mark.parametrize("config, expected", SHAPE_BYTES,
                         ids=[c["architectures"][0] + str(b) for c, b in SHAPE_BYTES])
def test_config_shapes(config, expected):
    assert kv_cost(meta_from_hf_config(config)).bytes_per_token == expected


class TestKvCost:
    def test_record_fields_for_a_dense_model(self):
        cost = kv_cost(meta_from_hf_config(JAMBA))
        assert (cost.attention_layers, cost.total_layers, cost.mla) == (4, 32, False)
        assert (cost.key_length, cost.value_length) == (128, 128)
        assert cost.kv_heads[4] == 8 and cost.kv_heads[5] == 0 and len(cost.kv_heads) == 32
        assert cost.note == "16 KiB per token"
        assert cost.derivation == (
            "layers: attn_layer_period 8 offset 4: 4 of 32 layers keep KV",
            "4 layers × 8 KV heads × (key 128 + value 128) × 2 B = 16384 B per token",
            "recurrent state per layer: conv (4 - 1) × (8192 + 2 × 0 × 16) + state 16 × 8192"
            " = 155648 elements",
            "28 recurrent layers × 155648 × 4 B = 17432576 B per sequence (constant in context length)",
        )
        assert cost.state_bytes_per_seq == 17432576

    def test_sliding_window_is_charged_and_said(self):
        cost = kv_cost(meta_from_hf_config(GEMMA2_9B))
        assert cost.derivation[-1].startswith("sliding window 4096: per token those layers count as full attention")

    def test_mla_counts_one_latent_per_layer(self):
        """GGUF-shaped MLA meta (deepseek2): head_count_kv 1, widths are the per-head ones."""
        meta = ModelMeta(source="gguf", arch="deepseek2", block_count=61, head_count_kv=(1,) * 61,
                         key_length=192, value_length=128, kv_lora_rank=512, qk_rope_head_dim=64)
        cost = kv_cost(meta)
        assert (cost.bytes_per_token, cost.mla, cost.key_length, cost.value_length) == (70272, True, 576, 0)
        assert cost.derivation[-1] == "61 layers × (512 + 64) × 2 B = 70272 B per token"

    def test_uneven_heads_sum_per_layer(self):
        meta = ModelMeta(source="gguf", block_count=4, head_count_kv=(0, 8, 0, 4),
                         key_length=64, value_length=32)
        cost = kv_cost(meta)
        assert cost.bytes_per_token == 12 * (64 + 32) * 2
        assert "KV heads per layer: 0, 8, 0, 4" in cost.derivation[1]

    def test_state_space_costs_nothing_per_token_and_says_so(self):
        cost = kv_cost(meta_from_hf_config(MAMBA))
        assert (cost.bytes_per_token, cost.attention_layers, cost.total_layers) == (0, 0, 64)
        assert "no per-token KV cache" in cost.note

    def test_state_space_state_is_charged_per_sequence(self):
        """mamba-2.8b: 64 layers × ((4 − 1) × 5120 + 16 × 5120) f32; vLLM's mamba1 shapes are
        (5120, 3) conv + (5120, 16) temporal, the same element counts."""
        cost = kv_cost(meta_from_hf_config(MAMBA))
        assert cost.state_bytes_per_seq == 64 * (3 * 5120 + 16 * 5120) * 4 == 24903680
        assert cost.derivation[-1] == ("64 recurrent layers × 97280 × 4 B = 24903680 B per"
                                       " sequence (constant in context length)")

    def test_attention_only_models_hold_no_state(self):
        assert kv_cost(meta_from_hf_config(MISTRAL_NEMO)).state_bytes_per_seq == 0

    def test_recurrent_layers_without_sizes_are_said_not_guessed(self):
        meta = ModelMeta(source="hf", block_count=2, head_count_kv=(4, 0), key_length=64,
                         value_length=64, recurrent_layers=1)
        cost = kv_cost(meta)
        assert cost.state_bytes_per_seq == 0
        assert cost.derivation[-1] == "1 recurrent layer: state sizes not given, not charged"

    def test_rwkv_state_is_token_shift_plus_wkv_heads(self):
        """llama.cpp `n_embd_r` = token_shift_count × n_embd, `n_embd_s` = n_embd × head_size."""
        meta = ModelMeta(source="gguf", arch="rwkv6", block_count=24, head_count_kv=(0,) * 24,
                         embedding_length=2048, recurrent_layers=24, wkv_head_size=64,
                         token_shift_count=2)
        assert kv_cost(meta).state_bytes_per_seq == 24 * (2 * 2048 + 2048 * 64) * 4

    def test_gemma4_layers_are_charged_at_their_own_widths(self):
        cost = kv_cost(meta_from_hf_config(GEMMA4_31B))
        assert (cost.key_length, cost.value_length, cost.attention_layers) == (512, 512, 60)
        assert cost.derivation[1:3] == (
            "sliding-window layers: key 256 + value 256 per head; full layers: key 512 + value 512",
            "(50 × 16 × (256 + 256) + 10 × 4 × (512 + 512)) × 2 B = 901120 B per token",
        )

    def test_unmarked_sliding_layers_are_charged_at_the_wider_width(self):
        """key_length_swa without a per-layer pattern: every layer at the full width."""
        meta = ModelMeta(source="gguf", block_count=6, head_count_kv=(2,) * 6, key_length=512,
                         value_length=512, key_length_swa=256, value_length_swa=256)
        cost = kv_cost(meta)
        assert cost.bytes_per_token == 6 * 2 * (512 + 512) * 2
        assert cost.derivation[1] == "sliding layers not marked: every layer charged at the wider key 512 + value 512"

    def test_gemma4_without_layer_types_is_charged_conservatively(self):
        """No layer_types: every layer at 512 wide and at the larger KV head count."""
        text = {k: v for k, v in GEMMA4_31B["text_config"].items() if k != "layer_types"}
        cost = kv_cost(meta_from_hf_config({**GEMMA4_31B, "text_config": text}))
        assert cost.bytes_per_token == 60 * 16 * (512 + 512) * 2
        assert cost.bytes_per_token > kv_cost(meta_from_hf_config(GEMMA4_31B)).bytes_per_token

    @pytest.mark.parametrize("meta, reason", [
        (ModelMeta(source="hf"), "no layer count"),
        (ModelMeta(source="gguf", block_count=4), "no KV head count"),
        (ModelMeta(source="gguf", block_count=4, head_count_kv=(8, 8), key_length=64,
                   value_length=64), "2 KV head entries for 4 layers"),
        (ModelMeta(source="gguf", block_count=2, head_count_kv=(8, -1), key_length=64,
                   value_length=64), "negative KV head count"),
        (ModelMeta(source="gguf", block_count=2, head_count_kv=(8, 8)), "no key/value head width"),
    ])
    def test_undeterminable_cost_is_none_with_a_note(self, meta, reason):
        cost = kv_cost(meta)
        assert cost.bytes_per_token is None
        assert cost.note == f"KV cost unknown: {reason}" and "\n" not in cost.note

    def test_hf_config_without_heads_is_unknown_not_guessed(self):
        cost = kv_cost(meta_from_hf_config({"num_hidden_layers": 4, "hidden_size": 512}))
        assert cost.bytes_per_token is None

    def test_record_is_frozen(self):
        with pytest.raises(AttributeError):
            kv_cost(meta_from_hf_config(JAMBA)).bytes_per_token = 1  # type: ignore[misc]


class TestKvBytes:
    COST = KvCost(131072)  # Llama-3.1-8B

    def test_f16_is_bytes_per_token_times_ctx(self):
        assert kv_bytes(self.COST, 8192) == 131072 * 8192 == 1 << 30

    def test_quantized_cache_uses_block_ratios_exactly(self):
        # 65536 elements per token; q8_0 stores 34 bytes per 32 → 69632 B per token
        assert kv_bytes(self.COST, 1, element_bytes=KV_TYPE_BYTES["q8_0"]) == 69632
        assert kv_bytes(self.COST, 1, element_bytes=KV_TYPE_BYTES["q4_0"]) == 36864
        assert kv_bytes(self.COST, 100, element_bytes=KV_TYPE_BYTES["f32"]) == 26214400

    def test_parallel_sequences_multiply(self):
        assert kv_bytes(self.COST, 4096, parallel=4) == 4 * kv_bytes(self.COST, 4096)

    def test_fractions_round_up(self):
        assert kv_bytes(KvCost(2), 1, element_bytes=KV_TYPE_BYTES["q4_0"]) == 1  # 0.5625 → 1

    def test_zero_context_is_zero_bytes(self):
        assert kv_bytes(self.COST, 0) == 0

    def test_unknown_cost_raises_its_note(self):
        with pytest.raises(ModelError, match="KV cost unknown: no layer count"):
            kv_bytes(kv_cost(ModelMeta(source="hf")), 4096)

    @pytest.mark.parametrize("kwargs", [{"ctx": -1}, {"ctx": 1, "parallel": 0},
                                        {"ctx": 1, "element_bytes": 0.0}])
    def test_nonsense_arguments_are_refused(self, kwargs):
        with pytest.raises(ValueError):
            kv_bytes(self.COST, **kwargs)


def test_kv_type_table_matches_ggml_block_sizes():
    """Each cache type's bytes per element is ggml's block bytes over block elements."""
    for name, per_element in KV_TYPE_BYTES.items():
        qtype = gguf.GGMLQuantizationType[name.upper()]
        elements, nbytes = gguf.GGML_QUANT_SIZES[qtype]
        assert per_element == nbytes / elements, name


# -- GGUF parity: the header llama.cpp's convert_hf_to_gguf.py writes for the same model ----

K = gguf.Keys


def _common(layers: int, ctx: int, embd: int, heads: int, kv_heads) -> dict:
    return {K.LLM.BLOCK_COUNT: layers, K.LLM.CONTEXT_LENGTH: ctx, K.LLM.EMBEDDING_LENGTH: embd,
            K.Attention.HEAD_COUNT: heads, K.Attention.HEAD_COUNT_KV: kv_heads}


def _head_dim(dim: int) -> dict:  # TextModel.set_gguf_parameters: written when head_dim is set
    return {K.Attention.KEY_LENGTH: dim, K.Attention.VALUE_LENGTH: dim}


def _nemotron_pattern() -> str:
    config = read_config_json(str(HF_CONFIGS / "nemotron-h-56b-base-8k" / "config.json"))
    return config["hybrid_override_pattern"]


def _ssm(conv: int, inner: int, state: int, groups: int | None, rank: int) -> dict:
    keys = {"{arch}.ssm.conv_kernel": conv, "{arch}.ssm.inner_size": inner,
            "{arch}.ssm.state_size": state, "{arch}.ssm.time_step_rank": rank}
    return keys if groups is None else {**keys, "{arch}.ssm.group_count": groups}


def _gemma4(layers: int, ctx: int, embd: int, heads: int, kv_heads, pattern: list[str],
            window: int) -> dict:
    """Gemma4Model.set_gguf_parameters: global widths as key_length, head_dim as `_swa`,
    the layer_types as a bool pattern, per-layer KV heads only with num_global_key_value_heads."""
    return {**_common(layers, ctx, embd, heads, kv_heads), **_head_dim(512),
            K.Attention.KEY_LENGTH_SWA: 256, K.Attention.VALUE_LENGTH_SWA: 256,
            K.Attention.SLIDING_WINDOW: window,
            K.Attention.SLIDING_WINDOW_PATTERN: [t == "sliding_attention" for t in pattern]}


# (shared config name or inline config, gguf arch, header keys as the converter writes them)
PARITY = [
    # LlamaModel: no head_dim in config.json, so no key_length; llama.cpp uses 4096 / 32
    ("llama-3.1-8b", "llama", lambda: _common(32, 131072, 4096, 32, 8)),
    # Qwen3Model / Qwen3MoeModel: base keys plus head_dim
    ("qwen3-8b", "qwen3", lambda: {**_common(36, 40960, 4096, 32, 8), **_head_dim(128)}),
    ("qwen3-30b-a3b", "qwen3moe", lambda: {**_common(48, 40960, 2048, 32, 4), **_head_dim(128),
                                           K.LLM.EXPERT_COUNT: 128, K.LLM.EXPERT_USED_COUNT: 8}),
    # DeepseekV2Model (MLA): MQA over the latent; per-head widths under the _mla keys
    ("deepseek-v3", "deepseek2", lambda: {
        **_common(61, 163840, 7168, 128, 1), K.Attention.KEY_LENGTH: 576,
        K.Attention.VALUE_LENGTH: 512, K.Attention.KEY_LENGTH_MLA: 192,
        K.Attention.VALUE_LENGTH_MLA: 128, K.Attention.KV_LORA_RANK: 512,
        K.Rope.DIMENSION_COUNT: 64}),
    # NemotronHModel (GraniteHybridModel): per-layer head_count_kv, 0 off the '*' layers;
    # feed_forward_length per layer, 0 off the '-' layers; d_inner = mamba heads × head dim
    ("nemotron-h-56b-base-8k", "nemotron_h", lambda: {
        **_common(118, 8192, 8192, 64, [8 if c == "*" else 0 for c in _nemotron_pattern()]),
        **_head_dim(128), **_ssm(4, 256 * 64, 256, 8, 256),
        K.LLM.FEED_FORWARD_LENGTH: [32768 if c == "-" else 0 for c in _nemotron_pattern()]}),
    # Qwen3.5: scalar head_count_kv, hybrid layout from full_attention_interval; gated delta
    # net as ssm keys (state = key head dim, groups = key heads, inner = value heads × dim)
    ("qwen3.5-27b", "qwen35", lambda: {**_common(64, 262144, 5120, 24, 4), **_head_dim(256),
                                       K.LLM.FULL_ATTENTION_INTERVAL: 4,
                                       **_ssm(4, 48 * 128, 128, 16, 48)}),
    # GptOssModel: sliding_window written, layers charged in full on both sides
    ("gpt-oss-20b", "gpt-oss", lambda: {**_common(24, 131072, 2880, 64, 8), **_head_dim(64),
                                        K.Attention.SLIDING_WINDOW: 128}),
    # Gemma3Model: the text tower's defaults are written out explicitly
    (GEMMA3_4B, "gemma3", lambda: {**_common(34, 131072, 2560, 8, 4), **_head_dim(256),
                                   K.Attention.SLIDING_WINDOW: 1024}),
    # MistralModel (llama arch): head_dim present, so key_length 128 overrides 5120 / 32
    (MISTRAL_NEMO, "llama", lambda: {**_common(40, 1024000, 5120, 32, 8), **_head_dim(128)}),
    # ChatGLMModel: head_count_kv = multi_query_group_num
    (CHATGLM3, "chatglm", lambda: _common(28, 8192, 4096, 32, 2)),
    # FalconModel: num_kv_heads or n_head_kv or 1
    (FALCON_7B, "falcon", lambda: _common(32, 2048, 4544, 71, 1)),
    # JambaModel: head_count_kv per layer, 0 on mamba layers; mamba-1 ssm keys, no groups
    (JAMBA, "jamba", lambda: {**_common(32, 262144, 4096, 32,
                                        [8 if i % 8 == 4 else 0 for i in range(32)]),
                              **_ssm(4, 2 * 4096, 16, None, 256)}),
    # MambaModel: head_count 0, d_inner = 2 × d_model
    (MAMBA, "mamba", lambda: {**_common(64, 1 << 20, 2560, 0, 0), **_ssm(4, 5120, 16, None, 160)}),
    # Gemma4Model, 31B: num_global_key_value_heads present, so head_count_kv per layer
    (GEMMA4_31B, "gemma4", lambda: _gemma4(60, 262144, 5376, 32,
                                           [16 if t == "sliding_attention" else 4 for t in _GEMMA4_31B_LAYERS],
                                           _GEMMA4_31B_LAYERS, 1024)),
    # Gemma4Model, E2B: no global KV head count, scalar head_count_kv from Gemma3Model
    (GEMMA4_E2B, "gemma4", lambda: _gemma4(35, 131072, 1536, 8, 1, _GEMMA4_E2B_LAYERS, 512)),
]


@pytest.mark.parametrize("source, arch, keys", PARITY,
                         ids=[s if isinstance(s, str) else a for s, a, _ in PARITY])
def test_gguf_header_and_hf_config_agree(tmp_path, source, arch, keys):
    gguf_header = pytest.importorskip("autogen.metadata.gguf_header")
    gguf_meta = pytest.importorskip("autogen.metadata.gguf_meta")
    fixtures = pytest.importorskip("tests.gguf_fixtures")
    if isinstance(source, str):
        path = HF_CONFIGS / source / "config.json"
        config = read_config_json(str(path))
    else:
        config = source
    hf = kv_cost(meta_from_hf_config(config))
    written = fixtures.write_gguf(tmp_path / "model.gguf", arch, kv=keys())
    gg = kv_cost(gguf_meta.meta_from_gguf(gguf_header.read_gguf_header(written)))
    assert hf.bytes_per_token is not None
    assert (gg.bytes_per_token, gg.attention_layers, gg.mla) == (hf.bytes_per_token, hf.attention_layers, hf.mla)
    assert gg.state_bytes_per_seq == hf.state_bytes_per_seq


#: Recurrent state per sequence of the hybrid parity models, f32 (llama.cpp n_embd_r + n_embd_s).
PARITY_STATE = {
    # 54 'M' layers × ((4 − 1) × (16384 + 2 × 8 × 256) + 256 × 16384)
    "nemotron-h-56b-base-8k": 54 * (3 * (16384 + 2 * 8 * 256) + 256 * 16384) * 4,
    # 48 linear layers × ((4 − 1) × (6144 + 2 × 16 × 128) + 128 × 6144); vLLM's gated delta
    # net: conv (10240, 3) + temporal (48, 128, 128), the same element counts
    "qwen3.5-27b": 48 * (3 * (6144 + 2 * 16 * 128) + 128 * 6144) * 4,
}


@pytest.mark.parametrize("name, expected", sorted(PARITY_STATE.items()))
def test_real_hybrid_configs_state_per_sequence(name, expected):
    path = HF_CONFIGS / name / "config.json"
    cost = kv_cost(meta_from_hf_config(read_config_json(str(path))))
    assert cost.state_bytes_per_seq == expected > 0
