"""What whisper-server allocates for one model: the figures whisper.cpp prints at start, computed
from the model's header (docs/maintainers/whisper.md#memory).

`whisper_init_state` (src/whisper.cpp) allocates, on the first backend (the GPU when one is
used), three F16 caches of the text width:

- kv self:  2 · n_text_state · n_text_layer · pad256(n_text_ctx) elements (448 → 512 tokens);
- kv cross: 2 · n_text_state · n_text_layer · pad256(n_audio_ctx) (1500 → 1536 frames);
- kv pad:   2 · n_audio_state · pad256(n_audio_ctx), the encoder's flash-attention buffer;

and reserves four compute graphs (`whisper_sched_graph_init`), each printed as its backend
buffers plus its graph metadata (`whisper_sched_size`: ggml_tensor_overhead() · WHISPER_MAX_NODES +
ggml_graph_overhead()). Their sizes follow the graphs' largest live tensors and were checked
against the printout of whisper.cpp 1.8.5 on 19 shapes (tiny to large-v3, 1 to 4 layers, F32 to
Q4_0, flash attention on and off: tests/data/whisper_alloc_1.8.5.json), exact to the printed
0.01 MB; they depend on neither the layer counts nor the weight type:

- conv:   16 · A · s + 20 · A · n_mels     (A = n_audio_ctx, s = n_audio_state; the two convolutions)
- encode: 28 · A · s with flash attention; without, max(that, 16 · A · s + 4 · A² · n_audio_head),
          the attention scores in F32
- cross:  4 · A · s
- decode: 4 · n_text_ctx · (n_vocab + 2 · n_text_state), the logits of a full text window

What the printout does not show, and is charged beside it: the temperature fallback (whisper-server's
default `--best-of 2`) rebuilds kv self for 2 + 2 decoders (`whisper_full_with_state`: "overallocate
to workaround KV cache fragmentation"), 3 more self caches while it lasts; and the Silero VAD
model, loaded at the first request on the CPU (`whisper_vad_init_context`: its weights and a
~1.6 MB graph).
"""

from __future__ import annotations

from attrs import frozen

from autogen.footprint import Fact
from autogen.metadata.whisper_header import WhisperShape

#: ggml_tensor_overhead() · WHISPER_MAX_NODES (368 · 4096) + ggml_graph_overhead() (82,608) on a
#: 64-bit build: the metadata every compute buffer's printed size includes.
GRAPH_META = 368 * 4096 + 82_608
#: Bytes of an F16 cache element (the caches take `whisper_context::itype`, F16).
CACHE_ELEMENT = 2
#: whisper.cpp pads both cache lengths to 256 (`GGML_PAD(…, 256)` in `whisper_init_state`).
PAD = 256
#: The decoders a temperature fallback runs with whisper-server's default `--best-of 2`, and
#: the factor whisper.cpp then sizes kv self by (n_decoders + 2).
FALLBACK_FACTOR = 2 + 2


def _pad(n: int) -> int:
    return -(-n // PAD) * PAD


@frozen
class WhisperMemory:
    """whisper-server's memory for one model and one flash-attention setting, in bytes, each
    part a `Fact`: the weights, the three caches, the four compute buffers, and what whisper.cpp
    does not print (the fallback's larger self cache)."""

    weights: Fact
    caches: tuple[Fact, ...]
    compute: tuple[Fact, ...]
    fallback: Fact

    @property
    def context(self) -> int:
        return sum(f.bytes for f in self.caches)

    @property
    def compute_bytes(self) -> int:
        return sum(f.bytes for f in self.compute)

    @property
    def printed(self) -> int:
        """Everything whisper.cpp prints at start: weights, caches, compute buffers."""
        return self.weights.bytes + self.context + self.compute_bytes

    @property
    def facts(self) -> tuple[Fact, ...]:
        return (self.weights, *self.caches, *self.compute, self.fallback)


def whisper_memory(shape: WhisperShape, flash_attn: bool = True) -> WhisperMemory:
    """The module docstring's figures for `shape`."""
    s, t, a_ctx = shape.n_audio_state, shape.n_text_state, shape.n_audio_ctx
    self_cache = 2 * t * shape.n_text_layer * _pad(shape.n_text_ctx) * CACHE_ELEMENT
    caches = (
        Fact("kv self", self_cache, f"2 × {t} × {shape.n_text_layer} layers × {_pad(shape.n_text_ctx)} tokens × F16"),
        Fact("kv cross", 2 * t * shape.n_text_layer * _pad(a_ctx) * CACHE_ELEMENT,
             f"2 × {t} × {shape.n_text_layer} layers × {_pad(a_ctx)} frames × F16"),
        Fact("kv pad", 2 * s * _pad(a_ctx) * CACHE_ELEMENT, f"2 × {s} × {_pad(a_ctx)} frames × F16"),
    )
    encode = 28 * a_ctx * s
    how = "with flash attention"
    if not flash_attn:
        scores = 16 * a_ctx * s + 4 * a_ctx * a_ctx * shape.n_audio_head
        encode, how = max(encode, scores), f"without flash attention: {shape.n_audio_head} heads of F32 scores"
    compute = (
        Fact("conv", GRAPH_META + 16 * a_ctx * s + 20 * a_ctx * shape.n_mels, "the two convolutions"),
        Fact("encode", GRAPH_META + encode, f"the encoder, {how}"),
        Fact("cross", GRAPH_META + 4 * a_ctx * s, "the cross-attention keys and values"),
        Fact("decode", GRAPH_META + 4 * shape.n_text_ctx * (shape.n_vocab + 2 * t),
             f"the logits of {shape.n_text_ctx} tokens × {shape.n_vocab}"),
    )
    fallback = Fact("fallback", (FALLBACK_FACTOR - 1) * self_cache,
                    f"temperature fallback: kv self for {FALLBACK_FACTOR} decoders (not printed)")
    weights = Fact("weights", shape.weight_bytes, f"{shape.quant} weights from the header")
    return WhisperMemory(weights=weights, caches=caches, compute=compute, fallback=fallback)
