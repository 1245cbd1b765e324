"""Persistent metadata cache in `cache_dir`, so a no-op run reads no model file.

Keyed by path; an entry is reused while (size, mtime_ns) match, or — after a `touch`, a copy
without `-p`, an rsync without `-t` — while the size matches and an xxhash of the first MiB is
unchanged. Failed reads are cached too (with their reason), so a corrupt file costs one read.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any, TextIO

import attrs
import xxhash

from autogen import GENERATOR_VERSION
from autogen.discovery import HeaderInfo
from autogen.errors import ModelError
from autogen.fsutil import write_if_changed
from autogen.metadata import ModelMeta

CACHE_FILE = "metadata.json"
HEAD_BYTES = 1 << 20
#: Changes whenever the stored shape changes: old caches are then ignored, not misread.
_FORMAT = f"{GENERATOR_VERSION}:" + ",".join(a.name for a in attrs.fields(ModelMeta))


def head_hash(path: str) -> str:
    with open(path, "rb") as f:
        return xxhash.xxh3_64_hexdigest(f.read(HEAD_BYTES))


def _meta_to_json(meta: ModelMeta) -> dict[str, Any]:
    return attrs.asdict(meta, recurse=False)


def _meta_from_json(data: dict[str, Any]) -> ModelMeta:
    return ModelMeta(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})


def _read_gguf(path: str) -> tuple[ModelMeta, int]:
    from autogen.gguf_header import GGUFError, read_gguf_header
    from autogen.gguf_meta import meta_from_gguf

    try:
        header = read_gguf_header(path)
    except GGUFError as exc:
        raise ModelError(str(exc)) from None
    return meta_from_gguf(header), header.expected_file_size


def _read_hf(config_path: str) -> tuple[ModelMeta, int]:
    from autogen.hf_config import meta_from_hf_config, read_config_json

    return meta_from_hf_config(read_config_json(config_path)), 0


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
        self.entries: dict[str, dict[str, Any]] = {}
        self.used: set[str] = set()
        self.dirty = False
        #: Files actually opened this run (benchmarks and tests read this).
        self.reads = 0
        self.progress = progress if progress is not None else Progress(sys.stderr)
        try:
            with open(self.path, encoding="utf-8") as f:
                data = json.load(f)
            if data.get("format") == _FORMAT and isinstance(data.get("entries"), dict):
                self.entries = data["entries"]
        except (OSError, ValueError, AttributeError):
            self.entries = {}

    def _lookup(self, path: str, size: int, mtime_ns: int, reader) -> dict[str, Any]:
        self.used.add(path)
        entry = self.entries.get(path)
        if entry is not None and entry["size"] == size:
            if entry["mtime_ns"] == mtime_ns:
                return entry
            try:
                if entry["head"] == head_hash(path):
                    entry["mtime_ns"] = mtime_ns
                    self.dirty = True
                    return entry
            except OSError:
                pass
        self.reads += 1
        self.progress.update(self.reads, len(self.used))
        entry = {"size": size, "mtime_ns": mtime_ns, "head": "", "meta": None, "error": None, "expected": 0}
        try:
            entry["head"] = head_hash(path)
            meta, expected = reader(path)
            entry["meta"] = _meta_to_json(meta)
            entry["expected"] = expected
        except ModelError as exc:
            entry["error"] = str(exc)
        except OSError as exc:
            entry["error"] = f"cannot read: {exc.strerror or exc}"
        self.entries[path] = entry
        self.dirty = True
        return entry

    def gguf(self, path: str, size: int, mtime_ns: int) -> HeaderInfo:
        """The discovery probe: arch, expected size or the read error."""
        entry = self._lookup(path, size, mtime_ns, _read_gguf)
        arch = (entry["meta"] or {}).get("arch", "")
        return HeaderInfo(arch=arch, expected_size=entry["expected"], error=entry["error"])

    def meta(self, path: str, *, hf: bool = False) -> ModelMeta:
        """Metadata of a GGUF file, or of an HF folder (its config.json). Raises ModelError."""
        target = os.path.join(path, "config.json") if hf else path
        try:
            st = os.stat(target)
        except OSError as exc:
            raise ModelError(f"{target}: cannot read ({exc.strerror or exc})") from None
        entry = self._lookup(target, st.st_size, st.st_mtime_ns, _read_hf if hf else _read_gguf)
        if entry["error"] is not None:
            raise ModelError(entry["error"])
        return _meta_from_json(entry["meta"])

    def save(self, *, prune: bool = True) -> None:
        """Write the cache if anything changed; entries not used this run are dropped."""
        self.progress.done(self.reads, len(self.used))
        if prune:
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
