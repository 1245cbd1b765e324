#!/usr/bin/env python3
"""Write a whisper.cpp model (GGML `.bin`) that whisper-server loads: random weights, or zeros in
a sparse file, at the width of a real Whisper and with as many layers as asked.

Only for checks of generated llama-swap configs: the model transcribes nothing sensible, but it
is a real whisper.cpp file that whisper-server loads, sizes, and answers
`/v1/audio/transcriptions` with. The layout is whisper.cpp's models/convert-pt-to-ggml.py (and
examples/quantize for a quantized type): the magic, eleven int32 hyperparameters, the mel
filters, the vocabulary, then each tensor as (n_dims, name length, type, dims innermost first,
name, data). The 2-D weights take the file's type but the positional embeddings and conv biases;
the conv kernels are F16 (F32 in an F32 file); every other tensor is F32.

The vocabulary is the 256 byte tokens, " " among them: whisper-server's text output needs that
token (without it the server fails with `map::at`); whisper.cpp adds the special tokens up to
n_vocab itself.

`--silero` writes a Silero VAD model in whisper.cpp's format instead (its type, version, window
and layer sizes as models/convert-silero-vad-to-ggml.py writes them for v6.2.0), with random
weights: whisper-server runs it with `--vad --vad-model`.

Needs: pip install gguf numpy
Usage: python3 make_tiny_whisper.py OUT.bin [--width tiny|base|small|medium|large-v3|large-v3-turbo]
         [--audio-layers 1] [--text-layers 1] [--type f16|f32|q4_0|q4_1|q5_0|q5_1|q8_0] [--english]
         [--zeros] [--seed 0]
       python3 make_tiny_whisper.py OUT.bin --silero
"""

from __future__ import annotations

import argparse
import os
import struct
import sys

import numpy as np

try:
    from gguf import GGML_QUANT_SIZES, quants
    from gguf import GGMLQuantizationType as T
except ImportError:  # pragma: no cover - message for humans
    sys.exit("make_tiny_whisper.py needs the 'gguf' package: pip install gguf numpy")

MAGIC = 0x67676D6C
#: examples/quantize: a quantized file's ftype carries GGML_QNT_VERSION (2) × 1000.
QNT_VERSION = 2
#: --type → (ggml_ftype, the 2-D weights' ggml type).
TYPES = {"f32": (0, T.F32), "f16": (1, T.F16), "q4_0": (2, T.Q4_0), "q4_1": (3, T.Q4_1), "q8_0": (7, T.Q8_0),
         "q5_0": (8, T.Q5_0), "q5_1": (9, T.Q5_1)}
#: --width → (n_vocab, width, heads, n_mels) of the Whisper of that name (openai/whisper model dims).
WIDTHS = {"tiny": (51865, 384, 6, 80), "base": (51865, 512, 8, 80), "small": (51865, 768, 12, 80),
          "medium": (51865, 1024, 16, 80), "large-v3": (51866, 1280, 20, 128),
          "large-v3-turbo": (51866, 1280, 20, 128)}
#: An English-only model's vocabulary (`.en` models; whisper.cpp: multilingual from 51865 tokens).
ENGLISH_VOCAB = 51864
#: Whisper's audio frames and text tokens (the two contexts every Whisper has).
AUDIO_CTX, TEXT_CTX = 1500, 448
N_FFT = 201
UNQUANTIZED = ("encoder.positional_embedding", "decoder.positional_embedding", "encoder.conv1.bias",
               "encoder.conv2.bias")


def _block(prefix: str, w: int, cross: bool) -> list[tuple[str, tuple[int, ...]]]:
    """One transformer block's tensors (numpy order: outermost dimension first)."""
    out = [(prefix + "mlp_ln.weight", (w,)), (prefix + "mlp_ln.bias", (w,)), (prefix + "mlp.0.weight", (4 * w, w)),
           (prefix + "mlp.0.bias", (4 * w,)), (prefix + "mlp.2.weight", (w, 4 * w)), (prefix + "mlp.2.bias", (w,))]
    for attn in ("attn", "cross_attn") if cross else ("attn",):
        out += [(f"{prefix}{attn}_ln.weight", (w,)), (f"{prefix}{attn}_ln.bias", (w,)),
                (f"{prefix}{attn}.query.weight", (w, w)), (f"{prefix}{attn}.query.bias", (w,)),
                (f"{prefix}{attn}.key.weight", (w, w)), (f"{prefix}{attn}.value.weight", (w, w)),
                (f"{prefix}{attn}.value.bias", (w,)), (f"{prefix}{attn}.out.weight", (w, w)),
                (f"{prefix}{attn}.out.bias", (w,))]
    return out


def tensors(n_vocab: int, w: int, n_mels: int, audio_layers: int, text_layers: int) -> list[tuple[str, tuple]]:
    """Every tensor whisper_model_load expects, with its shape."""
    out = [("encoder.positional_embedding", (AUDIO_CTX, w)), ("encoder.conv1.weight", (w, n_mels, 3)),
           ("encoder.conv1.bias", (w, 1)), ("encoder.conv2.weight", (w, w, 3)), ("encoder.conv2.bias", (w, 1)),
           ("encoder.ln_post.weight", (w,)), ("encoder.ln_post.bias", (w,))]
    for i in range(audio_layers):
        out += _block(f"encoder.blocks.{i}.", w, cross=False)
    out += [("decoder.positional_embedding", (TEXT_CTX, w)), ("decoder.token_embedding.weight", (n_vocab, w)),
            ("decoder.ln.weight", (w,)), ("decoder.ln.bias", (w,))]
    for i in range(text_layers):
        out += _block(f"decoder.blocks.{i}.", w, cross=True)
    return out


def tensor_type(name: str, shape: tuple[int, ...], wtype: T) -> T:
    if len(shape) == 3:  # conv kernels
        return T.F32 if wtype == T.F32 else T.F16
    return wtype if len(shape) == 2 and name not in UNQUANTIZED else T.F32


def _data(shape: tuple[int, ...], qtype: T, rng: np.random.Generator) -> bytes:
    values = rng.standard_normal(shape, dtype=np.float32) * 0.02
    if qtype == T.F32:
        return values.tobytes()
    if qtype == T.F16:
        return values.astype(np.float16).tobytes()
    return quants.quantize(values, qtype).tobytes()


def _nbytes(shape: tuple[int, ...], qtype: T) -> int:
    block, size = GGML_QUANT_SIZES[qtype]
    return int(np.prod(shape)) // block * size


def write_model(path: str, width: str = "tiny", audio_layers: int = 1, text_layers: int = 1, kind: str = "f16",
                *, english: bool = False, zeros: bool = False, seed: int = 0) -> None:
    n_vocab, w, heads, n_mels = WIDTHS[width]
    n_vocab = ENGLISH_VOCAB if english else n_vocab
    ftype, wtype = TYPES[kind]
    header_ftype = ftype + (QNT_VERSION * 1000 if wtype not in (T.F32, T.F16) else 0)
    rng = np.random.default_rng(seed)
    with open(path, "wb") as out:
        out.write(struct.pack("<12i", MAGIC, n_vocab, AUDIO_CTX, w, heads, audio_layers, TEXT_CTX, w, heads,
                              text_layers, n_mels, header_ftype))
        out.write(struct.pack("<2i", n_mels, N_FFT) + np.full(n_mels * N_FFT, 0.01, np.float32).tobytes())
        out.write(struct.pack("<i", 256) + b"".join(struct.pack("<i", 1) + bytes([b]) for b in range(256)))
        for name, shape in tensors(n_vocab, w, n_mels, audio_layers, text_layers):
            qtype = tensor_type(name, shape, wtype)
            raw = name.encode()
            out.write(struct.pack(f"<3i{len(shape)}i", len(shape), len(raw), int(qtype), *reversed(shape)) + raw)
            if zeros:
                out.seek(_nbytes(shape, qtype), 1)
            else:
                out.write(_data(shape, qtype, rng))
        out.truncate()


#: Silero VAD v6.2.0 as models/convert-silero-vad-to-ggml.py writes it: (in, out, kernel) per
#: encoder layer, LSTM input and hidden sizes, final conv in and out.
SILERO_ENCODER = ((129, 128, 3), (128, 64, 3), (64, 64, 3), (64, 128, 3))
SILERO_LSTM, SILERO_FINAL = (128, 128), (128, 1)


def write_silero(path: str, *, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    kind = b"silero-16k"
    hidden = SILERO_LSTM[1]
    shapes = [("_model.stft.forward_basis_buffer", (258, 1, 256), T.F16)]
    for i, (cin, cout, k) in enumerate(SILERO_ENCODER):
        shapes += [(f"_model.encoder.{i}.reparam_conv.weight", (cout, cin, k), T.F16),
                   (f"_model.encoder.{i}.reparam_conv.bias", (cout,), T.F32)]
    shapes += [("_model.decoder.rnn.weight_ih", (4 * hidden, hidden), T.F32),
               ("_model.decoder.rnn.weight_hh", (4 * hidden, hidden), T.F32),
               ("_model.decoder.rnn.bias_ih", (4 * hidden,), T.F32),
               ("_model.decoder.rnn.bias_hh", (4 * hidden,), T.F32),
               ("_model.decoder.decoder.2.weight", (1, SILERO_FINAL[0]), T.F16),
               ("_model.decoder.decoder.2.bias", (1,), T.F32)]
    with open(path, "wb") as out:
        out.write(struct.pack("<2i", MAGIC, len(kind)) + kind + struct.pack("<5i", 6, 2, 0, 512, 64))
        out.write(struct.pack("<i", len(SILERO_ENCODER)))
        for layer in SILERO_ENCODER:
            out.write(struct.pack("<3i", *layer))
        out.write(struct.pack("<4i", *SILERO_LSTM, *SILERO_FINAL))
        for name, shape, qtype in shapes:
            raw = name.encode()
            out.write(struct.pack(f"<3i{len(shape)}i", len(shape), len(raw), int(qtype), *reversed(shape)) + raw)
            out.write(_data(shape, qtype, rng))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--width", choices=sorted(WIDTHS), default="tiny")
    parser.add_argument("--audio-layers", type=int, default=1)
    parser.add_argument("--text-layers", type=int, default=1)
    parser.add_argument("--type", choices=sorted(TYPES), default="f16")
    parser.add_argument("--english", action="store_true", help="an English-only vocabulary (a .en model)")
    parser.add_argument("--zeros", action="store_true", help="zero weights in a sparse file (nothing is generated)")
    parser.add_argument("--silero", action="store_true", help="a Silero VAD model instead")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    if args.silero:
        write_silero(args.out, seed=args.seed)
    else:
        write_model(args.out, args.width, args.audio_layers, args.text_layers, args.type, english=args.english,
                    zeros=args.zeros, seed=args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
