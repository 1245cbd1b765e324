"""Shared set-up for the vLLM tests (`test_emit_vllm`, `test_vllm_args`, `test_vllm_sizing`):
the worked examples' KV costs and card (docs/maintainers/sizing.md#vllm-worked-examples), an `EmitContext` builder, per-GPU device contexts, and argv
readers. A plain module, not conftest, so each test file names what it uses."""


import attrs

from autogen.discovery.rows import ModelRow
from autogen.emit.entry import Entry
from autogen.emit.vllm import emit_vllm
from autogen.metadata.kvcost import KvCost, kv_cost
from autogen.metadata.model_meta import ModelMeta
from autogen.numfmt import GIB
from autogen.resolve.backends import Resolved
from autogen.resolve.context import EmitContext
from autogen.settings.schema import BackendRow, Gpu, Settings

# The original charged KvReserveGB(ctx) = slope·ctx (+ a constant for sliding-window/SSM layers,
# none of which these dense models have), slope = layers · kv_heads · (key + value) · 2 bytes.
# Our KvCost carries that slope in bytes, built literally per example:
QWEN3_8B = KvCost(bytes_per_token=196_608, note="48 layers × 8 KV heads × (128+128) × 2 B")
QWEN25_05B = KvCost(bytes_per_token=12_288, note="24 layers × 2 KV heads × (64+64) × 2 B")
LLAMA3_8B = KvCost(bytes_per_token=131_072, note="32 layers × 8 KV heads × (128+128) × 2 B")
NO_DIMS = KvCost(bytes_per_token=None, note="no attention dimensions in the model file")

CARD = 24.0
#: Version 0.10.1 predates --kv-cache-memory-bytes: the worked examples' numbers (no pin).
BASELINE = "0.10.1"
BASE_V = (0, 10, 1)


def make_ctx(*, size_gb=8.0, arch="qwen3", trained=262_144, kv=QWEN3_8B, budget=16.0, card=CARD,
             override=None, version=BASELINE, fmt="gguf", path=None, model_id="q", tool_parsers=None,
             exe="/opt/vllm/bin/vllm", shards=(), row=True, size_bytes=None):
    path = path or ("/models/q/q.gguf" if fmt == "gguf" else "/models/meta/q")
    model_row = ModelRow(id=model_id, format=fmt, path=path,
                         size_bytes=size_bytes if size_bytes is not None else round(size_gb * GIB),
                         shards=shards)
    meta = ModelMeta(source=fmt, arch=arch, context_length=trained, has_chat_template=fmt == "gguf")
    backend_row = BackendRow(id="vllm-1", kind="vllm", path=exe, default=True, version=version) if row else None
    backend = Resolved(engine="vllm", exe=exe, row=backend_row, why="★ of class llm")
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

