"""The Ollama model store: `<models>/manifests/<host>/<namespace>/<model>/<tag>` and `<models>/blobs/`.

Each manifest file is one `name:tag` (ollama `types/model/name.go`, `Name.Filepath`): a Docker
v2 manifest whose `layers` name blobs by digest, typed by media type (ollama `manifest/`,
`server/images.go` `GetModel`). A digest `sha256:<hex>` is the file `blobs/sha256-<hex>`; older
stores kept the colon (`manifest.BlobsPath` accepts both). A pull downloads into
`blobs/sha256-<hex>-partial` (preallocated to its full size, with `-partial-<n>` chunk records
beside it) and renames it when whole; the manifest is written last (`server/download.go`,
`server/images.go` `PullModel`).

This module reads the layout only: manifests, names and blob stats. GGUF headers are the
walker's, through the metadata cache. No blob is ever opened here, and nothing is written.
"""

from __future__ import annotations

import os
import re
import stat as statmod

from attrs import frozen

from autogen.discovery.rows import Download
from autogen.errors import ModelError
from autogen.metadata.hf_config import read_json_object
from autogen.numfmt import gib_text

MANIFESTS = "manifests"
BLOBS = "blobs"
DEFAULT_HOST = "registry.ollama.ai"
DEFAULT_NAMESPACE = "library"
PARTIAL_SUFFIX = "-partial"

#: Layer media types (ollama `server/images.go` `GetModel`, `manifest/layer.go`).
MODEL_LAYER = "application/vnd.ollama.image.model"
PROJECTOR_LAYER = "application/vnd.ollama.image.projector"
DRAFT_LAYER = "application/vnd.ollama.image.draft"
ADAPTER_LAYER = "application/vnd.ollama.image.adapter"
#: Safetensors tensors for Ollama's MLX engine, one layer per tensor (`manifest.MediaTypeImageTensor`).
TENSOR_LAYER = "application/vnd.ollama.image.tensor"

#: Architectures Ollama writes that llama.cpp's `LLM_ARCH_NAMES` (llama-arch.cpp) lacks, so
#: llama-server refuses the blob (`unknown model architecture`): Llama 3.2 Vision lives in
#: Ollama's own engine, and Ollama spells gpt-oss and Qwen2.5-VL its own way (llama.cpp:
#: `gpt-oss`, `qwen2vl` with the vision tower in a projector).
OLLAMA_ONLY_ARCHS = {
    "mllama": "architecture mllama (Llama 3.2 Vision) runs only on Ollama's own engine; llama-server has no mllama",
    "gptoss": "architecture gptoss is Ollama's spelling of gpt-oss; llama-server refuses it (unknown model "
              "architecture); use a GGUF converted by llama.cpp",
    "qwen25vl": "architecture qwen25vl is Ollama's Qwen2.5-VL layout; llama-server refuses it (unknown model "
                "architecture); llama.cpp serves Qwen2.5-VL as qwen2vl with a separate mmproj",
}
#: Ollama's own engine packs the vision tower of newer models (Gemma 3 and 4, among others) into
#: the model blob; llama.cpp loads a tower only from a projector file, and its loader
#: refuses a model file with tensors it does not create (`done_getting_tensors`).
PACKED_VISION = ("the model blob packs {n} vision-tower tensors (v.*, mm.*) into the model, Ollama's own engine "
                 "layout; llama-server loads a vision tower only from a separate --mmproj file and refuses this "
                 "one (wrong number of tensors)")
#: Manifests are a few KB; one layer per tensor (MLX models) makes a few hundred KB.
MAX_MANIFEST_BYTES = 4 << 20
#: The config blob is a few hundred bytes (`model_format`, `file_type`, …).
MAX_CONFIG_BYTES = 1 << 20
#: Layer sizes above this are refused as hostile (no model blob is a PiB).
MAX_LAYER_BYTES = 1 << 50
#: `manifest.BlobsPath`: only real sha256 digests name a blob (no path can hide in one).
DIGEST = re.compile(r"^sha256[:-]([0-9a-fA-F]{64})$")
#: A name part: a letter, digit or `_` first, then those and `_-.` (`types/model/name.go`
#: `isValidPart`); a namespace has no `.`, a host may carry `:port`; at most 80 (host 350).
_PART = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
_HOST = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:-]*$")


@frozen
class OllamaName:
    """A model's name as its manifest path spells it.

    Example: OllamaName(host="registry.ollama.ai", namespace="library", model="llama3.2", tag="3b").
    """

    host: str
    namespace: str
    model: str
    tag: str

    @property
    def shortest(self) -> str:
        """The name as `ollama list` shows it (`Name.DisplayShortest`): `llama3.2:3b` for the
        default registry and namespace, `namespace/model:tag` on the default registry,
        `host/namespace/model:tag` elsewhere."""
        if self.host.lower() != DEFAULT_HOST:
            return f"{self.host}/{self.namespace}/{self.model}:{self.tag}"
        if self.namespace.lower() != DEFAULT_NAMESPACE:
            return f"{self.namespace}/{self.model}:{self.tag}"
        return f"{self.model}:{self.tag}"


@frozen
class Blob:
    """A blob a manifest layer names, as found on disk (`st` follows a symlinked blob)."""

    path: str
    st: os.stat_result


@frozen
class StoreEntry:
    """One manifest: the blobs it serves, or why it cannot be served.

    Example: StoreEntry(name=OllamaName(…, model="llava", tag="7b"), manifest=".../library/llava/7b",
    model=Blob(".../blobs/sha256-170370…", 4_113_289_984, …), projector=Blob(…), quant="Q4_0").
    """

    name: OllamaName
    manifest: str
    model: Blob | None = None
    projector: Blob | None = None
    draft: Blob | None = None
    #: The config blob's `file_type` ("Q4_K_M"), "" when absent or unreadable.
    quant: str = ""
    #: Why the entry cannot be served (a layout problem); None when its blobs are whole.
    reason: str | None = None
    #: How far a pull cut short has come.
    download: Download | None = None


@frozen
class StoreScan:
    entries: tuple[StoreEntry, ...]
    #: (path, reason) per file that is not a servable manifest or is a blob no manifest names.
    ignored: tuple[tuple[str, str], ...] = ()
    #: Folders that could not be listed.
    problems: tuple[str, ...] = ()


def is_store(subdirs: set[str]) -> bool:
    """A folder holding both `manifests/` and `blobs/` is an Ollama models folder."""
    return MANIFESTS in subdirs and BLOBS in subdirs


def blob_name(digest: str) -> str | None:
    """`sha256:<hex>` → `sha256-<hex>`, None for anything that is not a sha256 digest."""
    m = DIGEST.match(digest)
    return f"sha256-{m.group(1)}" if m else None


def scan_store(models: str) -> StoreScan:
    """Every manifest under `models/manifests` (exactly host/namespace/model/tag deep, as ollama's
    `Manifests` globs them), resolved against `models/blobs`; blobs no manifest names are
    reported as ignored."""
    problems: list[str] = []
    ignored: list[tuple[str, str]] = []
    blobs_dir = os.path.join(models, BLOBS)
    blobs = _list(blobs_dir, problems)
    entries = []
    named: set[str] = set()
    for path, parts in _manifest_files(os.path.join(models, MANIFESTS), ignored, problems):
        bad = _bad_name(parts)
        if bad is not None:
            ignored.append((path, f"not an Ollama model name ({bad}); expected "
                                  "manifests/<host>/<namespace>/<model>/<tag>"))
            continue
        entry, refs = _entry(OllamaName(*parts), path, blobs_dir, blobs)
        entries.append(entry)
        named.update(refs)
    for name in sorted(blobs):
        if name in named or name.startswith("."):
            continue
        base, sep, rest = name.partition(PARTIAL_SUFFIX)
        if sep and not rest and base not in named:
            ignored.append((os.path.join(blobs_dir, name), "an Ollama pull under way or interrupted; no manifest "
                                                           "names it yet"))
        elif not sep and not rest and blob_name(base.replace("-", ":", 1)) is not None:
            ignored.append((os.path.join(blobs_dir, name), "Ollama blob no manifest names (left by a removed "
                                                           "model); not served"))
    return StoreScan(tuple(entries), tuple(ignored), tuple(problems))


def _list(folder: str, problems: list[str]) -> dict[str, os.DirEntry]:
    try:
        with os.scandir(folder) as it:
            return {e.name: e for e in it}
    except OSError as exc:
        problems.append(f"{folder}: cannot list folder ({exc.strerror or exc})")
        return {}


def _manifest_files(root: str, ignored: list[tuple[str, str]],
                    problems: list[str]) -> list[tuple[str, tuple[str, str, str, str]]]:
    """(path, (host, namespace, model, tag)) of every file four levels under `manifests/`, sorted.
    Files at other depths are not manifests; folders deeper than a tag are not walked (a symlink
    loop among them costs nothing)."""
    found = []

    def walk(folder: str, parts: tuple[str, ...]) -> None:
        for name, entry in sorted(_list(folder, problems).items()):
            if name.startswith("."):
                continue
            try:
                is_dir = entry.is_dir()
                is_file = entry.is_file()
            except OSError:
                is_dir = is_file = False
            here = (*parts, name)
            if len(here) < 4 and is_dir:
                walk(entry.path, here)
            elif len(here) == 4 and is_file:
                found.append((entry.path, here))
            elif not is_dir and not is_file and entry.is_symlink():
                ignored.append((entry.path, f"broken symlink (its target {_link_target(entry.path)} is missing)"))
            elif is_file:
                ignored.append((entry.path, "not an Ollama manifest: manifests sit at "
                                            "manifests/<host>/<namespace>/<model>/<tag>"))
            elif is_dir:
                ignored.append((entry.path, "a folder where a tag's manifest file belongs; not walked"))

    walk(root, ())
    return found


def _bad_name(parts: tuple[str, ...]) -> str | None:
    """Why the parts are no valid ollama name (`isValidPart`), else None."""
    for kind, part, limit in zip(("host", "namespace", "model", "tag"), parts, (350, 80, 80, 80), strict=True):
        pattern = _HOST if kind == "host" else _PART
        if not pattern.match(part) or len(part) > limit or (kind == "namespace" and "." in part):
            return f"{kind} {part!r}"
    return None


def _entry(name: OllamaName, path: str, blobs_dir: str, blobs: dict[str, os.DirEntry]) -> tuple[StoreEntry, set[str]]:
    """The manifest read and its layers resolved; (entry, blob file names it references)."""
    refs: set[str] = set()
    try:
        data = read_json_object(path, MAX_MANIFEST_BYTES, "an Ollama manifest")
    except ModelError as exc:
        return StoreEntry(name, path, reason=str(exc)), refs
    try:
        layers = _layers(data)
    except ModelError as exc:
        return StoreEntry(name, path, reason=f"{path}: {exc}"), refs
    for layer in layers:
        refs.update(_names_of(layer[1]))
    config = data.get("config")
    if isinstance(config, dict) and isinstance(config.get("digest"), str):
        refs.update(_names_of(config["digest"]))
    by_type: dict[str, list[tuple[str, int]]] = {}
    for media_type, digest, size in layers:
        by_type.setdefault(media_type, []).append((digest, size))
    models = by_type.get(MODEL_LAYER, [])
    reason = _layout_reason(by_type, models)
    if reason is not None:
        return StoreEntry(name, path, reason=f"{path}: {reason}"), refs
    found: dict[str, Blob] = {}
    for media_type, what in ((MODEL_LAYER, "model"), (PROJECTOR_LAYER, "projector"), (DRAFT_LAYER, "draft")):
        if media_type not in by_type:
            continue
        digest, size = by_type[media_type][0]
        blob, why, download = _blob(digest, size, blobs_dir, blobs)
        if why is not None:
            return StoreEntry(name, path, model=found.get("model"), reason=f"{what} layer: {why}",
                              download=download), refs
        found[what] = blob
    return StoreEntry(name, path, model=found["model"], projector=found.get("projector"), draft=found.get("draft"),
                      quant=_quant(config, blobs_dir, blobs)), refs


def _layers(data: dict) -> list[tuple[str, str, int]]:
    """(mediaType, digest, size) per layer; raises ModelError naming the first bad field."""
    layers = data.get("layers")
    if not isinstance(layers, list):
        raise ModelError("`layers` must be a list")
    out = []
    for i, layer in enumerate(layers):
        if not isinstance(layer, dict):
            raise ModelError(f"layers[{i}] must be an object")
        media_type, digest, size = layer.get("mediaType"), layer.get("digest"), layer.get("size")
        if not isinstance(media_type, str):
            raise ModelError(f"layers[{i}].mediaType must be a string (got {media_type!r})")
        if not isinstance(digest, str) or blob_name(digest) is None:
            raise ModelError(f"layers[{i}].digest must be sha256:<64 hex digits> (got {str(digest)[:80]!r})")
        if isinstance(size, bool) or not isinstance(size, int) or not 0 <= size < MAX_LAYER_BYTES:
            raise ModelError(f"layers[{i}].size must be a byte count below {MAX_LAYER_BYTES} (got {str(size)[:40]})")
        out.append((media_type, digest, size))
    return out


def _layout_reason(by_type: dict[str, list[tuple[str, int]]], models: list[tuple[str, int]]) -> str | None:
    """Why the layer set is none llama-server can serve as one model, else None."""
    if not models:
        if TENSOR_LAYER in by_type:
            return ("safetensors tensor layers for Ollama's MLX engine, no GGUF model layer; "
                    "llama-server needs a GGUF")
        return f"no model layer ({MODEL_LAYER})"
    if len(models) > 1:
        return (f"{len(models)} model layers; llama-server finds the shards of a split GGUF by file name, "
                "which blobs do not have")
    if ADAPTER_LAYER in by_type:
        return "a LoRA adapter layer: the model is its base plus the adapter, and swapgen does not attach adapters"
    for media_type, what in ((PROJECTOR_LAYER, "projector"), (DRAFT_LAYER, "draft")):
        if len(by_type.get(media_type, ())) > 1:
            return f"{len(by_type[media_type])} {what} layers; llama-server takes one"
    return None


def _names_of(digest: str) -> tuple[str, ...]:
    """The blob file names a digest may have on disk (`sha256-<hex>`, older `sha256:<hex>`)."""
    name = blob_name(digest)
    return (name, name.replace("-", ":", 1)) if name else ()


def _blob(digest: str, size: int, blobs_dir: str,
          blobs: dict[str, os.DirEntry]) -> tuple[Blob | None, str | None, Download | None]:
    """(blob, None, None) when the layer's blob is whole, else (None, why, how far a pull came)."""
    name = blob_name(digest)
    entry = next((blobs[n] for n in _names_of(digest) if n in blobs), None)
    if entry is None:
        partial = blobs.get(name + PARTIAL_SUFFIX)
        if partial is not None:
            return None, (f"pull not finished ({partial.path} is still downloading or was interrupted; "
                          "`ollama pull` resumes it)"), None
        return None, f"blob {name} is missing from {blobs_dir}", None
    try:
        st = entry.stat()  # follows a symlinked blob: the size is the target's
    except OSError as exc:
        if entry.is_symlink():
            return None, f"{entry.path} is a broken symlink (its target {_link_target(entry.path)} is missing)", None
        return None, f"cannot stat {entry.path} ({exc.strerror or exc})", None
    if not statmod.S_ISREG(st.st_mode):
        return None, f"{entry.path} is not a file", None
    if st.st_size < size:
        return None, f"incomplete pull of {entry.path} ({gib_text(size)} expected)", Download(st.st_size, size)
    if st.st_size != size:
        return None, f"{entry.path} is {st.st_size} bytes, the manifest says {size} (a damaged or replaced blob)", None
    return Blob(entry.path, st), None, None


def _quant(config: object, blobs_dir: str, blobs: dict[str, os.DirEntry]) -> str:
    """The config blob's `file_type` (what `ollama show` prints as quantization), "" when unknown:
    it is a label, never a reason to skip."""
    if not isinstance(config, dict) or not isinstance(config.get("digest"), str):
        return ""
    entry = next((blobs[n] for n in _names_of(config["digest"]) if n in blobs), None)
    if entry is None:
        return ""
    try:
        file_type = read_json_object(entry.path, MAX_CONFIG_BYTES, "an Ollama config blob").get("file_type")
    except ModelError:
        return ""
    return file_type.strip().upper() if isinstance(file_type, str) and _PART.match(file_type.strip()) else ""


def _link_target(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return "?"
