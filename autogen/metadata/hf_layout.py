"""Which layers of a Hugging Face config keep a per-token KV cache, which hold recurrent
state, and how wide that state is.

Every hybrid family marks its layout its own way (`layer_types`, `layers_block_type`,
Nemotron-H `hybrid_override_pattern`, MiniMax `attn_type_list`, Bamba `attn_layer_indices`,
Jamba `attn_layer_period`/`offset`, Qwen3-Next `full_attention_interval`) and spells its
SSM / linear-attention sizes its own way; this table grows with each new family, while
`hf_config` (reading, validating and mapping config.json) stays put. Mirrors vLLM's
`get_num_layers_by_block_type` and `MambaStateShapeCalculator`, so `kvcost` charges the
layers vLLM caches. Every look-up goes through `config_reader.ConfigReader`, so errors name the key.
"""

from __future__ import annotations

from autogen.metadata.config_reader import ConfigReader

#: Attention-free families: a constant recurrent state, no per-token cache.
STATE_SPACE_MODEL_TYPES = frozenset(
    {"mamba", "mamba2", "falcon_mamba", "rwkv", "rwkv5", "rwkv6", "rwkv7", "xlstm"}
)
#: A per-layer type keeps no per-token KV when its name contains one of these
#: (`layer_types`: linear_attention, mamba, conv; `block_types`: recurrent) …
NO_KV_MARKERS = ("linear", "mamba", "ssm", "conv", "recurrent", "rwkv")
#: … or is one of these feed-forward-only block names (`layers_block_type`, Nemotron-H).
NO_KV_NAMES = frozenset({"moe", "mlp"})
#: Nemotron-H `hybrid_override_pattern`: `*` attention, `M` mamba, `-` MLP, `E` MoE.
PATTERN_ATTENTION = "*"
PATTERN_MAMBA = "M"
#: Every layer runs attention and a mamba mixer side by side (vLLM `FalconH1DecoderLayer`).
PARALLEL_HYBRID_MODEL_TYPES = frozenset({"falcon_h1"})

# -- recurrent state sizes (vLLM `mamba_utils.MambaStateShapeCalculator`; llama.cpp converters
#    `conversion/mamba.py`, `granite.py`, `nemotron.py`, `qwen.py`) -------------------------

SSM_CONV_KEYS = ("conv_kernel", "mamba_d_conv", "d_conv")
SSM_STATE_KEYS = ("ssm_state_size", "state_size", "mamba_d_state", "d_state")
SSM_GROUP_KEYS = ("n_groups", "mamba_n_groups", "mamba_ngroups", "ngroups")


def kv_layers(get: ConfigReader, model_type: str, layers: int) -> tuple[list[bool], list[bool], str]:
    """Which layers keep a per-token cache, which hold recurrent state, and how we know."""
    if model_type in STATE_SPACE_MODEL_TYPES:
        return [False] * layers, [True] * layers, f"{model_type}: state-space model, no per-token KV cache"
    everywhere = [model_type in PARALLEL_HYBRID_MODEL_TYPES] * layers
    for key in ("layer_types", "layers_block_type"):
        entries = get.string_list(key)
        if entries is not None:
            if len(entries) != layers:
                note = f"{key} has {len(entries)} entries for {layers} layers: ignored, every layer charged"
                return [True] * layers, everywhere, note
            if model_type == "zamba2":  # vLLM: only "hybrid" blocks carry the shared attention
                keeps, recurrent = [e == "hybrid" for e in entries], [True] * layers
            else:
                keeps, recurrent = [_keeps_kv(e) for e in entries], [_is_recurrent(e) for e in entries]
            return keeps, recurrent, _note(key, keeps)
    pattern = get.text("hybrid_override_pattern")
    if pattern:
        if len(pattern) != layers:
            note = f"hybrid_override_pattern has {len(pattern)} layers, config {layers}: ignored"
            return [True] * layers, everywhere, note
        keeps = [c == PATTERN_ATTENTION for c in pattern]
        return keeps, [c == PATTERN_MAMBA for c in pattern], _note("hybrid_override_pattern", keeps)
    kinds = get.int_list("attn_type_list")  # MiniMax: 1 = softmax attention, 0 = linear
    if kinds is not None and len(kinds) == layers:
        keeps = [k == 1 for k in kinds]
        return keeps, _others(keeps), _note("attn_type_list", keeps)
    indices = get.int_list("attn_layer_indices")  # Bamba
    if indices:
        wanted = set(indices)
        keeps = [i in wanted for i in range(layers)]
        return keeps, _others(keeps), _note("attn_layer_indices", keeps)
    period = get.count(("attn_layer_period",))  # Jamba: layer i attends when i % period == offset
    if period:
        offset = get.count(("attn_layer_offset",))
        keeps = [i % period == offset for i in range(layers)]
        return keeps, _others(keeps), _note(f"attn_layer_period {period} offset {offset}", keeps)
    interval = get.count(("full_attention_interval",))  # Qwen3-Next: every N-th layer attends
    if interval:
        keeps = [(i + 1) % interval == 0 for i in range(layers)]
        return keeps, _others(keeps), _note(f"full_attention_interval {interval}", keeps)
    return [True] * layers, everywhere, ""


def sliding_layers(get: ConfigReader, layers: int) -> tuple[bool, ...]:
    """Per layer, True where `layer_types` says sliding; () when it does not say."""
    entries = get.string_list("layer_types")
    if entries is None or len(entries) != layers or not any("sliding" in e for e in entries):
        return ()
    return tuple("sliding" in e for e in entries)


def ssm_sizes(get: ConfigReader, model_type: str, hidden: int) -> tuple[int, int, int, int]:
    """(conv kernel, inner width, state width, groups) in llama.cpp's `ssm.*` terms."""
    if get.count(("linear_conv_kernel_dim",)):  # gated delta net: Qwen3-Next, Qwen3.5
        inner = get.count(("linear_num_value_heads",)) * get.count(("linear_value_head_dim",))
        sizes = (get.count(("linear_conv_kernel_dim",)), inner, get.count(("linear_key_head_dim",)),
                 get.count(("linear_num_key_heads",)))
    elif get.count(("conv_L_cache",)):  # LFM2 short conv over the hidden width
        sizes = (get.count(("conv_L_cache",)), hidden, 0, 0)
    else:
        # Inner width: Nemotron-H heads × head dim, Falcon-H1 mamba_d_ssm, else expand × hidden
        # (Jamba, Bamba, Granite-4, Zamba2, Mamba-2), Mamba-1 its intermediate_size.
        inner = (get.count(("mamba_num_heads",)) * get.count(("mamba_head_dim",))
                 or get.count(("mamba_d_ssm",))
                 or get.count(("mamba_expand", "expand")) * hidden
                 or (get.count(("intermediate_size",)) if model_type in STATE_SPACE_MODEL_TYPES else 0))
        sizes = (get.count(SSM_CONV_KEYS), inner, get.count(SSM_STATE_KEYS), get.count(SSM_GROUP_KEYS))
    return sizes


def _keeps_kv(entry: str) -> bool:
    low = entry.lower()
    return low not in NO_KV_NAMES and not any(m in low for m in NO_KV_MARKERS)


def _is_recurrent(entry: str) -> bool:
    low = entry.lower()
    return any(m in low for m in NO_KV_MARKERS)


def _others(keeps: list[bool]) -> list[bool]:
    return [not k for k in keeps]


def _note(source: str, keeps: list[bool]) -> str:
    return f"{source}: {sum(keeps)} of {len(keeps)} layers keep KV"
