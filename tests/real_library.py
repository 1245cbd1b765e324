"""A library shaped like real download folders, for the end-to-end checks of discovery: bartowski
and unsloth GGUF repos (imatrix files, projectors, split sets, generic names), LM Studio's tree
linking into the HF hub cache, mlx-community, EXL2, ONNX and pre-GGUF downloads, LoRA adapters
(GGUF and PEFT) and a control vector. Headers are real (`gguf.GGUFWriter`), data sparse.

`build` returns what each weight file must become: the model id it serves as, or the words its
`swapgen list` reason starts with."""

from __future__ import annotations

import json
import os
from pathlib import Path

import xxhash

from tests.gguf_fixtures import Q, write_gguf, write_lora, write_split_set
from tests.hf_fixtures import LLAMA_CONFIG, write_config, write_safetensors

QWEN_TOKENS = [f"Ġq{i:04d}" for i in range(384)]
#: The same count as Qwen's, one token different: never a draft for a Qwen model.
ALMOST_QWEN_TOKENS = [*QWEN_TOKENS[:-1], "Ġimpostor"]
LLAMA_TOKENS = [f"Ġl{i:04d}" for i in range(384)]
GEMMA_TOKENS = [f"▁g{i:04d}" for i in range(384)]
#: Gemma 2's vocabulary is not Gemma 3's (256000 tokens against 262144).
GEMMA2_TOKENS = [f"▁h{i:04d}" for i in range(384)]
QWEN, LLAMA, GEMMA = ("gpt2", "qwen2"), ("gpt2", "llama-bpe"), ("llama", "default")
TEMPLATE = "{% for m in messages %}{{ m.content }}{% endfor %}{% if tools %}{{ tools }}{% endif %}"
SETTINGS = """roots: [models]
vram_budget_gb: 8
card_vram_gb: 0
backends:
  - {id: llama, kind: llama, path: /opt/llama/bin/llama-server, default: true}
  - {id: vllm, kind: vllm, path: /opt/vllm/bin/vllm, version: "0.33.0"}
"""


def chat(path: Path, arch: str, *, blocks: int, embd: int, tokens=QWEN_TOKENS, tokenizer=QWEN, name: str = "",
         **kw) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    kv = {"{arch}.block_count": blocks, "{arch}.context_length": 32768, "{arch}.embedding_length": embd,
          "{arch}.attention.head_count": 4, "{arch}.attention.head_count_kv": 2,
          "{arch}.feed_forward_length": 4 * embd, **({"general.name": name} if name else {})}
    tensors = [("token_embd.weight", (embd, len(tokens)), Q.Q8_0)]
    tensors += [(f"blk.{i}.attn_q.weight", (embd, embd), Q.Q8_0) for i in range(blocks)]
    return write_gguf(path, arch, kv=kv, tensors=tensors, tokens=tokens, tokenizer=tokenizer, chat_template=TEMPLATE,
                      **kw)


def projector(path: Path, kind: str = "gemma3") -> Path:
    """A projector of type `kind` (`clip.projector_type`: SmolVLM's is idefics3)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_gguf(path, "clip", kv={"general.type": "mmproj", "clip.has_vision_encoder": True,
                                        "clip.projector_type": kind},
                      tensors=[("v.patch_embd.weight", (14, 14, 3, 64), Q.F16), ("mm.input_projection.weight",
                                                                                 (64, 256), Q.F16)])


def imatrix(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_gguf(path, None, kv={"general.type": "imatrix", "imatrix.chunk_count": 125, "imatrix.chunk_size": 512},
                      tensors=[("blk.0.attn_q.weight.in_sum2", (256, 1), Q.F32),
                               ("blk.0.attn_q.weight.counts", (1, 1), Q.F32)])


def hub_gguf(hub: Path, repo: str, name: str, write) -> Path:
    """A GGUF in the hub cache: the blob, and the snapshot's relative symlink to it."""
    owner, model = repo.split("/")
    root = hub / f"models--{owner}--{model}"
    blob = root / "blobs" / xxhash.xxh3_64_hexdigest(name.encode())
    blob.parent.mkdir(parents=True, exist_ok=True)
    write(blob)
    (root / "refs").mkdir(exist_ok=True)
    (root / "refs" / "main").write_text("abc123")
    link = root / "snapshots" / "abc123" / name
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(os.path.relpath(blob, link.parent))
    return link


def build(root: Path) -> dict[str, str]:
    """The library under `root/models`; returns path (relative to it) → expected id, or the start
    of the listed reason ("ignored: …" / "attached: …"), or "skipped: …" for a row skipped."""
    m = root / "models"
    want: dict[str, str] = {}

    def put(rel: str, what: str) -> Path:
        want[rel] = what
        return m / rel

    # bartowski: a Qwen3 family, an imatrix beside the quants, a small model of the family
    q8b = "bartowski/Qwen_Qwen3-8B-GGUF"
    chat(put(f"{q8b}/Qwen_Qwen3-8B-Q4_K_M.gguf", "qwen_qwen3-8b-q4_k_m"), "qwen3", blocks=8, embd=256, name="Qwen3 8B")
    chat(put(f"{q8b}/Qwen_Qwen3-8B-Q8_0.gguf", "qwen_qwen3-8b-q8_0"), "qwen3", blocks=8, embd=256, name="Qwen3 8B")
    imatrix(put(f"{q8b}/Qwen_Qwen3-8B-imatrix.gguf", "ignored: importance matrix"))
    (m / q8b / "Qwen_Qwen3-8B.imatrix").write_bytes(b"\x01\x00\x00\x00legacy imatrix")  # not a GGUF: no weights
    (m / q8b / "README.md").write_text("# Qwen3 8B\n")
    chat(put("bartowski/Qwen_Qwen3-0.6B-GGUF/Qwen_Qwen3-0.6B-Q8_0.gguf", "qwen_qwen3-0.6b-q8_0"), "qwen3",
         blocks=4, embd=64)
    q14 = "bartowski/Qwen_Qwen3-14B-GGUF"
    chat(put(f"{q14}/Qwen_Qwen3-14B-Q4_K_M.gguf", "qwen_qwen3-14b-q4_k_m"), "qwen3", blocks=12, embd=256)
    chat(put(f"{q14}/Qwen_Qwen3-0.5B-distill-Q8_0.gguf", "qwen_qwen3-0.5b-distill-q8_0"), "qwen3", blocks=4, embd=64,
         tokens=ALMOST_QWEN_TOKENS)  # beside it, the same count, another token list: never its draft

    # unsloth: a vision model and its projector, a split set in a quant subfolder
    g = "unsloth/gemma-3-4b-it-GGUF"
    for quant in ("Q4_K_M", "UD-Q8_K_XL"):
        chat(put(f"{g}/gemma-3-4b-it-{quant}.gguf", f"gemma-3-4b-it-{quant.lower()}"), "gemma3", blocks=6, embd=256,
             tokens=GEMMA_TOKENS, tokenizer=GEMMA)
    projector(put(f"{g}/mmproj-F16.gguf", "attached: projector of gemma-3-4b-it-q4_k_m, gemma-3-4b-it-ud-q8_k_xl"))
    split = m / "unsloth/Qwen3-30B-A3B-GGUF/UD-Q4_K_XL"
    split.mkdir(parents=True)
    shards = write_split_set(split, "Qwen3-30B-A3B-UD-Q4_K_XL", "qwen3moe", shards=2,
                             kv={"{arch}.block_count": 2, "{arch}.context_length": 32768,
                                 "{arch}.embedding_length": 128, "{arch}.attention.head_count": 4},
                             tensors=[(f"blk.{i}.ffn_up_exps.weight", (256, 512), Q.Q4_K) for i in range(2)])
    want[os.path.relpath(shards[0], m)] = "qwen3-30b-a3b-ud-q4_k_xl"
    want[os.path.relpath(shards[1], m)] = "input: qwen3-30b-a3b-ud-q4_k_xl"

    # a projector whose name reads like a diffusion encoder
    chat(put("ggml-org/SmolVLM-500M-Instruct-GGUF/SmolVLM-500M-Instruct-Q8_0.gguf", "smolvlm-500m-instruct-q8_0"),
         "llama", blocks=4, embd=128, tokens=LLAMA_TOKENS, tokenizer=LLAMA)
    projector(put("ggml-org/SmolVLM-500M-Instruct-GGUF/vision-encoder-f16.gguf",
                  "attached: projector of smolvlm-500m-instruct-q8_0"), "idefics3")

    # generic file names: the repo folder names them
    chat(put("second-state/gemma-2-9b-it-GGUF/model-Q4_K_M.gguf", "gemma-2-9b-it-q4_k_m"), "gemma2", blocks=4,
         embd=128, tokens=GEMMA2_TOKENS, tokenizer=GEMMA)
    chat(put("QuantFactory/Phi-3-mini-4k-instruct-GGUF/ggml-model-q4_0.gguf", "phi-3-mini-4k-instruct-q4_0"),
         "phi3", blocks=4, embd=128, tokens=LLAMA_TOKENS, tokenizer=LLAMA)

    # the hub cache, and LM Studio's tree linking into it (one file, two paths)
    hub = m / "hf-cache/hub"
    link = hub_gguf(hub, "Qwen/Qwen3-4B-GGUF", "Qwen3-4B-Q4_K_M.gguf",
                    lambda p: chat(p, "qwen3", blocks=6, embd=192))
    want[os.path.relpath(link, m)] = "qwen3-4b-q4_k_m"
    lms = m / "lmstudio/models/Qwen/Qwen3-4B-GGUF/Qwen3-4B-Q4_K_M.gguf"
    lms.parent.mkdir(parents=True)
    lms.symlink_to(link)
    want[os.path.relpath(lms, m)] = "attached: same file as"
    llama = hub / "models--meta-llama--Llama-3.1-8B-Instruct/snapshots/0e9e39f2"
    write_config(llama, LLAMA_CONFIG)
    write_safetensors(llama / "model.safetensors", 1 << 28)
    want[os.path.relpath(llama, m)] = "llama-3.1-8b-instruct-bf16"

    # adapters: a GGUF LoRA of the Qwen3 8B, one without its base, a PEFT folder of the HF Llama
    write_lora(put("loras/Qwen3-8B-sql-LoRA-F16.gguf", "attached: LoRA adapter (rank 16, alpha 32) for "
                                                       "qwen_qwen3-8b-q4_k_m, qwen_qwen3-8b-q8_0"),
               "qwen3", blocks=8, embd=256, rank=16, alpha=32,
               base=("Qwen3 8B", "Qwen", "https://huggingface.co/Qwen/Qwen3-8B"))
    write_lora(put("loras/Llama-3.1-70B-storyteller-LoRA-F16.gguf", "ignored: LoRA adapter (rank 8, alpha 16): its "
                                                                     "base Llama 3.1 70B"),
               "llama", blocks=8, embd=512, base=("Llama 3.1 70B", "Meta Llama",
                                                  "https://huggingface.co/meta-llama/Llama-3.1-70B"))
    peft = put("loras/llama-sql-lora", "attached: PEFT LoRA adapter (rank 16) for llama-3.1-8b-instruct-bf16")
    peft.mkdir(parents=True)
    (peft / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "meta-llama/Llama-3.1-8B-Instruct",
                                                          "peft_type": "LORA", "r": 16, "lora_alpha": 32,
                                                          "task_type": "CAUSAL_LM"}))
    write_safetensors(peft / "adapter_model.safetensors", 1 << 20)
    cv = put("control-vectors/happy.gguf", "ignored: control vector")
    cv.parent.mkdir(parents=True)
    write_gguf(cv, "controlvector", kv={"controlvector.model_hint": "llama", "controlvector.layer_count": 2},
               tensors=[("direction.1", (128,), Q.F32), ("direction.2", (128,), Q.F32)])

    # formats no configured engine loads
    mlx = put("mlx-community/Qwen3-8B-4bit", "skipped: MLX weights")
    write_config(mlx, {**LLAMA_CONFIG, "quantization": {"group_size": 64, "bits": 4},
                       "quantization_config": {"group_size": 64, "bits": 4}})
    write_safetensors(mlx / "model.safetensors", 1 << 20)
    exl2 = put("turboderp/Llama-3.1-8B-Instruct-exl2", "skipped: EXL2 weights")
    write_config(exl2, {**LLAMA_CONFIG, "quantization_config": {"quant_method": "exl2", "bits": 4.0}})
    write_safetensors(exl2 / "output.safetensors", 1 << 20)
    onnx = put("onnx-community/Qwen3-0.6B-ONNX/onnx", "skipped: ONNX weights")
    onnx.mkdir(parents=True)
    for name in ("model.onnx", "model_q4.onnx"):
        (onnx / name).write_bytes(b"\x08\x07\x12\x04onnx")
    write_config(onnx.parent, LLAMA_CONFIG)
    ggml = put("TheBloke/Llama-2-7B-Chat-GGML/llama-2-7b-chat.ggmlv3.q4_0.bin", "skipped: GGML (pre-GGUF) weights")
    ggml.parent.mkdir(parents=True)
    ggml.write_bytes(b"tjgg\x03\x00\x00\x00" + b"\0" * 256)
    return want


def newcomers(root: Path) -> dict[str, str]:
    """Files that arrive later: a generic name another repo's model already has, a new quant, a
    smaller model sorting first. Returns what each must become."""
    m = root / "models"
    chat(m / "aaa-mirror/gemma-2-9b-it-GGUF/model-Q4_K_M.gguf", "gemma2", blocks=4, embd=128, tokens=GEMMA2_TOKENS,
         tokenizer=GEMMA)
    chat(m / "bartowski/Qwen_Qwen3-8B-GGUF/Qwen_Qwen3-8B-Q6_K.gguf", "qwen3", blocks=8, embd=256, name="Qwen3 8B")
    chat(m / "bartowski/Qwen_Qwen3-0.6B-GGUF/Qwen_Qwen3-0.6B-BF16.gguf", "qwen3", blocks=4, embd=64)
    return {"aaa-mirror/gemma-2-9b-it-GGUF/model-Q4_K_M.gguf": "gemma-2-9b-it-q4_k_m-aaa-mirror",
            "bartowski/Qwen_Qwen3-8B-GGUF/Qwen_Qwen3-8B-Q6_K.gguf": "qwen_qwen3-8b-q6_k",
            "bartowski/Qwen_Qwen3-0.6B-GGUF/Qwen_Qwen3-0.6B-BF16.gguf": "qwen_qwen3-0.6b-bf16"}
