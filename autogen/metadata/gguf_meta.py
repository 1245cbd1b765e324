"""GGUF header → `ModelMeta`: the key mapping of docs/maintainers/discovery.md#keys-and-derived-fields.

The attention layout is normalised to one KV-head count per layer, read the way llama.cpp
reads it (`src/llama-model.cpp` `load_hparams`, `get_key_or_arr`), so the KV cost can be one
formula for every architecture.
"""

from __future__ import annotations

from collections.abc import Callable

from autogen.metadata.gguf_header import GGUFError, GGUFHeader
from autogen.metadata.gguf_keys import (
    CONTROL_VECTOR_ARCH,
    CONTROL_VECTOR_HINT,
    PROJECTOR_ARCH,
    GGMLType,
    GGUFType,
    Keys,
)
from autogen.metadata.model_meta import ModelMeta
from autogen.vision_tower import VisionTower

__all__ = ["meta_from_gguf"]

#: Architectures whose layers are all recurrent: no per-token KV cache at all
#: (llama.cpp `llm_arch_is_recurrent`).
RECURRENT_ARCHS = frozenset({"mamba", "mamba2", "rwkv6", "rwkv6qwen2", "rwkv7", "arwkv7"})

#: audio.cpp's family key (its converter writes it beside the embedded model spec).
AUDIOCPP_FAMILY = "audiocpp.model_spec.family"

#: More layers than any model has: a hostile block_count must not size a per-layer tuple.
MAX_BLOCKS = 1 << 16

#: Hybrids whose attention layers come from `{arch}.full_attention_interval`, with the
#: default llama.cpp uses when the key is absent (`load_hparams` for qwen3next / qwen35 /
#: qwen35moe: `recurrent_layer_arr[i] = ((i + 1) % full_attn_interval != 0)`, default 4).
INTERVAL_DEFAULTS = {"qwen3next": 4, "qwen35": 4, "qwen35moe": 4}

#: Hybrids whose 0-KV-head layers are recurrent only where the per-layer feed_forward_length
#: is 0 too (the rest are MLP / MoE blocks): llama.cpp `load_hparams` for nemotron_h.
FFN_MARKS_MLP_LAYERS = frozenset({"nemotron_h", "nemotron_h_moe"})
#: Every layer runs attention and a mamba mixer side by side (llama.cpp: all recurrent).
PARALLEL_HYBRIDS = frozenset({"falcon-h1"})



def meta_from_gguf(header: GGUFHeader) -> ModelMeta:
    """Normalise a header's keys; numbers are 0 when the file does not say.

    Raises `GGUFError` (a `ModelError`) only for an absurd block count.
    """
    kv = header.kv
    arch = kv.get(Keys.General.ARCHITECTURE)
    arch = arch if isinstance(arch, str) else ""

    def key(template: str) -> object:
        return kv.get(template.format(arch=arch))

    embd_dims = header.token_embd_dims
    block_count = _positive_int(key(Keys.LLM.BLOCK_COUNT))
    if block_count > MAX_BLOCKS:
        raise GGUFError(f"block_count {block_count} is absurd (max {MAX_BLOCKS})")
    embedding = _positive_int(key(Keys.LLM.EMBEDDING_LENGTH)) or (embd_dims[0] if embd_dims else 0)
    head_count = _int_or_max(key(Keys.Attention.HEAD_COUNT))
    key_length = _positive_int(key(Keys.Attention.KEY_LENGTH))
    value_length = _positive_int(key(Keys.Attention.VALUE_LENGTH))

    # MLA (deepseek2 and kin, conversion/deepseek.py): the compressed layout stores
    # key_length = kv_lora_rank + rope dims, value_length = kv_lora_rank, the per-head widths
    # under the `_mla` keys, and the rope part as rope.dimension_count. llama.cpp then caches
    # one latent row of kv_lora_rank + n_rot per token and layer. Files converted before the
    # `_mla` keys existed run as plain attention on per-head K/V (`hparams.is_mla()` false).
    kv_lora_rank = _positive_int(key(Keys.Attention.KV_LORA_RANK))
    key_length_mla = _positive_int(key(Keys.Attention.KEY_LENGTH_MLA))
    rope_dims = latent_rank = 0
    mla_note = ""
    if kv_lora_rank and key_length_mla:
        rope_dims = _positive_int(key(Keys.Rope.DIMENSION_COUNT)) or max(key_length - kv_lora_rank, 0)
        key_length = key_length_mla
        value_length = _positive_int(key(Keys.Attention.VALUE_LENGTH_MLA)) or value_length
        mla_note = f"MLA latent {kv_lora_rank} + rope {rope_dims} per layer"
    elif kv_lora_rank:
        latent_rank, kv_lora_rank = kv_lora_rank, 0
        rope_dims = _positive_int(key(Keys.Rope.DIMENSION_COUNT))
        mla_note = "kv_lora_rank without key_length_mla (pre-MLA conversion): per-head K/V"
    if head_count and embedding:
        key_length = key_length or embedding // head_count
        value_length = value_length or embedding // head_count

    heads_kv, layout_note = _kv_layout(header, arch, block_count)
    sliding = _bool_array(key(Keys.Attention.SLIDING_WINDOW_PATTERN))
    ssm = _ssm_sizes(key, embedding)
    recurrent = _recurrent_layers(arch, heads_kv, key(Keys.LLM.FEED_FORWARD_LENGTH)) if any(ssm) else 0
    vocab = header.array_lengths.get(Keys.Tokenizer.LIST, 0) or _positive_int(key(Keys.LLM.VOCAB_SIZE))
    if not vocab and len(embd_dims) >= 2:
        vocab = embd_dims[1]
    adapter_type = _text(kv.get(Keys.Adapter.TYPE)).strip().lower()
    if arch == CONTROL_VECTOR_ARCH:
        adapter_type = "control_vector"
    alpha = kv.get(Keys.Adapter.LORA_ALPHA)
    return ModelMeta(
        source="gguf",
        arch=arch.lower(),
        general_type=_text(kv.get(Keys.General.TYPE)).strip().lower(),
        name=_text(kv.get(Keys.General.NAME)),
        full_name=" ".join(p for p in (_text(kv.get(k)).strip() for k in (
            Keys.General.BASENAME, Keys.General.SIZE_LABEL, Keys.General.FINETUNE)) if p),
        base_models=_base_models(kv),
        adapter_type=adapter_type,
        lora_alpha=float(alpha) if isinstance(alpha, (int, float)) and not isinstance(alpha, bool) else 0.0,
        lora_rank=header.lora_rank,
        lora_width=header.lora_width,
        lora_layers=header.lora_layers,
        tokenizer_model=_text(kv.get(Keys.Tokenizer.MODEL)),
        tokenizer_pre=_text(kv.get(Keys.Tokenizer.PRE)),
        vocab_digest=header.vocab_digest,
        special_tokens=_special_tokens(kv) if header.vocab_digest else (),
        context_length=_positive_int(key(Keys.LLM.CONTEXT_LENGTH)),
        block_count=block_count,
        embedding_length=embedding,
        feed_forward_length=_int_or_max(key(Keys.LLM.FEED_FORWARD_LENGTH)),
        head_count=head_count,
        head_count_kv=heads_kv,
        key_length=key_length,
        value_length=value_length,
        kv_lora_rank=kv_lora_rank,
        qk_rope_head_dim=rope_dims,
        latent_rank=latent_rank,
        tied_output_bytes=header.tied_output_bytes,
        sliding_window=_positive_int(key(Keys.Attention.SLIDING_WINDOW)),
        expert_count=_positive_int(key(Keys.LLM.EXPERT_COUNT)),
        expert_used_count=_positive_int(key(Keys.LLM.EXPERT_USED_COUNT)),
        expert_shared_count=_positive_int(key(Keys.LLM.EXPERT_SHARED_COUNT)),
        expert_feed_forward_length=_int_or_max(key(Keys.LLM.EXPERT_FEED_FORWARD_LENGTH)),
        nextn_layers=_positive_int(key(Keys.LLM.NEXTN_PREDICT_LAYERS)),
        pooling_type=_positive_int(key(Keys.LLM.POOLING_TYPE)),
        vocab_size=vocab,
        has_chat_template=header.has_chat_template,
        tensor_bytes=header.tensor_bytes,
        expert_tensor_bytes=header.expert_tensor_bytes,
        tensor_count=header.tensor_count,
        diffusion_kind=_diffusion_kind(header),
        quant_label=_quant_label(header),
        layout_note="; ".join(n for n in (layout_note, mla_note) if n),
        audio_family=_text(kv.get(AUDIOCPP_FAMILY)).strip().lower(),
        chat_template_markers=header.chat_template_markers or (),
        chat_template_scanned=header.chat_template_markers is not None,
        has_baked_encoders=header.has_baked_encoders,
        vision_tensor_count=header.vision_tensor_count,
        projector_width=_projector_width(kv),
        vision_tower=_vision_tower(kv),
        leading_dense_blocks=_positive_int(key(Keys.LLM.LEADING_DENSE_BLOCK_COUNT)),
        key_length_swa=_positive_int(key(Keys.Attention.KEY_LENGTH_SWA)),
        value_length_swa=_positive_int(key(Keys.Attention.VALUE_LENGTH_SWA)),
        sliding_layers=sliding if sliding is not None and len(sliding) == block_count else (),
        sliding_pattern=_positive_int(key(Keys.Attention.SLIDING_WINDOW_PATTERN)),
        recurrent_layers=recurrent,
        ssm_conv_kernel=ssm[0],
        ssm_inner_size=ssm[1],
        ssm_state_size=ssm[2],
        ssm_group_count=ssm[3],
        wkv_head_size=ssm[4],
        token_shift_count=ssm[5],
    )


def _special_tokens(kv) -> tuple[bool | int | None, ...]:
    """`ModelMeta.special_tokens`: whether BOS and EOS are added, and which ids they are when so."""
    add_bos, add_eos = kv.get(Keys.Tokenizer.ADD_BOS), kv.get(Keys.Tokenizer.ADD_EOS)
    return (add_bos, kv.get(Keys.Tokenizer.BOS_ID) if add_bos else None,
            add_eos, kv.get(Keys.Tokenizer.EOS_ID) if add_eos else None)


def _projector_width(kv) -> int:
    """`ModelMeta.projector_width`: the text width a `general.type = mmproj` file declares."""
    if _text(kv.get(Keys.General.TYPE)).strip().lower() != GGUFType.MMPROJ:
        return 0
    return (_positive_int(kv.get(Keys.ClipVision.PROJECTION_DIM))
            or _positive_int(kv.get(Keys.ClipAudio.PROJECTION_DIM)))


def _vision_tower(kv) -> VisionTower | None:
    """`ModelMeta.vision_tower`: what a projector file (`general.type = mmproj`, or architecture
    `clip` from the older image-encoder converter) with a vision projector type says of its tower,
    the keys tools/mtmd/clip.cpp `load_hparams` reads. Its text width only where
    `projector_width` trusts it."""
    is_projector = (_text(kv.get(Keys.General.TYPE)).strip().lower() == GGUFType.MMPROJ
                    or _text(kv.get(Keys.General.ARCHITECTURE)).strip().lower() == PROJECTOR_ARCH)
    if not is_projector:
        return None
    vision = Keys.ClipVision
    kind = _text(kv.get(Keys.Clip.PROJECTOR_TYPE)) or _text(kv.get(vision.PROJECTOR_TYPE))
    if not kind:
        return None
    deepstack = _bool_array(kv.get(vision.IS_DEEPSTACK_LAYERS)) or ()
    return VisionTower(
        projector_type=kind.strip().lower(),
        image_size=_positive_int(kv.get(vision.IMAGE_SIZE)),
        patch_size=_positive_int(kv.get(vision.PATCH_SIZE)),
        embedding_length=_positive_int(kv.get(vision.EMBEDDING_LENGTH)),
        feed_forward_length=_positive_int(kv.get(vision.FEED_FORWARD_LENGTH)),
        head_count=_positive_int(kv.get(vision.Attention.HEAD_COUNT)),
        projection_dim=_projector_width(kv),
        merge=_positive_int(kv.get(vision.SPATIAL_MERGE_SIZE)) or _positive_int(kv.get(vision.Projector.SCALE_FACTOR)),
        window_pattern=_positive_int(kv.get(vision.N_WA_PATTERN)),
        deepstack_layers=sum(deepstack),
        has_audio=kv.get(Keys.Clip.HAS_AUDIO_ENCODER) is True,
    )


#: `general.base_model.N` entries read (the count is the file's word; a hostile one is capped).
MAX_BASE_MODELS = 8


def _base_models(kv) -> tuple[str, ...]:
    """What the header names as this file's base models (`ModelMeta.base_models`)."""
    names: list[str] = []
    for i in range(min(_positive_int(kv.get(Keys.General.BASE_MODEL_COUNT)), MAX_BASE_MODELS)):
        name = _text(kv.get(Keys.General.BASE_MODEL_NAME.format(id=i))).strip()
        org = _text(kv.get(Keys.General.BASE_MODEL_ORGANIZATION.format(id=i))).strip()
        url = _text(kv.get(Keys.General.BASE_MODEL_REPO_URL.format(id=i))).strip()
        names += [n for n in (name, f"{org}/{name}" if org and name else "", url) if n]
    hint = _text(kv.get(CONTROL_VECTOR_HINT)).strip()
    if hint:
        names.append(hint)
    return tuple(dict.fromkeys(names))


def _kv_layout(header: GGUFHeader, arch: str, blocks: int) -> tuple[tuple[int, ...], str]:
    """KV heads per layer (0 = no per-token KV) and how they were read.

    As llama.cpp: head_count_kv (scalar broadcast, or per layer) else head_count (the same),
    then, for interval hybrids, zero on every layer but each `interval`-th.
    """
    if arch in RECURRENT_ARCHS:
        return (0,) * blocks, f"recurrent architecture {arch}: no per-token KV"
    raw_kv = header.kv.get(Keys.Attention.HEAD_COUNT_KV.format(arch=arch))
    raw_heads = header.kv.get(Keys.Attention.HEAD_COUNT.format(arch=arch))
    label, per_layer = "head_count_kv", _int_array(raw_kv)
    if per_layer is None and not _positive_int(raw_kv):
        label, per_layer = "head_count_kv absent, head_count", _int_array(raw_heads)
    if per_layer is not None:
        heads = _fit(per_layer, blocks) if blocks else per_layer
        note = f"{label} per layer: {_attention_layers(heads)}"
        if len(per_layer) != len(heads):
            note += f" (array of {len(per_layer)} fitted to block_count {blocks})"
        return heads, note
    scalar = _positive_int(raw_kv) or _positive_int(raw_heads)
    if not scalar or not blocks:
        return (), "no block_count or head counts: attention layout unknown"
    heads, note = (scalar,) * blocks, f"{label} {scalar} on every layer"
    interval = _positive_int(header.kv.get(Keys.LLM.FULL_ATTENTION_INTERVAL.format(arch=arch)))
    source = f"full_attention_interval {interval}"
    if not interval and arch in INTERVAL_DEFAULTS:
        interval = INTERVAL_DEFAULTS[arch]
        source = f"full_attention_interval absent, llama.cpp default {interval}"
    if interval:
        heads = tuple(h if (i + 1) % interval == 0 else 0 for i, h in enumerate(heads))
        note = f"{source}: {_attention_layers(heads)}"
    return heads, note


def _ssm_sizes(key: Callable[[str], object], embedding: int) -> tuple[int, int, int, int, int, int]:
    """(conv kernel, inner, state, groups, wkv head, token shift) as llama.cpp loads them.

    LFM2's short conv is a kernel of `l_cache` over the embedding (`n_embd_r` =
    n_embd × (l_cache − 1)); RWKV's token shift count defaults to 2 (`load_hparams`).
    """
    wkv = _positive_int(key(Keys.WKV.HEAD_SIZE))
    if wkv:
        return 0, 0, 0, 0, wkv, _positive_int(key(Keys.LLM.TOKEN_SHIFT_COUNT)) or 2
    l_cache = _positive_int(key(Keys.ShortConv.L_CACHE))
    if l_cache:
        return l_cache, embedding, 0, 0, 0, 0
    return (_positive_int(key(Keys.SSM.CONV_KERNEL)), _positive_int(key(Keys.SSM.INNER_SIZE)),
            _positive_int(key(Keys.SSM.STATE_SIZE)), _positive_int(key(Keys.SSM.GROUP_COUNT)), 0, 0)


def _recurrent_layers(arch: str, heads: tuple[int, ...], raw_ffn: object) -> int:
    """Layers without KV heads hold recurrent state (llama.cpp `recurrent_layer_arr`)."""
    if arch in PARALLEL_HYBRIDS:
        return len(heads)
    ffn = _int_array(raw_ffn)
    if arch in FFN_MARKS_MLP_LAYERS and ffn is not None and len(ffn) == len(heads):
        return sum(1 for h, f in zip(heads, ffn, strict=False) if h == 0 and f == 0)
    return sum(1 for h in heads if h == 0)


def _fit(values: tuple[int, ...], n: int) -> tuple[int, ...]:
    """A per-layer array of the wrong length: cut it, or pad with its largest entry."""
    return values[:n] + (max(values),) * (n - len(values))


def _attention_layers(heads: tuple[int, ...]) -> str:
    return f"{sum(1 for h in heads if h)} of {len(heads)} layers attention"


def _diffusion_kind(header: GGUFHeader) -> str:
    if not header.has_unet_blocks:
        return ""
    return "sdxl" if header.has_label_emb else "sd1"


def _quant_label(header: GGUFHeader) -> str:
    """Name of the ggml type holding the most bytes (display only; 1-D norms stay F32)."""
    if not header.bytes_by_type:
        return ""
    return GGMLType(header.bytes_by_type[0][0]).name


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _is_strict_int(value: object) -> bool:
    """A GGUF integer value (a bool is not one, although Python says it is)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _int_array(value: object) -> tuple[int, ...] | None:
    """A non-empty integer array, negatives read as 0; None for anything else."""
    if isinstance(value, tuple) and value and all(_is_strict_int(v) for v in value):
        return tuple(max(v, 0) for v in value)
    return None


def _bool_array(value: object) -> tuple[bool, ...] | None:
    if isinstance(value, tuple) and value and all(isinstance(v, bool) for v in value):
        return value
    return None


def _positive_int(value: object) -> int:
    return value if _is_strict_int(value) and value > 0 else 0


def _int_or_max(value: object) -> int:
    """A scalar, or the largest entry of a per-layer array (llama.cpp `get_key_or_arr`)."""
    if isinstance(value, tuple):
        return max((v for v in value if _is_strict_int(v)), default=0)
    return _positive_int(value)
