"""GGUF names and numbers the header reader needs, without importing `gguf` (0.35 s, numpy).

Every table here mirrors gguf-py's `gguf/constants.py` (ggml-org/llama.cpp, `gguf-py/`);
`tests/test_gguf_header.py` walks each one and compares it with the installed `gguf`.
Per-architecture keys are templates filled with `.format(arch=…)`, as in `gguf.Keys`.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = [
    "CONTROL_VECTOR_ARCH",
    "CONTROL_VECTOR_HINT",
    "DEFAULT_ALIGNMENT",
    "GGML_TYPE_SIZES",
    "GGUF_MAGIC",
    "PROJECTOR_ARCH",
    "SCALAR_FORMATS",
    "SUPPORTED_VERSIONS",
    "GGMLType",
    "GGUFType",
    "Keys",
    "ValueType",
]

GGUF_MAGIC = b"GGUF"
#: v1 used 32-bit counts and lengths; v2 and v3 share one little-endian layout.
SUPPORTED_VERSIONS = (2, 3)
#: `general.alignment` when absent (gguf.GGUF_DEFAULT_ALIGNMENT).
DEFAULT_ALIGNMENT = 32


class Keys:
    """Metadata keys, named and nested as in `gguf.Keys`."""

    class General:
        TYPE         = "general.type"
        ARCHITECTURE = "general.architecture"
        ALIGNMENT    = "general.alignment"
        NAME         = "general.name"
        BASENAME     = "general.basename"
        FINETUNE     = "general.finetune"
        SIZE_LABEL   = "general.size_label"
        BASE_MODEL_COUNT        = "general.base_model.count"
        BASE_MODEL_NAME         = "general.base_model.{id}.name"
        BASE_MODEL_ORGANIZATION = "general.base_model.{id}.organization"
        BASE_MODEL_REPO_URL     = "general.base_model.{id}.repo_url"

    class LLM:
        VOCAB_SIZE              = "{arch}.vocab_size"
        CONTEXT_LENGTH          = "{arch}.context_length"
        EMBEDDING_LENGTH        = "{arch}.embedding_length"
        BLOCK_COUNT             = "{arch}.block_count"
        FEED_FORWARD_LENGTH     = "{arch}.feed_forward_length"
        EXPERT_COUNT            = "{arch}.expert_count"
        EXPERT_USED_COUNT       = "{arch}.expert_used_count"
        EXPERT_SHARED_COUNT     = "{arch}.expert_shared_count"
        EXPERT_FEED_FORWARD_LENGTH = "{arch}.expert_feed_forward_length"
        NEXTN_PREDICT_LAYERS    = "{arch}.nextn_predict_layers"
        POOLING_TYPE            = "{arch}.pooling_type"
        FULL_ATTENTION_INTERVAL = "{arch}.full_attention_interval"
        LEADING_DENSE_BLOCK_COUNT = "{arch}.leading_dense_block_count"
        TOKEN_SHIFT_COUNT       = "{arch}.token_shift_count"

    class Attention:
        HEAD_COUNT             = "{arch}.attention.head_count"
        HEAD_COUNT_KV          = "{arch}.attention.head_count_kv"
        KEY_LENGTH             = "{arch}.attention.key_length"
        VALUE_LENGTH           = "{arch}.attention.value_length"
        KV_LORA_RANK           = "{arch}.attention.kv_lora_rank"
        KEY_LENGTH_MLA         = "{arch}.attention.key_length_mla"
        VALUE_LENGTH_MLA       = "{arch}.attention.value_length_mla"
        SLIDING_WINDOW         = "{arch}.attention.sliding_window"
        SLIDING_WINDOW_PATTERN = "{arch}.attention.sliding_window_pattern"
        KEY_LENGTH_SWA         = "{arch}.attention.key_length_swa"
        VALUE_LENGTH_SWA       = "{arch}.attention.value_length_swa"

    class SSM:
        CONV_KERNEL = "{arch}.ssm.conv_kernel"
        INNER_SIZE  = "{arch}.ssm.inner_size"
        STATE_SIZE  = "{arch}.ssm.state_size"
        GROUP_COUNT = "{arch}.ssm.group_count"

    class WKV:
        HEAD_SIZE = "{arch}.wkv.head_size"

    class ShortConv:
        L_CACHE = "{arch}.shortconv.l_cache"

    class Rope:
        DIMENSION_COUNT = "{arch}.rope.dimension_count"

    class Split:
        LLM_KV_SPLIT_NO            = "split.no"
        LLM_KV_SPLIT_COUNT         = "split.count"
        LLM_KV_SPLIT_TENSORS_COUNT = "split.tensors.count"

    class Tokenizer:
        MODEL         = "tokenizer.ggml.model"
        PRE           = "tokenizer.ggml.pre"
        LIST          = "tokenizer.ggml.tokens"
        CHAT_TEMPLATE = "tokenizer.chat_template"
        BOS_ID        = "tokenizer.ggml.bos_token_id"
        EOS_ID        = "tokenizer.ggml.eos_token_id"
        ADD_BOS       = "tokenizer.ggml.add_bos_token"
        ADD_EOS       = "tokenizer.ggml.add_eos_token"

    class Adapter:
        TYPE       = "adapter.type"
        LORA_ALPHA = "adapter.lora.alpha"

    class Clip:
        PROJECTOR_TYPE    = "clip.projector_type"
        HAS_AUDIO_ENCODER = "clip.has_audio_encoder"

    class ClipVision:
        PROJECTOR_TYPE      = "clip.vision.projector_type"
        IMAGE_SIZE          = "clip.vision.image_size"
        PATCH_SIZE          = "clip.vision.patch_size"
        EMBEDDING_LENGTH    = "clip.vision.embedding_length"
        FEED_FORWARD_LENGTH = "clip.vision.feed_forward_length"
        PROJECTION_DIM      = "clip.vision.projection_dim"
        SPATIAL_MERGE_SIZE  = "clip.vision.spatial_merge_size"
        N_WA_PATTERN        = "clip.vision.n_wa_pattern"
        IS_DEEPSTACK_LAYERS = "clip.vision.is_deepstack_layers"

        class Attention:
            HEAD_COUNT = "clip.vision.attention.head_count"

        class Projector:
            SCALE_FACTOR = "clip.vision.projector.scale_factor"

    class ClipAudio:
        PROJECTION_DIM = "clip.audio.projection_dim"


class GGUFType:
    """`general.type` values (gguf.GGUFType): what a file is before what its architecture is."""

    MODEL   = "model"
    ADAPTER = "adapter"
    IMATRIX = "imatrix"
    MMPROJ  = "mmproj"


#: A control vector (llama.cpp tools/cvector-generator `export_gguf`): its own architecture, the
#: architecture it was made for as a hint, no `general.type`. Not in gguf-py's constants.
CONTROL_VECTOR_ARCH = "controlvector"
#: The architecture of a projector (llama.cpp tools/mtmd/clip.cpp reads `clip.*` keys); files of
#: the older image-encoder converter say only this, no `general.type`.
PROJECTOR_ARCH = "clip"
CONTROL_VECTOR_HINT = "controlvector.model_hint"


class ValueType(IntEnum):
    """KV value type ids as stored in the file (gguf.GGUFValueType)."""

    UINT8   = 0
    INT8    = 1
    UINT16  = 2
    INT16   = 3
    UINT32  = 4
    INT32   = 5
    FLOAT32 = 6
    BOOL    = 7
    STRING  = 8
    ARRAY   = 9
    UINT64  = 10
    INT64   = 11
    FLOAT64 = 12


#: `struct` code of each fixed-size value type (little-endian; size = struct.calcsize).
SCALAR_FORMATS: dict[ValueType, str] = {
    ValueType.UINT8:   "B",
    ValueType.INT8:    "b",
    ValueType.UINT16:  "H",
    ValueType.INT16:   "h",
    ValueType.UINT32:  "I",
    ValueType.INT32:   "i",
    ValueType.FLOAT32: "f",
    ValueType.BOOL:    "?",
    ValueType.UINT64:  "Q",
    ValueType.INT64:   "q",
    ValueType.FLOAT64: "d",
}


class GGMLType(IntEnum):
    """Tensor types as stored in tensor infos (gguf.GGMLQuantizationType; ggml.h `ggml_type`).

    Removed upstream and never reused: 4 Q4_2, 5 Q4_3, 31-33 Q4_0_4_4/4_8/8_8, 36-38 IQ4_NL_x_x.
    """

    F32     = 0
    F16     = 1
    Q4_0    = 2
    Q4_1    = 3
    Q5_0    = 6
    Q5_1    = 7
    Q8_0    = 8
    Q8_1    = 9
    Q2_K    = 10
    Q3_K    = 11
    Q4_K    = 12
    Q5_K    = 13
    Q6_K    = 14
    Q8_K    = 15
    IQ2_XXS = 16
    IQ2_XS  = 17
    IQ3_XXS = 18
    IQ1_S   = 19
    IQ4_NL  = 20
    IQ3_S   = 21
    IQ2_S   = 22
    IQ4_XS  = 23
    I8      = 24
    I16     = 25
    I32     = 26
    I64     = 27
    F64     = 28
    IQ1_M   = 29
    BF16    = 30
    TQ1_0   = 34
    TQ2_0   = 35
    MXFP4   = 39
    NVFP4   = 40
    Q1_0    = 41


QK_K = 256

#: (block size in elements, bytes per block), the arithmetic left visible as in
#: gguf.GGML_QUANT_SIZES so it can be checked against ggml's `block_*` structs
#: (ggml/src/ggml-common.h). One deliberate difference: Q8_1 is 36 bytes, as ggml's
#: static_assert says (two ggml_half + 32); gguf-py still says 4 + 4 + 32 = 40.
GGML_TYPE_SIZES: dict[GGMLType, tuple[int, int]] = {
    GGMLType.F32:     (1, 4),
    GGMLType.F16:     (1, 2),
    GGMLType.Q4_0:    (32, 2 + 16),
    GGMLType.Q4_1:    (32, 2 + 2 + 16),
    GGMLType.Q5_0:    (32, 2 + 4 + 16),
    GGMLType.Q5_1:    (32, 2 + 2 + 4 + 16),
    GGMLType.Q8_0:    (32, 2 + 32),
    GGMLType.Q8_1:    (32, 2 + 2 + 32),
    GGMLType.Q2_K:    (256, 2 + 2 + QK_K // 16 + QK_K // 4),
    GGMLType.Q3_K:    (256, 2 + QK_K // 4 + QK_K // 8 + 12),
    GGMLType.Q4_K:    (256, 2 + 2 + QK_K // 2 + 12),
    GGMLType.Q5_K:    (256, 2 + 2 + QK_K // 2 + QK_K // 8 + 12),
    GGMLType.Q6_K:    (256, 2 + QK_K // 2 + QK_K // 4 + QK_K // 16),
    GGMLType.Q8_K:    (256, 4 + QK_K + QK_K // 8),
    GGMLType.IQ2_XXS: (256, 2 + QK_K // 4),
    GGMLType.IQ2_XS:  (256, 2 + QK_K // 4 + QK_K // 32),
    GGMLType.IQ3_XXS: (256, 2 + QK_K // 4 + QK_K // 8),
    GGMLType.IQ1_S:   (256, 2 + QK_K // 8 + QK_K // 16),
    GGMLType.IQ4_NL:  (32, 2 + 16),
    GGMLType.IQ3_S:   (256, 2 + QK_K // 4 + QK_K // 8 + QK_K // 32 + 4),
    GGMLType.IQ2_S:   (256, 2 + QK_K // 4 + QK_K // 16),
    GGMLType.IQ4_XS:  (256, 2 + 2 + QK_K // 2 + QK_K // 64),
    GGMLType.I8:      (1, 1),
    GGMLType.I16:     (1, 2),
    GGMLType.I32:     (1, 4),
    GGMLType.I64:     (1, 8),
    GGMLType.F64:     (1, 8),
    GGMLType.IQ1_M:   (256, QK_K // 8 + QK_K // 16 + QK_K // 32),
    GGMLType.BF16:    (1, 2),
    GGMLType.TQ1_0:   (256, 2 + 4 * 13),
    GGMLType.TQ2_0:   (256, 2 + 64),
    GGMLType.MXFP4:   (32, 1 + 16),
    GGMLType.NVFP4:   (64, 4 + 32),
    GGMLType.Q1_0:    (128, 2 + 16),
}
