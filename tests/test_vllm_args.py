"""`extra_args` read as vLLM's own argparse reads them (`vllm_args`): lengths in vLLM's
human-readable form, abbreviated and `_` spellings, the last value winning, and a value vLLM
refuses becoming a Skip. What the pins do to the sizing is in `test_vllm_sizing`."""

import pytest
from vllm_fixtures import make_ctx

from autogen.emit.vllm import emit_vllm
from autogen.flags.vllm import AUTO, ExtraArgs, parse_max_model_len, read_extra_args
from autogen.settings.schema import Override


class TestExtraArgsReadAsVllmReadsThem:
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
        (("--max-num-b", "4096"), ExtraArgs(max_num_batched_tokens=4096)),  # vLLM 0.33's least prefix
        (("--max_num_batched_tokens=8k",), ExtraArgs(max_num_batched_tokens=8000)),
        (("--max-num-seqs", "8", "--max-num-scheduled-tokens", "4096"), ExtraArgs()),
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
