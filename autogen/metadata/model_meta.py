"""The model record every later stage reads: one shape for GGUF headers, HF `config.json` and
whisper.cpp's GGML headers.

`gguf_meta.meta_from_gguf`, `hf_config.meta_from_hf_config` and `meta_from_whisper` build it; `kvcost`, the
emitters and `swapgen show` read it. Numbers are raw (ints, bytes); a 0 means "absent".
"""

from __future__ import annotations

from attrs import frozen

from autogen.metadata.whisper_header import WhisperShape
from autogen.vision_tower import VisionTower


@frozen
class ModelMeta:
    """What a model file says about itself.

    The attention layout is normalised so the KV cost is one formula for both sources:
    `head_count_kv` is per layer (length `block_count`), with 0 for a layer that keeps no
    per-token cache (SSM / linear-attention / mamba layers of a hybrid).
    """

    #: "gguf", "hf" or "whisper" (a whisper.cpp GGML model: `meta_from_whisper`).
    source: str
    #: GGUF `general.architecture` or HF `model_type` (lower case). Example: "qwen3moe", "llama".
    arch: str = ""
    #: GGUF `general.type` ("model", "mmproj", …) when present.
    general_type: str = ""
    #: Display name (`general.name`), informational only.
    name: str = ""
    #: `general.basename`, `general.size_label` and `general.finetune` joined (convert_hf_to_gguf's
    #: naming parts: "Llama-3.1 8B Instruct"); a name a LoRA adapter's base is matched against.
    full_name: str = ""
    #: Models this file derives from, as its header names them: each `general.base_model.N`'s
    #: name, "organization/name" and repo URL, and a control vector's `model_hint`.
    #: Example: ("Llama 3.1 8B Instruct", "Meta Llama/Llama 3.1 8B Instruct",
    #: "https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct").
    base_models: tuple[str, ...] = ()
    #: `adapter.type` ("lora") of an adapter GGUF; "control_vector" for llama.cpp's control
    #: vectors (arch `controlvector`); "" for anything else.
    adapter_type: str = ""
    #: LoRA: `adapter.lora.alpha`, and from its tensors the rank, the input width of the layers
    #: (the base's embedding length) and how many blocks it reaches (`GGUFHeader.lora_*`).
    lora_alpha: float = 0.0
    lora_rank: int = 0
    lora_width: int = 0
    lora_layers: int = 0
    #: HF `architectures` (e.g. ("Qwen3ForCausalLM",)); empty for GGUF.
    architectures: tuple[str, ...] = ()
    #: Trained context window (GGUF `{arch}.context_length`, HF `max_position_embeddings`).
    context_length: int = 0
    #: Transformer layers (GGUF `{arch}.block_count`, HF `num_hidden_layers`).
    block_count: int = 0
    #: Hidden size (GGUF `{arch}.embedding_length`, HF `hidden_size`).
    embedding_length: int = 0
    #: Feed-forward width (scalar; the maximum when per-layer).
    feed_forward_length: int = 0
    #: Attention query heads (the maximum when per-layer).
    head_count: int = 0
    #: KV heads per layer, len == block_count; 0 = layer keeps no per-token KV. () = unknown.
    head_count_kv: tuple[int, ...] = ()
    #: Per-head key / value widths in elements (explicit or embedding_length // head_count).
    key_length: int = 0
    value_length: int = 0
    #: MLA (DeepSeek V2/V3, Kimi): latent width and rope part. K and V share one latent vector
    #: of kv_lora_rank + qk_rope_head_dim elements per layer. 0 = not MLA.
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    #: The kv_lora_rank of a conversion before the `_mla` keys: llama.cpp runs it as per-head K/V
    #: (`kv_lora_rank` 0), ik_llama.cpp still caches its latent (`qk_rope_head_dim` then holds
    #: the rope part). 0 = none.
    latent_rank: int = 0
    #: Bytes of the token embeddings a tied model's output layer reads (no `output.weight`):
    #: loaded without mmap (ik_llama.cpp's `-rtr`), the output gets its own copy. 0 = untied.
    tied_output_bytes: int = 0
    #: Sliding-window size in tokens (0 = none).
    sliding_window: int = 0
    #: Mixture of experts.
    expert_count: int = 0
    expert_used_count: int = 0
    expert_shared_count: int = 0
    #: Width of one expert's FFN (GGUF `expert_feed_forward_length`), 0 when not given.
    expert_feed_forward_length: int = 0
    #: Multi-token-prediction layers baked into the file.
    nextn_layers: int = 0
    #: GGUF `{arch}.pooling_type` (> 0: an embedding model).
    pooling_type: int = 0
    #: Vocabulary size (tokens), 0 when unknown.
    vocab_size: int = 0
    #: The vocabulary's identity, what a speculative-decoding draft must share with its target:
    #: `tokenizer.ggml.model` ("gpt2", "llama"), `tokenizer.ggml.pre` ("qwen2", "llama-bpe")
    #: and the digest of the token list's bytes (`GGUFHeader.vocab_digest`). "" when absent.
    tokenizer_model: str = ""
    tokenizer_pre: str = ""
    vocab_digest: str = ""
    #: What llama-server also compares before it runs a draft beside a model (common/speculative.cpp
    #: `common_speculative_are_compatible`): `add_bos_token`, the BOS id when it is added,
    #: `add_eos_token`, the EOS id when it is added; each as the header has it (None: absent).
    special_tokens: tuple[bool | int | None, ...] = ()
    #: The file carries a chat template.
    has_chat_template: bool = False
    #: Declared tensor bytes (GGUF tensor infos, all of them); 0 when unknown.
    tensor_bytes: int = 0
    #: Bytes of MoE expert tensors (names containing `_exps`), part of tensor_bytes.
    expert_tensor_bytes: int = 0
    #: Number of tensors declared in the header.
    tensor_count: int = 0
    #: Diffusion UNet flavour from tensor names ("sd1", "sdxl") or "" (image class).
    diffusion_kind: str = ""
    #: Quantisation label from the file itself (HF `quantization_config.quant_method`
    #: upper-cased, else dtype "BF16"/"F16"/"F32"; GGUF: dominant tensor type), display only.
    quant_label: str = ""
    #: How the attention layout was read, for `swapgen show` (e.g.
    #: "layer_types: 16 of 64 layers full_attention").
    layout_note: str = ""
    #: audio.cpp conversions: GGUF `audiocpp.model_spec.family` (e.g. "moss_tts_nano"), else "".
    audio_family: str = ""
    #: Names of the `chat_template.TEMPLATE_MARKERS` (and "tools_var") found in the GGUF chat
    #: template, sorted. Example: ("tool_call_xml", "tools_var").
    chat_template_markers: tuple[str, ...] = ()
    #: The whole template was scanned, so a marker's absence is evidence too. False: no template,
    #: one too long to scan, or an HF config (tokenizer_config.json is not read).
    chat_template_scanned: bool = False
    #: Image checkpoints: text encoders baked in (tensors under `cond_stage_model.` or
    #: `conditioner.embedders.`); an SD/SDXL file without them is a bare UNet.
    has_baked_encoders: bool = False
    #: GGUF tensors of a vision tower or projector (`v.*`, `mm.*`); in a model file (not a
    #: projector) they are a tower packed in, which llama-server refuses.
    vision_tensor_count: int = 0
    #: A projector's output width: the embedding length of the text model it feeds, which
    #: llama-server requires to match (tools/mtmd/mtmd.cpp: "mismatch between text model
    #: (n_embd = …) and mmproj"). Read only from a `general.type = mmproj` file, whose
    #: `clip.vision.projection_dim` (else `clip.audio.projection_dim`) convert_hf_to_gguf sets
    #: to the text model's hidden size; the older image-encoder converter wrote CLIP's own
    #: projection there. 0 = unknown.
    projector_width: int = 0
    #: Per-head key / value widths on sliding-window layers when they differ from the full
    #: layers' (Gemma 4: GGUF `key_length_swa` 256 vs `key_length` 512; HF `head_dim` vs
    #: `global_head_dim`); 0 = the same as key_length / value_length.
    key_length_swa: int = 0
    value_length_swa: int = 0
    #: Per layer, True for a sliding-window layer (GGUF `sliding_window_pattern`, HF
    #: `layer_types`); () = not given. The `_swa` widths and which layers the sliding-window caches hold.
    sliding_layers: tuple[bool, ...] = ()
    #: GGUF `sliding_window_pattern` given as one integer n (llama.cpp `set_swa_pattern(n)`:
    #: n - 1 sliding layers, then a full one); 0 = absent or given per layer.
    sliding_pattern: int = 0
    #: Layers that hold a recurrent state (mamba / linear attention / short conv / RWKV): HF
    #: from the layer layout; GGUF only when the file carries the sizes below.
    recurrent_layers: int = 0
    #: Recurrent state sizes as llama.cpp names them (`{arch}.ssm.*`; `llama_hparams::n_embd_r`
    #: / `n_embd_s`): conv kernel, inner width, state width, B/C groups. LFM2's short conv is
    #: kernel = `shortconv.l_cache`, inner = embedding_length, state 0.
    ssm_conv_kernel: int = 0
    ssm_inner_size: int = 0
    ssm_state_size: int = 0
    ssm_group_count: int = 0
    #: RWKV: `{arch}.wkv.head_size` and `{arch}.token_shift_count` (state = n_embd × both).
    wkv_head_size: int = 0
    token_shift_count: int = 0
    #: MoE: leading layers with a dense FFN and no experts (GGUF `{arch}.leading_dense_block_count`,
    #: HF `first_k_dense_replace`; DeepSeek V2/V3, Kimi K2, GLM-4.5). `--n-cpu-moe N` counts them.
    leading_dense_blocks: int = 0
    #: A projector's vision tower (`general.type = mmproj` with a vision projector type); None
    #: elsewhere.
    vision_tower: VisionTower | None = None
    #: A whisper.cpp model's hyperparameters (`source` "whisper"); None elsewhere.
    whisper: WhisperShape | None = None


def meta_from_whisper(shape: WhisperShape) -> ModelMeta:
    """A whisper.cpp model's record: its shape, and the few common fields `swapgen show` and the
    listing read (architecture, vocabulary, weight bytes, type)."""
    return ModelMeta(source="whisper", arch="whisper", vocab_size=shape.n_vocab, context_length=shape.n_text_ctx,
                     tensor_bytes=shape.weight_bytes, quant_label=shape.quant, whisper=shape)
