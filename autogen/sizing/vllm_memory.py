"""The KV-cache bytes vLLM 0.33 checks before it starts, and the longest `--max-model-len` they allow.

vLLM refuses to start unless its KV pool, less one block (the null block `BlockPool` holds
back), holds one request of `--max-model-len`: `get_kv_cache_configs` →
`_check_enough_kv_cache_memory` against `_max_memory_usage_bytes_from_groups`
(vllm/v1/core/kv_cache_planning.py), bytes per block × Σ over the KV-cache groups of the blocks
one request takes. When it does not fit it prints "the estimated maximum model length is N"
(`_estimate_max_model_len_from_groups`, a search over the same function); `longest` is that
search. docs/maintainers/sizing.md#vllms-start-up-check states each rule with its source, and
docs/maintainers/sizing.md#how-the-tests-hold-the-vllm-numbers how vLLM's own functions hold it.

Per layer (vllm/v1/kv_cache_interface.py), `block` tokens per page:

- full attention and MLA (`FullAttentionSpec`, `MLAAttentionSpec`): `cdiv(max_model_len, block)`;
- sliding window (`SlidingWindowSpec.max_admission_blocks_per_request`):
  `cdiv(min(window − 1 + in_flight, max_model_len), block) + 1`, where `in_flight` =
  2 batches (async scheduling) × `--max-num-batched-tokens` (`VllmConfig.max_in_flight_tokens`);
- mamba / linear attention (`MambaSpec.max_memory_usage_bytes`): 3 pages in prefix-caching
  "align" mode (2 + one prefill checkpoint; prefix caching is on by default), whatever the
  length. Mamba2 mixers always export that checkpoint (`MambaMixer2.get_kv_cache_spec`); gated
  DeltaNet does with FlashInfer's prefill, which also aligns blocks to 64 tokens
  (`FLASHINFER_GDN_CHECKPOINT_ALIGNMENT`), and keeps 2 pages at 16-token blocks otherwise: every
  recurrent family but Mamba2 is charged at the former, which is never less.

The groups (`_get_kv_cache_groups_uniform_page_size`): layers of one kind form a bucket; the
group size is the smallest bucket (the largest if it is under 1.5 × the smallest); a bucket
of n layers splits into cdiv(n, size) groups, and one block holds the widest group's pages. A
hybrid mamba model first raises the attention block so one attention page holds a mamba state
and pads the state to it (`Platform._align_hybrid_block_size`, FlashAttention's kernel blocks of
16 tokens).
"""

from __future__ import annotations

from attrs import frozen

from autogen.metadata.kvcost import F16_BYTES, STATE_BYTES, KvCost
from autogen.metadata.layers import SlidingWindow, layer_layout
from autogen.metadata.model_meta import ModelMeta

#: `CacheConfig.DEFAULT_BLOCK_SIZE`, FlashAttention's `MultipleOf(16)` kernel blocks.
BLOCK_TOKENS = 16
#: `VllmConfig.max_concurrent_batches` with async scheduling (on by default on GPUs).
CONCURRENT_BATCHES = 2
#: Mamba pages one request holds in "align" mode: 2 + `num_prefill_checkpoint_blocks` (1 for
#: Mamba2 mixers, and for gated DeltaNet where its backend exports checkpoints; 2 elsewhere).
MAMBA_PAGES = 3
#: Families whose recurrent layers are vLLM's `MambaMixer2` (checkpoint pages at 16-token
#: blocks); other recurrent families are charged at FlashInfer gated DeltaNet's 64-token blocks.
MAMBA2_TYPES = frozenset({"bamba", "falcon_h1", "granitemoehybrid", "mamba2", "nemotron_h", "zamba2"})
CHECKPOINT_ALIGN = 64
#: `--max-num-batched-tokens` of `vllm serve` by card (vllm/engine/arg_utils.py
#: `get_batch_defaults`): (at least this many GiB, tokens), largest first; 2048 below.
BATCH_DEFAULTS = ((160, 16384), (70, 8192))
SMALL_CARD_BATCH = 2048


def default_batched_tokens(card_gib: float | None) -> int:
    """`--max-num-batched-tokens` vLLM picks on a card of `card_gib` (the largest default without a
    reading, so a sliding window is never undercharged). An A100 80GB gets 2048 from vLLM but
    8192 here: the name is not in the reading, and more is the safe side."""
    if card_gib is None:
        return BATCH_DEFAULTS[0][1]
    return next((tokens for least, tokens in BATCH_DEFAULTS if card_gib >= least), SMALL_CARD_BATCH)


@frozen
class VllmKv:
    """One rank's KV-cache layout as vLLM groups it; every count is of layers.

    Example (gpt-oss-20b, 24 GiB card): VllmKv(full=12, sliding=12, window=128, mamba=0,
    token_bytes=2048, mamba_bytes=0, in_flight=4096).
    """

    full: int
    sliding: int
    window: int
    mamba: int
    #: One attention layer's K+V bytes per token on this rank.
    token_bytes: int
    #: One mamba layer's state page before padding (conv window in bf16, SSM state in f32).
    mamba_bytes: int
    in_flight: int
    #: Tokens the attention block is a multiple of on a mamba hybrid (16, or 64 for FlashInfer's
    #: gated DeltaNet checkpoints).
    align: int = BLOCK_TOKENS

    @property
    def block(self) -> int:
        """Tokens per block: 16, raised on a mamba hybrid until one attention page holds a state."""
        if not self.mamba:
            return BLOCK_TOKENS
        return self.align * -(-self.mamba_bytes // (self.align * self.token_bytes))

    def _buckets(self) -> list[tuple[str, int, int]]:
        """(kind, groups, layers in the widest group) of each kind present."""
        counts = [(kind, n) for kind, n in (("full", self.full), ("sliding", self.sliding),
                                              ("mamba", self.mamba)) if n]
        size = min(n for _, n in counts)
        if max(n for _, n in counts) < size * 1.5:
            size = max(n for _, n in counts)
        out = []
        for kind, n in counts:
            groups = -(-n // size)
            out.append((kind, groups, -(-n // groups)))
        return out

    @property
    def block_bytes(self) -> int:
        """One block of the pool: the widest group's pages (also the null block the check keeps)."""
        return max(layers for _, _, layers in self._buckets()) * self.block * self.token_bytes

    def blocks(self, max_model_len: int) -> dict[str, int]:
        """Blocks one request of `max_model_len` takes, per kind (Σ over that kind's groups)."""
        block = self.block
        per_group = {"full": -(-max_model_len // block),
                     "sliding": -(-min(self.window - 1 + self.in_flight, max_model_len) // block) + 1,
                     "mamba": MAMBA_PAGES}
        return {kind: groups * per_group[kind] for kind, groups, _ in self._buckets()}

    def needed(self, max_model_len: int) -> int:
        """`_max_memory_usage_bytes_from_groups` at `max_model_len`."""
        return self.block_bytes * sum(self.blocks(max_model_len).values())

    def check_bytes(self, max_model_len: int) -> int:
        """The least KV pool vLLM starts with at `max_model_len`: what one request needs plus the null block."""
        return self.needed(max_model_len) + self.block_bytes

    def longest(self, pool_bytes: int, cap: int, *, null_block: bool = True) -> int:
        """The longest `--max-model-len` up to `cap` a pool of `pool_bytes` passes the check with
        (`_estimate_max_model_len_from_groups`); without `null_block`, the longest one request of
        which fits in `pool_bytes`. 0 when not even one token does."""
        charge = self.check_bytes if null_block else self.needed
        if charge(1) > pool_bytes:
            return 0
        low, high = 1, cap
        while low < high:
            mid = (low + high + 1) // 2
            low, high = (mid, high) if charge(mid) <= pool_bytes else (low, mid - 1)
        return low

    def parts(self, max_model_len: int) -> list[str]:
        """The check's arithmetic at `max_model_len`, one line per kind, for notes and `swapgen show`."""
        what = {"full": f"{self.full} full-attention layers",
                "sliding": f"{self.sliding} sliding-window layers (window {self.window} + {self.in_flight} "
                           "tokens in flight)",
                "mamba": f"{self.mamba} recurrent layers ({MAMBA_PAGES} state pages each)"}
        return [f"{what[kind]}: {n} blocks" for kind, n in self.blocks(max_model_len).items()] + [
            f"{self.block_bytes} B per block of {self.block} tokens, + 1 null block"]

    def state_bytes(self) -> int:
        """The recurrent layers' share of the check (constant in the length)."""
        return self.block_bytes * self.blocks(1).get("mamba", 0)


def rank_heads(heads: int, ranks: int, *, latent: bool = False) -> int:
    """KV heads of a layer one of `ranks` tensor-parallel ranks holds: max(1, heads // ranks), so
    heads fewer than ranks are copied (`ModelConfig.get_num_kv_heads`, vllm/config/model.py); an
    MLA `latent` sits whole on every rank."""
    return heads if latent else max(1, heads // ranks)


def vllm_kv(kv: KvCost | None, meta: ModelMeta | None, ranks: int, in_flight: int) -> VllmKv | None:
    """`meta`'s layer layout (`metadata.layers`) as vLLM groups it on one of `ranks`, or None where
    the grouping is not modelled (attention layers of different widths or head counts, MLA beside
    mamba, no attention, an unknown `kv`): then the caller charges every layer at the full context.

    Sliding-window layers are the layout's for an HF config (vLLM's per-layer window); a GGUF's
    window is llama.cpp's reading, not vLLM's: charged as full."""
    if kv is None or not kv.bytes_per_token or meta is None:
        return None
    layout = layer_layout(meta)
    attention = layout.attention
    shapes = {(layer.kv_heads, layer.key_length, layer.value_length) for layer in attention}
    state = layout.state if layout.state is not None and layout.state.elements else None
    if len(shapes) != 1 or layout.widths.mixed or (layout.mla is not None and state is not None):
        return None
    first = attention[0]
    heads = rank_heads(first.kv_heads, ranks, latent=layout.mla is not None)
    sliding = sum(isinstance(layer, SlidingWindow) for layer in attention) if meta.source == "hf" else 0
    page = (state.conv_elements * F16_BYTES + state.ssm_elements * STATE_BYTES) if state is not None else 0
    return VllmKv(full=len(attention) - sliding, sliding=sliding, window=layout.window if sliding else 0,
                  mamba=state.layers if state is not None else 0,
                  token_bytes=heads * (first.key_length + first.value_length) * F16_BYTES,
                  mamba_bytes=-(-page // ranks), in_flight=in_flight,
                  align=BLOCK_TOKENS if meta.arch in MAMBA2_TYPES else CHECKPOINT_ALIGN)
