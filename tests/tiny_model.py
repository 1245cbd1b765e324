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
