"""whisper.cpp's GGML model files: the header read, every figure checked, and the exact weight bytes.

The layout is whisper.cpp's (src/whisper.cpp `whisper_model_load`, models/convert-pt-to-ggml.py):
the magic `ggml` (0x67676d6c, little-endian), eleven int32 hyperparameters — n_vocab,
n_audio_ctx, n_audio_state, n_audio_head, n_audio_layer, n_text_ctx, n_text_state, n_text_head,
n_text_layer, n_mels, ftype — then the mel filters (int32 n_mel, int32 n_fft, n_mel·n_fft
floats), the vocabulary and the tensors. A quantized file's ftype carries the quantization
version (examples/quantize: `GGML_QNT_VERSION * 1000 + ftype`, so a q5_0 file says 2008).

The loader checks every tensor's size against the hyperparameters, so the weights are known
from them alone (`WhisperShape.weight_bytes`): the 2-D weights (token embedding included) take
the file's type, the two convolution kernels F16 (F32 in an F32 file), the positional
embeddings, conv biases and every 1-D tensor F32 (models/convert-pt-to-ggml.py, and
examples/quantize, which quantizes 2-D tensors but the positional embeddings and conv biases).
"""

from __future__ import annotations

import struct

from attrs import frozen
from gguf import GGML_QUANT_SIZES
from gguf import GGMLQuantizationType as T

from autogen.errors import ModelError

#: `ggml` as the first four bytes of the file read it.
MAGIC = b"lmgg"
#: Magic, eleven hyperparameters, then the mel filters' two dimensions.
HEADER = struct.Struct("<4s11i2i")
#: examples/quantize: the quantization version times this, plus the ftype (ggml.h `GGML_QNT_VERSION_FACTOR`).
QNT_VERSION_FACTOR = 1000
#: ggml.h `enum ggml_ftype` → the ggml type of the file's 2-D weights (ggml.c `ggml_ftype_to_ggml_type`).
#: Any other value (4 = MOSTLY_Q4_1_SOME_F16, unknown ones) stops whisper.cpp in an assertion.
FTYPES: dict[int, T] = {
    0: T.F32, 1: T.F16, 2: T.Q4_0, 3: T.Q4_1, 7: T.Q8_0, 8: T.Q5_0, 9: T.Q5_1, 10: T.Q2_K, 11: T.Q3_K, 12: T.Q4_K,
    13: T.Q5_K, 14: T.Q6_K, 15: T.IQ2_XXS, 16: T.IQ2_XS, 17: T.IQ3_XXS, 18: T.IQ1_S, 19: T.IQ4_NL, 20: T.IQ3_S,
    21: T.IQ2_S, 22: T.IQ4_XS, 23: T.IQ1_M, 24: T.BF16, 25: T.MXFP4, 26: T.NVFP4, 27: T.Q1_0,
}
#: Bounds no Whisper comes near (large-v3: 51866 tokens, width 1280, 32 layers, 128 mels): a
#: figure past one is a damaged or hostile file, refused before anything is computed from it.
LIMITS = {"n_vocab": 1 << 20, "n_audio_ctx": 1 << 16, "n_audio_state": 1 << 16, "n_audio_head": 1 << 10,
          "n_audio_layer": 1 << 10, "n_text_ctx": 1 << 16, "n_text_state": 1 << 16, "n_text_head": 1 << 10,
          "n_text_layer": 1 << 10, "n_mels": 1 << 10}
#: A Whisper vocabulary holds at least the GPT-2 tokens and the special ones (whisper.cpp's
#: `whisper_vocab`: `token_beg` 50363 in an English-only model): fewer, and the loader reads
#: token ids past its end.
MIN_VOCAB = 51864
#: `whisper_vocab::is_multilingual`: 51865 tokens and more (large-v3: 51866).
MULTILINGUAL_VOCAB = 51865


@frozen
class WhisperShape:
    """A whisper.cpp model's hyperparameters, as its header gives them.

    Example (ggml-large-v3-turbo-q5_0.bin): WhisperShape(n_vocab=51866, n_audio_ctx=1500,
    n_audio_state=1280, n_audio_head=20, n_audio_layer=32, n_text_ctx=448, n_text_state=1280,
    n_text_head=20, n_text_layer=4, n_mels=128, ftype=8, qntvr=2).
    """

    n_vocab: int
    n_audio_ctx: int
    n_audio_state: int
    n_audio_head: int
    n_audio_layer: int
    n_text_ctx: int
    n_text_state: int
    n_text_head: int
    n_text_layer: int
    n_mels: int
    #: ggml.h `ggml_ftype` of the 2-D weights (the quantization version taken off).
    ftype: int
    #: The quantization version a quantized file was written with (0 for F32/F16 files).
    qntvr: int = 0
    #: The mel filter bank's FFT bins (201 in every Whisper).
    n_fft: int = 201

    @property
    def weight_type(self) -> T:
        return FTYPES[self.ftype]

    @property
    def multilingual(self) -> bool:
        """More tokens than the English-only vocabulary: it transcribes other languages."""
        return self.n_vocab >= MULTILINGUAL_VOCAB

    @property
    def quant(self) -> str:
        """The weight type as a label ("F16", "Q5_0")."""
        return self.weight_type.name

    def tensors(self) -> tuple[tuple[int, int, T], ...]:
        """(count, elements, type) of the model's tensors, grouped (module docstring)."""
        a, t = self.n_audio_state, self.n_text_state
        wtype = self.weight_type
        conv = T.F32 if wtype == T.F32 else T.F16
        f32 = T.F32
        return (
            (1, self.n_audio_ctx * a, f32), (1, 3 * self.n_mels * a, conv), (1, 3 * a * a, conv), (2, a, f32),
            (2, a, f32),
            # per audio layer: mlp 0 and 2 (4a·a each), q, k, v, out (a·a); 8 vectors of a, one of 4a
            (self.n_audio_layer, 12 * a * a, wtype), (self.n_audio_layer, 12 * a, f32),
            (1, self.n_text_ctx * t, f32), (1, self.n_vocab * t, wtype), (2, t, f32),
            # per text layer: mlp (8t·t), self and cross attention (4 + 4 of t·t); 13 vectors of t, one of 4t
            (self.n_text_layer, 16 * t * t, wtype), (self.n_text_layer, 17 * t, f32),
        )

    @property
    def weight_bytes(self) -> int:
        """What the model's tensors take: whisper.cpp's printed `model size`."""
        total = 0
        for count, elements, qtype in self.tensors():
            block, size = GGML_QUANT_SIZES[qtype]
            total += count * elements // block * size
        return total

    @property
    def parameters(self) -> int:
        return sum(count * elements for count, elements, _ in self.tensors())

    @property
    def least_file_bytes(self) -> int:
        """The bytes a whole file has at least: header, mel filters and weights (the vocabulary
        and the tensor names come on top); a shorter file is cut short."""
        return HEADER.size + self.n_mels * self.n_fft * 4 + 4 + self.weight_bytes


def _checked(name: str, value: int) -> int:
    if not 0 < value <= LIMITS[name]:
        raise ModelError(f"whisper.cpp header: {name} {value} is out of range (1 to {LIMITS[name]})")
    return value


def parse_whisper_header(data: bytes) -> WhisperShape:
    """The shape `data` (the file's first bytes) gives, every figure checked; ModelError when
    it is no whisper.cpp model whisper.cpp could load."""
    if len(data) < HEADER.size:
        raise ModelError(f"whisper.cpp header: {len(data)} bytes, a header has {HEADER.size}")
    magic, *hparams, ftype, n_mel, n_fft = HEADER.unpack_from(data)
    if magic != MAGIC:
        raise ModelError(f"not a whisper.cpp model (magic {magic!r})")
    values = {name: _checked(name, v) for name, v in zip(LIMITS, hparams, strict=True)}
    if values["n_vocab"] < MIN_VOCAB:
        raise ModelError(f"whisper.cpp header: n_vocab {values['n_vocab']} is below Whisper's {MIN_VOCAB} tokens")
    for side in ("audio", "text"):
        state, head = values[f"n_{side}_state"], values[f"n_{side}_head"]
        if state % head:
            raise ModelError(f"whisper.cpp header: n_{side}_state {state} is not a multiple of n_{side}_head {head}")
    if values["n_audio_state"] != values["n_text_state"]:
        raise ModelError(f"whisper.cpp header: n_audio_state {values['n_audio_state']} differs from n_text_state "
                         f"{values['n_text_state']}, which whisper.cpp requires equal")
    qntvr, kind = divmod(ftype, QNT_VERSION_FACTOR) if ftype >= 0 else (0, ftype)
    if kind not in FTYPES:
        raise ModelError(f"whisper.cpp header: ftype {ftype} names no weight type whisper.cpp loads")
    if n_mel != values["n_mels"] or not 0 < n_fft <= 1 << 12:
        raise ModelError(f"whisper.cpp header: mel filters {n_mel}×{n_fft} do not fit n_mels {values['n_mels']}")
    return WhisperShape(**values, ftype=kind, qntvr=qntvr, n_fft=n_fft)


def read_whisper_header(path: str) -> WhisperShape:
    """The shape of the file at `path` (its first 56 bytes); ModelError when unreadable or not a
    whisper.cpp model."""
    try:
        with open(path, "rb") as f:
            data = f.read(HEADER.size)
    except OSError as exc:
        raise ModelError(f"cannot read: {exc.strerror or exc}") from None
    return parse_whisper_header(data)
