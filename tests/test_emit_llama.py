"""The llama-server emitter: argv order, knobs, extra_args replacement, projectors, embeddings."""

from __future__ import annotations

import json

import attrs
import pytest

from autogen.emit.llama import emit_llama
from autogen.errors import SettingsError
from autogen.metadata.gguf_header import read_gguf_header
from autogen.metadata.gguf_meta import meta_from_gguf
from autogen.metadata.hf_config import meta_from_hf_config
from autogen.metadata.kvcost import KV_TYPE_BYTES
from autogen.metadata.model_meta import ModelMeta
from autogen.resolve.context import EmitContext
from autogen.settings.schema import LLAMA_KV_TYPES, Override, Profile, Settings
from autogen.settings.structure import structure
from autogen.sizing.llama_args import extra_flags, split_equals
from autogen.vision_tower import VisionTower
from tests.builders import HEAD, context, meta
from tests.gguf_fixtures import write_gguf
from tests.shared import HF_CONFIGS

GIB = 1 << 30
def only_entry(ctx: EmitContext):
    plan = emit_llama(ctx)
    assert not plan.skips, plan.skips
    (entry,) = plan.entries
    return entry, plan


def meta_dict(entry) -> dict:
    return dict(entry.metadata)


def with_extra(*extra: str, m: ModelMeta | None = None, **kw) -> EmitContext:
    return context(m, override=Override(match="*", extra_args=extra), **kw)


def stateful(ctx: EmitContext, per_seq: int) -> EmitContext:
    """The context of a model whose KV cost carries recurrent state of `per_seq` bytes."""
    return attrs.evolve(ctx, kv=attrs.evolve(ctx.kv, state_bytes_per_seq=per_seq))


class TestChatArgv:
    def test_dense_model_argv_in_documented_order(self):
        entry, _ = only_entry(context())
        assert entry.argv == (*HEAD, "-c", "45056", "-ngl", "33", "-fit", "off")

    def test_comment_first_line_says_arch_size_ctx_ngl_and_why(self):
        entry, _ = only_entry(context())
        assert entry.comment[0] == "llama · llama · 4.58 GiB · ctx 45056, ngl 33 (largest ctx that fits on the GPU)"

    def test_metadata_carries_every_sizing_number(self):
        entry, _ = only_entry(context())
        md = meta_dict(entry)
        assert [k for k, _ in entry.metadata][:2] == ["backend", "engine"]
        assert md["backend"] == "llama-cuda" and md["engine"] == "llama.cpp"
        assert (md["ctx"], md["ngl"], md["n_cpu_moe"], md["kv_type"]) == (45056, 33, 0, "f16")
        assert md["kv_bytes_per_token"] == 131072 and md["size_gb"] == 4.58
        assert 0 < md["est_vram_gb"] <= 11.5 and md["est_ram_gb"] == 0

    def test_kv_bytes_per_token_is_the_models_f16_cost_whatever_the_cache_type(self):
        """The same figure the vLLM entry of the same model reports; the cache type is `kv_type`."""
        entry, _ = only_entry(context(override=Override(match="*", kv_type="q8_0")))
        md = meta_dict(entry)
        assert (md["kv_type"], md["kv_bytes_per_token"]) == ("q8_0", 131072)

    def test_capabilities_advertise_text_tools_and_context(self):
        entry, _ = only_entry(context())
        caps = entry.capabilities
        assert (caps.inputs, caps.outputs, caps.tools, caps.context) == (("text",), ("text",), True, 45056)

    def test_notes_explain_each_number(self):
        _, plan = only_entry(context())
        text = "\n".join(plan.notes)
        for needle in ("KV full attention 5.50 GiB: 32 layers × 45056 cells", "f16 KV: 48,640 tokens fit; "
                       "131,072 would need 21.63 GiB of 11.50 GiB",
                       "compute buffer", "llama_context::sched_reserve", "runtime 0.30 GiB", "ctx 45056",
                       "placement: all 32 layers", "estimate: VRAM", "fit: -fit off, swapgen's sizing decides"):
            assert needle in text

    def test_moe_over_budget_gets_n_cpu_moe_and_a_q8_0_cache(self):
        m = meta(arch="qwen3moe", context_length=40960, block_count=48, embedding_length=2048,
                 head_count_kv=(4,) * 48, vocab_size=151936, expert_count=128, expert_used_count=8,
                 expert_feed_forward_length=768)
        entry, _ = only_entry(context(m, size_gb=17.282))
        argv = entry.argv
        assert argv[:len(HEAD)] == HEAD
        assert argv[len(HEAD):len(HEAD) + 4] == ("-c", "40960", "-ngl", "49")
        i = argv.index("--n-cpu-moe")
        assert int(argv[i + 1]) == meta_dict(entry)["n_cpu_moe"] > 0
        assert argv[i + 2:i + 8] == ("-fit", "off", "-ctk", "q8_0", "-ctv", "q8_0")
        assert "n-cpu-moe" in entry.comment[0]

    def test_moe_moves_one_layer_of_experts_rather_than_give_up_context(self):
        """qwen3moe 17.28 GiB in 21.65 GiB: f16 fits under 40960 tokens whole; one layer's experts buy 40960."""
        m = meta(arch="qwen3moe", context_length=40960, block_count=48, embedding_length=2048,
                 head_count_kv=(4,) * 48, vocab_size=151936, expert_count=128, expert_used_count=8,
                 expert_feed_forward_length=768)
        entry, _ = only_entry(context(m, size_gb=17.28, budget=21.65))
        assert entry.argv[len(HEAD):] == ("-c", "40960", "-ngl", "49", "--n-cpu-moe", "1", "-fit", "off")
        md = meta_dict(entry)
        assert (md["ctx"], md["n_cpu_moe"], md["kv_type"], md["est_ram_gb"]) == (40960, 1, "f16", 0.32)
        assert md["est_vram_gb"] <= 22.0

    def test_settings_knobs_become_flags(self):
        s = Settings(roots=("/m",), flash_attn="on", threads=8, parallel=2, kv_type="q8_0")
        entry, _ = only_entry(context(settings=s))
        tail = entry.argv[len(HEAD):]
        ctx = meta_dict(entry)["ctx"]
        assert tail == ("-c", str(2 * ctx), "-ngl", "33", "-fit", "off", "-fa", "on", "-ctk", "q8_0", "-ctv", "q8_0",
                        "--parallel", "2", "-t", "8")
        assert entry.capabilities.context == ctx

    def test_override_beats_settings(self):
        s = Settings(roots=("/m",), threads=8, flash_attn="on")
        ov = Override(match="*", threads=4, flash_attn="auto", ctx=16384, ngl=20)
        entry, _ = only_entry(context(settings=s, override=ov))
        assert entry.argv[len(HEAD):] == ("-c", "16384", "-ngl", "20", "-fit", "off", "-fa", "auto", "-t", "4")

    def test_unlisted_and_ttl_follow_the_override_and_settings(self):
        entry, _ = only_entry(context(override=Override(match="*", unlisted=True)))
        assert entry.unlisted and entry.ttl == 600


class TestExtraArgs:
    def test_flags_in_extra_args_replace_ours_and_pin_the_sizing(self):
        ov = Override(match="*", extra_args=("--ctx-size=8192", "--n-gpu-layers", "10", "--jinja"))
        entry, _ = only_entry(context(override=ov))
        assert entry.argv == (*HEAD, "-fit", "off", "--ctx-size", "8192", "--n-gpu-layers", "10", "--jinja")
        md = meta_dict(entry)
        assert (md["ctx"], md["ngl"]) == (8192, 10) and md["est_ram_gb"] > 0

    @pytest.mark.parametrize("extra, gone", [
        (("-c", "4096"), "-c"), (("--gpu-layers", "all"), "-ngl"), (("-fa", "on"), "-fa"),
        (("--flash-attn=auto",), "-fa"), (("-t", "2"), "-t"), (("--threads", "2"), "-t"),
        (("-np", "3"), "--parallel"), (("--cache-type-k", "q4_0"), "-ctk"),
    ])
    def test_each_alias_replaces_the_generated_flag(self, extra, gone):
        s = Settings(roots=("/m",), flash_attn="on", threads=8, parallel=2, kv_type="q8_0")
        entry, _ = only_entry(context(settings=s, override=Override(match="*", extra_args=extra)))
        appended = split_equals(extra)
        generated = entry.argv[:len(entry.argv) - len(appended)]
        assert gone not in generated
        assert entry.argv[-len(appended):] == appended

    def test_extra_parallel_and_ctx_divide_into_slots(self):
        entry, _ = only_entry(context(override=Override(match="*", extra_args=("-np", "4", "-c", "32768"))))
        assert meta_dict(entry)["ctx"] == 8192

    def test_extra_flash_attention_off_avoids_a_quantized_cache(self):
        m = meta(arch="qwen3moe", context_length=40960, block_count=48, embedding_length=2048,
                 head_count_kv=(4,) * 48, vocab_size=151936, expert_count=128)
        entry, _ = only_entry(context(m, size_gb=17.282, override=Override(match="*", extra_args=("-fa", "off"))))
        assert "-ctk" not in entry.argv and meta_dict(entry)["kv_type"] == "f16"

    def test_equals_form_of_a_known_flag_is_split_for_llama_server(self):
        assert split_equals(("--ctx-size=4096", "-fa=on", "--embeddings", "--x=y", "-ot", "a=b")) == (
            "--ctx-size", "4096", "-fa", "on", "--embeddings", "--x=y", "-ot", "a=b")

    def test_extra_flags_reads_values_and_switches(self):
        found = extra_flags(("--cpu-moe", "-ngl=7", "--port", "9", "--unknown", "x"))
        assert found == {"n_cpu_moe": ("--cpu-moe", None), "ngl": ("-ngl", "7"), "port": ("--port", "9")}


class TestExtraArgValues:
    """Every value read back from extra_args is checked: a bad one skips the model with a reason
    instead of crashing the run or sizing a command llama-server would run differently."""

    @pytest.mark.parametrize("extra, flag, value, allowed", [
        (("-ctk", "Q8_0"), "-ctk", "'Q8_0'", "f32, f16, bf16, q8_0"),
        (("-ctk", "q6_k"), "-ctk", "'q6_k'", "q4_0, iq4_nl"),
        (("--cache-type-k=q4_K",), "--cache-type-k", "'q4_K'", "q5_1, q5_0"),
        (("-ctv", "turbo3"), "-ctv", "'turbo3'", "q8_0"),
        (("-ctk", "-ctv", "q8_0"), "-ctk", "'-ctv'", "q8_0"),
        (("-ngl", "-1"), "-ngl", "'-1'", "an integer from 0 to 2147483647, all ('auto'"),
        (("--n-gpu-layers", "auto"), "--n-gpu-layers", "'auto'", "an integer from 0 to 2147483647, all"),
        (("--n-cpu-moe", "-2"), "--n-cpu-moe", "'-2'", "an integer from 0 to 2147483647"),
        (("-fa", "yes"), "-fa", "'yes'", "on, off, auto"),
        (("-np", "0"), "-np", "'0'", "an integer from 1 to 256, -1 (-1 = auto)"),
        (("-c", "-4096"), "-c", "'-4096'", "an integer from 0 to 2147483647 (0 = the trained context)"),
        (("-c", "8k"), "-c", "'8k'", "an integer from 0 to 2147483647"),
        (("-c", "100000000000000000000"), "-c", "'100000000000000000000'", "an integer from 0 to 2147483647"),
        (("-c", "1" * 5000), "-c", "'111111111111111111111111111111'… (5000 characters)", "an integer from 0"),
        (("-ngl", "2147483648"), "-ngl", "'2147483648'", "an integer from 0 to 2147483647, all"),
        (("-np", "257"), "-np", "'257'", "an integer from 1 to 256"),
        (("--jinja", "-c"), "-c", "no value", "an integer from 0 to 2147483647"),
        (("--image-max-tokens", "many"), "--image-max-tokens", "'many'", "an integer from -2147483648 to 2147483647 (0 or less = the projector's own)"),
    ])
    def test_a_bad_value_skips_the_model_naming_flag_value_and_allowed_list(self, extra, flag, value, allowed):
        plan = emit_llama(with_extra(*extra))
        assert not plan.entries
        (skip,) = plan.skips
        assert skip.reason.startswith(f"extra_args: {flag} {value}: expected ") and allowed in skip.reason

    def test_the_allowed_cache_types_are_the_sized_ones(self):
        plan = emit_llama(with_extra("-ctk", "Q8_0"))
        assert plan.skips[0].reason.endswith("expected " + ", ".join(KV_TYPE_BYTES))

    def test_ctx_zero_pins_the_trained_window(self):
        """llama-server: `-c 0` = "loaded from model"; our -c goes, the entry reports that ctx."""
        entry, _ = only_entry(with_extra("-c", "0"))
        assert entry.argv[-2:] == ("-c", "0") and entry.argv.count("-c") == 1
        md = meta_dict(entry)
        assert md["ctx"] == entry.capabilities.context == 131072
        assert md["est_vram_gb"] <= 11.5 and md["ngl"] < 33  # 128k does not fit whole: layers leave

    def test_ctx_zero_is_split_over_explicit_slots(self):
        entry, _ = only_entry(with_extra("-np", "2", "-c", "0", budget=40))
        assert meta_dict(entry)["ctx"] == 65536

    def test_ctx_zero_without_a_trained_window_is_refused(self):
        plan = emit_llama(with_extra("-c", "0", m=meta(context_length=0)))
        assert "asks for the trained context" in plan.skips[0].reason

    def test_ngl_all_means_every_layer(self):
        entry, _ = only_entry(with_extra("-ngl", "all", "-c", "4096"))
        assert meta_dict(entry)["ngl"] == 33 and entry.argv[-4:] == ("-ngl", "all", "-c", "4096")

    def test_cpu_moe_switch_means_every_layers_experts(self):
        m = meta(arch="qwen3moe", block_count=48, head_count_kv=(4,) * 48, expert_count=128, expert_used_count=8)
        entry, _ = only_entry(with_extra("--cpu-moe", m=m, size_gb=17.28))
        assert meta_dict(entry)["n_cpu_moe"] == 48 and "--n-cpu-moe" not in entry.argv

    def test_differing_k_and_v_types_are_sized_at_the_larger(self):
        entry, _ = only_entry(with_extra("-ctk", "q4_0", "-ctv", "q8_0"))
        assert meta_dict(entry)["kv_type"] == "q8_0"
        assert entry.argv[-4:] == ("-ctk", "q4_0", "-ctv", "q8_0") and entry.argv.count("-ctk") == 1

    def test_a_quantized_v_cache_alone_with_flash_attention_off_is_refused(self):
        plan = emit_llama(with_extra("-fa", "off", "-ctv", "q8_0"))
        assert "cache type q8_0 for V needs flash attention" in plan.skips[0].reason

    def test_a_bad_value_in_a_variant_skips_only_that_profile(self):
        ov = Override(match="*", profiles=(Profile(name="odd", extra_args=("-ctk", "Q4_0")),))
        plan = emit_llama(context(override=ov))
        assert [e.id for e in plan.entries] == ["llama-8b"]
        assert [s.id for s in plan.skips] == ["llama-8b-odd"] and "-ctk 'Q4_0'" in plan.skips[0].reason


class TestSlots:
    """llama-server b11434 without `--parallel` runs 4 slots over one KV pool of -c ("n_parallel
    is set to auto, using n_parallel = 4 and kv_unified = true"): the KV cost is -c, but 4
    sequences of recurrent state are allocated."""

    def test_no_parallel_flag_by_default_and_four_sequences_of_state(self):
        entry, plan = only_entry(stateful(context(), 64 << 20))
        assert "--parallel" not in entry.argv
        assert any(n.startswith("recurrent state 0.25 GiB: 4 cells × 67108864 B") for n in plan.notes)

    def test_a_chosen_slot_count_is_emitted_even_when_it_is_one(self):
        entry, plan = only_entry(stateful(context(settings=Settings(roots=("/m",), parallel=1)), 64 << 20))
        assert entry.argv[-2:] == ("--parallel", "1")
        assert any("recurrent state 0.06 GiB: 1 cell × " in n for n in plan.notes)

    def test_extra_parallel_auto_keeps_the_four_sequences(self):
        entry, plan = only_entry(stateful(with_extra("-np", "-1"), 64 << 20))
        assert entry.argv[-2:] == ("-np", "-1") and "--parallel" not in entry.argv
        assert any("recurrent state 0.25 GiB: 4 cells" in n for n in plan.notes)

    def test_state_is_inside_the_estimate(self):
        bare, _ = only_entry(context())
        heavy, _ = only_entry(stateful(context(), 1 << 30))
        assert meta_dict(heavy)["ctx"] < meta_dict(bare)["ctx"] and meta_dict(heavy)["est_vram_gb"] <= 11.5


class TestFlashAttentionOff:
    def test_settings_flash_attention_off_charges_the_scores(self):
        entry, plan = only_entry(context(settings=Settings(roots=("/m",), flash_attn="off")))
        md = meta_dict(entry)
        assert md["ctx"] == 28672 and md["est_vram_gb"] <= 11.5  # 45056 with flash attention
        assert any("scores 1.75 GiB: flash attention off, 28672 × 512 × 32 heads × 4 B" in n for n in plan.notes)

    def test_extra_flash_attention_off_charges_the_scores_too(self):
        entry, _ = only_entry(with_extra("-fa", "off"))
        assert meta_dict(entry)["ctx"] == 28672

    def test_an_embedder_without_flash_attention_pays_ctx_squared_scores(self):
        m = meta(arch="bert", pooling_type=1, context_length=8192, block_count=12, embedding_length=768,
                 feed_forward_length=3072, head_count=12, head_count_kv=(12,) * 12, key_length=64, value_length=64,
                 vocab_size=30522)
        on, _ = only_entry(context(m, size_gb=0.13))
        off, plan = only_entry(context(m, size_gb=0.13, override=Override(match="*", extra_args=("-fa", "off"))))
        scores = 8192 * 8192 * 12 * 4
        assert meta_dict(off)["est_vram_gb"] >= meta_dict(on)["est_vram_gb"] + 0.9 * scores / GIB
        assert any("flash attention off, 8192 × 8192 × 12 heads" in n for n in plan.notes)


class TestToolsCapability:
    @pytest.mark.parametrize("markers, scanned, tools", [
        (("tools_var",), True, True),
        (("tool_call_xml", "tools_var"), True, True),
        ((), True, None),
        (("tool_call_xml",), True, None),
        ((), False, True),  # too long to scan: absence is no evidence
    ])
    def test_tools_follow_the_scanned_template(self, markers, scanned, tools):
        m = meta(chat_template_markers=markers, chat_template_scanned=scanned)
        entry, _ = only_entry(context(m))
        assert entry.capabilities.tools is tools
        said = "no tools capability: the chat template never mentions tools" in entry.comment
        assert said is (tools is None)

    def test_no_template_no_tools_and_no_line(self):
        entry, _ = only_entry(context(meta(has_chat_template=False)))
        assert entry.capabilities.tools is None and not any("tools" in c for c in entry.comment)


class TestLeadingDenseLayers:
    def test_gguf_key_is_read(self, tmp_path):
        path = write_gguf(tmp_path / "ds.gguf", "deepseek2", kv={"{arch}.block_count": 61,
                                                                 "{arch}.leading_dense_block_count": 3})
        assert meta_from_gguf(read_gguf_header(path)).leading_dense_blocks == 3

    def test_hf_first_k_dense_replace_is_read(self):
        path = HF_CONFIGS / "deepseek-v3" / "config.json"
        assert meta_from_hf_config(json.loads(path.read_text())).leading_dense_blocks == 3

    def test_n_cpu_moe_counts_the_dense_layers(self):
        m = meta(arch="deepseek2", block_count=61, head_count_kv=(1,) * 61, kv_lora_rank=512, qk_rope_head_dim=64,
                 context_length=163840, expert_count=256, expert_used_count=8, leading_dense_blocks=3,
                 tensor_bytes=100 * GIB, expert_tensor_bytes=95 * GIB)
        entry, plan = only_entry(context(m, size_gb=100, budget=48))
        ncm = meta_dict(entry)["n_cpu_moe"]
        vram = 100 * GIB - 95 * GIB * (ncm - 3) / 58  # weights on the GPU: the dense layers move nothing
        assert entry.argv[entry.argv.index("--n-cpu-moe") + 1] == str(ncm)
        assert any(f"experts of {ncm - 3} of 58 MoE layers" in n for n in plan.notes)
        assert vram / GIB < meta_dict(entry)["est_vram_gb"] <= 48


class TestProjector:
    def test_roomy_budget_keeps_the_projector_on_the_gpu(self):
        entry, plan = only_entry(context(budget=24, mmproj="/models/mmproj-f16.gguf", mmproj_bytes=int(0.8 * GIB)))
        assert entry.argv[-2:] == ("--mmproj", "/models/mmproj-f16.gguf")
        assert entry.capabilities.inputs == ("text", "image")
        projector = [n for n in plan.notes if "projector" in n]
        assert projector == ["projector 1.80 GiB: on the GPU: its file 0.80 GiB and an assumed 1.00 GiB CLIP compute "
                             "buffer (no vision tower read from its header)"], "said once"

    def test_the_projector_charge_is_its_file_and_the_buffer_its_tower_needs(self):
        tower = VisionTower(projector_type="gemma3", image_size=896, patch_size=14, embedding_length=1152,
                            feed_forward_length=4304, head_count=16, projection_dim=4096)
        entry, plan = only_entry(context(budget=24, mmproj="/models/mmproj-f16.gguf", mmproj_bytes=int(0.8 * GIB),
                                         mmproj_tower=tower))
        assert "--no-mmproj-offload" not in entry.argv
        assert [n for n in plan.notes if "projector" in n] == [
            "projector 0.92 GiB: on the GPU: its file 0.80 GiB and llama.cpp's CLIP compute buffer for a 896×896 "
            "image, 0.12 GiB"]
        off = context(budget=24, mmproj="/models/mmproj-f16.gguf", mmproj_bytes=int(0.8 * GIB), mmproj_tower=tower,
                      override=Override(match="*", flash_attn="off", mmproj="gpu"))
        assert any("flash attention off, 1.09 GiB" in n for n in only_entry(off)[1].notes)

    def test_image_max_tokens_in_extra_args_shrinks_the_charge_and_image_min_tokens_does_not(self):
        """llama-server passes `--image-max-tokens` to clip.cpp, whose warmup of a Qwen-VL
        projector then holds 10 × 10 merged tokens, not 46 × 46; `--image-min-tokens` never
        changes the warmup."""
        tower = VisionTower(projector_type="qwen2vl_merger", patch_size=14, embedding_length=1280,
                            feed_forward_length=5120, head_count=16, projection_dim=3584, merge=2)

        def note(extra: list[str]) -> str:
            ov = Override(match="*", mmproj="gpu", extra_args=extra)
            _, plan = only_entry(context(budget=24, mmproj="/models/mmproj-f16.gguf", mmproj_bytes=GIB,
                                         mmproj_tower=tower, override=ov))
            return next(n for n in plan.notes if "projector" in n)

        assert "1288×1288 image, 0.26 GiB" in note([])
        assert "280×280 image, 0.01 GiB" in note(["--image-max-tokens", "100"])
        assert note(["--image-max-tokens=100"]) == note(["--image-max-tokens", "100"])
        assert note(["--image-min-tokens", "100"]) == note([])
        assert note(["--image-max-tokens", "-1"]) == note(["--image-max-tokens", "0"]) == note([]), "≤ 0: unset"

    def test_tight_budget_moves_the_projector_to_the_cpu(self):
        entry, plan = only_entry(context(budget=11.5, mmproj="/models/mmproj-f16.gguf", mmproj_bytes=int(0.8 * GIB)))
        assert entry.argv[-3:] == ("--mmproj", "/models/mmproj-f16.gguf", "--no-mmproj-offload")
        assert entry.capabilities.inputs == ("text", "image")
        assert "projector mmproj-f16.gguf on the CPU" in entry.comment
        assert [n for n in plan.notes if "projector" in n] == ["projector on the CPU (--no-mmproj-offload), not charged"]

    @pytest.mark.parametrize("mode, tail", [
        ("none", ("-ngl", "33", "-fit", "off")),
        ("cpu", ("--mmproj", "/models/mmproj.gguf", "--no-mmproj-offload")),
        ("gpu", ("--mmproj", "/models/mmproj.gguf")),
        ("/other/proj.gguf", ("--mmproj", "/other/proj.gguf")),
    ])
    def test_mmproj_setting(self, mode, tail):
        ov = Override(match="*", mmproj=mode)
        entry, _ = only_entry(context(budget=24, mmproj="/models/mmproj.gguf", override=ov))
        assert entry.argv[-len(tail):] == tail
        assert entry.capabilities.inputs == (("text",) if mode == "none" else ("text", "image"))

    def test_gpu_projector_is_charged_in_the_estimate(self):
        cpu, _ = only_entry(context(budget=24, mmproj="/m/p.gguf", override=Override(match="*", ctx=8192,
                                                                                     mmproj="cpu")))
        gpu, _ = only_entry(context(budget=24, mmproj="/m/p.gguf", override=Override(match="*", ctx=8192,
                                                                                     mmproj="gpu")))
        assert meta_dict(gpu)["est_vram_gb"] == pytest.approx(meta_dict(cpu)["est_vram_gb"] + 2.0, abs=0.011)


class TestEmbedding:
    @pytest.mark.parametrize("pooling, name", [(1, "mean"), (2, "cls"), (3, "last"), (4, "rank")])
    def test_embedding_command_names_the_pooling_and_sizes_batches_to_ctx(self, pooling, name):
        m = meta(arch="bert", pooling_type=pooling, context_length=512, block_count=12, embedding_length=768,
                 head_count_kv=(12,) * 12, key_length=64, value_length=64, vocab_size=30522,
                 has_chat_template=False)
        entry, _ = only_entry(context(m, size_gb=0.13, settings=Settings(roots=("/m",), threads=4)))
        assert entry.argv == (*HEAD, "--embeddings", "--pooling", name, "-c", "512", "-b", "512", "-ub", "512", "-ngl", "13", "-fit", "off", "-t", "4")
        caps = entry.capabilities
        assert caps.tools is None and caps.outputs == () and caps.context == 512
        assert caps.reranker is (True if name == "rank" else None)
        assert meta_dict(entry)["pooling"] == name

    def test_embedding_context_is_capped_and_pinnable(self):
        m = meta(arch="qwen3", pooling_type=3, context_length=32768)
        entry, _ = only_entry(context(m))
        assert entry.argv[entry.argv.index("-c") + 1] == "8192"
        entry, _ = only_entry(context(m, override=Override(match="*", ctx=2048, extra_args=("-ub", "1024"))))
        assert entry.argv[-2:] == ("-ub", "1024") and "2048" in entry.argv


class TestSkips:
    def test_missing_block_count_skips_with_a_reason(self):
        plan = emit_llama(context(meta(block_count=0, head_count_kv=())))
        assert not plan.entries and "block_count" in plan.skips[0].reason

    def test_unknown_kv_cost_skips_with_a_reason(self):
        plan = emit_llama(context(meta(head_count_kv=(), key_length=0, value_length=0, head_count=0,
                                       embedding_length=0)))
        assert not plan.entries and plan.skips[0].reason.startswith("KV cache cost unknown")

    def test_no_metadata_skips(self):
        ctx = attrs.evolve(context(), meta=None, kv=None)
        assert "no readable GGUF metadata" in emit_llama(ctx).skips[0].reason

    def test_projector_path_with_a_macro_skips(self):
        plan = emit_llama(context(override=Override(match="*", mmproj="/m/${PORT}.gguf")))
        assert "macro" in plan.skips[0].reason


class TestSettingsValidation:
    @pytest.mark.parametrize("data, message", [
        ({"kv_type": "q9"}, "kv_type: expected one of f32, f16"),
        ({"flash_attn": "yes"}, "flash_attn: expected on, off or auto, got 'yes'"),
        ({"overrides": [{"match": "*", "mmproj": ""}]}, "overrides[0].mmproj: expected auto, none, cpu, gpu"),
        ({"overrides": [{"match": "*", "ngl": -1}]}, "overrides[0].ngl: expected an integer from 0 to 2147483647"),
        ({"overrides": [{"match": "*", "flash_attn": True}]}, "overrides[0].flash_attn: expected a string"),
    ])
    def test_bad_llama_knobs_are_refused_with_their_path(self, data, message):
        with pytest.raises(SettingsError) as err:
            structure({"roots": ["/m"], **data}, Settings, "swapgen.yaml")
        assert any(p.startswith(message) for p in err.value.problems), err.value.problems

    def test_settings_cache_types_are_the_sized_ones(self):
        assert tuple(KV_TYPE_BYTES) == LLAMA_KV_TYPES
        with pytest.raises(SettingsError):
            structure({"roots": ["/m"], "kv_type": "Q8_0"}, Settings, "swapgen.yaml")

    def test_good_llama_knobs_are_accepted(self):
        s = structure({"roots": ["/m"], "kv_type": "q8_0", "flash_attn": "auto",
                       "overrides": [{"match": "*", "mmproj": "/p/mmproj.gguf", "ngl": 0, "kv_type": "f16"}]},
                      Settings, "swapgen.yaml")
        assert (s.kv_type, s.overrides[0].mmproj, s.overrides[0].ngl) == ("q8_0", "/p/mmproj.gguf", 0)


class TestSlidingWindowAndFit:
    def gemma3(self, **kw) -> ModelMeta:
        return meta(arch="gemma3", context_length=131072, block_count=48, embedding_length=3840,
                    feed_forward_length=15360, head_count=16, head_count_kv=(8,) * 48, key_length=256,
                    value_length=256, sliding_window=1024, vocab_size=262208, **kw)

    def test_sliding_layers_hold_their_window_so_gemma3_gets_more_context(self):
        entry, plan = only_entry(context(self.gemma3(), size_gb=6.8, budget=16.0))
        assert meta_dict(entry)["ctx"] >= 65536 and meta_dict(entry)["kv_type"] == "f16"
        assert any("KV sliding window" in n and "4608 cells" in n for n in plan.notes)

    def test_swa_full_in_extra_args_charges_every_cell(self):
        window, _ = only_entry(context(self.gemma3(), size_gb=6.8, budget=16.0))
        full, plan = only_entry(context(self.gemma3(), size_gb=6.8, budget=16.0,
                                        override=Override(match="*", extra_args=("--swa-full",))))
        assert meta_dict(full)["ctx"] < meta_dict(window)["ctx"] and full.argv[-1] == "--swa-full"
        assert any("--swa-full: every cell" in n for n in plan.notes)

    def test_a_fit_flag_in_extra_args_replaces_ours_and_show_says_so(self):
        entry, plan = only_entry(with_extra("-fit", "on"))
        assert entry.argv.count("-fit") == 1 and entry.argv[-2:] == ("-fit", "on")
        assert any(n.startswith("fit: -fit on from extra_args") for n in plan.notes)

    def test_a_bad_fit_value_is_refused(self):
        plan = emit_llama(with_extra("-fit", "maybe"))
        assert plan.skips and "-fit 'maybe'" in plan.skips[0].reason
