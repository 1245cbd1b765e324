"""What discovery finds: one `ModelRow` per servable model, plus the sidecars paired to it.

Sizes are raw bytes; display strings are derived where they are printed.
"""

from __future__ import annotations

from attrs import frozen


@frozen
class ModelRow:
    """One discovered model.

    Example: ModelRow(id="qwen3-8b-q4_k_m", format="gguf",
    path="/models/unsloth/Qwen3-8B-GGUF/Qwen3-8B-Q4_K_M.gguf", quant="Q4_K_M", ...)
    """

    #: Served id (clashes already resolved), the router's model key.
    id: str
    #: "gguf" (a file or the first shard of a split set), "hf" (a folder), or a non-LLM
    #: format added by the class emitters ("ggml" for SAM).
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
    #: Every file whose bytes feed this model's fragment (doit `file_dep`): the gguf shards,
    #: projector and draft, or the HF folder's config.json, weight index and the *.safetensors it loads.
    inputs: tuple[str, ...] = ()
    #: Bytes of the `mmproj` file (0 = unknown); llama-server sizing charges it when GPU-placed.
    mmproj_bytes: int = 0
    #: The Ollama manifest an entry of an Ollama store comes from
    #: (`…/manifests/registry.ollama.ai/library/llama3.2/3b`); None elsewhere.
    manifest: str | None = None

    @property
    def match_path(self) -> str:
        """What override globs match: the path, or for an Ollama entry its manifest (a blob's
        name is a digest; the manifest's path spells the model's name and tag)."""
        return (self.manifest or self.path).replace("\\", "/")

    @property
    def is_split(self) -> bool:
        return len(self.shards) > 1


@frozen
class Download:
    """How far an incomplete model has come: `swapgen list` shows it; the skip reason in the
    config does not (it would change, and the config be rewritten, as the download grows).

    Example: Download(have_bytes=1_997_000_000, want_bytes=5_036_000_000).
    """

    have_bytes: int
    #: What the complete model measures; 0 = not known yet (files not started).
    want_bytes: int = 0
