"""vLLM sizing (`sizing.vllm`): worked examples A–D number for number
(docs/maintainers/sizing.md#vllm-worked-examples, card probe stubbed at 24 GiB), the KV-cache size (docs/maintainers/sizing.md#vllm-kv-cache-size), sizing per
GPU under tensor parallelism, the pins `extra_args` carry, and recurrent state in the KV reserve."""

import json
from types import SimpleNamespace

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from vllm_fixtures import (
    BASE_V,
    BASELINE,
    DSV2,
    LLAMA3_8B,
    NO_DIMS,
    PAIR_24,
    QWEN25_05B,
    dense_meta,
    device_ctx,
    entry_of,
    flag,
    make_ctx,
    meta_of,
)

from autogen.emit.vllm import emit_vllm
from autogen.errors import ModelError
from autogen.figures.calibrate import read_figures
from autogen.figures.measurements import Measurement
from autogen.figures.plan import measured_record
from autogen.footprint import Reading, margin
from autogen.metadata.hf_config import meta_from_hf_config
from autogen.metadata.kvcost import KvCost, kv_cost
from autogen.numfmt import GIB, size_gb
from autogen.settings.schema import Gpu, Override
from autogen.sizing.vllm import (
    MAX_UTIL,
    OVERHEAD,
    kv_cache_flag_bytes,
    per_gpu_bytes_per_token,
    rounded_ctx,
    size_vllm,
)
from tests.shared import HF_CONFIGS
from tests.test_engine_logs import VLLM_TP2


class TestExampleA_MaxModelLenSizedToBudget:
    """Qwen3-8B dims, trained 262144, 8 GiB of weights."""

    @pytest.mark.parametrize(
        ("budget", "card", "override", "ctx", "note"),
        [
            (16, 24.0, None, 32768, "sized to 6.5 GiB free of budget"),  # 35498 tokens → 32768
            (48, 64.0, None, 208896, "sized to 38.5 GiB free of budget"),  # 210261 → 208896
            (4096, None, None, 262144, "trained context"),
            (16, 24.0, Override(match="*", ctx=200_000), 200_000, "pinned"),
            (4, 24.0, None, 4096, "weights exceed the VRAM budget"),
        ],
    )
    def test_ctx_and_note(self, budget, card, override, ctx, note):
        sizing = size_vllm(make_ctx(budget=budget, card=card, override=override), BASE_V)
        assert (sizing.max_model_len, sizing.ctx_note) == (ctx, note)

    def test_budget_sized_ctx_is_a_multiple_of_4096_below_trained(self):
        small = size_vllm(make_ctx(budget=16), BASE_V).max_model_len
        large = size_vllm(make_ctx(budget=48), BASE_V).max_model_len
        assert 0 < small < 262_144 and small % 4096 == 0 and large >= small

    def test_pinned_ctx_is_not_capped_or_rounded(self):
        sizing = size_vllm(make_ctx(trained=32768, override=Override(match="*", ctx=40_001)), BASE_V)
        assert sizing.max_model_len == 40_001

    def test_floor_is_capped_by_a_short_trained_window(self):
        """Deliberate difference: vLLM refuses a max-model-len past the trained window."""
        sizing = size_vllm(make_ctx(budget=4, trained=2048), BASE_V)
        assert sizing.max_model_len == 2048
        assert sizing.ctx_note == "weights exceed the VRAM budget; trained context"


class TestExampleB_GpuUtilDerivedFromFootprint:
    """Card 24; with no KV model the footprint is the budget, so the budget steers it."""

    @pytest.mark.parametrize(
        ("budget", "override", "util"),
        [
            (12, None, 0.5),
            (6, Override(match="*", vram_budget_gb=6), 0.25),
            (0.5, None, 0.10),  # floor clamp
            (32, None, 0.95),  # ceiling clamp
            (16, Override(match="*", vllm_gpu_util=0.99), 0.99),  # pinned: verbatim, unclamped
        ],
    )
    def test_util(self, budget, override, util):
        sizing = size_vllm(make_ctx(kv=NO_DIMS, budget=budget, override=override), BASE_V)
        assert sizing.util == util

    def test_pinned_util_is_charged_against_the_card(self):
        entry = entry_of(make_ctx(override=Override(match="*", vllm_gpu_util=0.99)))
        assert meta_of(entry)["est_vram_gb"] == 23.76
        assert flag(entry.argv, "--gpu-memory-utilization") == "0.99"

    def test_no_card_reading_falls_back_to_0_90(self):
        sizing = size_vllm(make_ctx(card=None), BASE_V)
        assert (sizing.util, sizing.util_note) == (0.90, "no GPU reading")
        assert size_vllm(make_ctx(card=0.0), BASE_V).util == 0.90


class TestExampleC_SmallModelTakesOnlyWhatItNeeds:
    def test_qwen25_05b_hf_folder(self):
        ctx = make_ctx(fmt="hf", size_gb=0.92, kv=QWEN25_05B, arch="qwen2", trained=32768, budget=22.8)
        sizing = size_vllm(ctx, BASE_V)
        assert (sizing.max_model_len, sizing.ctx_note) == (32768, "trained context")
        assert sizing.kv_reserve == 0.375 * GIB
        assert sizing.footprint == int(0.92 * GIB) + 0.375 * GIB + 1.5 * GIB
        assert sizing.footprint <= 4 * GIB
        entry = entry_of(ctx)
        assert flag(entry.argv, "--gpu-memory-utilization") == "0.12"
        assert meta_of(entry)["est_vram_gb"] == 2.88
        assert entry.comment[1] == ("gpu-memory-utilization 0.12 (2.8 GiB needed (weights+KV+overhead) of "
                                    "24.0 GiB card, under the 22.8 GiB budget)")

    def test_qwen3_8b_on_16(self):
        sizing = size_vllm(make_ctx(trained=262_144), BASE_V)
        assert sizing.max_model_len == 32768
        assert 15 * GIB < sizing.footprint < 16 * GIB
        assert sizing.footprint == 15.5 * GIB
        assert (sizing.util, sizing.est_vram) == (0.65, round(15.6 * GIB))


class TestExampleD_HFParityWithGguf:
    @pytest.mark.parametrize("fmt", ["gguf", "hf"])
    def test_llama3_8b_budget_24(self, fmt):
        sizing = size_vllm(make_ctx(fmt=fmt, size_gb=15, kv=LLAMA3_8B, arch="llama", trained=131_072,
                                    budget=24, card=32.0), BASE_V)
        assert sizing.max_model_len == 61440  # 7.5 GiB / 128 KiB per token, exactly

    def test_real_llama_config_gives_the_same_window(self):
        config = HF_CONFIGS / "llama-3.1-8b" / "config.json"

        meta = meta_from_hf_config(json.loads(config.read_text()))
        ctx = make_ctx(fmt="hf", size_gb=15, kv=kv_cost(meta), arch=meta.arch, trained=meta.context_length,
                       budget=24, card=32.0)
        assert ctx.kv.bytes_per_token == 131_072
        assert size_vllm(ctx, BASE_V).max_model_len == 61440


class TestKvCacheFlag:
    def test_small_model_pin_numbers(self):
        """docs/maintainers/sizing.md#vllm-worked-examples "KV-cache size"; the pin is rounded up to 679 MiB."""
        ctx = make_ctx(fmt="hf", size_gb=0.92, kv=QWEN25_05B, arch="qwen2", trained=32768, budget=22.8,
                       version="0.10.2")
        entry = entry_of(ctx)
        assert flag(entry.argv, "--kv-cache-memory-bytes") == str(679 * 2**20)  # 711,353,958.4 B → MiB
        assert flag(entry.argv, "--gpu-memory-utilization") == "0.13"  # footprint 3.083
        assert meta_of(entry)["est_vram_gb"] == 3.12
        assert meta_of(entry)["kv_cache_bytes"] == 679 * 2**20
        i = entry.argv.index("--gpu-memory-utilization")
        assert entry.argv[i + 2] == "--kv-cache-memory-bytes"

    def test_budget_sized_model_pin_is_uncapped(self):
        sizing = size_vllm(make_ctx(), (0, 11, 0))
        assert sizing.kv_cache_bytes == 7015 * 2**20  # 6.0 GiB × 1.10 + 0.25 = 6.85 GiB = 7014.4 MiB
        assert sizing.footprint / GIB == pytest.approx(8 + 7015 / 1024 + 1.5)
        assert sizing.footprint > 16 * GIB
        assert sizing.util == 0.69
        assert sizing.max_model_len == 32768  # not shrunk for the margin

    @pytest.mark.parametrize(
        ("version", "pinned"),
        [("0.10.1", False), ("0.10.1.1", False), ("0.10.2", True), ("v0.11.0rc1", True), ("", True),
         ("nightly", True)],
    )
    def test_version_gate(self, version, pinned):
        assert ("--kv-cache-memory-bytes" in entry_of(make_ctx(version=version)).argv) is pinned

    def test_legacy_exe_without_a_row_counts_as_current(self):
        assert "--kv-cache-memory-bytes" in entry_of(make_ctx(row=False)).argv

    def test_old_version_note(self):
        entry = entry_of(make_ctx(version="0.10.1"))
        assert "KV pool not pinned: vLLM 0.10.1 lacks --kv-cache-memory-bytes (0.10.2+)" in entry.comment

    def test_pinned_util_suppresses_the_pin(self):
        entry = entry_of(make_ctx(version="0.11.0", override=Override(match="*", vllm_gpu_util=0.5)))
        assert "--kv-cache-memory-bytes" not in entry.argv
        assert flag(entry.argv, "--gpu-memory-utilization") == "0.5"

    @pytest.mark.parametrize(
        "extra",
        [
            ("--kv-cache-memory-bytes", "4G"),
            ("--kv-cache-memory-bytes=4294967296",),
            ("--kv-cache-memory", "4G"),  # argparse prefix match, as vLLM's allow_abbrev does
            ("--kv-cache-mem=4G",),
            ("--kv_cache_memory_bytes", "4G"),  # vLLM reads _ as -
            ("--gpu-memory-utilization", "0.5"),
            ("--gpu-memory-util", "0.5"),
            ("--gpu-memory-utilization=0.5",),
            ("--gpu_memory_utilization", "0.5"),
            ("--gp", "0.5"),
            ("--device-memory-utilization", "0.5"),
            ("--enforce-eager", "--gpu-mem", "0.5"),
        ],
    )
    def test_extra_args_memory_flags_suppress_the_pin(self, extra):
        entry = entry_of(make_ctx(version="0.11.0", override=Override(match="*", extra_args=extra)))
        assert "--kv-cache-memory-bytes" not in entry.argv[: -len(extra)]
        assert entry.argv[-len(extra):] == extra
        assert "KV pool not pinned: extra_args set the memory" in entry.comment

    @pytest.mark.parametrize(
        "extra",
        [("--kv-cache-dtype", "fp8"), ("--kv-cache-metrics",), ("--max-model-len", "8192"),
         ("--device-ids", "0"), ("-tp", "2"), ("--chat-template", "gpu-memory-utilization.jinja")],
    )
    def test_other_flags_keep_the_pin(self, extra):
        entry = entry_of(make_ctx(version="0.11.0", override=Override(match="*", extra_args=extra)))
        assert "--kv-cache-memory-bytes" in entry.argv

    def test_no_kv_model_no_pin(self):
        entry = entry_of(make_ctx(kv=NO_DIMS, version="0.11.0"))
        assert "--kv-cache-memory-bytes" not in entry.argv
        assert "kv_bytes_per_token" not in meta_of(entry)

    def test_state_space_model_gets_trained_window_and_no_pin(self):
        ssm = KvCost(bytes_per_token=0, note="no attention layers")
        sizing = size_vllm(make_ctx(kv=ssm, trained=1_048_576), (0, 11, 0))
        assert (sizing.max_model_len, sizing.kv_cache_bytes) == (1_048_576, None)


class TestTensorParallelSizedPerGpu:
    def test_mla_cache_is_whole_on_every_rank(self):
        """The reviewer's case: 516096 tokens and a 16.7 GiB pin per GPU needed 33.2 of 24 GiB."""
        ctx = device_ctx(DSV2)
        assert ctx.kv.bytes_per_token == 31_104
        sizing = size_vllm(ctx, (0, 11, 0))
        assert sizing.tensor_parallel == 2
        assert sizing.kv_reserve == 31_104 * sizing.max_model_len  # the whole latent per GPU
        # vLLM's check: one request plus the null block, one block being 16 tokens of all 27 layers
        assert sizing.kv_cache_bytes == kv_cache_flag_bytes(31_104 * (sizing.max_model_len + 16))
        assert sizing.footprint == 15 * GIB + sizing.kv_cache_bytes + 1.5 * GIB <= MAX_UTIL * 24 * GIB
        assert sizing.util == 0.95 and sizing.max_model_len == 188_416
        assert sizing.ctx_note == ("sized to 7.5 GiB free of budget per GPU, cut to fit 22.8 GiB of the smallest "
                                   "24.0 GiB card of 2")

    def test_window_comes_from_the_budgets_share_per_card(self):
        """Share 20 − weights 30/2 − overhead 1.5 = 3.5 GiB of KV per GPU."""
        sizing = size_vllm(device_ctx(DSV2, budget=40.0), (0, 11, 0))
        assert sizing.max_model_len == 118_784 == 120_823 // 4096 * 4096
        assert sizing.ctx_note == "sized to 3.5 GiB free of budget per GPU"
        assert sizing.footprint == 15 * GIB + kv_cache_flag_bytes(31_104 * (118_784 + 16)) + 1.5 * GIB  # the pin's margin over 20
        assert sizing.util == 0.86

    @pytest.mark.parametrize(("kv_heads", "per_gpu", "window"), [(1, 24_576, 282_624), (8, 98_304, 69_632)])
    def test_heads_fewer_than_ranks_are_replicated(self, kv_heads, per_gpu, window):
        """6.5 GiB of KV per GPU: one head sits whole on both ranks, eight split four and four."""
        ctx = device_ctx(dense_meta(kv_heads=kv_heads), size_gb=8, budget=24.0)
        sizing = size_vllm(ctx, (0, 11, 0))
        assert per_gpu_bytes_per_token(ctx.kv, ctx.meta, 2) == per_gpu
        assert sizing.max_model_len == window == int(6.5 * GIB // per_gpu) // 4096 * 4096
        assert sizing.kv_cache_bytes == kv_cache_flag_bytes(per_gpu * (window + 16))  # + the null block

    def test_baseline_version_without_a_pin_is_cut_to_the_card_too(self):
        sizing = size_vllm(device_ctx(DSV2), (0, 10, 1))
        assert sizing.kv_cache_bytes is None
        assert sizing.footprint <= MAX_UTIL * 24 * GIB and sizing.max_model_len == 217_088

    def test_a_model_over_the_card_at_the_floor_is_skipped(self):
        plan = emit_vllm(device_ctx(DSV2, size_gb=50))
        assert plan.entries == ()
        assert [s.reason for s in plan.skips] == [
            "needs 26.9 GiB per GPU at max-model-len 4096 (weights 25.0 GiB + KV + 1.5 GiB overhead), over 22.8 GiB of "
            "the smallest 24.0 GiB card of 2: vLLM cannot start it; give it more devices or a smaller quant"]

    def test_one_small_device_is_judged_alone(self):
        plan = emit_vllm(device_ctx(dense_meta(), size_gb=11, devices=(Gpu(index=3, vram_gb=12.0),)))
        assert "over 11.4 GiB of 12.0 GiB card 3: vLLM cannot start it" in plan.skips[0].reason

    def test_a_pinned_utilization_is_the_limit(self):
        ov = Override(match="*", vllm_gpu_util=0.5)
        assert emit_vllm(device_ctx(dense_meta(), size_gb=20, override=ov)).entries  # 10 + 0.375 + 1.5
        plan = emit_vllm(device_ctx(dense_meta(), size_gb=21, override=ov))
        assert "needs 12.4 GiB per GPU" in plan.skips[0].reason
        assert "over 12.0 GiB of the smallest 24.0 GiB card of 2" in plan.skips[0].reason

    def test_a_tensor_parallel_pin_without_devices_keeps_the_reference_numbers(self):
        """Pooled: budget 48 − 30 − one overhead 1.5 = 16.5 GiB, as docs/maintainers/sizing.md#--max-model-len charges it."""
        ov = Override(match="*", vllm_tensor_parallel=2)
        sizing = size_vllm(attrs.evolve(device_ctx(DSV2, override=ov), devices=()), (0, 11, 0))
        assert (sizing.tensor_parallel, sizing.max_model_len) == (2, 569_344)
        assert sizing.max_model_len == int(16.5 * GIB // 31_104) // 4096 * 4096

    @settings(max_examples=60, deadline=None)
    @given(weights=st.integers(1, 70), heads=st.sampled_from([1, 2, 4, 8]), mla=st.booleans(),
           cards=st.sampled_from([(24.0, 24.0), (24.0, 12.0), (12.0,), (48.0, 48.0, 48.0, 48.0)]),
           per_card=st.sampled_from([None, 10.0, 20.0, 80.0]), version=st.sampled_from([(0, 10, 1), (0, 11, 0)]),
           state=st.sampled_from([0, 156_893_184, 919_240_704, 3 * GIB]))
    def test_an_entry_always_fits_its_smallest_card(self, weights, heads, mla, cards, per_card, version, state):
        meta = DSV2 if mla else dense_meta(kv_heads=heads)
        devices = tuple(Gpu(index=i, vram_gb=v) for i, v in enumerate(cards))
        budget = sum(min(v, per_card) if per_card else v for v in cards)
        ctx = device_ctx(meta, size_gb=weights, devices=devices, budget=budget)
        ctx = attrs.evolve(ctx, kv=attrs.evolve(ctx.kv, state_bytes_per_seq=state))
        try:
            sizing = size_vllm(ctx, version)
        except ModelError as exc:
            assert "vLLM cannot start it" in str(exc)
            return
        smallest = min(cards)
        assert sizing.footprint <= MAX_UTIL * smallest * GIB
        assert sizing.util <= MAX_UTIL and sizing.max_model_len >= 4096


class TestPerGpuBytesPerToken:
    @pytest.mark.parametrize(("heads", "tp", "expected"), [
        ((8,) * 4, 1, 16_384), ((8,) * 4, 2, 8192), ((8,) * 4, 8, 2048), ((8,) * 4, 16, 2048),
        ((2,) * 4, 4, 2048), ((0, 4, 0, 4), 8, 1024)])
    def test_heads_per_rank_follow_vllm(self, heads, tp, expected):
        meta = dense_meta(layers=4, kv_heads=heads)
        assert per_gpu_bytes_per_token(kv_cost(meta), meta, tp) == expected

    def test_mla_latent_is_whole_on_every_rank(self):
        assert per_gpu_bytes_per_token(kv_cost(DSV2), DSV2, 4) == 31_104

    def test_unknown_heads_split_evenly_rounded_up(self):
        assert per_gpu_bytes_per_token(KvCost(bytes_per_token=196_608), None, 3) == 65_536
        assert per_gpu_bytes_per_token(NO_DIMS, None, 2) is None
        assert per_gpu_bytes_per_token(None, None, 2) is None


# ---------------------------------------------------------------------------------------------
# extra_args: vLLM takes the last value, so theirs are pins and the sizing follows them
# (how they are read: test_vllm_args)

class TestExtraArgsPins:
    def test_their_length_sizes_the_pin_and_ours_is_dropped(self):
        extra = ("--max-model-len", "8192")
        entry = entry_of(make_ctx(version="0.11.0", override=Override(match="*", extra_args=extra)))
        assert entry.argv.count("--max-model-len") == 1 and entry.argv[-2:] == extra
        assert flag(entry.argv, "--kv-cache-memory-bytes") == str(1946 * 2**20)  # 1.5 GiB × 1.10 + 0.25
        assert meta_of(entry)["max_model_len"] == entry.capabilities.context == 8192
        assert flag(entry.argv, "--gpu-memory-utilization") == "0.48"  # (8 + 1946/1024 + 1.5) / 24
        assert entry.comment[0].endswith("max-model-len 8192 (pinned by extra_args)")

    def test_their_length_beats_the_overrides_ctx(self):
        ov = Override(match="*", ctx=200_000, extra_args=("--max-m=16k",))
        sizing = size_vllm(make_ctx(override=ov), (0, 11, 0))
        assert (sizing.max_model_len, sizing.kv_cache_bytes) == (16_000, kv_cache_flag_bytes(196_608 * 16_000))
        assert "--max-model-len" not in entry_of(make_ctx(override=ov)).argv

    @pytest.mark.parametrize("value", ["auto", "-1"])
    def test_auto_has_no_pin_and_reports_our_estimate(self, value):
        entry = entry_of(make_ctx(version="0.11.0", override=Override(match="*", extra_args=("--max-model-len", value))))
        assert "--kv-cache-memory-bytes" not in entry.argv and entry.argv.count("--max-model-len") == 1
        assert "KV pool not pinned: max-model-len auto: vLLM sizes the window from its memory" in entry.comment
        assert meta_of(entry)["max_model_len"] == entry.capabilities.context == 32768
        assert entry.comment[0].endswith("max-model-len 32768 (auto in extra_args: vLLM fits it to its memory, "
                                         "about 32768 (sized to 6.5 GiB free of budget))")
        assert flag(entry.argv, "--gpu-memory-utilization") == "0.65"  # the budget-sized footprint 15.5

    def test_their_tensor_parallel_replaces_ours(self):
        ov = Override(match="*", vllm_tensor_parallel=4, extra_args=("-tp", "2"))
        entry = entry_of(make_ctx(override=ov))
        assert "--tensor-parallel-size" not in entry.argv and entry.argv[-2:] == ("-tp", "2")
        assert size_vllm(make_ctx(override=ov), BASE_V).tensor_parallel == 2
        assert meta_of(entry) == meta_of(entry_of(make_ctx()))  # no devices: the pooled numbers

    def test_their_tensor_parallel_on_devices(self):
        one = size_vllm(device_ctx(dense_meta(), size_gb=8, override=Override(match="*", extra_args=("-tp=1",))),
                        (0, 11, 0))
        assert one.tensor_parallel == 1 and "of 24.0 GiB card 0" in one.util_note
        plan = emit_vllm(device_ctx(dense_meta(), override=Override(match="*", extra_args=("--te", "4"))))
        assert plan.skips[0].reason == "extra_args --tensor-parallel-size 4 needs 4 GPUs; devices 0,1 give 2"


class TestSizingCarriesItsResults:
    def test_flag_comment_notes_and_metadata_print_one_utilization(self):
        plan = emit_vllm(make_ctx(version="0.11.0"))
        sizing = size_vllm(make_ctx(version="0.11.0"), (0, 11, 0))
        entry = plan.entries[0]
        assert (sizing.util_flag, sizing.gpu_util, sizing.weights) == ("0.69", 0.69, 8 * GIB)
        assert flag(entry.argv, "--gpu-memory-utilization") == sizing.util_flag
        assert meta_of(entry)["gpu_util"] == sizing.gpu_util and meta_of(entry)["size_gb"] == size_gb(sizing.weights)
        assert entry.comment[1].startswith("gpu-memory-utilization 0.69 (")
        assert any(line.startswith("gpu-memory-utilization 0.69: ") for line in plan.notes)

    @pytest.mark.parametrize(("n_bytes", "gb"), [(2048, 0.0), (GIB // 8, 0.13), (round(0.92 * GIB), 0.92),
                                                 (15 * GIB, 15.0)])
    def test_size_gb_rounds_half_away_to_two_decimals(self, n_bytes, gb):
        assert size_gb(n_bytes) == gb


# ---------------------------------------------------------------------------------------------
# recurrent state: vLLM starts only if its pool holds one request of --max-model-len, i.e. the KV
# of that length plus one sequence's SSM / linear-attention state (`MambaSpec.max_memory_usage_bytes`)

MIB = 1 << 20


def real_ctx(name, *, size_gb, budget, card, devices=(), version="0.11.0"):
    config = HF_CONFIGS / name / "config.json"

    meta = meta_from_hf_config(json.loads(config.read_text()))
    ctx = make_ctx(fmt="hf", size_gb=size_gb, kv=kv_cost(meta), arch=meta.arch, trained=meta.context_length,
                   budget=budget, card=card, version=version)
    return attrs.evolve(ctx, meta=meta, devices=tuple(devices))


class TestRecurrentStateInTheKvReserve:
    """vLLM's own charge for the recurrent layers (autogen/sizing/vllm_memory.py, checked against
    vLLM's functions in tests/test_vllm_capacity.py): the attention block is raised until one page
    holds a state, and each group of recurrent layers holds 3 such pages in prefix-caching mode."""

    def test_qwen35_window_is_sized_from_the_room_left_after_the_state_pages(self):
        """Qwen3.5-27B: 16 full-attention layers (4 KiB/token each), 48 gated-DeltaNet layers of
        3,207,168 B; blocks of 832 tokens (64-token aligned) make a page of 3,407,872 B, 16 layers
        a block of 54,525,952 B, and the 3 state groups × 3 pages 490,733,568 B."""
        ctx = real_ctx("qwen3.5-27b", size_gb=16, budget=24, card=32)
        sizing = size_vllm(ctx, (0, 11, 0))
        layout = sizing.layout
        assert (layout.full, layout.mamba, layout.mamba_bytes, layout.block) == (16, 48, 3_207_168, 832)
        assert layout.block_bytes == 16 * 832 * 4096 == 54_525_952
        assert sizing.state_bytes == 9 * 54_525_952 == 490_733_568
        assert sizing.max_model_len == 98_304  # the longest of 4096-steps whose request fits 6.5 GiB
        assert layout.needed(98_304) <= 6.5 * GIB < layout.needed(98_304 + 4096)
        assert sizing.ctx_note == "sized to 6.5 GiB free of budget, less 0.46 GiB recurrent state"
        reserve = 54_525_952 * (-(-98_304 // 832) + 9)
        assert sizing.kv_reserve == reserve
        assert sizing.kv_cache_bytes == kv_cache_flag_bytes(reserve + 54_525_952) == 7635 * MIB
        assert sizing.footprint == (16 + 7635 / 1024 + 1.5) * GIB
        assert sizing.util == 0.78

    def test_nemotron_h_pin_holds_one_request_of_the_window(self):
        """Nemotron-H 56B: 10 attention layers and 54 Mamba-2 layers of 16,900,096 B (SSM state in
        f32, conv in bf16): 4128-token blocks, 6 state groups of 9 layers × 3 pages. At its trained
        8192 vLLM asks 3.38 GiB for one request; one sequence's bare state (0.86 GiB) would have
        left a pin vLLM refuses to start with."""
        ctx = real_ctx("nemotron-h-56b-base-8k", size_gb=30, budget=48, card=48)
        sizing = size_vllm(ctx, (0, 11, 0))
        assert (sizing.max_model_len, sizing.ctx_note) == (8192, "trained context")
        block = 10 * 4128 * 4096
        assert sizing.layout.block_bytes == block == 169_082_880
        reserve = block * (2 + 6 * 3)
        assert sizing.kv_reserve == reserve
        assert kv_cache_flag_bytes(40_960 * 8192 + 919_240_704) < reserve
        assert sizing.kv_cache_bytes == kv_cache_flag_bytes(reserve + block) == 3981 * MIB
        assert sizing.footprint == (30 + 3981 / 1024 + 1.5) * GIB and sizing.util == 0.74

    def test_without_a_pin_the_footprint_still_carries_the_state(self):
        ctx = real_ctx("nemotron-h-56b-base-8k", size_gb=30, budget=48, card=48, version=BASELINE)
        sizing = size_vllm(ctx, BASE_V)
        assert sizing.kv_cache_bytes is None
        assert sizing.footprint == 30 * GIB + 169_082_880 * 21 + 1.5 * GIB  # the pool vLLM's check asks

    def test_state_is_split_over_ranks_like_its_heads(self):
        ctx = real_ctx("nemotron-h-56b-base-8k", size_gb=30, budget=48, card=48, devices=PAIR_24)
        sizing = size_vllm(ctx, (0, 11, 0))
        layout = sizing.layout
        assert sizing.tensor_parallel == 2 and layout.mamba_bytes == 16_900_096 // 2
        assert layout.token_bytes == 2048  # 8 KV heads: 4 per rank
        assert sizing.state_bytes == 18 * layout.block_bytes
        assert sizing.kv_cache_bytes == kv_cache_flag_bytes(layout.check_bytes(8192))
        assert sizing.footprint == 15 * GIB + sizing.kv_cache_bytes + 1.5 * GIB <= MAX_UTIL * 24 * GIB

    def test_the_window_cut_to_a_card_leaves_room_for_the_state(self):
        ctx = real_ctx("qwen3.5-27b", size_gb=16, budget=24, card=24, devices=(Gpu(index=0, vram_gb=24.0),))
        sizing = size_vllm(ctx, (0, 11, 0))
        assert sizing.ctx_note.endswith(", less 0.46 GiB recurrent state, cut to fit 22.8 GiB of 24.0 GiB card 0")
        assert sizing.footprint <= MAX_UTIL * 24 * GIB
        bigger = kv_cache_flag_bytes(sizing.layout.check_bytes(sizing.max_model_len + 4096))
        assert 16 + bigger / GIB + 1.5 > MAX_UTIL * 24  # the next step would not fit

    def test_comment_and_notes_say_the_state_is_charged(self):
        plan = emit_vllm(real_ctx("qwen3.5-27b", size_gb=16, budget=24, card=32))
        (entry,) = plan.entries
        assert entry.comment[0].endswith("max-model-len 98304 (sized to 6.5 GiB free of budget, less 0.46 GiB "
                                         "recurrent state)")
        assert (f"kv-cache-memory-bytes {7635 * MIB} ((KV 6.04 GiB + recurrent state pages 0.46 GiB + 1 block) "
                "× 1.10 + 0.25 GiB, whole MiB)") in entry.comment
        assert "KV at max-model-len 6.50 GiB: 98304 tokens" in plan.notes
        assert ("KV includes 0.457 GiB of recurrent state "
                "(vLLM starts only if one request of max-model-len fits)") in plan.notes


class TestSlidingWindowLayersByTheirWindow:
    """gpt-oss-20b: 12 full and 12 sliding-window layers (window 128), 2 KiB per layer and token.
    vLLM's check charges the sliding ones `window − 1 + 2 × --max-num-batched-tokens` tokens."""

    def test_the_budget_holds_more_context_than_a_full_charge_allowed(self):
        sizing = size_vllm(real_ctx("gpt-oss-20b", size_gb=13, budget=16, card=24), (0, 11, 0))
        assert int(1.5 * GIB) // 49_152 == 32_768  # every layer at the full context
        assert sizing.max_model_len == 57_344 and sizing.ctx_note == "sized to 1.5 GiB free of budget"
        layout = sizing.layout
        assert layout.needed(57_344) <= 1.5 * GIB < layout.needed(57_344 + 4096)
        assert sizing.kv_cache_bytes == kv_cache_flag_bytes(layout.check_bytes(57_344))

    @pytest.mark.parametrize(("card", "in_flight"), [(24, 4096), (80, 16_384), (192, 32_768), (None, 32_768)])
    def test_tokens_in_flight_follow_the_cards_batch_default(self, card, in_flight):
        """`get_batch_defaults`: 2048 below 70 GiB, 8192 from 70, 16384 from 160; the largest unread."""
        sizing = size_vllm(real_ctx("gpt-oss-20b", size_gb=13, budget=20, card=card), (0, 11, 0))
        assert sizing.layout.in_flight == in_flight
        assert f"12 sliding-window layers at window 128 + {in_flight} in flight" in sizing.kv_cache_note

    def test_a_max_num_batched_tokens_in_extra_args_is_what_vllm_holds_in_flight(self):
        ctx = attrs.evolve(real_ctx("gpt-oss-20b", size_gb=13, budget=16, card=24),
                           override=Override(match="*", extra_args=("--max-num-batched-tokens=8k",)))
        sizing = size_vllm(ctx, (0, 11, 0))
        assert sizing.layout.in_flight == 2 * 8000
        assert sizing.max_model_len == 49_152  # more in flight, less room for the full layers

    def test_a_bad_max_num_batched_tokens_is_named(self):
        ctx = attrs.evolve(real_ctx("gpt-oss-20b", size_gb=13, budget=16, card=24),
                           override=Override(match="*", extra_args=("--max-num-batched-tokens", "many")))
        with pytest.raises(ModelError, match="--max-num-batched-tokens 'many' is not a token count"):
            size_vllm(ctx, (0, 11, 0))

    def test_a_gguf_window_is_charged_as_full_attention(self):
        """vLLM reads a GGUF's layers through its own conversion; swapgen does not guess its window."""
        ctx = real_ctx("gpt-oss-20b", size_gb=13, budget=16, card=24)
        gguf = attrs.evolve(ctx, meta=attrs.evolve(ctx.meta, source="gguf"))
        assert size_vllm(gguf, (0, 11, 0)).max_model_len == 32_768


class TestMeasuredFigures:
    """What `swapgen calibrate` read from vLLM 0.33's own lines (recorded in tests/test_engine_logs.py)
    sizes the next command: the model-loading size replaces the estimated weights, and the KV
    cache's capacity bounds the length, each with the stated margin (5%, at least 128 MiB)."""

    def reading(self, ctx, log: str) -> Reading:
        entry = entry_of(ctx)
        record, tokens = read_figures(SimpleNamespace(engine="vllm"), entry, log)
        measured = Measurement(entry.id, "vllm", record, kv_tokens=tokens)
        return Reading(argv=entry.argv, env=entry.env, engine=measured_record(measured, entry.estimate),
                       estimate=entry.estimate, kv_tokens=tokens)

    def test_model_loading_replaces_the_weights_and_the_capacity_bounds_the_length(self):
        # 24 layers: 48 KiB per token on each of the two GPUs, 21,845 tokens per GiB by swapgen's cost
        ctx = device_ctx(dense_meta(layers=24), size_gb=12.0)
        plain = size_vllm(ctx, (0, 33, 0))
        sized = size_vllm(attrs.evolve(ctx, readings=(self.reading(ctx, VLLM_TP2),)), (0, 33, 0))
        weights = round(7.51 * GIB)  # the larger of the two workers'
        assert plain.fact("weights").bytes == 6 * GIB
        assert sized.fact("weights").bytes == weights + margin(weights)
        assert sized.fact("weights").reason.startswith("measured (vLLM's model loading at launch)")
        # vLLM held 202,176 tokens in 12.34 GiB (16,384 per GiB): fewer than swapgen's cost, so the length is cut
        room = min(sized.fact("budget").bytes, sized.fact("limit").bytes) - sized.fact("weights").bytes - OVERHEAD
        cap = rounded_ctx(int(room * 202_176 / round(12.34 * GIB) * 0.95))
        assert sized.max_model_len == cap < plain.max_model_len
        assert "cut to the measured KV cache (202,176 tokens in 12.34 GiB, less 5%)" in sized.ctx_note
        # the pool pinned for it holds that length at the measured capacity, with the margin
        assert sized.kv_cache_bytes >= cap * round(12.34 * GIB) / 202_176 / 0.95

    def test_a_launch_on_other_gpus_is_not_used(self):
        ctx = device_ctx(dense_meta(layers=24), size_gb=12.0)
        one = self.reading(attrs.evolve(ctx, devices=PAIR_24[:1]), VLLM_ONE)
        assert size_vllm(attrs.evolve(ctx, readings=(one,)), (0, 33, 0)) == size_vllm(ctx, (0, 33, 0))

    def test_the_next_run_follows_the_measurement(self, tmp_path):
        """End to end: the entry's command after calibration is sized from the measured figures."""
        ctx = make_ctx(size_gb=8.0, budget=16.0, version="0.33.0")
        reading = self.reading(ctx, VLLM_ONE)
        after = entry_of(attrs.evolve(ctx, readings=(reading,)))
        assert after.argv != reading.argv  # another command: the corrected estimate, not the record
        assert after.footprint.memory.source == "estimate"
        assert flag(after.argv, "--max-model-len") != flag(reading.argv, "--max-model-len")


#: One worker (vllm/logger.py `_FORMAT`), Qwen3-8B-sized: its pool holds fewer tokens than our cost says.
VLLM_ONE = """\
(EngineCore pid=150) INFO 12-02 01:21:10 [gpu_model_runner.py:5089] Model loading took 8.3 GiB memory and 9.8 seconds
(EngineCore pid=150) INFO 12-02 01:21:30 [gpu_worker.py:773] Available KV cache memory: 6.2 GiB
(EngineCore pid=150) INFO 12-02 01:21:31 [kv_cache_utils.py:1148] GPU KV cache size: 30,000 tokens, Maximum concurrency for 32,768 tokens per request: 0.92x
"""


class TestFacts:
    """vLLM's figures are bytes with their reasons, and the memory record is made of them."""

    def test_the_record_is_the_facts(self):
        ctx = make_ctx(version="0.11.0")
        sizing = size_vllm(ctx, (0, 11, 0))
        (device,) = entry_of(ctx).estimate.devices
        assert device.model == sizing.fact("weights").bytes == 8 * GIB
        assert device.compute == sizing.fact("overhead").bytes == OVERHEAD
        assert device.total == sizing.fact("estimate").bytes == sizing.est_vram
        assert sizing.fact("footprint").bytes == sizing.footprint
        assert sizing.fact("kv-cache-memory-bytes").bytes == sizing.kv_cache_bytes
        assert [f.name for f in sizing.facts] == ["weights", "overhead", "budget", "limit", "KV at max-model-len",
                                                  "kv-cache-memory-bytes", "footprint", "estimate"]
