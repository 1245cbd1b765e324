"""What a projector placed on the GPU costs llama-server: its weights (the file) and the CLIP
compute buffer llama.cpp b11434 reserves for it (docs/maintainers/sizing.md#the-projector).

The buffer is reserved once, at load: tools/mtmd/clip.cpp `warmup` builds the encoder's graph for
one square warmup image and reserves the scheduler for it (`reserve_compute_meta`, which logs
"compute buffer size"); llama-server counts the same figure in its own estimate of the
projector ("estimated worst-case memory usage of mmproj"). The warmup image is the projector's
`image_size` (Gemma 3, LLaVA, InternVL, Idefics3, Llama 4) or, where the image size varies, a fixed
token count (`set_warmup_n_tokens`: 46 × 46 tokens for Qwen-VL and GLM-4V, 16 × 16 for Pixtral,
Gemma 4 and Kimi-VL), whatever the largest image the projector accepts; an image above it grows
the buffer when it is encoded. LFM2-VL warms up on its largest image (`set_limit_image_tokens`,
256 tokens). A user's `--image-max-tokens` lowers the fixed count to its square root per side,
and sets LFM2-VL's largest image, either way; `--image-min-tokens` leaves the warmup alone.

The buffer is the peak of ggml's graph allocator over that graph: per image position, the
activations one encoder layer keeps alive at once (a count of the tower's widths that depends
on the graph: SwiGLU keeps gate and up, Qwen3-VL's DeepStack mergers their outputs, LLaVA's
projection two text-wide rows per token), and without flash attention the attention scores,
heads × positions² floats. Qwen2.5-VL adds its window mask, positions² floats (and its f16 copy
with flash attention). These counts are read off llama.cpp's own reports at real widths
(`tests/data/clip_alloc_b11434.json`, recorded by `tests/data/record_clip_alloc.py`), which
the tests hold the formula to within 10%. A projector type not recorded there, an audio encoder,
or a header without the widths keeps the flat buffer of the Go original, said so in the reason.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from attrs import frozen

from autogen.metadata.gguf_keys import Keys
from autogen.numfmt import GIB, gib_text
from autogen.vision_tower import VisionTower

#: A projector file not read: assumed this size.
MMPROJ_ASSUMED = GIB
#: The CLIP compute buffer where the formula has nothing to go on (the Go original's `visionOverheadGB`).
CLIP_BUFFER_ASSUMED = GIB
F32 = 4
F16 = 2
#: clip.cpp `set_warmup_n_tokens`: tokens per side of the warmup image, by projector type.
WARMUP_TOKENS_SIDE = {"qwen2vl_merger": 46, "qwen2.5vl_merger": 46, "qwen3vl_merger": 46, "glm4v": 46,
                      "pixtral": 16, "gemma4v": 16, "kimivl": 16}
#: clip.cpp `set_limit_image_tokens` without a warmup count: the warmup is the largest image,
#: this many tokens (or the user's `--image-max-tokens`).
WARMUP_MAX_TOKENS = {"lfm2": 256}
#: Patches merged per side when the header does not say (clip.cpp `load_hparams` defaults; 1 else).
DEFAULT_MERGE = {"qwen2vl_merger": 2, "qwen2.5vl_merger": 2, "qwen3vl_merger": 2, "glm4v": 2, "gemma4v": 3}
#: Types whose encoder prepends a class token (one more position).
CLASS_TOKEN = frozenset({"mlp", "internvl", "llama4"})


def _plain(t: VisionTower) -> float:
    """A ViT layer with a GELU FFN: the FFN's hidden row and three of the width (Gemma 3's
    SigLIP, InternViT, CLIP-ViT, Qwen2-VL's LayerNorm ViT at 2.5)."""
    return t.feed_forward_length + 3 * t.embedding_length


def _lean(t: VisionTower) -> float:
    """The FFN's hidden row and two and a half of the width (Qwen2-VL, Llama 4)."""
    return t.feed_forward_length + 2.5 * t.embedding_length


def _gated(t: VisionTower) -> float:
    """A gated FFN without biases keeps four of its hidden rows (Pixtral, Gemma 4)."""
    return 4 * t.feed_forward_length


#: Floats per image position at the allocator's peak with flash attention, by projector type.
PER_POSITION: dict[str, Callable[[VisionTower], float]] = {
    "gemma3": _plain,
    "internvl": _plain,
    "mlp": _plain,
    "idefics3": _plain,
    "lfm2": _plain,
    "kimivl": lambda t: t.feed_forward_length + 4 * t.embedding_length,
    "llama4": _lean,
    "qwen2vl_merger": _lean,
    "qwen2.5vl_merger": lambda t: 2 * t.feed_forward_length + 2.5 * t.embedding_length,
    "qwen3vl_merger": lambda t: (t.feed_forward_length + 2.5 * t.embedding_length
                                 + (t.deepstack_layers + 1) * t.projection_dim / (t.merge or 2) ** 2),
    "pixtral": _gated,
    "gemma4v": _gated,
    # GLM-4V's blocks run a SwiGLU as wide as the text model; the header's FFN width is its merger's
    "glm4v": lambda t: 2 * t.projection_dim + 5 * t.embedding_length,
}
#: Floats per position beside the attention scores without flash attention.
ATTENTION_WIDTHS = 5


@frozen
class ClipBuffer:
    """The CLIP compute buffer llama.cpp reserves at load, and the warmup image it is for."""

    bytes: int
    #: Side of the square warmup image in pixels.
    image: int
    flash_attn: bool


@frozen
class ProjectorCharge:
    """A GPU-placed projector's charge: its file and the CLIP compute buffer, and why."""

    bytes: int
    reason: str


def _warmup(t: VisionTower, image_max_tokens: int | None) -> tuple[int, int]:
    """(side of the warmup image in pixels, image positions the encoder sees) — clip.cpp
    `load_hparams`: `image_size`, `set_warmup_n_tokens` of a type whose images vary (capped by
    the user's `--image-max-tokens`), or `set_limit_image_tokens`' largest image."""
    merge = t.merge or DEFAULT_MERGE.get(t.projector_type, 1)
    if t.projector_type in WARMUP_TOKENS_SIDE:
        side = WARMUP_TOKENS_SIDE[t.projector_type]
        if image_max_tokens and side * side > image_max_tokens:
            side = max(1, math.isqrt(image_max_tokens))
        return side * merge * t.patch_size, (side * merge) ** 2
    if t.projector_type in WARMUP_MAX_TOKENS:
        pixels = math.isqrt((image_max_tokens or WARMUP_MAX_TOKENS[t.projector_type]) * (t.patch_size * merge) ** 2)
        return pixels, (pixels // t.patch_size) ** 2
    grid = t.image_size // t.patch_size
    return t.image_size, grid * grid + (1 if t.projector_type in CLASS_TOKEN else 0)


def _missing(t: VisionTower) -> str:
    """What the formula lacks in this header ("" when nothing)."""
    if t.projector_type not in PER_POSITION:
        return f"projector type {t.projector_type} not measured"
    if t.has_audio:
        return "an audio encoder too, not measured"
    vision = Keys.ClipVision  # named as the header's keys
    widths = {vision.PATCH_SIZE: t.patch_size, vision.EMBEDDING_LENGTH: t.embedding_length,
              vision.FEED_FORWARD_LENGTH: t.feed_forward_length, vision.Attention.HEAD_COUNT: t.head_count}
    if t.projector_type not in WARMUP_TOKENS_SIDE and t.projector_type not in WARMUP_MAX_TOKENS:
        widths[vision.IMAGE_SIZE] = t.image_size
    if t.projector_type in ("mlp", "qwen3vl_merger", "glm4v"):
        widths[vision.PROJECTION_DIM] = t.projection_dim
    absent = [k for k, v in widths.items() if not v]
    return f"header lacks {', '.join(absent)}" if absent else ""


def clip_buffer(tower: VisionTower, flash_attn: bool, image_max_tokens: int | None = None) -> ClipBuffer | None:
    """llama.cpp's CLIP compute buffer for `tower` (module docstring); None when the header
    lacks what the formula needs or the type is not measured (`why_unsized` says which).
    `image_max_tokens`: llama-server's `--image-max-tokens` (None or 0: the projector's own)."""
    if _missing(tower):
        return None
    image, n = _warmup(tower, image_max_tokens)
    peak = F32 * n * PER_POSITION[tower.projector_type](tower)
    if tower.projector_type == "mlp":  # the projection: two text-wide rows per patch token
        tokens = (tower.image_size // tower.patch_size) ** 2
        peak = max(peak, F32 * tokens * (2 * tower.projection_dim + 1.5 * tower.embedding_length))
    mask = n * n if tower.projector_type == "qwen2.5vl_merger" and tower.window_pattern else 0
    if flash_attn:
        return ClipBuffer(int(peak + mask * (F32 + F16)), image, True)
    scores = F32 * n * (ATTENTION_WIDTHS * tower.embedding_length + tower.head_count * n)
    return ClipBuffer(int(max(peak, scores) + mask * F32), image, False)


def why_unsized(tower: VisionTower | None) -> str:
    """Why `clip_buffer` has no figure for this projector."""
    return _missing(tower) if tower is not None else "no vision tower read from its header"


def projector_charge(mmproj_bytes: int, tower: VisionTower | None, flash_attn: str | None,
                     image_max_tokens: int | None = None) -> ProjectorCharge:
    """A GPU-placed projector: its file (MMPROJ_ASSUMED when not read) and the CLIP compute
    buffer. `flash_attn`: llama-server's `-fa` ("off" turns clip's off too; auto and on keep it,
    every GPU backend running the encoder's head widths); `image_max_tokens`: its
    `--image-max-tokens`, which shrinks (or, for LFM2-VL, sets) the warmup image."""
    file_part = f"its file {gib_text(mmproj_bytes)}" if mmproj_bytes > 0 else \
        f"its file, assumed {gib_text(MMPROJ_ASSUMED)} (not read)"
    weights = mmproj_bytes if mmproj_bytes > 0 else MMPROJ_ASSUMED
    buffer = clip_buffer(tower, flash_attn != "off", image_max_tokens) if tower is not None else None
    if buffer is None:
        return ProjectorCharge(weights + CLIP_BUFFER_ASSUMED,
                               f"{file_part} and an assumed {gib_text(CLIP_BUFFER_ASSUMED)} CLIP compute buffer "
                               f"({why_unsized(tower)})")
    attention = "" if buffer.flash_attn else ", flash attention off"
    return ProjectorCharge(weights + buffer.bytes,
                           f"{file_part} and llama.cpp's CLIP compute buffer for a {buffer.image}×{buffer.image} "
                           f"image{attention}, {gib_text(buffer.bytes)}")
