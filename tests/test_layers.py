"""`autogen.metadata.layers`: which cache each layer keeps, one layout for every reader.

The HF side is held to vLLM 0.33's own per-layer specs (`tests/data/vllm_capacity_0.33.json`
records, per model, how many layers `get_kv_cache_spec` gave each spec class and the page
sizes). The GGUF side is the header llama.cpp's convert_hf_to_gguf.py writes for the same model
(the keys of `tests/test_kvcost.py`'s parity table), read by swapgen's own reader: both give
the same layout, family by family, except where the engines read the same model differently
(Llama 4's chunks, Mistral's window), which is asserted as such.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import attrs
import pytest
from gguf_fixtures import write_gguf

from autogen.metadata.gguf_header import read_gguf_header
from autogen.metadata.gguf_meta import meta_from_gguf
from autogen.metadata.hf_config import meta_from_hf_config, read_config_json
from autogen.metadata.kvcost import kv_cost
from autogen.metadata.layers import (
    WINDOWED,
    ChunkedAttention,
    FullAttention,
    HeadWidths,
    LayerLayout,
    MlaAttention,
    SlidingWindow,
    layer_layout,
)
from autogen.metadata.model_meta import ModelMeta
from autogen.sizing.llama_memory import Launch, allocations
from autogen.sizing.vllm_memory import vllm_kv
from tests.shared import HF_CONFIGS
from tests.test_kvcost import GEMMA3_4B, GEMMA4_31B, JAMBA, MAMBA, PARITY, K, _common, _head_dim, _ssm

CAPACITY = {m["name"]: m for m in json.loads((Path(__file__).parent / "data" / "vllm_capacity_0.33.json")
                                             .read_text())["models"]}
#: vLLM's spec class → the layout's kind.
VLLM_KINDS = {"FullAttentionSpec": FullAttention, "SlidingWindowSpec": SlidingWindow,
              "MLAAttentionSpec": MlaAttention}


def kinds(layout: LayerLayout) -> Counter:
    """Layers per kind, recurrent ones as "MambaSpec" (vLLM's name for every recurrent state)."""
    counted = Counter(type(layer).__name__ for layer in layout.attention)
    if layout.state is not None:
        counted["MambaSpec"] = layout.state.layers
    return counted


def from_gguf(tmp_path: Path, arch: str, keys: dict) -> LayerLayout:
    return layer_layout(meta_from_gguf(read_gguf_header(write_gguf(tmp_path / f"{arch}.gguf", arch, kv=keys))))


def config_of(source: str | dict) -> dict:
    return read_config_json(str(HF_CONFIGS / source / "config.json")) if isinstance(source, str) else source


# -- the HF side is vLLM's own ------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(CAPACITY))
def test_every_layer_is_the_kind_vllm_gives_it(name):
    model = CAPACITY[name]
    layout = layer_layout(meta_from_hf_config(model["config"]))
    expected = Counter({VLLM_KINDS[k].__name__ if k in VLLM_KINDS else k: n for k, n in model["layers"].items()})
    assert kinds(layout) == expected


@pytest.mark.parametrize("name", sorted(n for n, m in CAPACITY.items() if not m["mamba_page_real_bytes"]))
def test_a_layers_elements_are_vllms_page_per_token(name):
    """`AttentionSpec.page_size_bytes` = block × kv_heads × (head_size + head_size_v) × 2 B;
    MLA: block × (kv_lora_rank + rope) × 2 B."""
    model = CAPACITY[name]
    layout = layer_layout(meta_from_hf_config(model["config"]))
    assert {layer.elements * 2 * model["block_size"] for layer in layout.attention} == set(model["page_bytes"])


@pytest.mark.parametrize("name", sorted(n for n, m in CAPACITY.items() if m["mamba_page_real_bytes"]))
def test_a_recurrent_layers_elements_are_vllms_mamba_page(name):
    """`MambaSpec.real_page_size_bytes`: the conv window in bf16, the SSM state in f32."""
    state = layer_layout(meta_from_hf_config(CAPACITY[name]["config"])).state
    assert state is not None
    assert state.conv_elements * 2 + state.ssm_elements * 4 == CAPACITY[name]["mamba_page_real_bytes"]


# -- a GGUF and its HF config give the same layout -----------------------------------------------


def _swa_keys(layers: int, ctx: int, embd: int, heads: int, kv_heads: int, head_dim: int, window: int) -> dict:
    return {**_common(layers, ctx, embd, heads, kv_heads), **_head_dim(head_dim), K.Attention.SLIDING_WINDOW: window}


#: Qwen/Qwen3-Next-80B-A3B-Instruct's config.json, trimmed: gated DeltaNet on three of four layers.
QWEN3_NEXT = {
    "architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next", "hidden_size": 2048,
    "num_hidden_layers": 48, "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256,
    "full_attention_interval": 4, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128,
    "linear_num_key_heads": 16, "linear_num_value_heads": 32, "linear_value_head_dim": 128,
    "max_position_embeddings": 262144, "num_experts": 512, "num_experts_per_tok": 10}

#: (config, gguf arch, header keys): `tests/test_kvcost.py`'s parity table, less Gemma 3 4B (its
#: config.json carries no `layer_types`, which vLLM's reading charges as full attention), plus
#: vLLM's own Gemma 2 and Gemma 3 rows and Qwen3-Next.
LAYOUT_PARITY = [
    *((source, arch, keys) for source, arch, keys in PARITY if source is not GEMMA3_4B),
    (CAPACITY["gemma-2-9b"]["config"], "gemma2", lambda: _swa_keys(42, 8192, 3584, 16, 8, 256, 4096)),
    (CAPACITY["gemma-3-12b-text"]["config"], "gemma3", lambda: _swa_keys(48, 131072, 3840, 16, 8, 256, 1024)),
    (QWEN3_NEXT, "qwen3next", lambda: {**_common(48, 262144, 2048, 16, 2), **_head_dim(256),
                                       K.LLM.FULL_ATTENTION_INTERVAL: 4, **_ssm(4, 32 * 128, 128, 16, 32)}),
]


@pytest.mark.parametrize("source, arch, keys", LAYOUT_PARITY,
                         ids=[s if isinstance(s, str) else f"{a}-{s['model_type']}" for s, a, _ in LAYOUT_PARITY])
def test_gguf_and_hf_give_the_same_layout(tmp_path, source, arch, keys):
    hf = layer_layout(meta_from_hf_config(config_of(source)))
    gg = from_gguf(tmp_path, arch, keys())
    assert hf.unknown == gg.unknown == ""
    assert gg.layers == hf.layers
    assert gg.state == hf.state
    assert gg.widths.mixed == hf.widths.mixed


class TestFamilies:
    """Each family's layout, read from the HF config (the GGUF gives the same: above)."""

    def layout(self, source: str | dict) -> LayerLayout:
        return layer_layout(meta_from_hf_config(config_of(source)))

    def test_llama_gqa_is_full_attention_on_every_layer(self):
        layout = self.layout("llama-3.1-8b")
        assert layout.layers == (FullAttention(8, 128, 128),) * 32
        assert (layout.state, layout.window, layout.mla) == (None, 0, None)

    @pytest.mark.parametrize("name, period, window", [("gemma-2-9b", 2, 4096), ("gemma-3-12b-text", 6, 1024)])
    def test_gemma_slides_all_but_every_period_th_layer(self, name, period, window):
        layout = self.layout(CAPACITY[name]["config"])
        slides = [isinstance(layer, SlidingWindow) for layer in layout.layers]
        assert slides == [i % period != period - 1 for i in range(len(slides))]
        assert layout.window == window
        assert {layer.window for layer in layout.layers if isinstance(layer, SlidingWindow)} == {window}

    def test_gpt_oss_alternates_sliding_and_full(self):
        layout = self.layout("gpt-oss-20b")
        assert layout.layers[:2] == (SlidingWindow(8, 64, 64, 128), FullAttention(8, 64, 64))
        assert layout.layers == layout.layers[:2] * 12

    def test_gemma4_layers_keep_their_own_head_widths_and_heads(self):
        """vLLM 0.33's specs for this shape: 50 `SlidingWindowSpec` (16 heads of 256, window
        1024) and 10 `FullAttentionSpec` (4 heads of 512)."""
        layout = self.layout(GEMMA4_31B)
        assert layout.widths == HeadWidths((512, 512), (256, 256), marked=True)
        assert layout.layers[4:6] == (SlidingWindow(16, 256, 256, 1024), FullAttention(4, 512, 512))
        assert Counter(layout.layers) == {SlidingWindow(16, 256, 256, 1024): 50, FullAttention(4, 512, 512): 10}

    def test_gemma4_without_layer_types_takes_the_wider_width_everywhere(self):
        text = {k: v for k, v in GEMMA4_31B["text_config"].items() if k != "layer_types"}
        layout = self.layout({**GEMMA4_31B, "text_config": text})
        assert not layout.widths.marked and layout.widths.mixed
        assert set(layout.layers) == {FullAttention(16, 512, 512)}

    @pytest.mark.parametrize("source, attention, recurrent", [
        ("nemotron-h-56b-base-8k", 10, 54), ("qwen3.5-27b", 16, 48), (QWEN3_NEXT, 12, 36), (JAMBA, 4, 28)])
    def test_hybrids_keep_kv_only_in_their_attention_layers(self, source, attention, recurrent):
        layout = self.layout(source)
        assert len(layout.attention) == attention and layout.state is not None
        assert layout.state.layers == recurrent and layout.state.elements > 0

    @pytest.mark.parametrize("source, page", [(QWEN3_NEXT, 2_146_304), (JAMBA, 573_440), (MAMBA, 358_400)])
    def test_recurrent_elements_are_vllms_mamba_page(self, source, page):
        """vLLM 0.33's `MambaSpec.real_page_size_bytes` for these shapes (each layer's
        `get_kv_cache_spec` on the meta device, as tests/data/record_vllm_capacity.py asks it):
        the conv window in bf16, the state in f32."""
        state = self.layout(source).state
        assert state.conv_elements * 2 + state.ssm_elements * 4 == page

    def test_nemotron_h_mlp_layers_keep_nothing(self):
        """118 layers: 10 attention, 54 mamba, the rest MLP blocks with neither."""
        layout = self.layout("nemotron-h-56b-base-8k")
        assert (layout.blocks, len(layout.attention), layout.state.layers) == (118, 10, 54)

    def test_mamba_keeps_only_state(self):
        layout = self.layout(MAMBA)
        assert layout.attention == () and layout.layers == (None,) * 64
        assert (layout.state.conv_elements, layout.state.ssm_elements) == (3 * 5120, 16 * 5120)

    def test_deepseek_mla_is_one_latent_with_the_per_head_widths_beside_it(self):
        layout = self.layout("deepseek-v3")
        latent = MlaAttention(1, 576, 0, kv_lora_rank=512, rope_dims=64, heads=128, head_key_length=192,
                              head_value_length=128)
        assert layout.layers == (latent,) * 61 and layout.mla == latent
        assert (latent.key_elements, latent.value_elements) == (576, 0)


class TestEnginesReadTheSameModelDifferently:
    """Where the two sources' readers disagree, each layout is its engine's."""

    def test_llama4_gguf_attends_in_8192_token_chunks_on_three_layers_of_four(self, tmp_path):
        """src/models/llama4.cpp: chunked attention with n_swa = 8192 whatever a non-zero window
        key says, on the layers of `load_swa_pattern(ml, 4)`; vLLM 0.33's own specs for the HF
        model chunk the same layers (`ChunkedLocalAttentionSpec` on 0-2, 4-6, …)."""
        keys = {**_common(48, 1 << 20, 5120, 40, 8), **_head_dim(128), K.Attention.SLIDING_WINDOW: 4096}
        layout = from_gguf(tmp_path, "llama4", keys)
        assert layout.layers[:4] == (ChunkedAttention(8, 128, 128, 8192),) * 3 + (FullAttention(8, 128, 128),)
        assert layout.window == 8192
        memory = allocations(meta_from_gguf(read_gguf_header(tmp_path / "llama4.gguf")), Launch(ctx=65536, slots=1))
        assert memory.geometry.swa_cells == 8192 + 512

    def test_llama4_hf_is_full_attention_as_vllm_charges_it(self):
        """vLLM turns the hybrid manager off for chunked local attention and charges every layer
        in full; swapgen's reader does not read `attention_chunk_size`."""
        config = {"architectures": ["Llama4ForCausalLM"], "model_type": "llama4_text", "hidden_size": 5120,
                  "num_hidden_layers": 48, "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128,
                  "attention_chunk_size": 8192, "max_position_embeddings": 10485760}
        assert set(layer_layout(meta_from_hf_config(config)).layers) == {FullAttention(8, 128, 128)}

    def test_mistral_slides_every_layer_in_vllm_not_in_llama_cpp(self, tmp_path):
        hf = layer_layout(meta_from_hf_config(CAPACITY["mistral-7b-v0.1"]["config"]))
        gg = from_gguf(tmp_path, "llama", {**_common(32, 32768, 4096, 32, 8), K.Attention.SLIDING_WINDOW: 4096})
        assert set(hf.layers) == {SlidingWindow(8, 128, 128, 4096)}
        assert set(gg.layers) == {FullAttention(8, 128, 128)}

    def test_vllm_charges_a_ggufs_windows_in_full(self, tmp_path):
        """A GGUF's window is llama.cpp's reading: vLLM's sizer charges its layers as full."""
        gg = meta_from_gguf(read_gguf_header(write_gguf(tmp_path / "g.gguf", "gemma3",
                                                        kv=_swa_keys(48, 131072, 3840, 16, 8, 256, 1024))))
        hf = meta_from_hf_config(CAPACITY["gemma-3-12b-text"]["config"])
        assert kinds(layer_layout(gg)) == kinds(layer_layout(hf)) == {"SlidingWindow": 40, "FullAttention": 8}
        assert (vllm_kv(kv_cost(gg), gg, 1, 4096).sliding, vllm_kv(kv_cost(hf), hf, 1, 4096).sliding) == (0, 40)


#: llama-server b11434's own allocations (`tests/data/llama_alloc_b11434.json`), one loaded record
#: per model: each KV cache it built, with the number of layers in it.
LLAMA_TABLE = {r["model"]: r for r in json.loads((Path(__file__).parent / "data" / "llama_alloc_b11434.json")
                                                 .read_text())["records"] if r["status"] == "loaded"}
NOT_KEYS = {"arch", "model", "file", "description", "file_bytes", "vocab"}


@pytest.mark.parametrize("model", sorted(LLAMA_TABLE))
def test_each_layer_sits_in_the_cache_llama_cpp_gives_it(tmp_path, model):
    """The layers llama.cpp put in its full cache and in its window cache (`llama_kv_cache` logs
    each cache's layer count) are the layout's full and windowed layers, for every family of the
    table: GQA, Gemma 2/3/4, gpt-oss, Phi-3, MLA, the hybrids and Llama 4's chunks."""
    dims = LLAMA_TABLE[model]["gguf"]
    layout = from_gguf(tmp_path, dims["arch"], {f"{{arch}}.{k}": v for k, v in dims.items() if k not in NOT_KEYS})
    logged = Counter()
    for cache in LLAMA_TABLE[model]["kv_caches"]:
        logged["window" if cache["part"] == "swa" else "full"] += cache["layers"]
    assert Counter("window" if isinstance(layer, WINDOWED) else "full" for layer in layout.attention) == logged


class TestRules:
    def meta(self, **kw) -> ModelMeta:
        fields = {"source": "gguf", "arch": "x", "block_count": 4, "head_count": 8, "head_count_kv": (2,) * 4,
                  "key_length": 128, "value_length": 128, **kw}
        return ModelMeta(**fields)

    def test_a_sliding_layers_value_width_defaults_to_the_full_one(self):
        """llama.cpp's loader: `n_embd_head_v_swa = n_embd_head_v_full` unless the key says."""
        layout = layer_layout(self.meta(arch="gemma4", sliding_window=512, key_length_swa=64,
                                        sliding_layers=(True, False) * 2))
        assert layout.layers[:2] == (SlidingWindow(2, 64, 128, 512), FullAttention(2, 128, 128))

    def test_marked_widths_hold_where_no_window_is_kept(self):
        """The widths are the tensors' shapes: a layer marked sliding is narrow even when no
        engine keeps a window for it."""
        layout = layer_layout(self.meta(key_length_swa=64, value_length_swa=64, sliding_layers=(True, False) * 2))
        assert layout.layers[:2] == (FullAttention(2, 64, 64), FullAttention(2, 128, 128))

    def test_layers_without_kv_heads_are_none_even_where_the_pattern_slides(self):
        layout = layer_layout(self.meta(arch="gemma3", sliding_window=1024, head_count_kv=(2, 0, 2, 0)))
        assert layout.layers == (SlidingWindow(2, 128, 128, 1024), None, SlidingWindow(2, 128, 128, 1024), None)
        assert layout.kv_heads == (2, 0, 2, 0)

    def test_an_hf_marking_of_the_wrong_length_slides_nothing(self):
        layout = layer_layout(self.meta(source="hf", sliding_window=512, sliding_layers=(True,) * 3))
        assert layout.window == 0

    @pytest.mark.parametrize("changes, reason", [
        ({"block_count": 0}, "no layer count"), ({"head_count_kv": ()}, "no KV head count"),
        ({"head_count_kv": (2,) * 3}, "3 KV head entries for 4 layers"),
        ({"head_count_kv": (2, -1, 2, 2)}, "negative KV head count"),
        ({"key_length": 0}, "no key/value head width")])
    def test_an_unreadable_layout_says_why(self, changes, reason):
        layout = layer_layout(self.meta(**changes))
        assert layout.unknown == reason
        assert kv_cost(self.meta(**changes)).note == f"KV cost unknown: {reason}"

    def test_attention_free_needs_no_width(self):
        layout = layer_layout(self.meta(head_count_kv=(0,) * 4, key_length=0, value_length=0))
        assert (layout.unknown, layout.attention) == ("", ())

    def test_recurrent_layers_without_sizes_hold_no_elements(self):
        state = layer_layout(self.meta(head_count_kv=(2, 0, 0, 0), recurrent_layers=3)).state
        assert (state.layers, state.elements) == (3, 0)

    def test_rwkv_state_is_token_shift_and_wkv_heads(self):
        state = layer_layout(self.meta(arch="rwkv6", head_count_kv=(0,) * 4, embedding_length=2048,
                                       recurrent_layers=4, wkv_head_size=64, token_shift_count=2)).state
        assert (state.conv_elements, state.ssm_elements) == (2 * 2048, 2048 * 64)

    def test_the_layout_is_frozen(self):
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            layer_layout(self.meta()).blocks = 1  # type: ignore[misc]
