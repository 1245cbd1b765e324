#!/usr/bin/env python3
"""Write a tiny llama-architecture GGUF with random weights that llama-server loads.

Only for end-to-end checks of generated llama-swap configs: the model answers
/v1/chat/completions with nonsense words, but it is a real GGUF that llama.cpp
loads, tokenizes (SentencePiece "llama" vocab with byte fallback) and runs.

Shape: 2 blocks, n_embd 256, 4 heads of 64 (head_dim 64 like real models, so
quantized KV cache types such as -ctk q8_0 / q4_0, whose block is 32, work),
2 KV heads (GQA), n_ff 512, vocab 438, all F32, about 6 MB on disk.
Deterministic for a given --seed.

Trick to keep the output printable: every token embedding carries a large
constant in dimension 0, so after the final RMSNorm dimension 0 is always about
+sqrt(n_embd); output.weight puts -8 in that column for control tokens and raw
byte tokens, so they are never sampled, and 0 for the word tokens. Generation
therefore never stops early on EOS and never emits invalid UTF-8: it always
runs to max_tokens.

Needs: pip install gguf numpy   (tested with gguf 0.19.0, numpy 2.x)
Usage: python3 make_tiny_gguf.py OUT.gguf [--ctx 8192] [--seed 0]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

try:
    import gguf
except ImportError:  # pragma: no cover - message for humans
    sys.exit("make_tiny_gguf.py needs the 'gguf' package: pip install gguf numpy")

N_EMBD = 256
N_HEAD = 4
N_HEAD_KV = 2
N_LAYER = 2
N_FF = 512
HEAD_DIM = N_EMBD // N_HEAD

# ChatML, the most common template shape; llama-server --jinja renders it.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

WORDS = (  # noqa: SIM905 - a run of words reads better than a list of 80 quoted ones
    "the a an and or of to in on is it that this for with as was be are at by "
    "from not but have you he she we they his her its our their model tiny "
    "random llama swap server hello world test ok yes no cat dog sun moon red "
    "blue green fast slow big small one two three four five six seven eight "
    "nine ten up down left right good bad new old hot cold day night time word"
).split()


def build_vocab():
    """Return (tokens, scores, token_types) for an SPM vocab with byte fallback."""
    T = gguf.TokenType
    tokens: list[str] = []
    scores: list[float] = []
    types: list[int] = []

    def add(text: str, score: float, ttype: int) -> None:
        tokens.append(text)
        scores.append(score)
        types.append(int(ttype))

    add("<unk>", 0.0, T.UNKNOWN)          # 0
    add("<s>", 0.0, T.CONTROL)            # 1  bos
    add("</s>", 0.0, T.CONTROL)           # 2  eos
    add("<|im_start|>", 0.0, T.CONTROL)   # 3
    add("<|im_end|>", 0.0, T.CONTROL)     # 4  end of turn
    for b in range(256):                  # 5..260 byte fallback: <0x00>..<0xFF>
        add(f"<0x{b:02X}>", 0.0, T.BYTE)
    # single printable ASCII characters, then the word-start marker and words
    score = -1.0
    add("\u2581", score, T.NORMAL)        # "▁" = SentencePiece space
    for c in range(33, 127):
        score -= 0.01
        add(chr(c), score, T.NORMAL)
    for w in WORDS:
        score -= 0.01
        add("\u2581" + w, score, T.NORMAL)
    return tokens, scores, types


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", help="path of the .gguf file to write")
    ap.add_argument("--ctx", type=int, default=8192, help="llama.context_length (default 8192)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--name", default="tiny-random-llama")
    args = ap.parse_args(argv)

    tokens, scores, types = build_vocab()
    n_vocab = len(tokens)
    rng = np.random.default_rng(args.seed)

    def rnd(*shape: int, std: float = 0.02) -> np.ndarray:
        return (rng.standard_normal(shape) * std).astype(np.float32)

    w = gguf.GGUFWriter(args.out, "llama")
    w.add_name(args.name)
    w.add_context_length(args.ctx)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(N_LAYER)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD_KV)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(HEAD_DIM)
    w.add_rope_freq_base(10000.0)
    w.add_vocab_size(n_vocab)
    w.add_file_type(int(gguf.LlamaFileType.ALL_F32))

    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_eot_token_id(4)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    w.add_chat_template(CHAT_TEMPLATE)

    # numpy shapes are (rows, cols) = ggml ne reversed: (out_features, in_features)
    embd = rnd(n_vocab, N_EMBD)
    embd[:, 0] = 10.0  # constant direction, see module docstring
    w.add_tensor("token_embd.weight", embd)
    for i in range(N_LAYER):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
        w.add_tensor(p + "attn_q.weight", rnd(N_HEAD * HEAD_DIM, N_EMBD))
        w.add_tensor(p + "attn_k.weight", rnd(N_HEAD_KV * HEAD_DIM, N_EMBD))
        w.add_tensor(p + "attn_v.weight", rnd(N_HEAD_KV * HEAD_DIM, N_EMBD))
        w.add_tensor(p + "attn_output.weight", rnd(N_EMBD, N_HEAD * HEAD_DIM))
        w.add_tensor(p + "ffn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
        w.add_tensor(p + "ffn_gate.weight", rnd(N_FF, N_EMBD))
        w.add_tensor(p + "ffn_up.weight", rnd(N_FF, N_EMBD))
        w.add_tensor(p + "ffn_down.weight", rnd(N_EMBD, N_FF))
    w.add_tensor("output_norm.weight", np.ones(N_EMBD, dtype=np.float32))
    out = rnd(n_vocab, N_EMBD, std=1.0)
    banned = [i for i, t in enumerate(types) if t != int(gguf.TokenType.NORMAL)]
    out[:, 0] = 0.0
    out[banned, 0] = -8.0
    w.add_tensor("output.weight", out)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"wrote {args.out}: llama arch, {N_LAYER} layers, n_embd {N_EMBD}, "
          f"{N_HEAD} heads / {N_HEAD_KV} kv heads, vocab {n_vocab}, ctx {args.ctx}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
