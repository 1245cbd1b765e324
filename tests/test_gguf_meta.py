"""GGUF header → ModelMeta: the attention layout normalised per layer, as llama.cpp reads it."""

from __future__ import annotations

import json

import pytest
from gguf import GGUFValueType
from gguf.gguf_writer import GGUFValue
from gguf_fixtures import Q, tensor_nbytes, write_gguf

from autogen.metadata.gguf_header import GGUFError, read_gguf_header
from autogen.metadata.gguf_meta import meta_from_gguf
from autogen.metadata.model_meta import ModelMeta
from tests.shared import HF_CONFIGS


def meta(tmp_path, arch="llama", kv=None, **kwargs) -> ModelMeta:
    path = write_gguf(tmp_path / f"{arch}.gguf", arch, kv=kv, **kwargs)
    return meta_from_gguf(read_gguf_header(path))


def llama_kv(**extra):
    return {"{arch}.block_count": 32, "{arch}.embedding_length": 4096,
            "{arch}.attention.head_count": 32, "{arch}.context_length": 131072,
            "{arch}.feed_forward_length": 14336, **extra}


class TestDenseAttention:
    def test_scalar_kv_heads_are_broadcast_to_every_layer(self, tmp_path):
        m = meta(tmp_path, kv=llama_kv(**{"{arch}.attention.head_count_kv": 8}))
        assert m.source == "gguf"
        assert (m.arch, m.block_count, m.context_length) == ("llama", 32, 131072)
        assert (m.embedding_length, m.feed_forward_length, m.head_count) == (4096, 14336, 32)
        assert m.head_count_kv == (8,) * 32
        assert (m.key_length, m.value_length) == (128, 128)
        assert m.layout_note == "head_count_kv 8 on every layer"

    def test_absent_kv_heads_mean_multi_head_attention(self, tmp_path):
        m = meta(tmp_path, kv=llama_kv())
        assert m.head_count_kv == (32,) * 32
        assert m.layout_note == "head_count_kv absent, head_count 32 on every layer"

    def test_explicit_head_widths_win_over_embedding_over_heads(self, tmp_path):
        m = meta(tmp_path, "gemma3", kv=llama_kv(**{
            "{arch}.attention.key_length": 256, "{arch}.attention.value_length": 256,
            "{arch}.attention.sliding_window": 1024}))
        assert (m.key_length, m.value_length, m.sliding_window) == (256, 256, 1024)

    def test_per_layer_head_counts_take_the_maximum(self, tmp_path):
        """OpenELM-style per-layer heads; kv heads absent follow head_count layer by layer."""
        m = meta(tmp_path, "openelm", kv={
            "{arch}.block_count": 4, "{arch}.embedding_length": 1280,
            "{arch}.attention.head_count": [12, 16, 16, 20],
            "{arch}.feed_forward_length": [768, 1024, 1280, 1536]})
        assert (m.head_count, m.feed_forward_length) == (20, 1536)
        assert m.head_count_kv == (12, 16, 16, 20)
        assert m.layout_note == (
            "head_count_kv absent, head_count per layer: 4 of 4 layers attention")

    def test_per_layer_kv_heads_keep_zero_for_recurrent_layers(self, tmp_path):
        per_layer = [0, 0, 0, 8] * 8
        m = meta(tmp_path, "jamba", kv=llama_kv(**{"{arch}.attention.head_count_kv": per_layer}))
        assert m.head_count_kv == tuple(per_layer)
        assert m.layout_note == "head_count_kv per layer: 8 of 32 layers attention"

    def test_per_layer_array_of_the_wrong_length_is_fitted_to_block_count(self, tmp_path):
        m = meta(tmp_path, "lfm2", kv={"{arch}.block_count": 6,
                                       "{arch}.attention.head_count_kv": [0, 8, 0, 8]})
        assert m.head_count_kv == (0, 8, 0, 8, 8, 8)
        assert "array of 4 fitted to block_count 6" in m.layout_note

    def test_no_head_counts_leave_the_layout_unknown(self, tmp_path):
        m = meta(tmp_path, kv={"{arch}.block_count": 4})
        assert m.head_count_kv == ()
        assert m.layout_note == "no block_count or head counts: attention layout unknown"

    def test_wrongly_typed_values_read_as_absent(self, tmp_path):
        m = meta(tmp_path, kv={"{arch}.block_count": True, "{arch}.context_length": "4096",
                               "{arch}.attention.head_count": GGUFValue(-3, GGUFValueType.INT32)})
        assert (m.block_count, m.context_length, m.head_count) == (0, 0, 0)

    def test_signed_and_64_bit_integers_are_read(self, tmp_path):
        m = meta(tmp_path, kv={
            "{arch}.block_count": GGUFValue(2, GGUFValueType.INT32),
            "{arch}.context_length": GGUFValue(1 << 20, GGUFValueType.UINT64),
            "{arch}.attention.head_count": GGUFValue(4, GGUFValueType.UINT8)})
        assert (m.block_count, m.context_length, m.head_count_kv) == (2, 1 << 20, (4, 4))


class TestMultiHeadLatentAttention:
    def deepseek_kv(self, **extra):
        # As conversion/deepseek.py writes DeepSeek-V3: compressed widths under the plain keys.
        return {"{arch}.block_count": 61, "{arch}.embedding_length": 7168,
                "{arch}.attention.head_count": 128, "{arch}.attention.head_count_kv": 1,
                "{arch}.attention.kv_lora_rank": 512, "{arch}.attention.key_length": 576,
                "{arch}.attention.value_length": 512, "{arch}.attention.key_length_mla": 192,
                "{arch}.attention.value_length_mla": 128, "{arch}.rope.dimension_count": 64,
                "{arch}.expert_count": 256, "{arch}.expert_used_count": 8,
                "{arch}.expert_shared_count": 1, "{arch}.nextn_predict_layers": 1, **extra}

    def test_latent_and_rope_widths_come_from_the_mla_keys(self, tmp_path):
        m = meta(tmp_path, "deepseek2", kv=self.deepseek_kv())
        assert (m.kv_lora_rank, m.qk_rope_head_dim) == (512, 64)
        assert (m.key_length, m.value_length) == (192, 128)
        assert m.head_count_kv == (1,) * 61
        assert (m.expert_count, m.expert_used_count, m.expert_shared_count) == (256, 8, 1)
        assert m.nextn_layers == 1
        assert m.layout_note == ("head_count_kv 1 on every layer; "
                                 "MLA latent 512 + rope 64 per layer")

    def test_rope_width_falls_back_to_key_length_minus_latent(self, tmp_path):
        kv = self.deepseek_kv()
        del kv["{arch}.rope.dimension_count"]
        assert meta(tmp_path, "deepseek2", kv=kv).qk_rope_head_dim == 64

    def test_pre_mla_conversion_is_plain_per_head_attention(self, tmp_path):
        """llama.cpp runs it as per-head K/V; ik_llama.cpp still caches its latent (`latent_rank`)."""
        kv = self.deepseek_kv(**{"{arch}.attention.head_count_kv": 128,
                                 "{arch}.attention.key_length": 192,
                                 "{arch}.attention.value_length": 128})
        del kv["{arch}.attention.key_length_mla"], kv["{arch}.attention.value_length_mla"]
        m = meta(tmp_path, "deepseek2", kv=kv)
        assert (m.kv_lora_rank, m.latent_rank, m.qk_rope_head_dim) == (0, 512, 64)
        assert m.head_count_kv == (128,) * 61
        assert (m.key_length, m.value_length) == (192, 128)
        assert "pre-MLA conversion" in m.layout_note

    def test_deepseek_v3_config_maps_to_the_same_latent(self, tmp_path):
        config_path = HF_CONFIGS / "deepseek-v3" / "config.json"
        c = json.loads(config_path.read_text())
        kv = self.deepseek_kv(**{
            "{arch}.block_count": c["num_hidden_layers"],
            "{arch}.attention.kv_lora_rank": c["kv_lora_rank"],
            "{arch}.attention.key_length": c["kv_lora_rank"] + c["qk_rope_head_dim"],
            "{arch}.attention.value_length": c["kv_lora_rank"],
            "{arch}.rope.dimension_count": c["qk_rope_head_dim"]})
        m = meta(tmp_path, "deepseek2", kv=kv)
        assert m.kv_lora_rank + m.qk_rope_head_dim == 576
        assert sum(1 for h in m.head_count_kv if h) == c["num_hidden_layers"]


class TestHybridAndRecurrent:
    def test_full_attention_interval_keeps_every_nth_layer(self, tmp_path):
        m = meta(tmp_path, "qwen3next", kv={
            "{arch}.block_count": 48, "{arch}.attention.head_count": 16,
            "{arch}.attention.head_count_kv": 2, "{arch}.full_attention_interval": 4})
        assert [i for i, h in enumerate(m.head_count_kv) if h] == list(range(3, 48, 4))
        assert m.layout_note == "full_attention_interval 4: 12 of 48 layers attention"

    def test_absent_interval_uses_llama_cpp_default_for_qwen35(self, tmp_path):
        m = meta(tmp_path, "qwen35", kv={"{arch}.block_count": 8,
                                         "{arch}.attention.head_count": 24,
                                         "{arch}.attention.head_count_kv": 4})
        assert m.head_count_kv == (0, 0, 0, 4, 0, 0, 0, 4)
        assert m.layout_note == ("full_attention_interval absent, llama.cpp default 4: "
                                 "2 of 8 layers attention")

    def test_qwen35_27b_config_gives_the_same_attention_layers(self, tmp_path):
        config_path = HF_CONFIGS / "qwen3.5-27b" / "config.json"
        c = json.loads(config_path.read_text())
        c = c.get("text_config", c)
        m = meta(tmp_path, "qwen35", kv={
            "{arch}.block_count": c["num_hidden_layers"],
            "{arch}.attention.head_count": c["num_attention_heads"],
            "{arch}.attention.head_count_kv": c["num_key_value_heads"],
            "{arch}.attention.key_length": c["head_dim"],
            "{arch}.full_attention_interval": c["full_attention_interval"]})
        attention = [t == "full_attention" for t in c["layer_types"]]
        assert [bool(h) for h in m.head_count_kv] == attention
        assert m.key_length == c["head_dim"]

    def test_per_layer_array_wins_over_the_interval(self, tmp_path):
        m = meta(tmp_path, "qwen3next", kv={
            "{arch}.block_count": 4, "{arch}.attention.head_count_kv": [2, 0, 2, 0],
            "{arch}.full_attention_interval": 4})
        assert m.head_count_kv == (2, 0, 2, 0)

    @pytest.mark.parametrize("arch", ["mamba", "mamba2", "rwkv6", "rwkv7"])
    def test_pure_state_space_models_keep_no_per_token_kv(self, tmp_path, arch):
        m = meta(tmp_path, arch, kv={"{arch}.block_count": 24, "{arch}.embedding_length": 768})
        assert m.head_count_kv == (0,) * 24
        assert m.layout_note == f"recurrent architecture {arch}: no per-token KV"


class TestSlidingWidths:
    """Gemma 4 (conversion/gemma.py `Gemma4Model`): global widths as key_length, head_dim as
    key_length_swa, layer_types as a bool sliding_window_pattern."""

    PATTERN = ([True] * 5 + [False]) * 2

    def test_swa_widths_and_pattern_are_read(self, tmp_path):
        m = meta(tmp_path, "gemma4", kv={
            "{arch}.block_count": 12, "{arch}.attention.head_count": 32,
            "{arch}.attention.head_count_kv": [16 if s else 4 for s in self.PATTERN],
            "{arch}.attention.key_length": 512, "{arch}.attention.value_length": 512,
            "{arch}.attention.key_length_swa": 256, "{arch}.attention.value_length_swa": 256,
            "{arch}.attention.sliding_window_pattern": self.PATTERN})
        assert (m.key_length, m.key_length_swa, m.value_length_swa) == (512, 256, 256)
        assert m.sliding_layers == tuple(self.PATTERN)
        assert m.head_count_kv[:6] == (16, 16, 16, 16, 16, 4)

    @pytest.mark.parametrize("pattern", [[True, False], [1, 0] * 6, "yes"])
    def test_pattern_of_the_wrong_length_or_type_is_dropped(self, tmp_path, pattern):
        m = meta(tmp_path, "gemma4", kv={"{arch}.block_count": 12, "{arch}.attention.head_count": 8,
                                         "{arch}.attention.sliding_window_pattern": pattern})
        assert m.sliding_layers == ()

    def test_models_without_swa_widths_keep_zero(self, tmp_path):
        m = meta(tmp_path, kv=llama_kv())
        assert (m.key_length_swa, m.value_length_swa, m.sliding_layers) == (0, 0, ())


class TestRecurrentState:
    def test_nemotron_h_mlp_layers_hold_no_state(self, tmp_path):
        """llama.cpp: recurrent iff n_head_kv == 0 and n_ff == 0 ('M', not '-' or '*')."""
        pattern = "M-M*-M"
        m = meta(tmp_path, "nemotron_h", kv={
            "{arch}.block_count": 6, "{arch}.attention.head_count": 8,
            "{arch}.attention.head_count_kv": [2 if c == "*" else 0 for c in pattern],
            "{arch}.feed_forward_length": [1024 if c == "-" else 0 for c in pattern],
            "{arch}.ssm.conv_kernel": 4, "{arch}.ssm.inner_size": 1024,
            "{arch}.ssm.state_size": 128, "{arch}.ssm.group_count": 8})
        assert m.recurrent_layers == 3
        assert (m.ssm_conv_kernel, m.ssm_inner_size, m.ssm_state_size, m.ssm_group_count) == (4, 1024, 128, 8)

    def test_zero_head_layers_without_ssm_sizes_are_not_recurrent(self, tmp_path):
        """DeciLM-style no-attention layers: no state keys, so no recurrent layers."""
        m = meta(tmp_path, "deci", kv={"{arch}.block_count": 4, "{arch}.attention.head_count": 8,
                                       "{arch}.attention.head_count_kv": [8, 0, 8, 0]})
        assert m.recurrent_layers == 0

    def test_interval_hybrid_counts_its_linear_layers(self, tmp_path):
        m = meta(tmp_path, "qwen35", kv={
            "{arch}.block_count": 8, "{arch}.attention.head_count_kv": 4,
            "{arch}.ssm.conv_kernel": 4, "{arch}.ssm.inner_size": 4096,
            "{arch}.ssm.state_size": 128, "{arch}.ssm.group_count": 16})
        assert m.recurrent_layers == 6

    def test_rwkv_reads_wkv_head_and_defaults_token_shift_to_two(self, tmp_path):
        m = meta(tmp_path, "rwkv6", kv={"{arch}.block_count": 24, "{arch}.embedding_length": 2048,
                                        "{arch}.wkv.head_size": 64})
        assert (m.recurrent_layers, m.wkv_head_size, m.token_shift_count) == (24, 64, 2)

    def test_lfm2_short_conv_is_a_kernel_over_the_embedding(self, tmp_path):
        """llama.cpp `n_embd_r` = n_embd × (l_cache − 1), no ssm state."""
        m = meta(tmp_path, "lfm2", kv={"{arch}.block_count": 4, "{arch}.embedding_length": 2048,
                                       "{arch}.attention.head_count_kv": [0, 0, 8, 0],
                                       "{arch}.shortconv.l_cache": 3})
        assert (m.recurrent_layers, m.ssm_conv_kernel, m.ssm_inner_size, m.ssm_state_size) == (3, 3, 2048, 0)

    def test_falcon_h1_layers_attend_and_recur(self, tmp_path):
        m = meta(tmp_path, "falcon-h1", kv={"{arch}.block_count": 4, "{arch}.attention.head_count_kv": 2,
                                            "{arch}.ssm.conv_kernel": 4, "{arch}.ssm.inner_size": 1024,
                                            "{arch}.ssm.state_size": 16})
        assert (m.recurrent_layers, m.head_count_kv) == (4, (2,) * 4)


class TestOtherClasses:
    def test_embedding_model_reports_its_pooling(self, tmp_path):
        m = meta(tmp_path, "bert", kv={"{arch}.block_count": 12, "{arch}.pooling_type": 1,
                                       "{arch}.attention.head_count": 12}, vocab=300)
        assert (m.pooling_type, m.vocab_size) == (1, 300)

    def test_clip_projector_has_no_attention_layout(self, tmp_path):
        m = meta(tmp_path, "clip", kv={"general.type": "mmproj",
                                       "clip.vision.block_count": 27,
                                       "clip.vision.embedding_length": 1152})
        assert (m.arch, m.general_type, m.block_count) == ("clip", "mmproj", 0)
        assert m.head_count_kv == ()

    def test_chat_template_presence(self, tmp_path):
        assert meta(tmp_path, chat_template="{{ messages }}").has_chat_template
        assert not meta(tmp_path, "qwen3").has_chat_template

    def test_chat_template_markers_and_whether_the_template_was_read_whole(self, tmp_path):
        """Qwen2.5-7B-Instruct's tool lines, trimmed: evidence for toolparsers."""
        qwen = ('{%- if tools %}{%- for tool in tools %}{{- tool | tojson }}{%- endfor %}'
                '{{- "<tool_call>" }}{%- endif %}')
        m = meta(tmp_path, "qwen2", chat_template=qwen)
        assert (m.chat_template_markers, m.chat_template_scanned) == (("tool_call_xml", "tools_var"), True)
        m = meta(tmp_path, "llama", chat_template="{{ bos_token }}{{ messages }}")
        assert (m.chat_template_markers, m.chat_template_scanned) == ((), True)
        m = meta(tmp_path, "qwen3")
        assert (m.chat_template_markers, m.chat_template_scanned) == ((), False)
        m = meta(tmp_path, "qwen3", chat_template="{{ tools }}" * (1 << 15))  # 352 KiB: not scanned
        assert (m.has_chat_template, m.chat_template_markers, m.chat_template_scanned) == (True, (), False)

    @pytest.mark.parametrize(("names", "kind"), [
        (["model.diffusion_model.input_blocks.0.0.weight"], "sd1"),
        (["model.diffusion_model.input_blocks.0.0.weight",
          "model.diffusion_model.label_emb.0.0.weight"], "sdxl"),
        (["blk.0.attn_q.weight"], "")])
    def test_diffusion_kind_from_tensor_names(self, tmp_path, names, kind):
        tensors = [(n, (320, 320), Q.F16) for n in names]
        assert meta(tmp_path, "sd", tensors=tensors).diffusion_kind == kind

    def test_baked_encoders_from_tensor_names(self, tmp_path):
        unet = ("model.diffusion_model.input_blocks.0.0.weight", (320, 320), Q.F16)
        clip = ("cond_stage_model.transformer.text_model.embeddings.token_embedding.weight", (768, 64), Q.F16)
        assert meta(tmp_path, "sd1", tensors=[unet, clip]).has_baked_encoders
        assert not meta(tmp_path, "sd1", tensors=[unet]).has_baked_encoders


class TestSizesAndLabels:
    def test_tensor_and_expert_bytes_and_dominant_quant(self, tmp_path):
        tensors = [("token_embd.weight", (2048, 32000), Q.Q6_K),
                   ("blk.0.ffn_up_exps.weight", (2048, 768, 128), Q.Q4_K),
                   ("blk.0.ffn_down_exps.weight", (768, 2048, 128), Q.Q4_K),
                   ("blk.0.attn_norm.weight", (2048,), Q.F32)]
        m = meta(tmp_path, "qwen3moe", kv={"general.name": "Synthetic-30B-A3B"},
                 tensors=tensors)
        sizes = [tensor_nbytes(d, t) for _, d, t in tensors]
        assert (m.tensor_bytes, m.expert_tensor_bytes) == (sum(sizes), sizes[1] + sizes[2])
        assert (m.tensor_count, m.quant_label, m.name) == (4, "Q4_K", "Synthetic-30B-A3B")

    def test_widths_fall_back_to_token_embedding_dims(self, tmp_path):
        m = meta(tmp_path, kv={"{arch}.block_count": 2, "{arch}.attention.head_count": 16},
                 tensors=[("token_embd.weight", (2048, 32000), Q.Q8_0)])
        assert (m.embedding_length, m.vocab_size, m.key_length) == (2048, 32000, 128)

    def test_vocab_prefers_the_token_list(self, tmp_path):
        m = meta(tmp_path, kv={"{arch}.block_count": 2}, vocab=500,
                 tensors=[("token_embd.weight", (64, 512), Q.F16)])
        assert m.vocab_size == 500

    def test_no_tensors_no_quant_label(self, tmp_path):
        assert meta(tmp_path).quant_label == ""


class TestHostileValues:
    def test_absurd_block_count_is_a_reason_not_a_huge_tuple(self, tmp_path):
        path = write_gguf(tmp_path / "m.gguf", kv={"{arch}.block_count": 1 << 31,
                                                   "{arch}.attention.head_count": 8})
        with pytest.raises(GGUFError, match=r"^block_count 2147483648 is absurd \(max 65536\)$"):
            meta_from_gguf(read_gguf_header(path))

    def test_largest_plausible_block_count_still_maps(self, tmp_path):
        m = meta(tmp_path, kv={"{arch}.block_count": 1 << 16, "{arch}.attention.head_count": 1})
        assert len(m.head_count_kv) == 1 << 16
