"""The vLLM emitter: worked examples E–G (docs/maintainers/sizing.md#vllm-worked-examples, card probe stubbed
at 24 GiB), tool parsers, split GGUFs, HF folders, version gating,
the entry's shape and notes, and vLLM's own parser on our command lines. The sizing numbers are
in `test_vllm_sizing`, the reading of `extra_args` in `test_vllm_args`."""

import json
import shlex
import subprocess

import attrs
import pytest
from gguf_fixtures import write_gguf
from vllm_fixtures import LLAMA3_8B, NO_DIMS, entry_of, flag, make_ctx, meta_of

from autogen.emit.vllm import emit_vllm
from autogen.metadata.gguf_header import read_gguf_header
from autogen.metadata.gguf_meta import meta_from_gguf
from autogen.settings.schema import Override
from tests.shared import TOOLS, VLLM_VENV, not_set_up

ARGCHECK = TOOLS / "vllm-argcheck" / "vllm_argcheck.py"


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
        assert entry.comment[0] == "vllm · qwen3 · 4 GiB · max-model-len 32768 (no KV cost model; conservative default)"
        assert entry.comment[1] == "gpu-memory-utilization 0.67 (16.0 GiB budget of 24.0 GiB card)"
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
        assert entry.comment[0] == "vllm · qwen3 · 8 GiB · max-model-len 32768 (sized to 6.5 GiB free of budget)"

    def test_ttl_unlisted_and_extra_args_last(self):
        entry = entry_of(make_ctx(override=Override(match="*", unlisted=True, extra_args=("--enforce-eager",))))
        assert (entry.ttl, entry.unlisted, entry.argv[-1]) == (600, True, "--enforce-eager")

    def test_notes_give_every_number(self):
        notes = "\n".join(emit_vllm(make_ctx(version="0.11.0")).notes)
        for text in ("max-model-len 32768: sized to 6.5 GiB",
                     "kv-cache-memory-bytes 6.85 GiB", "footprint 16.35 GiB", "gpu-memory-utilization 0.69",
                     "estimate 16.56 GiB", "tool-call parser hermes", "vLLM version 0.11.0"):
            assert text in notes

    def test_notes_leave_the_budget_and_card_to_the_report_head(self):
        """`swapgen show` prints the budget and the card above the notes; the estimate is one line."""
        notes = emit_vllm(make_ctx(version="0.11.0")).notes
        assert not [n for n in notes if n.startswith(("card ", "budget ", "est_vram_gb"))]
        assert len([n for n in notes if n.startswith("estimate ")]) == 1

    def test_missing_metadata_is_tolerated(self):
        entry = entry_of(attrs.evolve(make_ctx(), meta=None, kv=None))
        assert entry.comment[0].startswith("vllm · ? · 8 GiB · max-model-len 32768 (no KV cost model")
        assert entry.capabilities.tools is None


@pytest.mark.slow
@pytest.mark.skipif(not (VLLM_VENV / "bin" / "python").exists(), reason=not_set_up(f"vLLM's CPU venv ({VLLM_VENV})"))
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
