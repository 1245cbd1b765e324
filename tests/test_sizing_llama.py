"""llama-server sizing: context, layers, experts and KV type against independent arithmetic."""

from __future__ import annotations

import math
import re

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autogen.errors import ModelError
from autogen.metadata.kvcost import KV_TYPE_BYTES, KvCost, kv_bytes, kv_cost
from autogen.metadata.model_meta import ModelMeta
from autogen.sizing.llama import (
    BASE_OVERHEAD,
    CTX_STEP,
    FLOAT_KV_TYPES,
    LlamaKnobs,
    fit_ctx,
    launch,
    runtime_bytes,
    size_llama,
)
from autogen.sizing.llama_memory import allocations

GIB = 1 << 30
CUDA = int(0.3 * GIB)


def llama8b(**kw) -> ModelMeta:
    """Llama-3.1-8B shape (docs/maintainers/sizing.md#llama-server-worked-examples, example 1)."""
    base = dict(source="gguf", arch="llama", context_length=131072, block_count=32, embedding_length=4096,
                head_count=32, head_count_kv=(8,) * 32, key_length=128, value_length=128, vocab_size=128256,
                feed_forward_length=14336)
    return ModelMeta(**{**base, **kw})


def qwen3_30b_a3b(**kw) -> ModelMeta:
    base = dict(source="gguf", arch="qwen3moe", context_length=40960, block_count=48, embedding_length=2048,
                head_count=32, head_count_kv=(4,) * 48, key_length=128, value_length=128, vocab_size=151936,
                expert_count=128, expert_used_count=8)
    return ModelMeta(**{**base, **kw})


def deepseek2(**kw) -> ModelMeta:
    """DeepSeek-V3 shape as llama.cpp's deepseek2 GGUF states it: 61 layers, the first 3 dense."""
    base = dict(source="gguf", arch="deepseek2", context_length=163840, block_count=61, embedding_length=7168,
                head_count=128, head_count_kv=(1,) * 61, key_length=192, value_length=128, kv_lora_rank=512,
                qk_rope_head_dim=64, vocab_size=129280, expert_count=256, expert_used_count=8,
                expert_shared_count=1, leading_dense_blocks=3, tensor_bytes=gib(100), expert_tensor_bytes=gib(95))
    return ModelMeta(**{**base, **kw})


DEFAULT_KNOBS = LlamaKnobs()


def engine(meta: ModelMeta, ctx: int, kv_type: str = "f16", knobs: LlamaKnobs = DEFAULT_KNOBS, state: int = 0):
    """llama.cpp's allocations at this launch (held to llama-server's own report in test_llama_memory)."""
    return allocations(meta, launch(knobs, ctx, kv_type), state)


def need(meta: ModelMeta, ctx: int, kv_type: str = "f16", knobs: LlamaKnobs = DEFAULT_KNOBS, state: int = 0) -> int:
    """What grows with the context or stays on the GPU: KV, recurrent state, compute buffer."""
    m = engine(meta, ctx, kv_type, knobs, state)
    return m.kv_total + m.state + m.compute


def fixed(runtime: int) -> int:
    return BASE_OVERHEAD + runtime


def largest(meta: ModelMeta, room: int, kv_type: str = "f16", knobs: LlamaKnobs = DEFAULT_KNOBS,
            top: int | None = None) -> int:
    """Independent scan: the trained length if it fits, else the largest multiple of 4096 that does."""
    top = top or meta.context_length
    if need(meta, top, kv_type, knobs) <= room:
        return top
    ctx = top // 4096 * 4096
    while ctx > 0 and need(meta, ctx, kv_type, knobs) > room:
        ctx -= 4096
    return ctx


def gib(x: float) -> int:
    return int(x * GIB)


def real_vram(meta: ModelMeta, s, kv_total: int, fixed: int) -> int:
    """VRAM llama-server takes with every layer on the GPU and `--n-cpu-moe s.n_cpu_moe`: the
    experts of the MoE layers among the first N leave (llama-arg `--n-cpu-moe`: "the first N
    layers"), dense leading layers have none."""
    moe_layers = meta.block_count - meta.leading_dense_blocks
    moved = max(0, s.n_cpu_moe - meta.leading_dense_blocks)
    experts = int(s.weights * meta.expert_tensor_bytes / meta.tensor_bytes)
    return s.weights - math.ceil(experts * moved / moe_layers) + kv_total + fixed


class TestDense:
    def test_llama8b_gets_the_largest_context_whose_kv_and_compute_fit(self):
        """Llama-3.1-8B (4.583 GB) in 11.5 GB, CUDA: KV 128 KiB per token plus a compute buffer
        whose KQ mask grows with the context → 45056 tokens, all layers."""
        meta = llama8b()
        s = size_llama(meta, kv_cost(meta), size=gib(4.583), budget=gib(11.5), knobs=LlamaKnobs(), runtime=CUDA)
        room = gib(11.5) - gib(4.583) - fixed(CUDA)
        assert largest(meta, room) == 45056
        assert (s.ctx, s.ngl, s.n_cpu_moe, s.kv_type) == (45056, 33, 0, "f16")
        assert s.est_vram == gib(4.583) + fixed(CUDA) + need(meta, 45056) <= gib(11.5)
        assert s.kv_total == 45056 * 131072
        assert s.est_ram == 0
        assert s.full_gpu

    def test_roomy_budget_takes_the_trained_length(self):
        meta = llama8b(context_length=32768)
        s = size_llama(meta, kv_cost(meta), size=gib(4.6), budget=gib(24), knobs=LlamaKnobs(), runtime=CUDA)
        assert s.ctx == 32768 and s.why == "trained length fits on the GPU"

    def test_weights_fit_but_not_the_minimum_context_keeps_speed_first(self):
        """Room for ~10k tokens: stay fully on the GPU at 8192 rather than offload for 32k."""
        meta = llama8b()
        runtime = runtime_bytes("vulkan")
        budget = gib(4.583) + fixed(runtime) + need(meta, 10_000)
        s = size_llama(meta, kv_cost(meta), size=gib(4.583), budget=budget, knobs=LlamaKnobs(kv_type="f16"),
                       runtime=runtime)
        assert (s.ctx, s.ngl) == (8192, 33)
        assert s.est_vram <= budget

    def test_weights_over_budget_offload_layers_for_the_minimum_context(self):
        """Ministral-14B-like: 40 layers, 7.27 GB in 7 GB → ngl from the per-layer size."""
        meta = llama8b(block_count=40, head_count_kv=(8,) * 40, context_length=262144, vocab_size=131072,
                       embedding_length=5120)
        cost = kv_cost(meta)
        size, budget, runtime = gib(7.27), gib(7.0), runtime_bytes("cuda")
        s = size_llama(meta, cost, size=size, budget=budget, knobs=LlamaKnobs(kv_type="q8_0"), runtime=runtime)
        m = engine(meta, 32768, "q8_0")
        per_layer = (size + m.kv_total) / 40
        resident = fixed(runtime) + m.compute
        expected = int((budget - resident) // per_layer)
        assert s.ctx == 32768 and s.ngl == expected < 40
        assert s.est_vram <= budget
        assert s.est_vram + s.est_ram == size + m.kv_total + resident

    def test_sliding_window_layers_are_charged_by_their_window(self):
        """gemma-3-12b shape (48 layers, 8 KV heads, 256/256, window 1024 on 5 of 6 layers): only
        the 8 global layers pay per token, the 40 sliding ones hold 4 × 1024 + 512 cells."""
        meta = ModelMeta(source="gguf", arch="gemma3", context_length=131072, block_count=48,
                         embedding_length=3840, feed_forward_length=15360, head_count=16, head_count_kv=(8,) * 48,
                         key_length=256, value_length=256, sliding_window=1024, vocab_size=262208)
        knobs = LlamaKnobs(sequences=4)
        s = size_llama(meta, kv_cost(meta), size=gib(6.799), budget=gib(16), knobs=knobs, runtime=CUDA)
        room = gib(16) - gib(6.799) - fixed(CUDA)
        assert s.kv_type == "f16" and s.ctx == largest(meta, room, knobs=knobs) >= 65536
        assert s.memory.geometry.swa_cells == 4608
        assert s.memory.kv_swa == 40 * 8 * 512 * 2 * 4608
        assert s.memory.kv == 8 * 8 * 512 * 2 * s.ctx

    def test_tiny_trained_window_is_used_as_is(self):
        meta = llama8b(context_length=2048)
        s = size_llama(meta, kv_cost(meta), size=gib(1), budget=gib(8), knobs=LlamaKnobs(), runtime=CUDA)
        assert s.ctx == 2048

    def test_state_space_model_without_kv_takes_the_trained_length(self):
        meta = llama8b(head_count_kv=(0,) * 32, context_length=65536)
        s = size_llama(meta, KvCost(0), size=gib(3), budget=gib(8), knobs=LlamaKnobs(), runtime=CUDA)
        assert (s.ctx, s.kv_total) == (65536, 0)


class TestMoe:
    def test_qwen3_30b_moves_experts_to_the_cpu_before_giving_up_context(self):
        """docs/maintainers/sizing.md#llama-server-worked-examples, example 3: 17.28 GB MoE in 11.5 GB → q8_0, 40960 tokens,
        experts of N layers on CPU."""
        meta = qwen3_30b_a3b()
        cost = kv_cost(meta)
        size, budget = gib(17.282), gib(11.5)
        s = size_llama(meta, cost, size=size, budget=budget, knobs=LlamaKnobs(), runtime=CUDA)
        assert s.kv_type == "q8_0"  # f16 cannot even hold the weights
        assert s.ctx == 40960
        kv = kv_bytes(cost, 40960, element_bytes=34 / 32)  # q8_0: 32 elements in 34 bytes
        per_layer = int(size * 0.90) / 48
        need = math.ceil((size + kv + fixed(CUDA) - budget) / per_layer)
        assert s.n_cpu_moe in (need, need + 1) and s.ngl == 49
        assert s.est_vram <= budget
        assert s.est_ram == pytest.approx(s.n_cpu_moe * per_layer, abs=2)

    def test_qwen3_30b_short_of_the_trained_length_moves_one_layer_of_experts(self):
        """Whole-GPU f16 room for 39000 tokens (≥ the 32768 minimum → f16, < the trained 40960):
        the experts of one layer (0.32 GB) go to the CPU instead of giving up 4096 tokens."""
        meta = qwen3_30b_a3b()
        cost = kv_cost(meta)
        size = gib(17.28)
        budget = size + fixed(CUDA) + need(meta, 39000)
        assert cost.bytes_per_token == 98304
        s = size_llama(meta, cost, size=size, budget=budget, knobs=LlamaKnobs(), runtime=CUDA)
        per_layer = int(size * 0.90) / 48
        moved = math.ceil((size + need(meta, 40960) + fixed(CUDA) - budget) / per_layer)
        assert moved == 1
        assert (s.ctx, s.kv_type, s.ngl, s.n_cpu_moe) == (40960, "f16", 49, moved)
        assert s.why == "experts to the CPU for ctx 40960"
        assert s.est_vram == size - math.ceil(per_layer) + need(meta, 40960) + fixed(CUDA) <= budget
        assert s.est_ram == math.ceil(per_layer)

    def test_a_dense_model_of_the_same_shape_still_gives_up_context_on_the_gpu(self):
        meta = qwen3_30b_a3b(arch="qwen3", expert_count=0, expert_used_count=0)
        budget = gib(17.28) + fixed(CUDA) + need(meta, 39000)
        s = size_llama(meta, kv_cost(meta), size=gib(17.28), budget=budget, knobs=LlamaKnobs(), runtime=CUDA)
        assert (s.ctx, s.kv_type, s.ngl, s.n_cpu_moe, s.est_ram) == (36864, "f16", 49, 0, 0)
        assert s.why == "largest ctx that fits on the GPU"

    def test_ram_estimate_grows_with_the_experts_moved(self):
        meta = qwen3_30b_a3b()
        runs = [size_llama(meta, kv_cost(meta), size=gib(17.28), budget=gib(b), knobs=LlamaKnobs(), runtime=CUDA)
                for b in (24, 22, 19, 11.5)]
        assert [s.n_cpu_moe for s in runs] == sorted(s.n_cpu_moe for s in runs) and runs[0].n_cpu_moe == 0
        assert [s.est_ram for s in runs] == sorted(s.est_ram for s in runs) and runs[0].est_ram == 0
        assert all(s.ctx == 40960 and s.est_vram <= s.budget for s in runs)

    def test_moe_target_is_65536_and_a_larger_whole_gpu_context_is_kept(self):
        long = qwen3_30b_a3b(context_length=262144)
        cost = kv_cost(long)
        tight = size_llama(long, cost, size=gib(17.28), budget=gib(22), knobs=LlamaKnobs(), runtime=CUDA)
        assert (tight.ctx, tight.ngl) == (65536, 49) and tight.n_cpu_moe > 0
        roomy = size_llama(long, cost, size=gib(17.28), budget=gib(36), knobs=LlamaKnobs(), runtime=CUDA)
        room = gib(36) - gib(17.28) - fixed(CUDA)
        assert roomy.ctx == largest(long, room) > 65536 and roomy.n_cpu_moe == 0

    def test_context_shrinks_only_with_every_expert_on_the_cpu(self):
        """Budget for the non-expert weights + 36864 q8_0 tokens: all 48 layers' experts move,
        every layer stays on the GPU, ctx is the largest that fits under the target."""
        meta = qwen3_30b_a3b()
        cost = kv_cost(meta)
        size = gib(17.28)
        non_expert = size - int(size * 0.90)
        q8 = kv_bytes(cost, 36864 + 2000, element_bytes=34 / 32)  # q8_0: 32 elements in 34 bytes
        budget = non_expert + q8 + fixed(CUDA)
        s = size_llama(meta, cost, size=size, budget=budget, knobs=LlamaKnobs(), runtime=CUDA)
        assert (s.ctx, s.n_cpu_moe, s.ngl, s.kv_type) == (36864, 48, 49, "q8_0")
        assert s.why == "all experts on the CPU, largest ctx that fits, under 40960"
        assert s.est_vram <= budget and s.est_ram == int(size * 0.90)

    def test_expert_share_comes_from_the_tensor_scan_when_present(self):
        meta = qwen3_30b_a3b(tensor_bytes=gib(17), expert_tensor_bytes=gib(8.5))
        s = size_llama(meta, kv_cost(meta), size=gib(17), budget=gib(11.5), knobs=LlamaKnobs(), runtime=CUDA)
        assert "50.0%" in s.notes[0] and "tensor scan" in s.notes[0]
        assert s.est_ram == pytest.approx(s.n_cpu_moe * gib(8.5) / 48, abs=2)

    def test_moe_that_fits_stays_on_the_gpu(self):
        meta = qwen3_30b_a3b()
        s = size_llama(meta, kv_cost(meta), size=gib(17.282), budget=gib(24), knobs=LlamaKnobs(), runtime=CUDA)
        assert (s.n_cpu_moe, s.ngl, s.ctx) == (0, 49, 40960)

    def test_tiny_budget_puts_every_expert_and_some_layers_on_the_cpu(self):
        meta = qwen3_30b_a3b()
        s = size_llama(meta, kv_cost(meta), size=gib(17.282), budget=gib(3), knobs=LlamaKnobs(), runtime=CUDA)
        assert s.n_cpu_moe == 48 and s.ngl < 48
        assert s.est_vram <= gib(3)


class TestLeadingDenseLayers:
    """DeepSeek / Kimi / GLM-MoE: `--n-cpu-moe N` moves the experts of the first N layers, and the
    first `leading_dense_blocks` of them have none."""

    def test_deepseek2_moves_enough_experts_to_really_fit(self):
        meta = deepseek2()
        budget = gib(48)
        s = size_llama(meta, kv_cost(meta), size=gib(100), budget=budget, knobs=LlamaKnobs(), runtime=CUDA)
        resident = fixed(CUDA) + s.compute
        per_moe_layer = int(gib(100) * 0.95) / 58
        moved = math.ceil((gib(100) + s.kv_total + resident - budget) / per_moe_layer)
        assert (s.ctx, s.ngl, s.n_cpu_moe) == (65536, 62, 3 + moved)
        assert s.est_vram == real_vram(meta, s, s.kv_total, resident) <= budget
        fewer = attrs.evolve(s, n_cpu_moe=s.n_cpu_moe - 1)
        assert real_vram(meta, fewer, s.kv_total, resident) > budget  # the fewest that fit
        assert "after 3 dense layers" in s.notes[-2] and "first 3 layers dense" in s.notes[0]

    def test_without_the_leading_layers_the_estimate_would_undercount(self):
        """The bug this guards: pricing 61 expert layers moves too few for the real 58."""
        meta = deepseek2()
        flat = size_llama(deepseek2(leading_dense_blocks=0), kv_cost(meta), size=gib(100), budget=gib(48),
                          knobs=LlamaKnobs(), runtime=CUDA)
        assert flat.est_vram <= gib(48) < real_vram(meta, flat, flat.kv_total, fixed(CUDA) + flat.compute)

    @pytest.mark.parametrize("pin, moved_layers", [(2, 0), (3, 0), (4, 1), (61, 58), (99, 58)])
    def test_a_pinned_n_cpu_moe_moves_only_moe_layers(self, pin, moved_layers):
        meta = deepseek2()
        s = size_llama(meta, kv_cost(meta), size=gib(100), budget=gib(200), knobs=LlamaKnobs(n_cpu_moe=pin),
                       runtime=CUDA)
        assert s.est_ram == math.ceil(int(gib(100) * 0.95) * moved_layers / 58)

    def test_a_tiny_budget_moves_every_expert(self):
        meta = deepseek2()
        s = size_llama(meta, kv_cost(meta), size=gib(100), budget=gib(8), knobs=LlamaKnobs(), runtime=CUDA)
        assert s.n_cpu_moe == 61 and s.est_vram <= gib(8)

    def test_leading_dense_layers_covering_every_layer_are_refused(self):
        meta = deepseek2(leading_dense_blocks=61)
        with pytest.raises(ModelError, match="61 leading dense layers of 61"):
            size_llama(meta, kv_cost(meta), size=gib(100), budget=gib(48), knobs=LlamaKnobs(), runtime=CUDA)


class TestFlashAttentionOff:
    def test_attention_scores_are_charged_per_token_of_context(self):
        """llama-graph.cpp without flash attention: kq = n_kv × n_ubatch × n_head f32, and an
        f32 mask: 512 × (32 × 4 + 4) bytes of compute per token of context on top of the KV."""
        meta = llama8b()
        knobs = LlamaKnobs(flash_attn="off")
        s = size_llama(meta, kv_cost(meta), size=gib(4.583), budget=gib(11.5), knobs=knobs, runtime=CUDA)
        room = gib(11.5) - gib(4.583) - fixed(CUDA)
        assert s.ctx == largest(meta, room, knobs=knobs) == 28672
        on = engine(meta, s.ctx)
        assert s.compute > on.compute + s.ctx * 512 * (32 * 4 + 4 - 2) - on.compute  # scores and an f32 mask
        assert s.est_vram == gib(4.583) + need(meta, s.ctx, knobs=knobs) + fixed(CUDA) <= gib(11.5)
        assert any("scores" in n for n in s.notes)

    @pytest.mark.parametrize("fa", [None, "on", "auto"])
    def test_flash_attention_on_or_auto_charges_no_scores(self, fa):
        meta = llama8b()
        s = size_llama(meta, kv_cost(meta), size=gib(4.583), budget=gib(11.5), knobs=LlamaKnobs(flash_attn=fa),
                       runtime=CUDA)
        assert s.ctx == 45056 and "scores" not in "\n".join(s.notes)

    def test_a_pinned_context_with_flash_attention_off_offloads_layers_for_the_scores(self):
        meta = llama8b()
        on = size_llama(meta, kv_cost(meta), size=gib(4.583), budget=gib(11.5), knobs=LlamaKnobs(ctx=40960),
                        runtime=CUDA)
        off = size_llama(meta, kv_cost(meta), size=gib(4.583), budget=gib(11.5),
                         knobs=LlamaKnobs(ctx=40960, flash_attn="off"), runtime=CUDA)
        assert on.ngl == 33 and off.ngl < 33 and off.est_vram <= gib(11.5)


class TestRecurrentState:
    def cost(self, meta: ModelMeta, per_seq: int) -> KvCost:
        return attrs.evolve(kv_cost(meta), state_bytes_per_seq=per_seq)

    @pytest.mark.parametrize("knobs, seqs", [(LlamaKnobs(sequences=4), 4), (LlamaKnobs(parallel=2), 2),
                                             (LlamaKnobs(), 1)])
    def test_state_is_charged_once_per_sequence(self, knobs, seqs):
        meta = llama8b(head_count_kv=(8, 0, 0, 0) * 8)
        cost = self.cost(meta, gib(0.25))
        s = size_llama(meta, cost, size=gib(4.583), budget=gib(11.5), knobs=knobs, runtime=CUDA)
        assert s.state == seqs * gib(0.25)
        assert s.est_vram == gib(4.583) + s.kv_total + fixed(CUDA) + s.compute + s.state <= gib(11.5)
        assert f"recurrent state {seqs * 0.25:.2f} GiB: {seqs} cell{'s' if seqs > 1 else ''} × " in "\n".join(s.notes)

    def test_state_that_fills_the_budget_is_refused(self):
        meta = llama8b()
        with pytest.raises(ModelError, match="does not cover"):
            size_llama(meta, self.cost(meta, gib(3)), size=gib(4), budget=gib(12), knobs=LlamaKnobs(sequences=4),
                       runtime=CUDA)


def test_unquantized_cache_types_come_from_the_one_size_table():
    assert {"f32", "f16", "bf16"} == FLOAT_KV_TYPES and set(KV_TYPE_BYTES) > FLOAT_KV_TYPES


class TestKnobs:
    def test_pinned_ctx_is_used_verbatim(self):
        meta = llama8b()
        s = size_llama(meta, kv_cost(meta), size=gib(4.583), budget=gib(11.5), knobs=LlamaKnobs(ctx=5000),
                       runtime=CUDA)
        assert s.ctx == 5000 and s.why == "ctx pinned" and s.ctx_total == 5000

    def test_pinned_ctx_too_large_offloads_layers(self):
        meta = llama8b()
        s = size_llama(meta, kv_cost(meta), size=gib(4.583), budget=gib(11.5),
                       knobs=LlamaKnobs(ctx=131072, kv_type="f16"), runtime=CUDA)
        assert s.ctx == 131072 and s.ngl < 32 and s.est_vram <= gib(11.5)
        assert s.why.startswith("ctx pinned;")

    def test_parallel_multiplies_the_kv_cost(self):
        meta = llama8b()
        one = size_llama(meta, kv_cost(meta), size=gib(4.583), budget=gib(11.5), knobs=LlamaKnobs(ctx=8192),
                         runtime=CUDA)
        two = size_llama(meta, kv_cost(meta), size=gib(4.583), budget=gib(11.5),
                         knobs=LlamaKnobs(ctx=8192, parallel=2), runtime=CUDA)
        assert two.kv_total == 2 * one.kv_total and two.ctx_total == 16384
        auto = size_llama(meta, kv_cost(meta), size=gib(4.583), budget=gib(11.5),
                          knobs=LlamaKnobs(parallel=2, kv_type="f16"), runtime=CUDA)
        assert auto.ctx == 20480  # per slot: half of 47594 tokens, floored to 4096
        assert auto.est_vram <= gib(11.5)

    def test_kv_type_f16_when_the_minimum_context_fits_else_q8_0(self):
        """docs/maintainers/sizing.md#llama-server-worked-examples, example 2: 32k of f16 fits → f16; 16k → q8_0."""
        meta = llama8b()
        cost = kv_cost(meta)
        base = gib(8) + fixed(CUDA)
        roomy = size_llama(meta, cost, size=gib(8), budget=base + need(meta, 32768), knobs=LlamaKnobs(), runtime=CUDA)
        tight = size_llama(meta, cost, size=gib(8), budget=base + need(meta, 16384), knobs=LlamaKnobs(), runtime=CUDA)
        pinned = size_llama(meta, cost, size=gib(8), budget=base + need(meta, 16384),
                            knobs=LlamaKnobs(kv_type="q5_1"), runtime=CUDA)
        assert (roomy.kv_type, tight.kv_type, pinned.kv_type) == ("f16", "q8_0", "q5_1")
        assert roomy.ctx == 32768
        assert tight.kv_bytes_per_token == 131072 * 34 // 64

    def test_flash_attention_off_keeps_an_unquantized_cache(self):
        meta = llama8b()
        s = size_llama(meta, kv_cost(meta), size=gib(8), budget=gib(9.5), knobs=LlamaKnobs(flash_attn="off"),
                       runtime=CUDA)
        assert s.kv_type == "f16"

    def test_quantized_cache_pin_with_flash_attention_off_is_refused(self):
        meta = llama8b()
        with pytest.raises(ModelError, match="needs flash attention"):
            size_llama(meta, kv_cost(meta), size=gib(8), budget=gib(12),
                       knobs=LlamaKnobs(kv_type="q4_0", flash_attn="off"), runtime=CUDA)

    def test_pinned_ngl_is_repriced(self):
        meta = llama8b()
        s = size_llama(meta, kv_cost(meta), size=gib(4.583), budget=gib(11.5), knobs=LlamaKnobs(ngl=16),
                       runtime=CUDA)
        assert s.ngl == 16 and s.est_ram > 0


class TestRefusals:
    def test_missing_block_count_is_a_reason_not_a_guess(self):
        meta = llama8b(block_count=0)
        with pytest.raises(ModelError, match="block_count"):
            size_llama(meta, kv_cost(meta), size=gib(4), budget=gib(8), knobs=LlamaKnobs(), runtime=CUDA)

    def test_unknown_kv_cost_is_a_reason_not_a_guess(self):
        with pytest.raises(ModelError, match=r"KV cache cost unknown.*no head dims"):
            size_llama(llama8b(), KvCost(None, note="no head dims"), size=gib(4), budget=gib(8),
                       knobs=LlamaKnobs(), runtime=CUDA)

    def test_budget_below_the_fixed_overhead_is_refused(self):
        with pytest.raises(ModelError, match="does not cover"):
            size_llama(llama8b(), kv_cost(llama8b()), size=gib(4), budget=gib(0.5), knobs=LlamaKnobs(),
                       runtime=CUDA)


def test_fit_ctx_rounds_to_steps_but_keeps_the_ceiling():
    assert fit_ctx(46826, 131072) == 45056
    assert fit_ctx(200000, 40960) == 40960
    assert fit_ctx(200000, 32000) == 32000
    assert fit_ctx(3000, 131072) == 3000 < CTX_STEP


@settings(max_examples=200, deadline=None)
@given(size=st.floats(0.2, 80), budget=st.floats(1.6, 96), blocks=st.integers(1, 96),
       kv_heads=st.integers(1, 16), trained=st.sampled_from([2048, 8192, 32768, 131072, 1048576]),
       moe=st.booleans(), parallel=st.integers(1, 4), leading=st.integers(0, 3),
       fa=st.sampled_from([None, "off"]), state=st.integers(0, 1 << 28), auto=st.booleans())
def test_estimate_never_exceeds_the_budget(size, budget, blocks, kv_heads, trained, moe, parallel, leading, fa,
                                           state, auto):
    meta = ModelMeta(source="gguf", arch="x", context_length=trained, block_count=blocks, embedding_length=4096,
                     head_count=32, head_count_kv=(kv_heads,) * blocks, key_length=128, value_length=128,
                     vocab_size=151936, expert_count=64 if moe else 0, leading_dense_blocks=leading if moe else 0)
    cost = attrs.evolve(kv_cost(meta), state_bytes_per_seq=state)
    knobs = LlamaKnobs(parallel=parallel, flash_attn=fa, sequences=4 if auto else None)
    try:
        s = size_llama(meta, cost, size=gib(size), budget=gib(budget), knobs=knobs, runtime=CUDA)
    except ModelError:
        return
    assert s.est_vram <= gib(budget)
    assert s.state == state * (4 if auto else parallel)
    assert 0 < s.ctx <= trained
    assert s.kv_total == engine(meta, s.ctx, s.kv_type, knobs).kv_total


@settings(max_examples=150, deadline=None)
@given(size=st.floats(0.5, 80), budget=st.floats(1.6, 96), blocks=st.integers(1, 96),
       trained=st.sampled_from([8192, 40960, 131072, 262144]), parallel=st.integers(1, 3))
def test_moe_keeps_at_least_the_whole_gpu_context_and_moves_the_fewest_experts(size, budget, blocks, trained,
                                                                              parallel):
    dense = ModelMeta(source="gguf", arch="x", context_length=trained, block_count=blocks, embedding_length=4096,
                      head_count=32, head_count_kv=(4,) * blocks, key_length=128, value_length=128,
                      vocab_size=151936)
    moe = attrs.evolve(dense, expert_count=64)
    args = dict(size=gib(size), budget=gib(budget), knobs=LlamaKnobs(parallel=parallel), runtime=CUDA)
    try:
        d = size_llama(dense, kv_cost(dense), **args)
        m = size_llama(moe, kv_cost(moe), **args)
    except ModelError:
        return
    if d.full_gpu:
        assert m.ctx >= d.ctx
    if m.n_cpu_moe and m.ngl > m.blocks:  # one layer's experts fewer would not fit
        assert m.est_vram + m.est_ram / m.n_cpu_moe > m.budget - 2
    assert m.est_vram <= m.budget


class TestEveryReasonIsTrue:
    """Each printed reason states arithmetic this test recomputes from llama.cpp's allocations."""

    def test_a_ctx_pinned_above_the_trained_length_keeps_f16_when_it_fits(self):
        """Qwen3-30B-A3B trains 40960 tokens; a pinned 131072 at f16 fits a 48 GB budget."""
        meta = qwen3_30b_a3b()
        s = size_llama(meta, kv_cost(meta), size=gib(17.3), budget=gib(48), knobs=LlamaKnobs(ctx=131072), runtime=CUDA)
        assert s.kv_type == "f16" and s.ctx == 131072
        assert s.notes[1].startswith("KV type f16: the pinned ctx 131072 needs ")

    def test_a_ctx_pinned_above_the_trained_length_quantizes_only_when_f16_does_not_fit(self):
        meta = qwen3_30b_a3b()
        room = need(meta, 131072) - gib(0.5)
        s = size_llama(meta, kv_cost(meta), size=gib(17.3), budget=gib(17.3) + fixed(CUDA) + room,
                       knobs=LlamaKnobs(ctx=131072), runtime=CUDA)
        assert s.kv_type == "q8_0" and "only" in s.notes[1]

    @pytest.mark.parametrize("meta", [llama8b(), qwen3_30b_a3b(), llama8b(context_length=8192)],
                             ids=["llama8b", "qwen3moe", "short-trained"])
    @pytest.mark.parametrize("budget_gb", [6, 9, 11.5, 16, 24, 48])
    @pytest.mark.parametrize("pin", [None, 4096, 65536, 131072])
    def test_the_kv_type_reason_recomputes(self, meta, budget_gb, pin):
        size, budget = gib(4.6 if meta.expert_count == 0 else 17.3), gib(budget_gb)
        try:
            s = size_llama(meta, kv_cost(meta), size=size, budget=budget, knobs=LlamaKnobs(ctx=pin), runtime=CUDA)
        except ModelError:
            return
        room = budget - size - fixed(CUDA)
        note = s.notes[1]
        if m := re.fullmatch(r"KV type (f16|q8_0): the pinned ctx (\d+) needs ([\d.]+) GiB at f16 \(KV, state, "
                             r"compute\), (?:only )?([\d.]+) GiB is free beside the weights", note):
            kv_type, ctx, needed, free = m.group(1), int(m.group(2)), float(m.group(3)), float(m.group(4))
            assert ctx == pin and needed == round(need(meta, ctx) / GIB, 2) and free == round(room / GIB, 2)
            assert (kv_type == "f16") == (need(meta, ctx) <= room)
        elif m := re.fullmatch(r"KV type q8_0: the weights and fixed charges are ([\d.]+) GiB over the budget "
                               r"already, no room on the GPU for a cache at f16", note):
            assert room <= 0 and float(m.group(1)) == round(-room / GIB, 2)
        elif m := re.fullmatch(r"f16 KV: ([\d,]+) tokens fit(?:; ([\d,]+) would need ([\d.]+) GiB of ([\d.]+) GiB)?",
                               note):
            fits, wanted = int(m.group(1).replace(",", "")), min(32768, meta.context_length)
            top = min(meta.context_length, 1 << 20)
            assert pin is None and need(meta, fits) <= room and fits >= wanted
            assert fits == top or need(meta, fits + 1) > room
            if m.group(2):  # what the trained length would take of the budget
                assert int(m.group(2).replace(",", "")) == top and float(m.group(4)) == round(budget / GIB, 2)
                assert float(m.group(3)) == round((need(meta, top) + budget - room) / GIB, 2)
            else:
                assert fits == top
        elif m := re.fullmatch(r"q8_0 KV: at f16 only ([\d,]+) tokens fit; ([\d,]+) would need ([\d.]+) GiB of "
                               r"([\d.]+) GiB", note):
            fits, wanted = int(m.group(1).replace(",", "")), int(m.group(2).replace(",", ""))
            assert fits < wanted and (fits == 0 or need(meta, fits) <= room) and need(meta, fits + 1) > room
            assert pin is None and wanted == min(32768, meta.context_length)
            assert float(m.group(3)) == round((need(meta, wanted) + budget - room) / GIB, 2)
            assert float(m.group(4)) == round(budget / GIB, 2)
        else:
            pytest.fail(f"a KV type reason this test cannot recompute: {note!r}")
        # the context's reason
        trained = meta.context_length
        ctx_line = re.fullmatch(rf"ctx {s.ctx}: (.+) \(trained {trained}\)", s.notes[2])
        assert ctx_line, s.notes[2]
        why, per_layer = ctx_line.group(1), s.kv_total
        if why == "trained length fits on the GPU":
            assert s.ctx == trained and need(meta, s.ctx, s.kv_type) <= room
        elif why == "largest ctx that fits on the GPU" or why.startswith("largest ctx that fits on the GPU, under"):
            assert need(meta, s.ctx, s.kv_type) <= room < need(meta, s.ctx + CTX_STEP, s.kv_type)
        elif why.startswith("layers offloaded for ctx "):
            assert s.ctx == int(why.rsplit(" ", 1)[1]) and s.ngl <= meta.block_count
        # the placement's
        place = s.notes[-2].removeprefix("placement: ")
        if m := re.fullmatch(r"all (\d+) layers on the GPU", place):
            assert int(m.group(1)) == meta.block_count and s.ngl == meta.block_count + 1 and s.est_vram <= budget
        elif m := re.fullmatch(r"(\d+) of (\d+) layers on the GPU \(([\d.]+) GiB each with KV\)", place):
            assert int(m.group(1)) == s.ngl and float(m.group(3)) == round((size + per_layer) / meta.block_count / GIB, 2)
        # the estimate line states the figures the sizing holds
        est = re.fullmatch(r"estimate: VRAM ([\d.]+) GiB of ([\d.]+) GiB budget, RAM ([\d.]+) GiB( \(ABOVE BUDGET\))?",
                           s.notes[-1])
        assert est and float(est.group(1)) == round(s.est_vram / GIB, 2) and float(est.group(2)) == budget_gb
        assert bool(est.group(4)) == (s.est_vram > budget)


class TestFacts:
    """The sizing explains its figures as facts (name, bytes, reason), and the memory record the
    decision used is made of the same figures: the two cannot disagree."""

    @pytest.mark.parametrize("budget", [11.5, 4.0])  # all on the GPU; layers offloaded
    def test_the_record_is_the_facts(self, budget):
        meta = llama8b()
        s = size_llama(meta, kv_cost(meta), size=gib(4.583), budget=gib(budget), knobs=LlamaKnobs(), runtime=CUDA)
        record = s.decided
        assert s.fact("weights").bytes == record.whole("model")
        assert s.fact("KV cache").bytes == record.whole("context")
        assert s.fact("compute buffer").bytes == record.whole("compute")
        assert s.fact("VRAM").bytes == s.est_vram == record.vram
        assert s.fact("RAM").bytes == s.est_ram == (record.host.total if record.host else 0)
        charges = sum(s.fact(name).bytes for name in ("runtime", "base"))
        assert record.unseen == (charges,)
        assert "runtime 0.30 GiB: device runtime of the backend build" in s.notes
