"""Walk the model roots and turn files and folders into `ModelRow`s.

Rules: reference `spec-discovery-generate.md` §2 and `spec-backends-vllm-hf.md` §5–6, with
PRODUCT §4's decisions: symlinked roots and folders are followed (loops are detected and
reported), hidden folders and the HF cache's `blobs/` are not walked, unreadable entries are
reported and never fatal. Projectors (GGUF arch `clip`), drafts and codecs are paired with the
models of their folder and never listed as models. A split set is one row: without shard 1
it is named after the set and skipped as missing it, and every shard's header is read (through
the metadata cache; headers of shards 2+ are tiny), so a shard cut short makes the set an
incomplete download. Problems are collected, not raised.
"""

from __future__ import annotations

import os
import re
import stat as statmod
from typing import Callable

import attrs
import xxhash
from attrs import field, frozen

from autogen.metadata.probes import (MODELOPT_CONFIG, ConfigInfo, ConfigProbe, HeaderInfo, HeaderProbe,
                                     read_config_info)
from autogen.discovery.rows import ModelRow
from autogen.ids import slugify
from autogen.numfmt import GIB

# File-name rules, in the order they are tried (reference spec-discovery-generate §2.2).
SAM_NAME = re.compile(r"(?i)(sam2|sam3|edgetam|hiera)")
BIREFNET_NAME = re.compile(r"(?i)birefnet")
FAST_MTP_NAME = re.compile(r"(?i)(^|[-_.])fast[-_.]?mtp([-_.]|\.gguf$)")
MTP_DRAFT_NAME = re.compile(r"(?i)^mtp[-_.]")
DFLASH_DRAFT_NAME = re.compile(r"(?i)dflash")
CODEC_NAME = re.compile(r"(?i)tokenizer-?\d+hz|codec")
DIFFUSION_COMPONENT_NAME = re.compile(
    r"(?i)(^|[-_.])(t5xxl|t5[-_]?v1[-_.]?1|umt5|clip[-_]?[lg]|text[-_]?encoder|ae|vae|taesd[a-z0-9_]*)"
    r"([-_.]|\.gguf$)|[-_.](encoder|with[-_]?proj)([-_.]|\.gguf$)"
)
SHARD_NAME = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$")
QUANT_TOKEN = re.compile(
    r"(?i)[-_.](I?Q\d+(?:_[A-Z0-9]+)*|TQ\d+(?:_[A-Z0-9]+)*|(?:MX|NV)?FP\d+(?:_[A-Z0-9]+)*|BF\d+|F\d+)"
    r"(?:[._-]|\.gguf$)"
)
#: GGUF architectures that are never served as models: projectors pair, encoders drop.
PROJECTOR_ARCHS = frozenset({"clip"})
ENCODER_ARCHS = frozenset({"t5encoder", "umt5", "t5"})
#: Characters kept in ids; anything else becomes "-" (ids are router keys and URL parts).
ID_UNSAFE = re.compile(r"[^\w.+-]+")


#: Records a model input's signature in the metadata cache, for the doit file checker:
#: (path, size, mtime_ns) -> its head hash. May raise OSError.
Signer = Callable[[str, int, int], str]


@frozen
class Ignored:
    """A file or folder that looked like a model and is not one (shown by `swapgen list`)."""

    path: str
    reason: str


@frozen
class Discovery:
    models: tuple[ModelRow, ...]
    #: Folders rejected as models (BERT, T5, …), dropped encoders; informational.
    ignored: tuple[Ignored, ...] = ()
    #: Unreadable folders, symlink loops, missing roots: reported, never fatal.
    problems: tuple[str, ...] = ()
    #: (folder, why) per folder that could not be listed: its models, if any, are unknown.
    unreadable: tuple[tuple[str, str], ...] = ()
    #: Per-model reasons found while discovering (missing shard, bad config.json, incomplete
    #: download, unreadable header); keyed by model id, becomes a SKIPPED line.
    row_errors: dict[str, str] = field(factory=dict, hash=False)


def quant_from_name(name: str) -> str:
    m = QUANT_TOKEN.search(name)
    return m.group(1).upper() if m else ""


def _contains_part(text: str, part: str) -> bool:
    return re.search(rf"(?i)(^|[-_.]){re.escape(part)}([-_.]|$)", text) is not None


def clean_id(text: str) -> str:
    cleaned = ID_UNSAFE.sub("-", text.lower()).strip("-.")
    return cleaned or "model"


def gguf_ids(name: str) -> tuple[str, str]:
    """(id, quant) from a shard-stripped GGUF file name (reference §2.3)."""
    quant = quant_from_name(name)
    base = name[: -len(".gguf")] if name.lower().endswith(".gguf") else name
    if quant and base.lower().endswith(quant.lower()) and len(base) > len(quant) and base[-len(quant) - 1] in "-_.":
        base = base[: -len(quant) - 1]
    if base.lower().endswith("-gguf"):
        base = base[: -len("-gguf")]
    base_id = clean_id(base)
    if quant and not _contains_part(base_id, quant.lower()):
        return f"{base_id}-{quant.lower()}", quant
    return base_id, quant


def _hf_cache_repo(folder: str) -> tuple[str, str] | None:
    """`models--owner--repo/snapshots/<rev>` → (owner, repo) (reference spec-backends §6.3)."""
    parent = os.path.dirname(folder)
    grand = os.path.basename(os.path.dirname(parent))
    if os.path.basename(parent).lower() != "snapshots" or not grand.startswith("models--"):
        return None
    owner, sep, repo = grand[len("models--"):].partition("--")
    return (owner, repo) if sep and owner and repo else None


def skipped_folder(name: str, parent: str) -> bool:
    """Folders discovery never enters: hidden ones and the HF cache's `blobs/` (its files are
    reached through the snapshots' symlinks)."""
    return name.startswith(".") or (name == "blobs" and os.path.basename(parent).startswith("models--"))


def walk_signature(roots: tuple[str, ...]) -> str:
    """A digest of everything discovery can see under `roots`: every entry it would visit, by
    path, type, size, mtime and inode (symlinks followed, as discovery follows them). Equal
    digests mean discovery would find the same rows (file contents are trusted by size and
    mtime, as doit and the metadata cache trust them)."""
    digest = xxhash.xxh3_128()
    visited: set[tuple[int, int]] = set()

    def walk(folder: str) -> None:
        try:
            st = os.stat(folder)
            if (st.st_dev, st.st_ino) in visited:
                digest.update(f"loop\0{folder}\n".encode("utf-8", "surrogatepass"))
                return
            visited.add((st.st_dev, st.st_ino))
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            digest.update(f"error\0{folder}\0{exc.errno}\n".encode("utf-8", "surrogatepass"))
            return
        for entry in entries:
            try:
                est = entry.stat()
            except OSError as exc:
                digest.update(f"error\0{entry.path}\0{exc.errno}\n".encode("utf-8", "surrogatepass"))
                continue
            if statmod.S_ISDIR(est.st_mode):  # a folder stands for its entries, not its own times
                digest.update(f"{entry.path}\0dir\n".encode("utf-8", "surrogatepass"))
                if not skipped_folder(entry.name, folder):
                    walk(entry.path)
                continue
            line = f"{entry.path}\0{est.st_mode}\0{est.st_size}\0{est.st_mtime_ns}\0{est.st_ino}\n"
            digest.update(line.encode("utf-8", "surrogatepass"))

    for root in roots:
        digest.update(f"root\0{root}\n".encode("utf-8", "surrogatepass"))
        walk(os.path.realpath(root) if os.path.islink(root) else root)
    return digest.hexdigest()


class _Walker:
    def __init__(self, probe: HeaderProbe, config: ConfigProbe, sign: Signer | None):
        self.probe = probe
        self.config = config
        self.sign = sign
        self.rows: list[ModelRow] = []
        #: (st_dev, st_ino) of each row's path: the same file reached twice is one model.
        self.row_keys: list[tuple[int, int]] = []
        self.ignored: list[Ignored] = []
        self.problems: list[str] = []
        self.unreadable: list[tuple[str, str]] = []
        self.row_errors: list[tuple[ModelRow, str]] = []
        self.visited: dict[tuple[int, int], str] = {}

    def _add(self, row: ModelRow, st: os.stat_result, stats: dict[str, os.stat_result]) -> ModelRow:
        """Record the row, and the signature of each of its inputs (the doit checker's file_deps)."""
        self.rows.append(row)
        self.row_keys.append((st.st_dev, st.st_ino))
        for path in row.inputs if self.sign is not None else ():
            est = stats.get(path)
            if est is not None:
                try:
                    self.sign(path, est.st_size, est.st_mtime_ns)
                except OSError:
                    pass  # unreadable: the checker meets it and says so
        return row

    # -- folders ------------------------------------------------------------------------------

    def walk(self, folder: str) -> None:
        try:
            st = os.stat(folder)
        except OSError as exc:
            self.problems.append(f"{folder}: cannot read folder ({exc.strerror or exc})")
            self.unreadable.append((folder, exc.strerror or str(exc)))
            return
        key = (st.st_dev, st.st_ino)
        if key in self.visited:
            self.problems.append(f"{folder}: symlink loop (already walked as {self.visited[key]}); not walked again")
            return
        self.visited[key] = folder
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            self.problems.append(f"{folder}: cannot list folder ({exc.strerror or exc})")
            self.unreadable.append((folder, exc.strerror or str(exc)))
            return
        files: list[tuple[os.DirEntry, os.stat_result]] = []
        subdirs: list[str] = []
        for entry in entries:
            try:
                est = entry.stat()  # follows symlinks: sizes come from the target
            except OSError as exc:
                if entry.is_symlink():
                    self.problems.append(f"{entry.path}: broken symlink ({exc.strerror or exc})")
                else:
                    self.problems.append(f"{entry.path}: cannot stat ({exc.strerror or exc})")
                continue
            if statmod.S_ISDIR(est.st_mode):
                if skipped_folder(entry.name, folder):
                    continue
                subdirs.append(entry.path)
            elif statmod.S_ISREG(est.st_mode):
                files.append((entry, est))
        self._hf_folder(folder, st, files)
        self._gguf_files(folder, files)
        for sub in subdirs:
            self.walk(sub)

    def _hf_folder(self, folder: str, folder_st: os.stat_result,
                   files: list[tuple[os.DirEntry, os.stat_result]]) -> None:
        names = {e.name.lower(): (e, st) for e, st in files}
        weights = [(e, st) for e, st in files if e.name.lower().endswith(".safetensors")]
        if "config.json" not in names or not weights:
            return
        if any(e.name.lower().endswith(".gguf") for e, _ in files):
            return  # a conversion kept beside its source: the gguf is the model (seed rule 3)
        weight_bytes = sum(st.st_size for _, st in weights)
        if weight_bytes <= 0:
            return
        stats = {e.path: st for e, st in files}
        config_entry, config_st = names["config.json"]
        cache = _hf_cache_repo(folder)
        publisher, base = cache if cache else (os.path.basename(os.path.dirname(folder)), os.path.basename(folder))
        inputs = tuple(sorted([config_entry.path] + [e.path for e, _ in weights]))
        info = self.config(config_entry.path, config_st.st_size, config_st.st_mtime_ns)
        if info.error is not None:
            row = self._add(ModelRow(id=clean_id(base), format="hf", path=folder, size_bytes=weight_bytes,
                                     publisher=publisher, repo=base, inputs=inputs), folder_st, stats)
            self.row_errors.append((row, info.error))
            return
        if info.reason is not None:
            self.ignored.append(Ignored(folder, info.reason))
            return
        quant = info.quant
        if MODELOPT_CONFIG in names:  # ModelOpt declares its quantisation beside config.json
            entry, st = names[MODELOPT_CONFIG]
            quant = self.config(entry.path, st.st_size, st.st_mtime_ns).quant or quant
            inputs = tuple(sorted(inputs + (entry.path,)))
        model_id = clean_id(base)
        if quant and not _contains_part(model_id, quant.lower()):
            model_id = f"{model_id}-{quant.lower()}"
        self._add(ModelRow(id=model_id, format="hf", path=folder, quant=quant, size_bytes=weight_bytes,
                           publisher=publisher, repo=base, inputs=inputs), folder_st, stats)

    # -- files --------------------------------------------------------------------------------

    def _gguf_files(self, folder: str, files: list[tuple[os.DirEntry, os.stat_result]]) -> None:
        stats = {e.path: st for e, st in files}
        names = {e.name for e, _ in files}
        #: (file name, stat, header) per model: a split set's shard 1, else (headless) its lowest shard.
        candidates: list[tuple[str, os.stat_result, HeaderInfo | None]] = []
        headless: dict[str, tuple[str, os.stat_result]] = {}
        draft = codec = mmproj = None
        mmproj_bytes = 0
        for entry, st in files:
            name = entry.name
            lower = name.lower()
            if lower.endswith(".ggml") and SAM_NAME.search(name):
                stem = clean_id(name[: -len(".ggml")].replace("_", "-"))
                self._add(ModelRow(id=stem, format="sam", path=entry.path, size_bytes=st.st_size,
                                   publisher=os.path.basename(os.path.dirname(folder)),
                                   repo=os.path.basename(folder), inputs=(entry.path,)), st, stats)
                continue
            if not lower.endswith(".gguf") or BIREFNET_NAME.search(name) or FAST_MTP_NAME.search(name):
                continue
            if MTP_DRAFT_NAME.search(name) or DFLASH_DRAFT_NAME.search(name):
                draft = entry.path
                continue
            if CODEC_NAME.search(name):
                codec = entry.path
                continue
            if DIFFUSION_COMPONENT_NAME.search(name):
                self.ignored.append(Ignored(entry.path, "diffusion component (encoder/VAE), not a model"))
                continue
            shard = SHARD_NAME.search(name)
            if shard and int(shard.group(2)) > 1 and shard.group(1) != "00001":
                first = _shard_names(name[: shard.start()], int(shard.group(2)))[0]
                if first not in names:
                    headless.setdefault(first, (name, st))  # files come sorted: the lowest shard
                continue  # shard 1 represents the set
            info = self.probe(entry.path, st.st_size, st.st_mtime_ns)
            arch = info.arch.lower()
            if arch in PROJECTOR_ARCHS:
                mmproj, mmproj_bytes = entry.path, st.st_size
                continue
            if arch in ENCODER_ARCHS:
                self.ignored.append(Ignored(entry.path, f"text encoder (arch {arch}), not a model"))
                continue
            candidates.append((name, st, info))
        candidates += [(name, st, None) for name, st in headless.values()]
        sidecars = tuple(p for p in (mmproj, draft, codec) if p)
        for name, st, info in candidates:
            path = os.path.join(folder, name)
            shard = SHARD_NAME.search(name)
            id_name = name[: shard.start()] + ".gguf" if shard else name
            shards: tuple[str, ...] = ()
            present: tuple[str, ...] = (path,)
            if shard and int(shard.group(2)) > 1:
                shards = tuple(os.path.join(folder, n) for n in _shard_names(name[: shard.start()], int(shard.group(2))))
                present = tuple(s for s in shards if s in stats)
            missing = tuple(s for s in shards if s not in stats)
            model_id, quant = gguf_ids(id_name)
            row = ModelRow(id=model_id, format="gguf", path=path, quant=quant,
                           size_bytes=sum(stats[s].st_size for s in present),
                           publisher=os.path.basename(os.path.dirname(folder)), repo=os.path.basename(folder),
                           shards=shards, missing_shards=missing, mmproj=mmproj, mmproj_bytes=mmproj_bytes,
                           draft=draft, codec=codec, inputs=tuple(dict.fromkeys(present + sidecars)))
            self._add(row, st, stats)
            reason = self._gguf_reason(row, info, stats)
            if reason is not None:
                self.row_errors.append((row, reason))

    def _gguf_reason(self, row: ModelRow, info: HeaderInfo | None, stats: dict[str, os.stat_result]) -> str | None:
        """Why a GGUF model or split set cannot be served: its header unreadable, shards missing,
        or any file shorter than its header says (every shard's header is probed: a download
        cut short in shard 3 leaves shard 1 whole)."""
        if info is not None and info.error is not None:
            return info.error
        if row.missing_shards:
            shown = ", ".join(os.path.basename(m) for m in row.missing_shards)
            return f"split set is missing {len(row.missing_shards)} of {len(row.shards)} shards ({shown})"
        have = want = 0
        for path in row.shards or (row.path,):
            st = stats[path]
            found = info if path == row.path else self.probe(path, st.st_size, st.st_mtime_ns)
            if found.error is not None:
                return f"{os.path.basename(path)}: {found.error}"
            have += st.st_size
            want += max(found.expected_size, st.st_size)
        if want > have:
            return f"incomplete download ({have / GIB:.2f} of {want / GIB:.2f} GB)"
        return None


def _shard_names(prefix: str, total: int) -> list[str]:
    """Every file name of a split set, in order (llama.cpp's `llama_split_path`)."""
    return [f"{prefix}-{i:05d}-of-{total:05d}.gguf" for i in range(1, total + 1)]


def _uncached_config(path: str, size: int, mtime_ns: int) -> ConfigInfo:
    return read_config_info(path)


def assign_unique_ids(rows: list[ModelRow]) -> list[ModelRow]:
    """Resolve id clashes deterministically (reference §5.3): sort by (id, publisher, path); a
    taken id gets `-<publisher>`, then `-<publisher>-<repo>`, then `-2`, `-3`, …"""
    taken: set[str] = set()
    out: list[ModelRow] = []
    for row in sorted(rows, key=lambda r: (r.id, r.publisher, r.path)):
        if row.id not in taken:
            taken.add(row.id)
            out.append(row)
            continue
        candidates = [row.id]
        if slugify(row.publisher):
            candidates.append(f"{row.id}-{slugify(row.publisher)}")
        if slugify(row.publisher + "-" + row.repo):
            candidates.append(f"{row.id}-{slugify(row.publisher + '-' + row.repo)}")
        chosen = next((c for c in candidates if c not in taken), None)
        n = 2
        while chosen is None:
            if f"{candidates[-1]}-{n}" not in taken:
                chosen = f"{candidates[-1]}-{n}"
            n += 1
        taken.add(chosen)
        out.append(row if chosen == row.id else attrs.evolve(row, id=chosen))
    return out


def discover(roots: tuple[str, ...], probe: HeaderProbe, config: ConfigProbe = _uncached_config,
             sign: Signer | None = None) -> Discovery:
    """Walk every root (in order; a path seen under an earlier root wins). The pipeline passes
    its metadata cache's `gguf`, `config` and `head`; `sign` records each model input's head
    there, for the doit file checker."""
    walker = _Walker(probe, config, sign)
    for root in roots:
        if not os.path.exists(root):
            walker.problems.append(f"{root}: model root does not exist")
            continue
        walker.walk(os.path.realpath(root) if os.path.islink(root) else root)
    unique: dict[tuple[int, int], ModelRow] = {}
    for row, key in zip(walker.rows, walker.row_keys):
        unique.setdefault(key, row)
    renamed = assign_unique_ids(list(unique.values()))
    by_path = {r.path: r for r in renamed}
    errors = {by_path[row.path].id: reason for row, reason in walker.row_errors if row.path in by_path}
    return Discovery(
        models=tuple(sorted(renamed, key=lambda r: r.id)),
        ignored=tuple(walker.ignored),
        problems=tuple(walker.problems),
        unreadable=tuple(walker.unreadable),
        row_errors=errors,
    )
