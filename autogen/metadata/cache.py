"""Persistent metadata cache in `cache_dir`, so a no-op run reads no model file.

One signature store, keyed by path: (size, mtime_ns, head), head being an xxhash of the first
MiB. An entry is current while (size, mtime_ns) match, or — after a `touch`, a copy without
`-p`, an rsync without `-t` — while the size matches and the head is unchanged (then the new
mtime is recorded, so the file is not read again). Beside the signature an entry keeps what was
parsed from the file, per kind: a GGUF header ("gguf"), an HF config.json's metadata ("hf"),
discovery's reading of it ("config") or of a safetensors header ("safetensors"), a
whisper.cpp model's header ("whisper"). The doit file checker asks the same store for heads
(`MetaCache.head`), and discovery records the head of every model input, so a touched
safetensors file is read once, not on every later run. Failed reads are cached too (with their
reason), so a corrupt file costs one read.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

import attrs
import xxhash

from autogen import GENERATOR_VERSION
from autogen.errors import ModelError
from autogen.fsutil import write_if_changed
from autogen.metadata.gguf_header import GGUFError, read_gguf_header
from autogen.metadata.gguf_meta import meta_from_gguf
from autogen.metadata.hf_config import meta_from_config_file
from autogen.metadata.model_meta import ModelMeta
from autogen.metadata.probes import ConfigInfo, HeaderInfo, read_config_info, read_safetensors_info, read_whisper_info
from autogen.metadata.whisper_header import WhisperShape
from autogen.vision_tower import VisionTower

CACHE_FILE = "metadata.json"
HEAD_BYTES = 1 << 20
#: Changes whenever the stored shape changes: old caches are then ignored, not misread.
_FORMAT = (f"6:{GENERATOR_VERSION}:" + ",".join(a.name for a in attrs.fields(ModelMeta))
           + ":" + ",".join(a.name for a in attrs.fields(VisionTower))
           + ":" + ",".join(a.name for a in attrs.fields(WhisperShape))
           + ":" + ",".join(a.name for a in attrs.fields(ConfigInfo))
           + ":" + ",".join(a.name for a in attrs.fields(HeaderInfo)))


def head_hash(path: str) -> str:
    with open(path, "rb") as f:
        return xxhash.xxh3_64_hexdigest(f.read(HEAD_BYTES))


def _meta_to_json(meta: ModelMeta) -> dict[str, Any]:
    """Only the fields that differ from their default: most are 0 for any one model, and a
    no-op run rebuilds every record from this. A projector's vision tower and a whisper.cpp
    model's shape nest as dicts."""
    data = attrs.asdict(meta, recurse=False, filter=lambda a, v: v != a.default)
    for name, nested in (("vision_tower", meta.vision_tower), ("whisper", meta.whisper)):
        if nested is not None:
            data[name] = attrs.asdict(nested)
    return data


def _meta_from_json(data: dict[str, Any]) -> ModelMeta:
    fields = {k: tuple(v) if type(v) is list else v for k, v in data.items()}
    if "vision_tower" in fields:
        fields["vision_tower"] = VisionTower(**fields["vision_tower"])
    if "whisper" in fields:
        fields["whisper"] = WhisperShape(**fields["whisper"])
    return ModelMeta(**fields)


def _read_gguf(path: str) -> dict[str, Any]:
    try:
        header = read_gguf_header(path)
        return {"meta": _meta_to_json(meta_from_gguf(header)), "expected": header.expected_file_size, "error": None}
    except (GGUFError, ModelError) as exc:
        return {"meta": None, "expected": 0, "error": str(exc)}


def _read_hf(config_path: str) -> dict[str, Any]:
    try:
        return {"meta": _meta_to_json(meta_from_config_file(config_path)), "error": None}
    except ModelError as exc:
        return {"meta": None, "error": str(exc)}


def _read_whisper(path: str) -> dict[str, Any]:
    info = read_whisper_info(path)
    return {"meta": _meta_to_json(info.meta) if info.meta is not None else None, "expected": info.expected_size,
            "error": info.error}


def _read_config(path: str) -> dict[str, Any]:
    return attrs.asdict(read_config_info(path))


def _read_safetensors(path: str) -> dict[str, Any]:
    return attrs.asdict(read_safetensors_info(path))


#: Kind → reader: path → JSON-able result, reporting failures in its "error" field (never raising).
_READERS: dict[str, Callable[[str], dict[str, Any]]] = {"gguf": _read_gguf, "hf": _read_hf, "config": _read_config,
                                                       "safetensors": _read_safetensors, "whisper": _read_whisper}


class Progress:
    """`read N model headers (M files checked, R/s)` on one rewritten stderr line, shown only
    on a terminal and only once a scan has taken `delay` seconds (a warm run stays silent)."""

    def __init__(self, stream: TextIO, *, delay: float = 1.0, interval: float = 0.25):
        self.stream = stream
        try:
            self.enabled = stream.isatty()
        except (AttributeError, ValueError):
            self.enabled = False
        self.delay, self.interval = delay, interval
        self.start = self.last = time.monotonic()
        self.shown = False

    def _line(self, reads: int, seen: int, now: float) -> str:
        rate = reads / max(now - self.start, 1e-9)
        return f"\rswapgen: read {reads} model headers ({seen} files checked, {rate:.0f}/s)"

    def update(self, reads: int, seen: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self.start < self.delay or (self.shown and now - self.last < self.interval):
            return
        self.stream.write(self._line(reads, seen, now))
        self.stream.flush()
        self.shown, self.last = True, now

    def done(self, reads: int, seen: int) -> None:
        if self.shown:
            self.stream.write(self._line(reads, seen, time.monotonic()) + "\n")
            self.stream.flush()
            self.shown = False


class MetaCache:
    """Load once per run, look up per file, save once (atomically, only when changed)."""

    def __init__(self, cache_dir: str, *, progress: Progress | None = None):
        self.path = os.path.join(cache_dir, CACHE_FILE)
        self._entries: dict[str, dict[str, Any]] | None = None
        self.used: set[str] = set()
        self.dirty = False
        #: Files parsed this run (benchmarks and tests read this).
        self.reads = 0
        self.progress = progress if progress is not None else Progress(sys.stderr)

    @property
    def entries(self) -> dict[str, dict[str, Any]]:
        """The stored entries, read on first use: a run whose walk replays every folder
        (`discovery.walk_memo`) never reads them."""
        if self._entries is None:
            self._entries = {}
            try:
                with open(self.path, encoding="utf-8") as f:
                    data = json.load(f)
                if data.get("format") == _FORMAT and isinstance(data.get("entries"), dict):
                    self._entries = data["entries"]
            except (OSError, ValueError, AttributeError):
                pass
        return self._entries

    def keep(self, paths) -> None:
        """Paths used this run without being looked up (their folders were replayed): kept when
        the cache is pruned."""
        self.used.update(paths)

    def signature(self, path: str) -> tuple[int | None, str | None]:
        """(size, head hash) of a file as signed (`head`), signing it when it is not yet;
        (None, None) when it cannot be read."""
        entry = self.entries.get(path)
        if entry is None or not entry["head"]:
            try:
                st = os.stat(path)
                self.head(path, st.st_size, st.st_mtime_ns)
            except (OSError, ValueError):
                return None, None
            entry = self.entries[path]
        self.used.add(path)
        return entry["size"], entry["head"]

    def _current(self, path: str, size: int, mtime_ns: int) -> dict[str, Any] | None:
        entry = self.entries.get(path)
        self.used.add(path)
        return entry if entry is not None and entry["size"] == size and entry["mtime_ns"] == mtime_ns else None

    def _signed(self, path: str, size: int, mtime_ns: int) -> dict[str, Any]:
        """The path's entry with its head known, reading the head only when (size, mtime_ns)
        are new; a changed head drops what was parsed. Raises OSError."""
        entry = self._current(path, size, mtime_ns)
        if entry is not None and entry["head"]:
            return entry
        head = head_hash(path)
        entry = self.entries.get(path)
        if entry is None or entry["size"] != size or entry["head"] != head:
            entry = self.entries[path] = {"size": size, "mtime_ns": mtime_ns, "head": head}
        entry["mtime_ns"] = mtime_ns
        self.dirty = True
        return entry

    def head(self, path: str, size: int, mtime_ns: int) -> str:
        """xxhash of the file's first MiB at this (size, mtime_ns); read only when unknown.
        The doit checker's and discovery's signer. Raises OSError."""
        return self._signed(path, size, mtime_ns)["head"]

    def _lookup(self, path: str, size: int, mtime_ns: int, kind: str) -> dict[str, Any]:
        entry = self._current(path, size, mtime_ns)
        if entry is not None and kind in entry:
            return entry[kind]
        try:
            entry = self._signed(path, size, mtime_ns)
        except OSError:  # unreadable: the reader says why, and the reason is cached
            entry = self.entries[path] = {"size": size, "mtime_ns": mtime_ns, "head": ""}
        if kind not in entry:
            self.reads += 1
            self.progress.update(self.reads, len(self.used))
            entry[kind] = _READERS[kind](path)
            self.dirty = True
        return entry[kind]

    def gguf(self, path: str, size: int, mtime_ns: int) -> HeaderInfo:
        """The discovery probe: arch, expected size, tensor count or the read error."""
        found = self._lookup(path, size, mtime_ns, "gguf")
        meta = found["meta"] or {}
        return HeaderInfo(arch=meta.get("arch", ""), expected_size=found["expected"], error=found["error"],
                          tensor_count=meta.get("tensor_count", 0) if found["meta"] is not None else None,
                          vision_tensors=meta.get("vision_tensor_count", 0), general_type=meta.get("general_type", ""),
                          adapter_type=meta.get("adapter_type", ""),
                          meta=_meta_from_json(found["meta"]) if found["meta"] is not None else None)

    def hf_meta(self, path: str, size: int, mtime_ns: int) -> HeaderInfo:
        """Discovery's reading of an HF folder's config.json as metadata (`HeaderInfo.meta`)."""
        found = self._lookup(path, size, mtime_ns, "hf")
        return HeaderInfo(error=found["error"], meta=_meta_from_json(found["meta"]) if found["meta"] is not None
                          else None)

    def whisper(self, path: str, size: int, mtime_ns: int) -> HeaderInfo:
        """Discovery's whisper.cpp probe: the model's shape as metadata, and the bytes the file
        has at least (`WhisperShape.least_file_bytes`)."""
        found = self._lookup(path, size, mtime_ns, "whisper")
        return HeaderInfo(arch="whisper" if found["meta"] is not None else "", expected_size=found["expected"],
                          error=found["error"], meta=_meta_from_json(found["meta"]) if found["meta"] is not None
                          else None)

    def safetensors(self, path: str, size: int, mtime_ns: int) -> HeaderInfo:
        """Discovery's safetensors probe: the size the header says the file must have."""
        return HeaderInfo(**self._lookup(path, size, mtime_ns, "safetensors"))

    def config(self, path: str, size: int, mtime_ns: int) -> ConfigInfo:
        """Discovery's config probe: an HF folder's detection reason and quant label."""
        return ConfigInfo(**self._lookup(path, size, mtime_ns, "config"))

    def meta(self, path: str, *, hf: bool = False, whisper: bool = False) -> ModelMeta:
        """Metadata of a GGUF file, of an HF folder (its config.json) or of a whisper.cpp model.
        Raises ModelError."""
        target = os.path.join(path, "config.json") if hf else path
        try:
            st = os.stat(target)
        except OSError as exc:
            raise ModelError(f"{target}: cannot read ({exc.strerror or exc})") from None
        found = self._lookup(target, st.st_size, st.st_mtime_ns, "hf" if hf else "whisper" if whisper else "gguf")
        if found["error"] is not None:
            raise ModelError(found["error"])
        return _meta_from_json(found["meta"])

    def save(self, *, prune: bool = True) -> None:
        """Write the cache if anything changed; entries not used this run are dropped."""
        self.progress.done(self.reads, len(self.used))
        if prune and self._entries is not None:
            stale = set(self.entries) - self.used
            for path in stale:
                del self.entries[path]
            self.dirty |= bool(stale)
        if not self.dirty:
            return
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        text = json.dumps({"format": _FORMAT, "entries": self.entries}, sort_keys=True, separators=(",", ":"))
        write_if_changed(self.path, text.encode(), durable=False)
        self.dirty = False
