"""Vision projectors at the real widths of published ones, as GGUF headers whose tensor data is a
sparse hole: the keys and tensor shapes llama.cpp b11434's tools/mtmd/clip.cpp loads for each
projector type (`clip_model_loader::load_hparams`, `load_tensors` and the graph builders of
tools/mtmd/models/). llama-server loads them (the weights read as zeros) and logs the CLIP
compute buffer its warmup reserves; `tests/data/record_clip_alloc.py` records those figures and
a slow test measures one again."""

from __future__ import annotations

from pathlib import Path

from attrs import frozen


@frozen
class ClipShape:
    """One published projector's shape. `keys`: its `clip.*` header (besides the common ones);
    `tensors`: (name, ggml dims, "f16" | "f32")."""

    name: str
    mirrors: str
    keys: dict
    tensors: tuple[tuple[str, tuple[int, ...], str], ...]


def _vit_blocks(layers: int, width: int, ffn: int, *, biases: bool, norm_bias: bool, gate: bool,
                layer_scale: bool = False, fused_qkv: bool = False) -> list[tuple[str, tuple[int, ...], str]]:
    """The encoder blocks of a ViT (tools/mtmd/clip-impl.h `TN_*` names)."""
    out = []
    attention = (("attn_qkv", 3 * width), ("attn_out", width)) if fused_qkv else \
        tuple((name, width) for name in ("attn_q", "attn_k", "attn_v", "attn_out"))
    for i in range(layers):
        blk = f"v.blk.{i}"
        for name, rows in attention:
            out.append((f"{blk}.{name}.weight", (width, rows), "f16"))
            if biases:
                out.append((f"{blk}.{name}.bias", (rows,), "f32"))
        for name in ("ln1", "ln2"):
            out.append((f"{blk}.{name}.weight", (width,), "f32"))
            if norm_bias:
                out.append((f"{blk}.{name}.bias", (width,), "f32"))
        if layer_scale:
            out += [(f"{blk}.ls1.weight", (width,), "f32"), (f"{blk}.ls2.weight", (width,), "f32")]
        for name, dims in (("ffn_up", (width, ffn)), ("ffn_down", (ffn, width))):
            out.append((f"{blk}.{name}.weight", dims, "f16"))
            if biases:
                out.append((f"{blk}.{name}.bias", (dims[1],), "f32"))
        if gate:
            out.append((f"{blk}.ffn_gate.weight", (width, ffn), "f16"))
            if biases:
                out.append((f"{blk}.ffn_gate.bias", (ffn,), "f32"))
    return out


def _vision_keys(width: int, ffn: int, heads: int, layers: int, image: int, patch: int, proj: int) -> dict:
    return {"clip.vision.embedding_length": width, "clip.vision.feed_forward_length": ffn,
            "clip.vision.attention.head_count": heads, "clip.vision.block_count": layers,
            "clip.vision.image_size": image, "clip.vision.patch_size": patch, "clip.vision.projection_dim": proj}


def gemma3(proj: int, label: str) -> ClipShape:
    """Gemma 3's SigLIP-so400m at 896 px, 4×4 average pooling to 256 tokens (tools/mtmd/models/siglip.cpp)."""
    w, ff, n = 1152, 4304, 27
    tensors = [("v.patch_embd.weight", (14, 14, 3, w), "f16"), ("v.patch_embd.bias", (w,), "f32"),
               ("v.position_embd.weight", (w, 64 * 64), "f16"),
               *_vit_blocks(n, w, ff, biases=True, norm_bias=True, gate=False),
               ("v.post_ln.weight", (w,), "f32"), ("v.post_ln.bias", (w,), "f32"),
               ("mm.input_projection.weight", (proj, w), "f16"), ("mm.soft_emb_norm.weight", (w,), "f32")]
    keys = {"clip.projector_type": "gemma3", "clip.use_gelu": True, **_vision_keys(w, ff, 16, n, 896, 14, proj)}
    return ClipShape(f"gemma3-siglip-896-{label}", f"mmproj of Gemma 3 {label} (SigLIP 896, projection {proj})",
                     keys, tuple(tensors))


def qwen25vl() -> ClipShape:
    """Qwen2.5-VL-7B's ViT: window attention, SwiGLU, 2×2 merge (tools/mtmd/models/qwen2vl.cpp)."""
    w, ff, n, proj = 1280, 3420, 32, 3584
    tensors = [("v.patch_embd.weight", (14, 14, 3, w), "f16"), ("v.patch_embd.weight.1", (14, 14, 3, w), "f16"),
               *_vit_blocks(n, w, ff, biases=True, norm_bias=False, gate=True),
               ("v.post_ln.weight", (w,), "f32"),
               ("mm.0.weight", (4 * w, 4 * w), "f16"), ("mm.0.bias", (4 * w,), "f32"),
               ("mm.2.weight", (4 * w, proj), "f16"), ("mm.2.bias", (proj,), "f32")]
    keys = {"clip.projector_type": "qwen2.5vl_merger", "clip.use_silu": True, "clip.vision.n_wa_pattern": 8,
            "clip.vision.spatial_merge_size": 2, **_vision_keys(w, ff, 16, n, 560, 14, proj)}
    return ClipShape("qwen2.5vl-7b", "mmproj of Qwen2.5-VL-7B-Instruct", keys, tuple(tensors))


def qwen2vl() -> ClipShape:
    """Qwen2-VL-7B's ViT: full attention, LayerNorm, quick GELU, 2×2 merge (tools/mtmd/models/qwen2vl.cpp)."""
    w, ff, n, proj = 1280, 5120, 32, 3584
    tensors = [("v.patch_embd.weight", (14, 14, 3, w), "f16"), ("v.patch_embd.weight.1", (14, 14, 3, w), "f16"),
               *_vit_blocks(n, w, ff, biases=True, norm_bias=True, gate=False),
               ("v.post_ln.weight", (w,), "f32"), ("v.post_ln.bias", (w,), "f32"),
               ("mm.0.weight", (4 * w, 4 * w), "f16"), ("mm.0.bias", (4 * w,), "f32"),
               ("mm.2.weight", (4 * w, proj), "f16"), ("mm.2.bias", (proj,), "f32")]
    keys = {"clip.projector_type": "qwen2vl_merger", "clip.vision.spatial_merge_size": 2,
            **_vision_keys(w, ff, 16, n, 560, 14, proj)}
    return ClipShape("qwen2vl-7b", "mmproj of Qwen2-VL-7B-Instruct", keys, tuple(tensors))


def llava15(proj: int, label: str) -> ClipShape:
    """LLaVA 1.5's CLIP-ViT-L/14-336 (23 of its 24 layers) and two-layer MLP (tools/mtmd/models/llava.cpp)."""
    w, ff, n = 1024, 4096, 23
    tensors = [("v.patch_embd.weight", (14, 14, 3, w), "f16"), ("v.class_embd", (w,), "f32"),
               ("v.position_embd.weight", (w, 577), "f16"), ("v.pre_ln.weight", (w,), "f32"),
               ("v.pre_ln.bias", (w,), "f32"), *_vit_blocks(n, w, ff, biases=True, norm_bias=True, gate=False),
               ("mm.0.weight", (w, proj), "f16"), ("mm.0.bias", (proj,), "f32"),
               ("mm.2.weight", (proj, proj), "f16"), ("mm.2.bias", (proj,), "f32")]
    keys = {"clip.projector_type": "mlp", **_vision_keys(w, ff, 16, n, 336, 14, proj)}
    return ClipShape(f"llava-1.5-clip-l-336-{label}", f"mmproj of LLaVA 1.5 {label} (CLIP-ViT-L/14-336)", keys,
                     tuple(tensors))


def pixtral(merger: bool) -> ClipShape:
    """Pixtral's ViT (tools/mtmd/models/pixtral.cpp): Pixtral-12B's in 16-pixel patches, or
    Mistral-Small-3.1's in 14-pixel patches with its 2×2 patch merger."""
    w, ff, n, proj = 1024, 4096, 24, 5120
    patch = 14 if merger else 16
    tensors = [("v.patch_embd.weight", (patch, patch, 3, w), "f16"), ("v.pre_ln.weight", (w,), "f32"),
               *_vit_blocks(n, w, ff, biases=False, norm_bias=False, gate=True),
               ("mm.1.weight", (w, proj), "f16"), ("mm.1.bias", (proj,), "f32"),
               ("mm.2.weight", (proj, proj), "f16"), ("mm.2.bias", (proj,), "f32"),
               ("v.token_embd.img_break", (proj,), "f32")]
    keys = {"clip.projector_type": "pixtral", "clip.use_silu": True,
            **_vision_keys(w, ff, 16, n, 1540 if merger else 1024, patch, proj)}
    if not merger:
        return ClipShape("pixtral-12b", "mmproj of Pixtral-12B-2409", keys, tuple(tensors))
    tensors += [("mm.input_norm.weight", (w,), "f32"), ("mm.patch_merger.weight", (4 * w, w), "f16")]
    keys["clip.vision.spatial_merge_size"] = 2
    return ClipShape("pixtral-mistral-small-3.1", "mmproj of Mistral-Small-3.1-24B-Instruct", keys, tuple(tensors))


def internvl3() -> ClipShape:
    """InternVL3-8B's InternViT-300M-448px and pixel-shuffle MLP (tools/mtmd/models/internvl.cpp)."""
    w, ff, n, proj = 1024, 4096, 24, 3584
    tensors = [("v.patch_embd.weight", (14, 14, 3, w), "f16"), ("v.patch_embd.bias", (w,), "f32"),
               ("v.class_embd", (w,), "f32"), ("v.position_embd.weight", (w, 1025), "f16"),
               *_vit_blocks(n, w, ff, biases=True, norm_bias=True, gate=False, layer_scale=True),
               ("mm.model.mlp.0.weight", (4 * w,), "f32"), ("mm.model.mlp.0.bias", (4 * w,), "f32"),
               ("mm.model.mlp.1.weight", (4 * w, proj), "f16"), ("mm.model.mlp.1.bias", (proj,), "f32"),
               ("mm.model.mlp.3.weight", (proj, proj), "f16"), ("mm.model.mlp.3.bias", (proj,), "f32")]
    keys = {"clip.projector_type": "internvl", "clip.use_gelu": True, "clip.vision.projector.scale_factor": 2,
            **_vision_keys(w, ff, 16, n, 448, 14, proj)}
    return ClipShape("internvl3-8b", "mmproj of InternVL3-8B (InternViT-300M-448px)", keys, tuple(tensors))


def qwen3vl() -> ClipShape:
    """Qwen3-VL-8B's ViT: fused QKV, learned positions, DeepStack mergers at layers 8, 16, 24
    (tools/mtmd/models/qwen3vl.cpp)."""
    w, ff, n, proj = 1152, 4304, 27, 4096
    tensors = [("v.patch_embd.weight", (16, 16, 3, w), "f16"), ("v.patch_embd.weight.1", (16, 16, 3, w), "f16"),
               ("v.patch_embd.bias", (w,), "f32"), ("v.position_embd.weight", (w, 48 * 48), "f32"),
               *_vit_blocks(n, w, ff, biases=True, norm_bias=True, gate=False, fused_qkv=True),
               ("v.post_ln.weight", (w,), "f32"), ("v.post_ln.bias", (w,), "f32"),
               ("mm.0.weight", (4 * w, 4 * w), "f16"), ("mm.0.bias", (4 * w,), "f32"),
               ("mm.2.weight", (4 * w, proj), "f16"), ("mm.2.bias", (proj,), "f32")]
    for il in (8, 16, 24):
        tensors += [(f"v.deepstack.{il}.norm.weight", (4 * w,), "f32"), (f"v.deepstack.{il}.norm.bias", (4 * w,), "f32"),
                    (f"v.deepstack.{il}.fc1.weight", (4 * w, 4 * w), "f16"), (f"v.deepstack.{il}.fc1.bias", (4 * w,), "f32"),
                    (f"v.deepstack.{il}.fc2.weight", (4 * w, proj), "f16"), (f"v.deepstack.{il}.fc2.bias", (proj,), "f32")]
    keys = {"clip.projector_type": "qwen3vl_merger", "clip.use_gelu": True, "clip.vision.spatial_merge_size": 2,
            "clip.vision.is_deepstack_layers": [il in (8, 16, 24) for il in range(n)],
            **_vision_keys(w, ff, 16, n, 768, 16, proj)}
    return ClipShape("qwen3vl-8b", "mmproj of Qwen3-VL-8B-Instruct", keys, tuple(tensors))


def gemma4v() -> ClipShape:
    """Gemma 4 31B's vision tower: RMS-normed ViT with q/k norms, post-norms and a gated GELU FFN,
    2D rotary positions, 3×3 average pooling (tools/mtmd/models/gemma4v.cpp)."""
    w, ff, n, proj, head = 1152, 4304, 27, 5376, 72
    tensors = [("v.patch_embd.weight", (16, 16, 3, w), "f16"), ("v.position_embd.weight", (w, 10240, 2), "f32"),
               *_vit_blocks(n, w, ff, biases=False, norm_bias=False, gate=True),
               ("v.std_bias", (w,), "f32"), ("v.std_scale", (w,), "f32"), ("mm.input_projection.weight", (w, proj), "f16")]
    for i in range(n):
        tensors += [(f"v.blk.{i}.{name}.weight", (head,), "f32") for name in ("attn_q_norm", "attn_k_norm")]
        tensors += [(f"v.blk.{i}.{name}.weight", (w,), "f32") for name in ("attn_post_norm", "ffn_post_norm")]
        tensors.append((f"v.blk.{i}.out_scale.weight", (1,), "f32"))
    keys = {"clip.vision.projector_type": "gemma4v", "clip.use_gelu": True, **_vision_keys(w, ff, 16, n, 224, 16, proj)}
    return ClipShape("gemma4-31b", "mmproj of Gemma 4 31B (vision only)", keys, tuple(tensors))


def _siglip_tower(w: int, ff: int, n: int, patch: int, positions: int) -> list[tuple[str, tuple[int, ...], str]]:
    """A SigLIP encoder: biased patch embedding, learned positions, LayerNorm blocks, post-norm."""
    return [("v.patch_embd.weight", (patch, patch, 3, w), "f16"), ("v.patch_embd.bias", (w,), "f32"),
            ("v.position_embd.weight", (w, positions), "f32"),
            *_vit_blocks(n, w, ff, biases=True, norm_bias=True, gate=False),
            ("v.post_ln.weight", (w,), "f32"), ("v.post_ln.bias", (w,), "f32")]


def idefics3() -> ClipShape:
    """SmolVLM2-2.2B's SigLIP at 384 px, pixel shuffle by 3 and one linear layer (tools/mtmd/models/siglip.cpp)."""
    w, ff, n, proj = 1152, 4304, 27, 2048
    tensors = [*_siglip_tower(w, ff, n, 14, 27 * 27), ("mm.model.fc.weight", (9 * w, proj), "f16")]
    keys = {"clip.projector_type": "idefics3", "clip.use_gelu": True, "clip.vision.projector.scale_factor": 3,
            **_vision_keys(w, ff, 16, n, 384, 14, proj)}
    return ClipShape("smolvlm2-2.2b", "mmproj of SmolVLM2-2.2B-Instruct (Idefics3)", keys, tuple(tensors))


def lfm2vl() -> ClipShape:
    """LFM2-VL-1.6B's SigLIP2 NaFlex (so400m) in 16-pixel patches, pixel unshuffle by 2 and a
    LayerNorm + two-layer MLP (tools/mtmd/models/siglip.cpp)."""
    w, ff, n, proj, hidden = 1152, 4304, 26, 2048, 2560
    tensors = [*_siglip_tower(w, ff, n, 16, 16 * 16),
               ("mm.input_norm.weight", (4 * w,), "f32"), ("mm.input_norm.bias", (4 * w,), "f32"),
               ("mm.1.weight", (4 * w, hidden), "f16"), ("mm.1.bias", (hidden,), "f32"),
               ("mm.2.weight", (hidden, proj), "f16"), ("mm.2.bias", (proj,), "f32")]
    keys = {"clip.projector_type": "lfm2", "clip.use_gelu": True, "clip.vision.projector.scale_factor": 2,
            **_vision_keys(w, ff, 16, n, 256, 16, proj)}
    return ClipShape("lfm2-vl-1.6b", "mmproj of LFM2-VL-1.6B (SigLIP2 NaFlex)", keys, tuple(tensors))


def kimivl() -> ClipShape:
    """Kimi-VL-A3B's MoonViT: 2D rotary and interpolated learned positions, 2×2 merge, LayerNorm +
    two-layer MLP (tools/mtmd/models/kimivl.cpp)."""
    w, ff, n, proj = 1152, 4304, 27, 2048
    tensors = [*_siglip_tower(w, ff, n, 14, 64 * 64),
               ("mm.input_norm.weight", (w,), "f32"), ("mm.input_norm.bias", (w,), "f32"),
               ("mm.1.weight", (4 * w, 4 * w), "f16"), ("mm.1.bias", (4 * w,), "f32"),
               ("mm.2.weight", (4 * w, proj), "f16"), ("mm.2.bias", (proj,), "f32")]
    keys = {"clip.projector_type": "kimivl", "clip.use_gelu": True, "clip.vision.projector.scale_factor": 2,
            **_vision_keys(w, ff, 16, n, 896, 14, proj)}
    return ClipShape("kimi-vl-a3b", "mmproj of Kimi-VL-A3B-Instruct (MoonViT)", keys, tuple(tensors))


def glm4v() -> ClipShape:
    """GLM-4.1V-9B's ViT: RMSNorm, SwiGLU 4096 wide, 2×2 conv merger, then an FC and a SwiGLU
    projector of the header's FFN width, 13696 (tools/mtmd/models/glm4v.cpp)."""
    w, ff, n, proj, block_ff = 1536, 13696, 24, 4096, 4096
    tensors = [("v.patch_embd.weight", (14, 14, 3, w), "f16"), ("v.patch_embd.weight.1", (14, 14, 3, w), "f16"),
               ("v.patch_embd.bias", (w,), "f32"), ("v.norm_embd.weight", (w,), "f32"),
               ("v.position_embd.weight", (w, 24 * 24), "f32"),
               *_vit_blocks(n, w, block_ff, biases=False, norm_bias=False, gate=True, fused_qkv=True),
               ("v.post_ln.weight", (w,), "f32"),
               ("mm.patch_merger.weight", (2, 2, w, proj), "f16"), ("mm.patch_merger.bias", (proj,), "f32"),
               ("mm.model.fc.weight", (proj, proj), "f16"),
               ("mm.post_norm.weight", (proj,), "f32"), ("mm.post_norm.bias", (proj,), "f32"),
               ("mm.up.weight", (proj, ff), "f16"), ("mm.gate.weight", (proj, ff), "f16"),
               ("mm.down.weight", (ff, proj), "f16")]
    keys = {"clip.projector_type": "glm4v", "clip.use_silu": True, "clip.vision.spatial_merge_size": 2,
            **_vision_keys(w, ff, 12, n, 336, 14, proj)}
    return ClipShape("glm-4.1v-9b", "mmproj of GLM-4.1V-9B-Thinking", keys, tuple(tensors))


def llama4() -> ClipShape:
    """Llama 4 Scout's ViT at 336 px with a class token, pixel shuffle by 2 and a GELU MLP adapter
    (tools/mtmd/models/llama4.cpp)."""
    w, ff, n, proj, adapter = 1408, 5632, 34, 5120, 4096
    tensors = [("v.patch_embd.weight", (14 * 14 * 3, w), "f16"), ("v.class_embd", (w,), "f32"),
               ("v.position_embd.weight", (w, 577), "f32"),
               ("v.pre_ln.weight", (w,), "f32"), ("v.pre_ln.bias", (w,), "f32"),
               *_vit_blocks(n, w, ff, biases=True, norm_bias=True, gate=False),
               ("v.post_ln.weight", (w,), "f32"), ("v.post_ln.bias", (w,), "f32"),
               ("mm.model.mlp.1.weight", (4 * w, adapter), "f16"), ("mm.model.mlp.2.weight", (adapter, adapter), "f16"),
               ("mm.model.fc.weight", (adapter, proj), "f16")]
    keys = {"clip.projector_type": "llama4", "clip.use_gelu": True, "clip.vision.projector.scale_factor": 2,
            **_vision_keys(w, ff, 16, n, 336, 14, proj)}
    return ClipShape("llama4-scout", "mmproj of Llama-4-Scout-17B-16E-Instruct", keys, tuple(tensors))


SHAPES = {s.name: s for s in (gemma3(2560, "4b"), gemma3(5376, "27b"), qwen25vl(), qwen2vl(), qwen3vl(),
                              llava15(4096, "7b"), llava15(5120, "13b"), pixtral(True), pixtral(False), internvl3(),
                              gemma4v(), idefics3(), lfm2vl(), kimivl(), glm4v(), llama4())}


def write_projector(shape: ClipShape, out: Path) -> Path:
    """The projector's GGUF: its header, and its tensor data a hole of the right length (llama.cpp
    reads zeros from it)."""
    from tests.gguf_fixtures import Q, write_gguf  # noqa: PLC0415 - gguf and numpy, for the writers only

    kv = {"general.type": "mmproj", "general.name": shape.name, "general.description": shape.mirrors,
          "clip.has_vision_encoder": True, "clip.vision.attention.layer_norm_epsilon": 1e-6,
          "clip.vision.image_mean": [0.5, 0.5, 0.5], "clip.vision.image_std": [0.5, 0.5, 0.5], **shape.keys}
    tensors = [(name, ne, Q.F16 if dtype == "f16" else Q.F32) for name, ne, dtype in shape.tensors]
    return write_gguf(out, "clip", kv=kv, tensors=tensors)
