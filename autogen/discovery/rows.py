"""What discovery finds: one `ModelRow` per servable model, plus the sidecars paired to it.

Sizes are raw bytes; display strings are derived where they are printed.
"""

from __future__ import annotations

from attrs import astuple, frozen

from autogen.vision_tower import VisionTower


@frozen
class ModelRow:
    """One discovered model.

    Example: ModelRow(id="qwen3-8b-q4_k_m", format="gguf",
    path="/models/unsloth/Qwen3-8B-GGUF/Qwen3-8B-Q4_K_M.gguf", quant="Q4_K_M", ...)
    """

    #: Served id (clashes already resolved), the router's model key.
    id: str
    #: "gguf" (a file or the first shard of a split set), "hf" (a folder), "sam" (a SAM `.ggml`
    #: file), "whisper" (a whisper.cpp GGML `.bin`), or the `foreign_format` of weights no
    #: configured engine loads ("ggml", "onnx", …).
    format: str
    #: What the engine is given: the .gguf (shard 1 of a set) or the HF folder.
    path: str
    #: Upper-case quant label from the name (GGUF) or the config (HF), "" if none.
    quant: str = ""
    #: Weight bytes on disk: the whole split set, or an HF folder's *.safetensors (those its index names).
    size_bytes: int = 0
    #: Parent-of-parent and parent folder names (HF cache layout: owner and repo).
    publisher: str = ""
    repo: str = ""
    #: All shard paths of a split set in order (shard 1 first); () for a single file.
    shards: tuple[str, ...] = ()
    #: Shards named by the set but absent on disk (a skip reason).
    missing_shards: tuple[str, ...] = ()
    #: Vision projector (GGUF with arch `clip`) found in the model's folder.
    mmproj: str | None = None
    #: Draft model for speculative decoding found in the model's folder.
    draft: str | None = None
    #: TTS audio codec found in the model's folder (Qwen3-TTS).
    codec: str | None = None
    #: whisper.cpp: the Silero VAD model of its folder (`--vad-model`), and its bytes.
    vad: str | None = None
    vad_bytes: int = 0
    #: whisper.cpp: the encoders beside it for another framework, the Core ML folder
    #: (`ggml-base.en-encoder.mlmodelc`) or OpenVINO's files (`ggml-base.en-encoder-openvino.xml`,
    #: its `.bin` and `-cache` folder), which only a whisper.cpp built with that framework loads,
    #: by itself, from the model's path; never an argument (`discovery.whisper_files`).
    encoders: tuple[str, ...] = ()
    #: Every file whose bytes feed this model's fragment (doit `file_dep`): the gguf shards,
    #: projector and draft, or the HF folder's config.json, weight index and the *.safetensors it loads.
    inputs: tuple[str, ...] = ()
    #: Bytes of the `mmproj` file (0 = unknown); llama-server sizing charges it when GPU-placed.
    mmproj_bytes: int = 0
    #: The `mmproj` file's vision tower as its header says (None = not read or none): llama-server
    #: sizing charges the CLIP compute buffer from it (`sizing.projector`).
    mmproj_tower: VisionTower | None = None
    #: The Ollama manifest an entry of an Ollama store comes from
    #: (`…/manifests/registry.ollama.ai/library/llama3.2/3b`); None elsewhere.
    manifest: str | None = None
    #: Weights in a format no configured engine loads (`metadata.formats`: "mlx", "exl2",
    #: "exl3", "onnx", "openvino", "ggml"), and what says so; "" for GGUF and plain HF folders.
    #: Such a row is skipped with the format named unless an override pins a `custom` backend.
    foreign_format: str = ""
    foreign_evidence: str = ""
    #: LoRA adapters whose base this model is (`discovery.pairing`): GGUF adapters become
    #: llama-server profiles, PEFT folders `--lora-modules` of a vLLM entry.
    loras: tuple[Adapter, ...] = ()
    #: A smaller model with the same vocabulary, offered as a speculative-decoding draft
    #: profile (`discovery.pairing`); None = none found.
    spec_draft: SpecDraft | None = None

    def __reduce__(self):
        """Pickled as its fields in order: the load memo holds a row per model, which attrs'
        own state (a dict per row, set back one field at a time) reads a third slower."""
        return ModelRow, astuple(self, recurse=False)

    @property
    def match_path(self) -> str:
        """What override globs match: the path, or for an Ollama entry its manifest (a blob's
        name is a digest; the manifest's path spells the model's name and tag)."""
        return (self.manifest or self.path).replace("\\", "/")

    @property
    def is_split(self) -> bool:
        return len(self.shards) > 1


@frozen
class Adapter:
    """A LoRA adapter paired with its base model.

    Example: Adapter(path="/m/loras/Llama-3.1-8B-sql-LoRA-F16.gguf", name="llama-3.1-8b-sql-lora",
    kind="gguf", size_bytes=167_772_160, rank=16, alpha=32.0).
    """

    path: str
    #: The name clients ask for: a profile id's tail (`<base>+<name>`), a vLLM LoRA module name.
    name: str
    #: "gguf" (llama-server `--lora`) or "peft" (vLLM `--lora-modules`).
    kind: str
    size_bytes: int
    rank: int = 0
    alpha: float = 0.0


@frozen
class SpecDraft:
    """The draft a model's speculative-decoding profile runs (`-md`), with what pairing checked.

    Example: SpecDraft(path="/m/Qwen3-0.6B-Q8_0.gguf", model_id="qwen3-0.6b-q8_0", size_bytes=639_447_040,
    why="same vocabulary (gpt2/qwen2, 151936 tokens, same token list), same folder").
    """

    path: str
    #: The draft's own id (it is a model of the library too); "" for a file pinned by an override.
    model_id: str
    size_bytes: int
    #: Why it was chosen, for the comment and `swapgen show`.
    why: str


@frozen
class Download:
    """How far an incomplete model has come: `swapgen list` shows it; the skip reason in the
    config does not (it would change, and the config be rewritten, as the download grows).

    Example: Download(have_bytes=1_997_000_000, want_bytes=5_036_000_000).
    """

    have_bytes: int
    #: What the complete model measures; 0 = not known yet (files not started).
    want_bytes: int = 0
