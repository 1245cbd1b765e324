"""Builders several test modules share: a llama-server emit context, and a two-model library on
disk (the `library` fixture in `conftest.py` builds it)."""

from __future__ import annotations

from autogen.discovery.rows import ModelRow
from autogen.metadata.kvcost import kv_cost
from autogen.metadata.model_meta import ModelMeta
from autogen.resolve.backends import Resolved
from autogen.resolve.context import EmitContext
from autogen.settings.schema import BackendRow, Settings
from tests.gguf_fixtures import Q, write_gguf

GIB = 1 << 30

# -- a llama-server emit context ----------------------------------------------------------------

EXE = "/opt/llama/bin/llama-server"
HEAD = (EXE, "-m", "/models/Llama 8B.gguf", "--host", "127.0.0.1", "--port", "${PORT}")


def meta(**kw) -> ModelMeta:
    base = dict(source="gguf", arch="llama", context_length=131072, block_count=32, embedding_length=4096,
                head_count=32, head_count_kv=(8,) * 32, key_length=128, value_length=128, vocab_size=128256,
                feed_forward_length=14336,
                has_chat_template=True)
    return ModelMeta(**{**base, **kw})


def context(m: ModelMeta | None = None, *, size_gb: float = 4.583, budget: float = 11.5, override=None,
            settings: Settings | None = None, **row_kw) -> EmitContext:
    m = meta() if m is None else m
    row = ModelRow(id="llama-8b", format="gguf", path="/models/Llama 8B.gguf", size_bytes=int(size_gb * GIB),
                   **row_kw)
    backend = Resolved(engine="llama", exe=EXE, row=BackendRow(id="llama-cuda", kind="llama", path=EXE, build="cuda"),
                       why="★ of class llm")
    return EmitContext(row=row, meta=m, kv=kv_cost(m) if m is not None else None, override=override,
                       settings=settings or Settings(roots=("/models",)), backend=backend, budget_gb=budget,
                       card_vram_gb=None, ttl=600)


# -- a library on disk ---------------------------------------------------------------------------

def llama_kv(blocks=4, ctx=8192):
    return {"{arch}.block_count": blocks, "{arch}.context_length": ctx, "{arch}.embedding_length": 256,
            "{arch}.attention.head_count": 8, "{arch}.attention.head_count_kv": 2,
            "{arch}.feed_forward_length": 1024}


def add_model(root, rel, *, size=None, blocks=4):
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    tensors = [("token_embd.weight", (256, 1024), Q.F16)]
    tensors += [(f"blk.{i}.attn_q.weight", (256, 256), Q.F16) for i in range(blocks)]
    return write_gguf(path, "llama", kv=llama_kv(blocks), tensors=tensors, sparse_size=size)


SETTINGS = """roots: [models]
vram_budget_gb: 8
card_vram_gb: 0
backends:
  - {id: llama, kind: llama, path: /opt/llama/llama-server, default: true}
"""
