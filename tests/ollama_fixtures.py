"""Ollama model stores for tests, in the layout `ollama pull` leaves (ollama `manifest/`):
`blobs/sha256-<hex>` files and `manifests/<host>/<namespace>/<model>/<tag>` JSON, the manifest a
Docker v2 one (schemaVersion 2, a config layer, typed layers with digest and size).

Model and projector blobs are GGUF files from `gguf.GGUFWriter`, sparse to their declared size.
Digests are derived from the blob's role and name, not from its bytes: swapgen never hashes a
blob, and hashing a sparse "4 GiB" file in a fixture would read 4 GiB.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from tests.gguf_fixtures import Q, TensorSpec, llama_tensors, write_gguf

MANIFEST_TYPE = "application/vnd.docker.distribution.manifest.v2+json"
CONFIG_TYPE = "application/vnd.docker.container.image.v1+json"
MODEL = "application/vnd.ollama.image.model"
PROJECTOR = "application/vnd.ollama.image.projector"
TEMPLATE = "application/vnd.ollama.image.template"
LICENSE = "application/vnd.ollama.image.license"
PARAMS = "application/vnd.ollama.image.params"
SYSTEM = "application/vnd.ollama.image.system"

LLAMA_KV = {"{arch}.block_count": 4, "{arch}.context_length": 8192, "{arch}.embedding_length": 256,
            "{arch}.attention.head_count": 8, "{arch}.attention.head_count_kv": 2,
            "{arch}.feed_forward_length": 1024, "general.file_type": 15}


def split_name(name: str) -> tuple[str, str, str, str]:
    """`llama3.2:3b` → (registry.ollama.ai, library, llama3.2, 3b), as `ollama pull` spells paths."""
    rest, _, tag = name.rpartition(":") if ":" in name.rsplit("/", 1)[-1] else (name, "", "latest")
    parts = rest.split("/")
    host, namespace = "registry.ollama.ai", "library"
    if len(parts) == 3:
        host, namespace, model = parts
    elif len(parts) == 2:
        namespace, model = parts
    else:
        (model,) = parts
    return host, namespace, model, tag


def digest_for(label: str) -> str:
    return "sha256:" + hashlib.sha256(label.encode()).hexdigest()


def blob_path(models: Path, digest: str) -> Path:
    return models / "blobs" / digest.replace(":", "-")


def add_text_blob(models: Path, label: str, text: str, media_type: str) -> dict:
    digest = digest_for(label)
    path = blob_path(models, digest)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return {"mediaType": media_type, "digest": digest, "size": path.stat().st_size}


def add_gguf_blob(models: Path, label: str, arch: str = "llama", *, media_type: str = MODEL, blocks: int = 4,
                  sparse_size: int | None = None, kv: dict | None = None,
                  tensors: list[TensorSpec] | None = None) -> dict:
    """A GGUF blob (llama-shaped; arch `clip` makes a projector); its layer dict."""
    digest = digest_for(label)
    path = blob_path(models, digest)
    path.parent.mkdir(parents=True, exist_ok=True)
    if arch == "clip":
        write_gguf(path, "clip", kv={"clip.has_vision_encoder": True, **(kv or {})},
                   tensors=tensors or [("v.patch_embd.weight", (14, 14, 3, 256), Q.F16)])
    else:
        if tensors is None:
            tensors = [("token_embd.weight", (256, 1024), Q.Q4_K)]
            tensors += [(f"blk.{i}.attn_q.weight", (256, 256), Q.Q4_K) for i in range(blocks)]
        write_gguf(path, arch, kv=LLAMA_KV if kv is None else kv, tensors=tensors)
    size = path.stat().st_size
    if sparse_size is not None:
        os.truncate(path, sparse_size)
    return {"mediaType": media_type, "digest": digest, "size": size}


def write_manifest(models: Path, name: str, layers: list[dict], *, config: dict | None = None) -> Path:
    """The manifest of `name` (`model:tag`, `namespace/model:tag` or `host/namespace/model:tag`),
    with a config blob like the registry's (`model_format`, `model_family`, `file_type`)."""
    if config is None:
        config = add_text_blob(models, f"config {name}", json.dumps(
            {"model_format": "gguf", "model_family": "llama", "model_families": ["llama"], "model_type": "3.2B",
             "file_type": "Q4_K_M", "architecture": "amd64", "os": "linux",
             "rootfs": {"type": "layers", "diff_ids": [layer["digest"] for layer in layers]}}), CONFIG_TYPE)
    path = models.joinpath("manifests", *split_name(name))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"schemaVersion": 2, "mediaType": MANIFEST_TYPE, "config": config,
                                "layers": layers}))
    return path


def pull(models: Path, name: str, *, arch: str = "llama", projector: bool = False, blob: str | None = None,
         params: dict | None = None, sparse_size: int | None = None) -> Path:
    """What `ollama pull <name>` leaves: model blob (`blob` names it, so tags can share one),
    optional projector, template, license and params blobs, and the manifest."""
    layers = [add_gguf_blob(models, blob or f"model {name}", arch, sparse_size=sparse_size)]
    if projector:
        layers.append(add_gguf_blob(models, f"projector {name}", "clip", media_type=PROJECTOR))
    layers.append(add_text_blob(models, "template", "{{ .Prompt }}", TEMPLATE))
    layers.append(add_text_blob(models, "license", "LLAMA 3.2 COMMUNITY LICENSE AGREEMENT", LICENSE))
    layers.append(add_text_blob(models, f"params {params}", json.dumps(params or {"stop": ["<|eot_id|>"]}), PARAMS))
    return write_manifest(models, name, layers)


def guide_store(models: Path) -> None:
    """The store of the guide's "Models from Ollama" example (docs/ollama-models.md), sizes as the real pulls: llama3.2:3b,
    llava:7b (with its projector), llama3.2-vision:11b (mllama), a blob left by `ollama rm` and a
    pull under way."""
    def kv(blocks, ctx, embd, heads, kv_heads, ffn):
        return {"{arch}.block_count": blocks, "{arch}.context_length": ctx, "{arch}.embedding_length": embd,
                "{arch}.attention.head_count": heads, "{arch}.attention.head_count_kv": kv_heads,
                "{arch}.feed_forward_length": ffn, "general.file_type": 15}

    def model(name, label, arch, k, tensors, extra=()):
        layers = [add_gguf_blob(models, label, arch, kv=k, tensors=tensors), *extra,
                  add_text_blob(models, f"template {name}", "{{ .Prompt }}", TEMPLATE),
                  add_text_blob(models, f"params {name}", json.dumps({"stop": ["<|eot_id|>"]}), PARAMS)]
        write_manifest(models, name, layers)

    model("llama3.2:3b", "llama3.2 3b", "llama", kv(28, 131072, 3072, 24, 8, 8192),
          llama_tensors(28, 3072, 128256, 8192))
    model("llava:7b", "llava 7b", "llama", kv(32, 4096, 4096, 32, 32, 11008), llama_tensors(32, 4096, 32000, 11008),
          [add_gguf_blob(models, "llava 7b projector", "clip", media_type=PROJECTOR,
                         tensors=[("v.blk.0.attn_q.weight", (1024, 304640), Q.F16)])])
    model("llama3.2-vision:11b", "llama3.2-vision 11b", "mllama", kv(40, 131072, 4096, 32, 8, 14336),
          llama_tensors(4, 4096, 128256, 14336))
    add_gguf_blob(models, "removed by ollama rm")
    (models / "blobs" / (blob_path(models, digest_for("qwen3 8b")).name + "-partial")).write_bytes(b"")
