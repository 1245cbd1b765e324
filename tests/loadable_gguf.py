"""A tiny llama GGUF that llama-server b11434 really loads (random f16 weights, an SPM vocab with
byte fallback, a chat template): for the tests that start the real engine or its estimator.
About 2 MB; written with gguf-py's writer, as every other fixture."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np

CHAT_TEMPLATE = ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] "
                 "+ '<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
                 "{% endif %}")


def _vocab(n: int) -> tuple[list[str], list[float], list[int]]:
    t = gguf.TokenType
    tokens = ["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"]
    types = [t.UNKNOWN, t.CONTROL, t.CONTROL, t.CONTROL, t.CONTROL]
    tokens += [f"<0x{b:02X}>" for b in range(256)]
    types += [t.BYTE] * 256
    tokens += ["\u2581"] + [chr(c) for c in range(33, 127)]
    types += [t.NORMAL] * 95
    while len(tokens) < n:
        tokens.append(f"\u2581w{len(tokens)}")
        types.append(t.NORMAL)
    scores = [0.0] * 261 + [-1.0 - i / 1000 for i in range(len(tokens) - 261)]
    return tokens, scores, [int(x) for x in types]


def write_loadable_llama(path: Path, *, ctx: int = 8192, embd: int = 64, layers: int = 2, heads: int = 4,
                         kv_heads: int = 2, ff: int = 128, vocab: int = 512) -> Path:
    rng = np.random.default_rng(0)
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("tiny random llama")
    w.add_context_length(ctx)
    w.add_embedding_length(embd)
    w.add_block_count(layers)
    w.add_feed_forward_length(ff)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_rope_dimension_count(embd // heads)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    tokens, scores, types = _vocab(vocab)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_chat_template(CHAT_TEMPLATE)

    def tensor(name: str, *shape: int) -> None:
        w.add_tensor(name, (rng.standard_normal(shape) * 0.02).astype(np.float16 if len(shape) > 1 else np.float32))

    head_dim = embd // heads
    tensor("token_embd.weight", vocab, embd)
    tensor("output_norm.weight", embd)
    tensor("output.weight", vocab, embd)
    for i in range(layers):
        tensor(f"blk.{i}.attn_norm.weight", embd)
        tensor(f"blk.{i}.attn_q.weight", embd, embd)
        tensor(f"blk.{i}.attn_k.weight", kv_heads * head_dim, embd)
        tensor(f"blk.{i}.attn_v.weight", kv_heads * head_dim, embd)
        tensor(f"blk.{i}.attn_output.weight", embd, embd)
        tensor(f"blk.{i}.ffn_norm.weight", embd)
        tensor(f"blk.{i}.ffn_gate.weight", ff, embd)
        tensor(f"blk.{i}.ffn_up.weight", ff, embd)
        tensor(f"blk.{i}.ffn_down.weight", embd, ff)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
