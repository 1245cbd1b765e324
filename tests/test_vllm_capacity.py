"""vLLM sizing held to vLLM 0.33's own capacity functions.

`tests/data/vllm_capacity_0.33.json` records, for the shared configs (gpt-oss-20b with sliding
and full layers, Qwen3.5-27B's gated DeltaNet hybrid, Nemotron-H's Mamba-2 hybrid, DeepSeek-V3's
MLA, Llama, Qwen3, Mixtral) and synthetic sliding / padded / MLA / hybrid shapes, what vLLM's
`_max_memory_usage_bytes_from_groups` charges one request at several `--max-model-len` and
`--max-num-batched-tokens`, the null block its check holds back, and what `get_kv_cache_configs`
says at several KV budgets (it fits, or "the estimated maximum model length is N"). How:
`tests/data/record_vllm_capacity.py` (vLLM's model files on the meta device, no GPU, no weights).
Each row's config is read by swapgen's own reader here; no vLLM runs, except in the slow test.

Exact on every row except gated DeltaNet (Qwen3.5): vLLM keeps 2 state pages at 16-token
blocks with its Triton prefill and 3 at 64-token blocks with FlashInfer's, the GPU decides, and
swapgen charges the latter: never less, and over by at most one page per state group plus the
coarser blocks (`GDN_SPARE_BLOCKS` of vLLM's blocks).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import attrs
import pytest
from shared import UPSTREAM_HF_CONFIGS, VLLM_VENV, not_set_up, upstream

from autogen.metadata.hf_config import meta_from_hf_config
from autogen.metadata.kvcost import kv_cost
from autogen.sizing.vllm_memory import CONCURRENT_BATCHES, VllmKv, vllm_kv

DATA = Path(__file__).parent / "data"
TABLE = json.loads((DATA / "vllm_capacity_0.33.json").read_text())
MODELS = {m["name"]: m for m in TABLE["models"]}
#: Gated DeltaNet's spare: 3 state groups × 1 page, and the 64-token block's extra tokens.
GDN_SPARE_BLOCKS = 4
REQUIRED = {"gpt-oss-20b", "qwen3.5-27b", "nemotron-h-56b-base-8k", "deepseek-v3"}


def layout_of(model: dict, batched: int) -> VllmKv:
    meta = meta_from_hf_config(model["config"])
    layout = vllm_kv(kv_cost(meta), meta, 1, CONCURRENT_BATCHES * batched)
    assert layout is not None, model["name"]
    return layout


def gated_delta_net(model: dict) -> bool:
    return model["config"].get("model_type") in {"qwen3_5", "qwen3_next"}


def test_the_table_covers_sliding_hybrid_and_mla_models():
    assert set(MODELS) >= REQUIRED
    kinds = {kind for m in TABLE["models"] for kind in m["layers"]}
    assert {"FullAttentionSpec", "SlidingWindowSpec", "MLAAttentionSpec", "MambaSpec"} <= kinds
    assert TABLE["vllm"].startswith("0.33")


@pytest.mark.parametrize("name", sorted(MODELS))
def test_layers_group_as_vllm_groups_them(name):
    model = MODELS[name]
    layout = layout_of(model, 2048)
    counts = model["layers"]
    assert layout.sliding == counts.get("SlidingWindowSpec", 0)
    assert layout.full == counts.get("FullAttentionSpec", 0) + counts.get("MLAAttentionSpec", 0)
    assert layout.mamba == counts.get("MambaSpec", 0)
    if not layout.mamba:
        assert layout.block == model["block_size"] and layout.block * layout.token_bytes == model["page_bytes"][0]
    else:
        assert layout.mamba_bytes == model["mamba_page_real_bytes"]  # conv in bf16, SSM state in f32
        assert layout.block >= model["block_size"]
    if gated_delta_net(model):
        assert model["null_block_bytes"] <= layout.block_bytes <= model["null_block_bytes"] * 1.1
    else:
        assert layout.block_bytes == model["null_block_bytes"]


@pytest.mark.parametrize("name", sorted(MODELS))
def test_one_request_costs_what_vllm_charges(name):
    model = MODELS[name]
    for row in model["needed"]:
        ours = layout_of(model, row["max_num_batched_tokens"]).needed(row["max_model_len"])
        if gated_delta_net(model):
            assert row["needed_bytes"] <= ours <= row["needed_bytes"] + GDN_SPARE_BLOCKS * model["null_block_bytes"]
        else:
            assert ours == row["needed_bytes"], row


@pytest.mark.parametrize("name", sorted(MODELS))
def test_longest_length_is_vllms_estimate(name):
    """`get_kv_cache_configs` at each budget: swapgen's longest length passes exactly where vLLM's
    does, and where it does not, it is vLLM's printed estimate (never longer for gated DeltaNet)."""
    model = MODELS[name]
    for check in model["checks"]:
        layout = layout_of(model, check["max_num_batched_tokens"])
        ours = layout.longest(check["kv_cache_memory_bytes"], model["trained"])
        theirs = model["trained"] if check["fits"] else check["estimate"]
        if gated_delta_net(model):
            assert ours <= theirs, check
            spare = GDN_SPARE_BLOCKS * model["null_block_bytes"]
            assert layout.check_bytes(theirs) <= check["kv_cache_memory_bytes"] + spare
        else:
            assert ours == theirs, check
            assert (layout.check_bytes(model["trained"]) <= check["kv_cache_memory_bytes"]) is check["fits"]


def test_sliding_layers_cost_their_window_not_the_context():
    """gpt-oss-20b at 128k on a small card: 12 full layers hold 8192 blocks, the 12 sliding ones
    cdiv(127 + 2 × 2048, 16) + 1 = 265; charging them at the full context would ask 1.94× as much."""
    model = MODELS["gpt-oss-20b"]
    layout = layout_of(model, 2048)
    assert layout.blocks(131_072) == {"full": 8192, "sliding": 265}
    full_charge = kv_cost(meta_from_hf_config(model["config"])).bytes_per_token * 131_072
    assert full_charge / layout.needed(131_072) > 1.9


def test_a_pattern_vllm_pads_is_charged_padded():
    """9 sliding + 8 full layers: vLLM groups them 9 and 9 (the full group padded), one block holds 9 pages."""
    layout = layout_of(MODELS["gpt-oss-17-layers"], 2048)
    assert layout.block_bytes == 9 * layout.block * layout.token_bytes


def _recompute(names: list[str], out: Path) -> subprocess.CompletedProcess:
    script = DATA / "record_vllm_capacity.py"
    return subprocess.run([str(VLLM_VENV / "bin" / "python"), str(script), "--out", str(out), "--only", *names],
                          capture_output=True, text=True, timeout=900, env=os.environ.copy(), check=False)


@pytest.mark.slow
@pytest.mark.skipif(not (VLLM_VENV / "bin" / "python").exists(), reason=not_set_up(f"vLLM's CPU venv ({VLLM_VENV})"))
def test_vllm_still_computes_the_recorded_rows(tmp_path):
    """Recompute a sliding, an MLA and a hybrid row with vLLM's own functions and compare (vLLM
    builds gpt-oss from its whole upstream config.json, which the recorder reads)."""
    upstream(UPSTREAM_HF_CONFIGS / "gpt-oss-20b" / "config.json", "gpt-oss-20b's config.json")
    names = ["gpt-oss-20b", "deepseek-v2-lite", "nemotron-h-small"]
    done = _recompute(names, tmp_path / "table.json")
    missing = next((line for line in reversed(done.stderr.splitlines())
                    if "No module named" in line and "vllm._C" not in line), None)
    if done.returncode != 0 and missing is not None:
        pytest.skip(f"the vLLM venv cannot build these models ({missing.strip()}); " + not_set_up(
            "the packages vLLM's model files import (einops, …)"))
    assert done.returncode == 0, done.stderr[-2000:]
    fresh = {m["name"]: m for m in json.loads((tmp_path / "table.json").read_text())["models"]}
    for name in names:
        for key in ("layers", "block_size", "null_block_bytes", "needed", "checks"):
            assert fresh[name][key] == MODELS[name][key], (name, key)


def test_layers_vllm_groups_otherwise_are_charged_at_the_full_context():
    """Attention layers of different head counts: vLLM rescales their blocks to one page
    (`unify_kv_cache_spec_page_size`), which is not modelled; every layer then pays the full context."""
    model = MODELS["llama-3.1-8b"]
    meta = meta_from_hf_config(model["config"])
    mixed = attrs.evolve(meta, head_count_kv=(8,) * 16 + (4,) * 16)
    assert vllm_kv(kv_cost(mixed), mixed, 1, 4096) is None
    assert vllm_kv(kv_cost(meta), meta, 1, 4096) is not None
