"""Hugging Face layouts built in tmp_path: safetensors files with real headers (sparse data),
sharded folders with their index, and hub caches (blobs, refs, snapshots of symlinks)."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

LLAMA_CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "torch_dtype": "bfloat16",
                "num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 64, "max_position_embeddings": 4096}


def write_safetensors(path, size: int, *, have: int | None = None) -> Path:
    """A safetensors file of `size` bytes: a real header declaring one tensor that fills the
    rest, its data sparse. `have`: cut the file to that many bytes (an interrupted download)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    header = b""
    for _ in range(3):  # the header's length changes the data length it declares
        data = max(0, size - 8 - len(header))
        header = json.dumps({"__metadata__": {"format": "pt"},
                             "w": {"dtype": "U8", "shape": [data], "data_offsets": [0, data]}}).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header)
    os.truncate(path, size if have is None else have)
    return path


def write_config(folder, config=None) -> Path:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "config.json"
    path.write_text(config if isinstance(config, str) else json.dumps(config or LLAMA_CONFIG))
    return path


def write_index(folder, files: dict[str, int]) -> Path:
    """`model.safetensors.index.json` naming `files` (name → size)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    index = {"metadata": {"total_size": sum(files.values())},
             "weight_map": {f"layer.{i}.weight": name for i, name in enumerate(files)}}
    path = folder / "model.safetensors.index.json"
    path.write_text(json.dumps(index))
    return path


def sharded(folder, total: int, size: int, *, present=None, have=None, index=True, config=None) -> Path:
    """A sharded model: config.json, `total` shards of `size` bytes (only those numbered in
    `present`, default all), `have` = {number: bytes} for shards cut short, and the index."""
    folder = Path(folder)
    write_config(folder, config)
    names = {f"model-{i:05d}-of-{total:05d}.safetensors": size for i in range(1, total + 1)}
    for i, name in enumerate(names, start=1):
        if present is None or i in present:
            write_safetensors(folder / name, size, have=(have or {}).get(i))
    if index:
        write_index(folder, names)
    return folder


def hub_snapshot(cache, repo: str, revision: str, files: dict[str, int | str | None], *, main: bool = False) -> Path:
    """`cache/models--owner--name/snapshots/<revision>/`, each file a relative symlink into
    `blobs/` as huggingface_hub makes them. Values: a size (safetensors), text (written as is,
    e.g. config.json) or None (a link whose blob is missing). `main`: refs/main names it."""
    owner, name = repo.split("/")
    root = Path(cache) / f"models--{owner}--{name}"
    snapshot = root / "snapshots" / revision
    snapshot.mkdir(parents=True, exist_ok=True)
    (root / "blobs").mkdir(exist_ok=True)
    for filename, content in files.items():
        blob = root / "blobs" / f"{revision[:8]}-{filename.replace('/', '_')}"
        if isinstance(content, int):
            write_safetensors(blob, content)
        elif isinstance(content, str):
            blob.write_text(content)
        link = snapshot / filename
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    if main:
        (root / "refs").mkdir(exist_ok=True)
        (root / "refs" / "main").write_text(revision)
    return snapshot
