"""The tiny random-weight llama GGUF that llama-server b11434 really loads, written by the
repository's tools/llama-server-check/make_tiny_gguf.py, and a projector it loads beside it: for
the checks that start the engine."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "tools" / "llama-server-check" / "make_tiny_gguf.py"
#: The tiny model's width: a projector's output must be it (llama-server refuses another).
TINY_EMBD = 256


def write_tiny(path: Path, *, seed: int = 0, ctx: int = 8192) -> Path:
    spec = importlib.util.spec_from_file_location("make_tiny_gguf", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main([str(path), "--ctx", str(ctx), "--seed", str(seed)]) == 0
    return path


def write_tiny_projector(path: Path, *, seed: int = 0) -> Path:
    """A LLaVA-style (`clip.projector_type = mlp`) vision projector for the tiny model, random F32
    weights in the layout tools/mtmd/clip.cpp loads: a 28-pixel image in 14-pixel patches, one
    encoder block of width 64, and the two-layer projection `mm.0`, `mm.2` to the model's width."""
    import gguf  # noqa: PLC0415 - only the real-engine checks write tensor data
    import numpy as np  # noqa: PLC0415

    width, ffn, image, patch = 64, 128, 28, 14
    rng = np.random.default_rng(seed)

    def weights(*shape: int):  # numpy order: ggml's dimensions reversed
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)

    def ones(n: int):
        return np.ones(n, np.float32)

    def zeros(n: int):
        return np.zeros(n, np.float32)

    w = gguf.GGUFWriter(str(path), "clip")
    w.add_type("mmproj")
    w.add_bool("clip.has_vision_encoder", True)
    w.add_string("clip.projector_type", "mlp")
    w.add_bool("clip.use_gelu", True)
    for key, value in (("embedding_length", width), ("feed_forward_length", ffn), ("attention.head_count", 2),
                       ("block_count", 1), ("projection_dim", TINY_EMBD), ("image_size", image),
                       ("patch_size", patch)):
        w.add_uint32(f"clip.vision.{key}", value)
    w.add_float32("clip.vision.attention.layer_norm_epsilon", 1e-6)
    w.add_array("clip.vision.image_mean", [0.5, 0.5, 0.5])
    w.add_array("clip.vision.image_std", [0.5, 0.5, 0.5])
    w.add_tensor("v.patch_embd.weight", weights(width, 3, patch, patch))
    w.add_tensor("v.class_embd", weights(width))
    w.add_tensor("v.position_embd.weight", weights((image // patch) ** 2 + 1, width))
    w.add_tensor("v.pre_ln.weight", ones(width))
    w.add_tensor("v.pre_ln.bias", zeros(width))
    for name in ("attn_q", "attn_k", "attn_v", "attn_out"):
        w.add_tensor(f"v.blk.0.{name}.weight", weights(width, width))
        w.add_tensor(f"v.blk.0.{name}.bias", zeros(width))
    for name in ("ln1", "ln2"):
        w.add_tensor(f"v.blk.0.{name}.weight", ones(width))
        w.add_tensor(f"v.blk.0.{name}.bias", zeros(width))
    w.add_tensor("v.blk.0.ffn_up.weight", weights(ffn, width))
    w.add_tensor("v.blk.0.ffn_up.bias", zeros(ffn))
    w.add_tensor("v.blk.0.ffn_down.weight", weights(width, ffn))
    w.add_tensor("v.blk.0.ffn_down.bias", zeros(width))
    w.add_tensor("mm.0.weight", weights(TINY_EMBD, width))
    w.add_tensor("mm.0.bias", zeros(TINY_EMBD))
    w.add_tensor("mm.2.weight", weights(TINY_EMBD, TINY_EMBD))
    w.add_tensor("mm.2.bias", zeros(TINY_EMBD))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def _tiny_writer(path: Path, arch: str, hp: dict[str, object]):
    """A GGUFWriter for `arch` with make_tiny_gguf.py's vocabulary and chat template, and `hp`
    (keys without the arch prefix; ints as u32, floats as f32)."""
    import gguf  # noqa: PLC0415 - only the real-engine checks write tensor data

    spec = importlib.util.spec_from_file_location("make_tiny_gguf", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    tokens, scores, types = module.build_vocab()
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name(f"tiny-random-{arch}")
    for key, value in {**hp, "vocab_size": len(tokens)}.items():
        (w.add_float32 if isinstance(value, float) else w.add_uint32)(f"{arch}.{key}", value)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    for add, token in ((w.add_bos_token_id, 1), (w.add_eos_token_id, 2), (w.add_unk_token_id, 0),
                       (w.add_eot_token_id, 4)):
        add(token)
    w.add_chat_template(module.CHAT_TEMPLATE)
    return w, len(tokens)


def write_tiny_moe(path: Path, arch: str, *, seed: int = 0) -> Path:
    """A tiny random MoE GGUF ik_llama.cpp's and llama.cpp's llama-server load: `qwen3moe` (4
    heads of 64, 2 KV heads, 4 experts of 64, 2 used) or `deepseek2` (MLA at DeepSeek's head
    widths: kv_lora_rank 512 + rope 64, nope 128, v 128, 4 heads, which ik_llama.cpp requires of a
    file with the `_mla` keys; one dense layer, then 4
    experts with a shared one), 2 layers, width 128, F32."""
    import numpy as np  # noqa: PLC0415

    rng = np.random.default_rng(seed)
    n_embd, n_expert, n_used, n_ff_exp, n_ff = 128, 4, 2, 64, 256

    def rnd(*shape: int):  # numpy order: ggml's dimensions reversed
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)

    common = {"context_length": 8192, "embedding_length": n_embd, "block_count": 2, "feed_forward_length": n_ff,
              "expert_count": n_expert, "expert_used_count": n_used, "expert_feed_forward_length": n_ff_exp,
              "attention.layer_norm_rms_epsilon": 1e-6, "rope.freq_base": 10000.0}
    if arch == "qwen3moe":
        w, vocab = _tiny_writer(path, arch, {**common, "attention.head_count": 4, "attention.head_count_kv": 2,
                                             "attention.key_length": 64, "attention.value_length": 64})
        layers = [{"attn_q": rnd(256, n_embd), "attn_k": rnd(128, n_embd), "attn_v": rnd(128, n_embd),
                   "attn_output": rnd(n_embd, 256), "attn_q_norm": np.ones(64, np.float32),
                   "attn_k_norm": np.ones(64, np.float32)} for _ in range(2)]
    else:
        heads, rank, rope, nope, v, q_lora = 4, 512, 64, 128, 128, 64
        w, vocab = _tiny_writer(path, arch, {
            **common, "attention.head_count": heads, "attention.head_count_kv": 1,
            "attention.key_length": rank + rope, "attention.value_length": rank,
            "attention.key_length_mla": nope + rope, "attention.value_length_mla": v,
            "attention.q_lora_rank": q_lora, "attention.kv_lora_rank": rank, "rope.dimension_count": rope,
            "leading_dense_block_count": 1, "expert_shared_count": 1, "expert_weights_scale": 1.0,
            "expert_gating_func": 1})
        layers = [{"attn_q_a": rnd(q_lora, n_embd), "attn_q_a_norm": np.ones(q_lora, np.float32),
                   "attn_q_b": rnd(heads * (nope + rope), q_lora), "attn_kv_a_mqa": rnd(rank + rope, n_embd),
                   "attn_kv_a_norm": np.ones(rank, np.float32), "attn_k_b": rnd(heads, rank, nope),
                   "attn_v_b": rnd(heads, v, rank), "attn_output": rnd(n_embd, heads * v)} for _ in range(2)]
    embd = rnd(vocab, n_embd)
    embd[:, 0] = 10.0  # make_tiny_gguf.py's constant direction: printable output
    w.add_tensor("token_embd.weight", embd)
    w.add_tensor("output_norm.weight", np.ones(n_embd, np.float32))
    out = rnd(vocab, n_embd)
    out[:, 0] = 0.0
    out[:261, 0] = -8.0  # control and byte tokens are never sampled: printable UTF-8 only
    w.add_tensor("output.weight", out)
    for i, layer in enumerate(layers):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", np.ones(n_embd, np.float32))
        w.add_tensor(p + "ffn_norm.weight", np.ones(n_embd, np.float32))
        for name, data in layer.items():
            w.add_tensor(f"{p}{name}.weight", data)
        if arch == "deepseek2" and i == 0:  # the leading dense layer
            for name, shape in (("gate", (n_ff, n_embd)), ("up", (n_ff, n_embd)), ("down", (n_embd, n_ff))):
                w.add_tensor(f"{p}ffn_{name}.weight", rnd(*shape))
            continue
        w.add_tensor(p + "ffn_gate_inp.weight", rnd(n_expert, n_embd))
        for name, shape in (("gate", (n_expert, n_ff_exp, n_embd)), ("up", (n_expert, n_ff_exp, n_embd)),
                            ("down", (n_expert, n_embd, n_ff_exp))):
            w.add_tensor(f"{p}ffn_{name}_exps.weight", rnd(*shape))
        if arch == "deepseek2":
            for name, shape in (("gate", (n_ff_exp, n_embd)), ("up", (n_ff_exp, n_embd)), ("down", (n_embd, n_ff_exp))):
                w.add_tensor(f"{p}ffn_{name}_shexp.weight", rnd(*shape))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def write_sparse(path: Path, arch: str, hp: dict[str, object], tensors: list[tuple[str, tuple[int, ...]]]) -> Path:
    """A header at a real model's width with make_tiny_gguf.py's vocabulary and F16 tensors whose
    data is a hole of the right length: a CPU load (`-ngl 0`) maps zeros and reads none of them,
    so its memory report is the real width's. `tensors`: (name, ggml dims)."""
    import numpy as np  # noqa: PLC0415

    w, _ = _tiny_writer(path, arch, hp)
    total = 0
    for name, dims in tensors:
        nbytes = int(np.prod(dims)) * (2 if len(dims) > 1 else 4)
        w.add_tensor_info(name, tuple(reversed(dims)), np.dtype(np.float16 if len(dims) > 1 else np.float32), nbytes)
        total += -(-nbytes // 32) * 32
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()
    with open(path, "r+b") as f:
        f.seek(0, 2)
        f.truncate(f.tell() + 64 + total)
    return path


def mla_tensors(n_embd: int, heads: int, layers: int, n_expert: int, n_ff_exp: int, n_ff: int,
                vocab: int) -> list[tuple[str, tuple[int, ...]]]:
    """DeepSeek-style tensors (q_lora 1536, kv_lora 512 + rope 64, nope 128, v 128; the first
    layer dense, the others MoE with one shared expert), ggml dims."""
    q_lora, rank, rope, nope, v = 1536, 512, 64, 128, 128
    out = [("token_embd.weight", (n_embd, vocab)), ("output_norm.weight", (n_embd,)), ("output.weight", (n_embd, vocab))]
    for i in range(layers):
        p = f"blk.{i}."
        out += [(p + "attn_norm.weight", (n_embd,)), (p + "ffn_norm.weight", (n_embd,)),
                (p + "attn_q_a_norm.weight", (q_lora,)), (p + "attn_q_a.weight", (n_embd, q_lora)),
                (p + "attn_q_b.weight", (q_lora, heads * (nope + rope))), (p + "attn_kv_a_norm.weight", (rank,)),
                (p + "attn_kv_a_mqa.weight", (n_embd, rank + rope)), (p + "attn_k_b.weight", (nope, rank, heads)),
                (p + "attn_v_b.weight", (rank, v, heads)), (p + "attn_output.weight", (heads * v, n_embd))]
        if i == 0:
            out += [(p + "ffn_gate.weight", (n_embd, n_ff)), (p + "ffn_up.weight", (n_embd, n_ff)),
                    (p + "ffn_down.weight", (n_ff, n_embd))]
            continue
        out += [(p + "ffn_gate_inp.weight", (n_embd, n_expert)), (p + "ffn_gate_exps.weight", (n_embd, n_ff_exp, n_expert)),
                (p + "ffn_up_exps.weight", (n_embd, n_ff_exp, n_expert)),
                (p + "ffn_down_exps.weight", (n_ff_exp, n_embd, n_expert)),
                (p + "ffn_gate_shexp.weight", (n_embd, n_ff_exp)), (p + "ffn_up_shexp.weight", (n_embd, n_ff_exp)),
                (p + "ffn_down_shexp.weight", (n_ff_exp, n_embd))]
    return out


def mla_hp(n_embd: int, heads: int, layers: int, n_expert: int, n_used: int, n_ff_exp: int, n_ff: int) -> dict:
    """The header keys of `mla_tensors`' model, as llama.cpp's converter writes them (`_mla` keys)."""
    return {"context_length": 163840, "embedding_length": n_embd, "block_count": layers, "feed_forward_length": n_ff,
            "attention.head_count": heads, "attention.head_count_kv": 1, "attention.key_length": 576,
            "attention.value_length": 512, "attention.key_length_mla": 192, "attention.value_length_mla": 128,
            "attention.q_lora_rank": 1536, "attention.kv_lora_rank": 512, "rope.dimension_count": 64,
            "attention.layer_norm_rms_epsilon": 1e-6, "rope.freq_base": 10000.0, "leading_dense_block_count": 1,
            "expert_count": n_expert, "expert_used_count": n_used, "expert_shared_count": 1,
            "expert_feed_forward_length": n_ff_exp, "expert_weights_scale": 1.0, "expert_gating_func": 1}
