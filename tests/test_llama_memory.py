"""llama-server's allocations, held to llama.cpp b11434's own report.

`tests/data/llama_alloc_b11434.json` records what llama-server itself logged on GGUFs with the
KV structure of Llama-3.1, Qwen3, Qwen3-MoE, Gemma-2/3, gpt-oss, Phi-3, DeepSeek MLA, Falcon MQA,
Mamba2, Granite-4.0-H, Nemotron-H and LFM2, plus dense and MoE models at real widths (MoE at
real depth from llama-fit-params), under
`-c` 4k–128k, auto / explicit / unified slots, q8_0 caches, flash attention off and
`--swa-full` (how: `tests/data/record_llama_alloc.py`). Each record's header is rebuilt here
as a GGUF and read by swapgen's own reader, so the whole path is under test; no server runs.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import attrs
import pytest
from gguf_fixtures import write_gguf

from autogen.metadata.gguf_header import read_gguf_header
from autogen.metadata.gguf_meta import meta_from_gguf
from autogen.metadata.kvcost import kv_cost
from autogen.metadata.model_meta import ModelMeta
from autogen.sizing.llama_memory import Launch, allocations, expert_width, row_bytes, sliding_layers

TABLE = json.loads((Path(__file__).parent / "data" / "llama_alloc_b11434.json").read_text())
RECORDS = [r for r in TABLE["records"] if r["status"] == "loaded"]
#: llama.cpp logs MiB with two decimals: ±0.005 MiB per figure.
LOG_ROUNDING = 6 * 1024
NOT_KEYS = {"arch", "model", "file", "description", "file_bytes", "vocab"}


def launch_of(args: list[str]) -> Launch:
    """The launch a record's llama-server flags describe (b11434 defaults for the rest)."""
    flags = dict(zip(args[::2], args[1::2], strict=False))
    slots = int(flags.get("--parallel", 0))
    return Launch(ctx=int(flags["-c"]), slots=slots or 4, unified=not slots or "--kv-unified" in args,
                  type_k=flags.get("-ctk", "f16"), type_v=flags.get("-ctv", "f16"),
                  flash_attn=flags.get("-fa", "on") != "off", swa_full="--swa-full" in args)


@pytest.fixture(scope="module")
def ours(tmp_path_factory):
    """swapgen's allocations for a record: its GGUF header rewritten and read back by swapgen's
    reader, at the record's launch (with `changes`)."""
    directory = tmp_path_factory.mktemp("llama-memory")

    @cache
    def meta_of(model: str) -> ModelMeta:
        dims = next(r["gguf"] for r in TABLE["records"] if r["model"] == model)
        kv = {f"{{arch}}.{k}": v for k, v in dims.items() if k not in NOT_KEYS}
        path = write_gguf(directory / f"{model}.gguf", dims["arch"], kv=kv, vocab=dims["vocab"])
        return meta_from_gguf(read_gguf_header(path))

    def allocations_of(record: dict, **changes):
        meta = meta_of(record["model"])
        launch = attrs.evolve(launch_of(record["args"]), **changes)
        return allocations(meta, launch, kv_cost(meta).state_bytes_per_seq)

    return allocations_of


def ids(records):
    return [f"{r['model']}-{r['launch']}" for r in records]


def test_the_table_covers_every_family_and_launch():
    archs = {r["gguf"]["arch"] for r in RECORDS}
    assert {"llama", "qwen3", "qwen3moe", "gemma2", "gemma3", "gpt-oss", "phi3", "deepseek2", "falcon", "mamba2",
            "granitehybrid", "nemotron_h", "lfm2"} <= archs
    assert {r["launch"] for r in RECORDS} >= {"c4k", "c128k", "c9999-np3", "c8k-q8", "c8k-faoff", "c8k-swafull"}
    assert len({r["model"] for r in RECORDS if r["model"].startswith("w-")}) >= 6


@pytest.mark.parametrize("record", RECORDS, ids=ids(RECORDS))
def test_kv_cache_and_cells_are_llama_cpps(record, ours):
    m = ours(record)
    assert m.kv_total == pytest.approx(record["kv_bytes"], rel=0.01, abs=2 * LOG_ROUNDING)
    assert m.kv_swa == pytest.approx(record["kv_swa_bytes"], rel=0.01, abs=LOG_ROUNDING)
    if record["kv_full_cells"] is not None and record["kv_caches"][0]["layers"] > 0:
        assert m.geometry.cells == record["kv_full_cells"]
    assert (m.geometry.swa_cells or None) == record["kv_swa_cells"]
    assert m.geometry.n_ctx == record["ctx"]["n_ctx"] and m.geometry.n_ctx_seq == record["ctx"]["n_ctx_seq"]


@pytest.mark.parametrize("record", RECORDS, ids=ids(RECORDS))
def test_recurrent_state_is_llama_cpps(record, ours):
    assert ours(record).state == pytest.approx(record["rs_bytes"], rel=0.01, abs=LOG_ROUNDING)


COMPUTE = [r for r in RECORDS if 4096 <= int(r["args"][1]) <= 131072]


@pytest.mark.parametrize("record", COMPUTE, ids=ids(COMPUTE))
def test_compute_buffer_within_15_percent(record, ours):
    assert ours(record).compute == pytest.approx(record["compute_bytes"], rel=0.15)


FIT = [r for r in RECORDS if r.get("fit_params")]


@pytest.mark.parametrize("record", FIT, ids=ids(FIT))
def test_llama_fit_params_agrees(record, ours):
    """llama.cpp's estimator reserves logits for n_ubatch outputs (it keeps n_outputs_max at
    n_batch) and one slot unless `--parallel` says otherwise."""
    fit = record["fit_params"]
    explicit = "--parallel" in record["args"]
    m = ours(record, outputs=512, **({} if explicit else {"slots": 1, "unified": True}))
    assert (m.kv_total + m.state) / 2**20 == pytest.approx(fit["context_mib"], rel=0.01, abs=1)
    assert m.compute / 2**20 == pytest.approx(fit["compute_mib"], rel=0.15)


#: Real depth (every layer of Qwen3-30B-A3B, Qwen3-235B-A22B) asked of llama-fit-params only: the
#: server's load would read tens of GB of a sparse file.
DEEP = [r for r in TABLE["records"] if r["status"] == "fit-params only"]


@pytest.mark.parametrize("record", DEEP, ids=ids(DEEP))
def test_moe_at_real_width_and_depth_agrees_with_llama_fit_params(record, ours):
    fit = record["fit_params"]
    explicit = "--parallel" in record["args"]
    m = ours(record, outputs=512, **({} if explicit else {"slots": 1, "unified": True}))
    assert (m.kv_total + m.state) / 2**20 == pytest.approx(fit["context_mib"], rel=0.01, abs=1)
    assert m.compute / 2**20 == pytest.approx(fit["compute_mib"], rel=0.05)


def test_the_moe_records_cover_real_widths_with_and_without_the_expert_width_key():
    moe = {r["model"] for r in RECORDS + DEEP if r["gguf"]["arch"] == "qwen3moe" and r["model"].startswith("w-")}
    assert {"w-qwen3moe-30b", "w-qwen3moe-30b-nokey", "w-qwen3moe-30b-48l", "w-qwen3moe-235b"} <= moe
    assert "expert_feed_forward_length" not in next(r for r in RECORDS if r["model"] == "w-qwen3moe-30b-nokey")["gguf"]


class TestRules:
    """The source rules on their own, with the examples llama.cpp's code gives."""

    def meta(self, arch: str, layers: int = 12, **kw) -> ModelMeta:
        return ModelMeta(source="gguf", arch=arch, context_length=131072, block_count=layers,
                         embedding_length=256, head_count=16, head_count_kv=(8,) * layers, key_length=256,
                         value_length=256, vocab_size=32000, **kw)

    def test_context_padding_with_explicit_slots(self):
        m = allocations(self.meta("llama"), Launch(ctx=9999, slots=3))
        assert (m.geometry.n_ctx, m.geometry.n_ctx_seq, m.geometry.streams) == (10752, 3584, 3)

    @pytest.mark.parametrize("arch, window, pattern, sliding", [
        ("gemma3", 1024, 0, 10), ("gemma3", 0, 0, 0), ("gemma2", 0, 0, 6), ("gpt-oss", 128, 0, 6),
        ("cohere2moe", 4096, 0, 9), ("llama4", 0, 0, 9), ("phi3", 2047, 0, 0), ("gemma3", 1024, 3, 8),
        ("llama", 4096, 0, 0)])
    def test_which_layers_slide(self, arch, window, pattern, sliding):
        flags, n_swa = sliding_layers(self.meta(arch, sliding_window=window, sliding_pattern=pattern))
        assert sum(flags) == sliding and (n_swa > 0) == (sliding > 0)

    def test_window_cells_grow_with_unified_slots_only(self):
        gemma = self.meta("gemma3", sliding_window=1024)
        assert allocations(gemma, Launch(ctx=8192, slots=4, unified=True)).geometry.swa_cells == 4608
        assert allocations(gemma, Launch(ctx=8192, slots=4)).geometry.swa_cells == 1536
        assert allocations(gemma, Launch(ctx=8192, slots=4, unified=True, swa_full=True)).geometry.swa_cells == 8192
        assert allocations(self.meta("gpt-oss", sliding_window=128),
                           Launch(ctx=131072, slots=4, unified=True)).geometry.swa_cells == 1024

    @pytest.mark.parametrize("arch, key, width", [("qwen3moe", 768, 768), ("qwen3moe", 0, 6144 // 8),
                                                  ("glm4moe", 0, 6144 // 8), ("llama", 0, 6144)])
    def test_an_experts_ffn_width_as_the_loader_sets_it(self, arch, key, width):
        """src/models/qwen3moe.cpp: n_ff / n_expert_used without the key; Mixtral (`llama`): n_ff."""
        meta = attrs.evolve(self.meta(arch), feed_forward_length=6144, expert_count=128, expert_used_count=8,
                            expert_feed_forward_length=key)
        assert expert_width(meta) == width

    def test_quantized_rows_are_ggml_blocks(self):
        assert (row_bytes("q8_0", 2048), row_bytes("q4_0", 2048), row_bytes("f16", 2048)) == (2176, 1152, 4096)

    def test_the_mask_grows_with_the_context(self):
        llama = self.meta("llama")
        small, large = (allocations(llama, Launch(ctx=c, slots=4, unified=True)) for c in (8192, 1 << 20))
        assert large.compute - small.compute == ((1 << 20) - 8192) * 512 * 2  # f16 mask, 1 GiB at 1M
