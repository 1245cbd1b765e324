"""Read a Hugging Face `config.json` and map it onto `ModelMeta`.

Mirrors what vLLM derives from the same file (docs/maintainers/discovery.md#configjson--metadata; vLLM
`vllm/config/model_arch_convertor.py` `get_head_size`, `get_total_num_kv_heads`,
`get_num_layers_by_block_type`), so `kvcost.kv_cost` charges what the engine allocates.
Older configs spell the same numbers differently (GPT-2 `n_layer`, ChatGLM `num_layers`,
Falcon `n_head_kv`); the alias tables below list every spelling we accept, in vLLM's order.
Which layers keep KV and how wide their recurrent state is are `hf_layout`'s, read through
this module's `ConfigReader`.
"""

from __future__ import annotations

import json
from pathlib import Path

from autogen.errors import ModelError
from autogen.metadata import hf_layout
from autogen.metadata.config_reader import CONTEXT_KEYS, MAX_COUNT, MAX_TOKENS, ConfigReader
from autogen.metadata.model_meta import ModelMeta

#: A config.json is a few KiB; anything past this is not one (and not worth parsing).
MAX_CONFIG_BYTES = 16 * 1024 * 1024
#: No real model has more layers; guards the per-layer tuple against hostile counts.
MAX_LAYERS = 65536
#: Exclusive bounds on integers read from config.json: counts and widths, then token counts
#: (context, sliding window). Past these a number is hostile, and a 1e308 would overflow
#: float arithmetic downstream.

# -- detection (docs/maintainers/discovery.md#hf-folders rule 1) -----------------------------------------------------

#: Generators vLLM registers whose class names carry neither suffix of rule 1
#: (`vllm/model_executor/models/registry.py`, `_TEXT_GENERATION_MODELS` / `_MULTIMODAL_MODELS`).
CAUSAL_LM_ARCHITECTURES = frozenset(
    {
        "ChatGLMModel",
        "ChatGLMForConditionalGeneration",
        "GPT2LMHeadModel",
        "InternVLChatModel",
        "QWenLMHeadModel",
    }
)
#: model_type of encoder-only families: never a chat LLM, whatever `architectures` claims
#: (transformers ships `RobertaForCausalLM` and friends).
ENCODER_ONLY_MODEL_TYPES = frozenset(
    {"albert", "bert", "camembert", "deberta", "deberta-v2", "distilbert", "electra",
     "modernbert", "mpnet", "nomic_bert", "roberta", "xlm-roberta"}
)

# -- where the text tower lives ----------------------------------------------------------

#: Sub-config keys of multimodal wrappers, in lookup order (LLaVA/Gemma-3/Qwen3.5:
#: text_config; InternVL, Nemotron-VL: llm_config; DeepSeek-VL2, Janus: language_config).
TEXT_TOWER_KEYS = ("text_config", "llm_config", "language_config")
#: Text model_type a wrapper assumes when its sub-config names none
#: (transformers `LlavaConfig` / `LlavaNextConfig` → llama, `Gemma3Config` → gemma3_text).
WRAPPER_TEXT_TYPE = {"llava": "llama", "llava_next": "llama", "gemma3": "gemma3_text",
                     "gemma4": "gemma4_text"}
#: transformers' constructor defaults for keys a config.json may omit (a LLaVA text tower
#: often names only max_position_embeddings). Sources: `configuration_llama.py`,
#: `configuration_mistral.py`, `configuration_qwen2.py`, `configuration_gemma3.py`
#: (Gemma3TextConfig), `configuration_gemma4.py` (Gemma4TextConfig; `global_head_dim` is a
#: constructor kwarg defaulting to 512), `configuration_falcon.py`. num_key_value_heads absent
#: → heads.
LIBRARY_DEFAULTS: dict[str, dict[str, int]] = {
    "llama": {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
              "max_position_embeddings": 2048, "vocab_size": 32000, "intermediate_size": 11008},
    "mistral": {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
                "num_key_value_heads": 8, "max_position_embeddings": 4096 * 32,
                "sliding_window": 4096, "vocab_size": 32000, "intermediate_size": 14336},
    "qwen2": {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
              "num_key_value_heads": 32, "max_position_embeddings": 32768,
              "vocab_size": 151936, "intermediate_size": 22016},
    "gemma3_text": {"hidden_size": 2304, "num_hidden_layers": 26, "num_attention_heads": 8,
                    "num_key_value_heads": 4, "head_dim": 256, "max_position_embeddings": 131072,
                    "sliding_window": 4096, "vocab_size": 262208, "intermediate_size": 9216},
    "gemma4_text": {"hidden_size": 2304, "num_hidden_layers": 30, "num_attention_heads": 8,
                    "num_key_value_heads": 4, "head_dim": 256, "global_head_dim": 512,
                    "max_position_embeddings": 131072, "sliding_window": 512,
                    "vocab_size": 262144, "intermediate_size": 9216},
    "falcon": {"hidden_size": 4544, "num_hidden_layers": 32, "num_attention_heads": 71,
               "vocab_size": 65024},
}

# -- key spellings -------------------------------------------------------------------------

LAYERS_KEYS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
HIDDEN_KEYS = ("hidden_size", "n_embd", "d_model")
HEADS_KEYS = ("num_attention_heads", "n_head", "n_heads")
#: vLLM `get_total_num_kv_heads` attribute chain (Falcon, Llama-2, ChatGLM, Step3).
KV_HEADS_KEYS = ("n_head_kv", "num_kv_heads", "num_key_value_heads", "multi_query_group_num",
                 "num_attention_groups")
#: vLLM `get_head_size` order after MLA: explicit head dim, Zamba2/Nemotron-H, PLaMo, ChatGLM.
HEAD_DIM_KEYS = ("head_dim", "attention_head_dim", "hidden_size_per_head", "kv_channels")
#: vLLM `derive_max_model_len`: the smallest of these wins.
EXPERT_KEYS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts")
EXPERT_USED_KEYS = ("num_experts_per_tok", "num_experts_per_token", "experts_per_token",
                    "moe_topk")
EXPERT_SHARED_KEYS = ("n_shared_experts", "num_shared_experts")
FFN_KEYS = ("intermediate_size", "ffn_hidden_size", "n_inner")
VOCAB_KEYS = ("vocab_size", "padded_vocab_size")
NEXTN_KEYS = ("num_nextn_predict_layers", "mtp_num_hidden_layers")

_ALIAS_GROUPS = (LAYERS_KEYS, HIDDEN_KEYS, HEADS_KEYS, KV_HEADS_KEYS, HEAD_DIM_KEYS,
                 CONTEXT_KEYS, VOCAB_KEYS, FFN_KEYS)

#: Falcon's model types (vLLM `MODEL_ARCH_CONFIG_CONVERTORS`); RefinedWeb is the 40B layout.
FALCON_MODEL_TYPES = frozenset({"falcon", "refinedweb", "refinedwebmodel"})
#: MLA families (vLLM `is_deepseek_mla`): one latent of kv_lora_rank + qk_rope_head_dim.
MLA_MODEL_TYPES = frozenset(
    {"deepseek_v2", "deepseek_v3", "deepseek_v32", "deepseek_mtp", "glm4_moe_lite",
     "glm_moe_dsa", "kimi_k2", "longcat_flash", "pangu_ultra_moe"}
)


def read_config_json(path: str) -> dict:
    """Parse `config.json` leniently (`Infinity`/`NaN` appear in real files), or say why not."""
    return read_json_object(path, MAX_CONFIG_BYTES, "a config.json")


def read_json_object(path: str, max_bytes: int, what: str) -> dict:
    """Parse a JSON object of at most `max_bytes` (`what` names it in the error), or say why not."""
    p = Path(path)
    try:
        with p.open("rb") as f:
            raw = f.read(max_bytes + 1)
    except OSError as e:
        raise ModelError(f"{path}: cannot read: {e.strerror or e}") from None
    if len(raw) > max_bytes:
        raise ModelError(f"{path}: larger than {max_bytes} bytes, not {what}")
    try:
        data = json.loads(raw.decode("utf-8-sig"))  # Python's json takes Infinity/NaN as is
    except UnicodeDecodeError as e:
        raise ModelError(f"{path}: not UTF-8 text (byte {e.start})") from None
    except json.JSONDecodeError as e:
        raise ModelError(f"{path}: not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    except RecursionError:
        raise ModelError(f"{path}: JSON nested too deeply") from None
    if not isinstance(data, dict):
        raise ModelError(f"{path}: expected a JSON object, got {_type_name(data)}")
    return data


def hf_model_reason(config: dict) -> str | None:
    """None when the config describes a causal LM (docs/maintainers/discovery.md#hf-folders rule 1), else why not."""
    archs = config.get("architectures")
    if archs is None:
        return "config.json names no architectures"
    if not isinstance(archs, list):
        return f"architectures must be a list (got {_type_name(archs)})"
    names = [a for a in archs if isinstance(a, str)]
    if not names:
        return "architectures names no model class"
    decisive = next((a for a in names if _is_causal_lm(a, config)), None)
    if decisive is None:
        first = names[0]
        if first.endswith("ForConditionalGeneration"):
            return f"{first} has no text_config: a seq2seq model"
        return f"{first} is not a causal LM"
    model_type = config.get("model_type")
    if isinstance(model_type, str) and model_type.lower() in ENCODER_ONLY_MODEL_TYPES:
        return f"{decisive} is an encoder-only {model_type} model"
    if config.get("is_encoder_decoder") is True:
        return f"{decisive} is an encoder-decoder (seq2seq) model"
    return None


def hf_quant(config: dict) -> str:
    """Quant label from the top-level config (docs/maintainers/discovery.md#hf-folders): method, else dtype, else ""."""
    for key in ("quantization_config", "compression_config"):  # compressed-tensors uses the 2nd
        qc = config.get(key)
        method = qc.get("quant_method") if isinstance(qc, dict) else None
        if isinstance(method, str) and method.strip():
            return method.strip().upper()
    dtype = config.get("torch_dtype") or config.get("dtype")
    if isinstance(dtype, str):
        return {"bfloat16": "BF16", "float16": "F16", "float32": "F32"}.get(dtype.lower(), "")
    return ""


def meta_from_config_file(path: str) -> ModelMeta:
    """`meta_from_hf_config` of the file at `path`; every error names the file."""
    config = read_config_json(path)  # its errors already start with the path
    try:
        return meta_from_hf_config(config)
    except ModelError as exc:
        raise ModelError(f"{path}: {exc}") from None


def meta_from_hf_config(config: dict) -> ModelMeta:
    """Normalise a config.json (its text tower, with library defaults) into a `ModelMeta`."""
    tower, prefix = _text_tower(config)
    get = ConfigReader(tower, prefix)
    archs = config.get("architectures")
    top_type = config.get("model_type")
    arch = top_type if isinstance(top_type, str) and top_type else get.text("model_type")
    model_type = get.text("model_type").lower()

    layers = get.count(LAYERS_KEYS)
    if layers > MAX_LAYERS:
        raise ModelError(f"{get.found}: {layers} layers is not a real model")
    hidden = get.count(HIDDEN_KEYS)
    heads = get.count(HEADS_KEYS)
    kv_lora_rank = get.count(("kv_lora_rank",)) if model_type in MLA_MODEL_TYPES else 0
    rope_dim = get.count(("qk_rope_head_dim",)) if kv_lora_rank else 0
    kv_heads, key_len, value_len = _attention(get, model_type, heads, hidden, kv_lora_rank, rope_dim)
    keeps, recurrent, layout = hf_layout.kv_layers(get, model_type, layers)
    sliding_layers = hf_layout.sliding_layers(get, layers)
    full_kv, swa_len, key_len, value_len = _full_layers(get, kv_heads, layers, sliding_layers, key_len, value_len)
    # No head count at all is "unknown", never "attention-free": kvcost must not guess 0.
    per_layer = (tuple(n if keep else 0 for keep, n in zip(keeps, full_kv, strict=False))
                 if kv_heads or not any(keeps) else ())
    sliding = get.count(("sliding_window",), MAX_TOKENS) if get.flag("use_sliding_window") is not False else 0
    ssm = hf_layout.ssm_sizes(get, model_type, hidden) if any(recurrent) else (0, 0, 0, 0)
    if ssm[1] >= MAX_COUNT:
        raise ModelError(f"{get.prefix}SSM inner width {ssm[1]} (a product of config values) is not a real model")

    return ModelMeta(
        source="hf",
        arch=arch.lower(),
        architectures=tuple(a for a in archs if isinstance(a, str)) if isinstance(archs, list) else (),
        context_length=get.context(),
        block_count=layers,
        embedding_length=hidden,
        feed_forward_length=get.count(FFN_KEYS),
        head_count=heads,
        head_count_kv=per_layer,
        key_length=key_len,
        value_length=value_len,
        kv_lora_rank=kv_lora_rank,
        qk_rope_head_dim=rope_dim,
        sliding_window=sliding,
        expert_count=get.count(EXPERT_KEYS),
        expert_used_count=get.count(EXPERT_USED_KEYS),
        expert_shared_count=get.count(EXPERT_SHARED_KEYS),
        nextn_layers=get.count(NEXTN_KEYS),
        vocab_size=get.count(VOCAB_KEYS),
        quant_label=hf_quant(config),
        layout_note=layout,
        leading_dense_blocks=get.count(("first_k_dense_replace",)),
        key_length_swa=swa_len,
        value_length_swa=swa_len,
        sliding_layers=sliding_layers,
        recurrent_layers=sum(recurrent),
        ssm_conv_kernel=ssm[0],
        ssm_inner_size=ssm[1],
        ssm_state_size=ssm[2],
        ssm_group_count=ssm[3],
    )


# -- helpers -------------------------------------------------------------------------------


def _attention(get: ConfigReader, model_type: str, heads: int, hidden: int, kv_lora_rank: int,
               rope_dim: int) -> tuple[int, int, int]:
    """(KV heads, key width, value width) per head."""
    if kv_lora_rank:
        # As gguf_meta reads convert_hf_to_gguf's deepseek2 output: one KV head (MQA over the
        # latent), per-head widths as `key_length_mla` / `value_length_mla`.
        return 1, get.count(("qk_nope_head_dim",)) + rope_dim, get.count(("v_head_dim",))
    key_len = get.count(HEAD_DIM_KEYS) or (hidden // heads if heads else 0)
    return _kv_heads(get, model_type, heads), key_len, key_len


def _full_layers(get: ConfigReader, kv_heads: int, layers: int, sliding_layers: tuple[bool, ...], key_len: int,
                 value_len: int) -> tuple[list[int], int, int, int]:
    """(KV heads per layer, sliding-window head width or 0, key width, value width). Gemma 4:
    full layers have their own head width and (with attention_k_eq_v) KV heads (transformers
    `Gemma4TextConfig`, vLLM `Gemma4DecoderLayer`); where the sliding layers are not marked,
    every layer is charged at the larger of each."""
    global_len = get.count(("global_head_dim",))
    global_kv = get.count(("num_global_key_value_heads",)) if get.flag("attention_k_eq_v") else 0
    full_kv = [kv_heads] * layers
    if global_kv and sliding_layers:
        full_kv = [kv_heads if swa else global_kv for swa in sliding_layers]
    elif global_kv:
        full_kv = [max(kv_heads, global_kv)] * layers
    if global_len and global_len != key_len:
        return full_kv, key_len, global_len, global_len
    return full_kv, 0, key_len, value_len


def _is_causal_lm(arch: str, config: dict) -> bool:
    if arch.endswith("ForCausalLM") or arch in CAUSAL_LM_ARCHITECTURES:
        return True
    return arch.endswith("ForConditionalGeneration") and (
        isinstance(config.get("text_config"), dict) or "vision_config" in config
    )


def _text_tower(config: dict) -> tuple[dict, str]:
    """The dict holding the language model, with its model type's defaults filled in.

    A wrapper's own keys stay authoritative when it states a layer count
    (docs/maintainers/discovery.md#configjson--metadata); else the sub-config wins, and the wrapper's
    context length fills a gap in it.
    """
    tower, prefix = config, ""
    if not any(_present(config, k) for k in LAYERS_KEYS):
        for key in TEXT_TOWER_KEYS:
            sub = config.get(key)
            if isinstance(sub, dict):
                tower, prefix = dict(sub), f"{key}."
                wrapper_type = str(config.get("model_type") or "").lower()
                tower.setdefault("model_type", WRAPPER_TEXT_TYPE.get(wrapper_type, ""))
                if not any(_present(tower, k) for k in CONTEXT_KEYS):
                    for k in CONTEXT_KEYS:
                        if _present(config, k):
                            tower[k] = config[k]
                break
    model_type = tower.get("model_type")
    defaults = LIBRARY_DEFAULTS.get(model_type.lower(), {}) if isinstance(model_type, str) else {}
    filled = dict(tower)
    for key, value in defaults.items():
        # A key written under any spelling (even as null, which transformers keeps) wins.
        spellings = next((g for g in _ALIAS_GROUPS if key in g), (key,))
        if not any(k in tower for k in spellings):
            filled[key] = value
    return filled, prefix


def _kv_heads(get: ConfigReader, model_type: str, heads: int) -> int:
    """KV heads of an attention layer (vLLM `get_total_num_kv_heads`, Falcon convertor)."""
    new_decoder = get.flag("new_decoder_architecture") is True or model_type == "refinedweb"
    if get.flag("multi_query") is True and not (model_type in FALCON_MODEL_TYPES and new_decoder):
        return 1  # GPT-BigCode, Falcon-7B: one shared KV head
    if get.flag("multi_query_attention") is False:
        return heads  # ChatGLM with grouping switched off ignores multi_query_group_num
    return get.count(KV_HEADS_KEYS) or heads


def _present(d: dict, key: str) -> bool:
    return d.get(key) is not None


def _type_name(value: object) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
            type(None): "null"}.get(type(value), "a number")


