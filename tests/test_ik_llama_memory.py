"""ik_llama.cpp's allocations, held to its own llama-server's report.

`tests/data/ik_llama_alloc_015.json` records what ik_llama.cpp's llama-server (ik-llama-cpp-python
0.1.5, CPU build) logged on the llama-memcheck GGUFs it loads and on DeepSeek-style MLA models at
DeepSeek-V2-Lite's and DeepSeek-V3's widths (new, `attn_kv_b` and pre-`_mla` conversions), under
`-c` 8k–128k, `--parallel`, q8_0 caches, flash attention off, `-ub 1024`, `-mla 0..2`, `-amb`,
`-no-fmoe`, `--cpu-moe` and `-rtr` (how: `tests/data/record_ik_llama_alloc.py`). Each record's
header is rebuilt as a GGUF and read by swapgen's reader; no server runs.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest
from gguf import GGMLQuantizationType
from gguf_fixtures import write_gguf

from autogen.metadata.gguf_header import read_gguf_header
from autogen.metadata.gguf_meta import meta_from_gguf
from autogen.metadata.model_meta import ModelMeta
from autogen.sizing.ik_llama_memory import ik_allocations
from autogen.sizing.llama import LlamaKnobs, unmapped_output
from autogen.sizing.llama_memory import Launch

TABLE = json.loads((Path(__file__).parent / "data" / "ik_llama_alloc_015.json").read_text())
RECORDS = [r for r in TABLE["records"] if r["status"] == "loaded"]
#: ik_llama.cpp logs MiB with two decimals: ±0.005 MiB per figure.
LOG_ROUNDING = 6 * 1024
NOT_KEYS = {"arch", "model", "file", "description", "file_bytes", "vocab"}


def launch_of(args: list[str]) -> Launch:
    """The launch a record's flags describe (ik_llama.cpp's defaults for the rest)."""
    flags = dict(zip(args[::2], args[1::2], strict=False))
    return Launch(ctx=int(flags["-c"]), slots=int(flags.get("--parallel", 1)), type_k=flags.get("-ctk", "f16"),
                  type_v=flags.get("-ctv", "f16"), flash_attn=flags.get("-fa", "on") != "off",
                  mla=int(flags.get("-mla", 3)), attn_max_batch=int(flags.get("-amb", 0)),
                  ubatch=int(flags.get("-ub", 512)))


@pytest.fixture(scope="module")
def meta_of(tmp_path_factory):
    """A record model's header, rewritten (with its embeddings, untied or `tied`) and read back."""
    directory = tmp_path_factory.mktemp("ik-llama-memory")

    @cache
    def meta(model: str, tied: bool = False) -> ModelMeta:
        dims = next(r["gguf"] for r in RECORDS if r["model"] == model)
        kv = {f"{{arch}}.{k}": v for k, v in dims.items() if k not in NOT_KEYS}
        embd = ("token_embd.weight", (dims["embedding_length"], dims["vocab"]), GGMLQuantizationType.F16)
        tensors = [embd] if tied else [embd, ("output.weight", embd[1], GGMLQuantizationType.F16)]
        path = write_gguf(directory / f"{model}-{tied}.gguf", dims["arch"], kv=kv, vocab=dims["vocab"],
                          tensors=tensors)
        return meta_from_gguf(read_gguf_header(path))

    return meta


def ids(records):
    return [f"{r['model']}-{r['launch']}" for r in records]


def test_the_table_covers_the_families_and_the_options_users_pick_ik_for():
    assert {r["gguf"]["arch"] for r in RECORDS} >= {"llama", "qwen3", "qwen3moe", "gemma3", "phi3", "deepseek2",
                                                      "falcon"}
    assert {r["launch"] for r in RECORDS} >= {"c128k", "c9999-np3", "c8k-q8", "c8k-faoff", "c8k-faoff-amb64",
                                               "c8k-mla0", "c8k-mla1", "c8k-mla2", "c8k-nofmoe", "c8k-cpumoe",
                                               "c8k-rtr"}
    assert {"w-dsv3", "w-dsv2-lite", "w-dsv2-lite-kvb", "w-dsv2-lite-pre-mla"} <= {r["model"] for r in RECORDS}


@pytest.mark.parametrize("record", RECORDS, ids=ids(RECORDS))
def test_context_and_kv_cache_are_ik_llama_cpps(record, meta_of):
    """One pool of n_ctx cells (256-padded with flash attention, 32 without) for every layer,
    sliding-window ones too; MLA's latent by `-mla` and flash attention."""
    m = ik_allocations(meta_of(record["model"]), launch_of(record["args"]))
    assert m.geometry.n_ctx == record["ctx"]["n_ctx"]
    assert m.kv_total == pytest.approx(record["kv_bytes"], rel=0.001, abs=2 * LOG_ROUNDING)


@pytest.mark.parametrize("record", RECORDS, ids=ids(RECORDS))
def test_compute_buffer_is_within_ten_percent(record, meta_of):
    m = ik_allocations(meta_of(record["model"]), launch_of(record["args"]))
    assert m.compute == pytest.approx(record["compute_bytes"], rel=0.10)


def test_mla_caches_the_latent_and_decompresses_it_for_prompts(meta_of):
    """DeepSeek-V3's width: `-mla 1` attends in the latent (402 MiB); `-mla 3` decompresses K and
    V of every cell (1.7 GiB at 8k); `-amb 64` slices the scores of `-fa off` by heads."""
    by = {(r["model"], r["launch"]): r for r in RECORDS}
    meta = meta_of("w-dsv3")
    for launch in ("c8k", "c8k-mla1", "c8k-faoff", "c8k-faoff-amb64"):
        record = by[("w-dsv3", launch)]
        assert ik_allocations(meta, launch_of(record["args"])).compute == pytest.approx(record["compute_bytes"],
                                                                                         rel=0.07)
    assert by[("w-dsv3", "c8k-faoff-amb64")]["compute_bytes"] < by[("w-dsv3", "c8k-faoff")]["compute_bytes"] / 4


def test_a_pre_mla_conversion_keeps_the_latent_too(meta_of):
    """llama.cpp runs it as per-head K/V; ik_llama.cpp caches the same 576-wide latent."""
    old, new = meta_of("w-dsv2-lite-pre-mla"), meta_of("w-dsv2-lite")
    assert old.kv_lora_rank == 0 and old.latent_rank == 512
    launch = launch_of(["-c", "8192"])
    assert ik_allocations(old, launch).kv_total == ik_allocations(new, launch).kv_total == 18 << 20


@pytest.mark.parametrize("model", sorted({r["model"] for r in RECORDS if r["launch"] == "c8k-rtr"}))
def test_run_time_repack_copies_a_tied_models_embeddings(model, meta_of):
    """`-rtr` reads the weights without mmap: a tied model's output layer gets its own copy of
    the token embeddings, an untied one's weights stay as they are."""
    by = {r["launch"]: r for r in RECORDS if r["model"] == model}
    grown = by["c8k-rtr"]["model_bytes"] - by["c8k"]["model_bytes"]
    tied = grown > LOG_ROUNDING
    meta = meta_of(model, tied)
    on_cpu = meta.block_count  # a CPU run: the output layer is on the host
    assert unmapped_output(meta, LlamaKnobs(run_time_repack=True), on_cpu) == pytest.approx(grown, abs=LOG_ROUNDING)
    assert unmapped_output(meta, LlamaKnobs(), on_cpu) == 0


def test_fused_moe_and_cpu_moe_move_no_buffer():
    """`-no-fmoe` and `--cpu-moe` leave the KV cache and the compute buffer where they were
    (within 0.5 MiB): neither needs a charge of its own."""
    by = {(r["model"], r["launch"]): r for r in RECORDS}
    for model in {m for m, launch in by if launch == "c8k-nofmoe"}:
        base = by[(model, "c8k")]
        for launch in ("c8k-nofmoe", "c8k-cpumoe"):
            assert by[(model, launch)]["kv_bytes"] == base["kv_bytes"]
            assert by[(model, launch)]["compute_bytes"] == pytest.approx(base["compute_bytes"], abs=1 << 19)
