"""The vision tower a projector's header describes: read by `metadata.gguf_meta`, carried on a
model row by discovery, priced by `sizing.projector`. A leaf, so a row read back from the load memo
imports no reader."""

from __future__ import annotations

from attrs import frozen


@frozen
class VisionTower:
    """What a projector's header says of its vision tower: what llama.cpp b11434 sizes the CLIP
    compute buffer from (tools/mtmd/clip.cpp `load_hparams` and the warmup image it picks). GGUF
    `clip.vision.*` keys as written; 0 = absent.

    Example: VisionTower(projector_type="gemma3", image_size=896, patch_size=14,
    embedding_length=1152, feed_forward_length=4304, head_count=16, projection_dim=2560).
    """

    #: `clip.projector_type`, else `clip.vision.projector_type` (a file with audio too).
    projector_type: str
    image_size: int = 0
    patch_size: int = 0
    embedding_length: int = 0
    feed_forward_length: int = 0
    head_count: int = 0
    projection_dim: int = 0
    #: Patches merged per side: `spatial_merge_size` (Qwen-VL, Pixtral), else
    #: `clip.vision.projector.scale_factor` (Gemma 3, InternVL).
    merge: int = 0
    #: `n_wa_pattern`: every n-th layer attends fully, the rest within windows (Qwen2.5-VL).
    window_pattern: int = 0
    #: Layers whose features also feed the text model (`is_deepstack_layers`, Qwen3-VL).
    deepstack_layers: int = 0
    #: `clip.has_audio_encoder`: the file carries an audio encoder too.
    has_audio: bool = False
