"""Walk the model roots and turn files and folders into `ModelRow`s.

Rules: docs/maintainers/discovery.md (the walk, file-name rules, split sets, HF folders), with these
decisions: symlinked roots and folders are followed (loops are detected and
reported), hidden folders and the HF cache's `blobs/` are not walked, unreadable entries are
reported and never fatal. Projectors (GGUF arch `clip`), drafts and codecs are paired with the
models of their folder and never listed as models. A split set is one row: without shard 1
it is named after the set and skipped as missing it, and every shard's header is read (through
the metadata cache; headers of shards 2+ are tiny), so a shard cut short makes the set an
incomplete download. Problems are collected, not raised.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable

from attrs import frozen

from autogen.discovery.hf_weights import check_weights, incomplete_text, names_text, still_written
from autogen.discovery.hub_cache import (
    hf_cache_repo,
    incomplete_blobs,
    is_snapshots_folder,
    repo_label,
    served_revision,
)
from autogen.discovery.ledger import Ledger, id_changes
from autogen.discovery.naming import (
    assign_unique_ids,
    clean_id,
    gguf_ids,
    quant_from_name,
    repo_name,
    whisper_id,
    with_quant,
)
from autogen.discovery.ollama_store import (
    BLOBS,
    MANIFESTS,
    OLLAMA_ONLY_ARCHS,
    PACKED_VISION,
    Blob,
    StoreEntry,
    is_store,
    scan_store,
)
from autogen.discovery.pairing import DraftFacts, FolderProjector, choose_projector, draft_facts, unpaired_projector
from autogen.discovery.rows import Download, ModelRow
from autogen.discovery.rules import (
    SHARD_NAME,
    START_BYTES,
    VOCAB_ONLY,
    FileFacts,
    Verdict,
    classify,
    encoder_of,
    ggml_magic,
)
from autogen.discovery.tree import AdapterFile, Discovery, Folder, Ignored, Stat, folders, root_folder, scanned
from autogen.discovery.walk_memo import FolderRecord, WalkMemo, replayable, signature
from autogen.discovery.whisper_files import pair_folder
from autogen.metadata.gguf_keys import PROJECTOR_ARCH
from autogen.metadata.model_meta import ModelMeta
from autogen.metadata.probes import (
    ADAPTER_CONFIG,
    MODELOPT_CONFIG,
    ConfigInfo,
    ConfigProbe,
    HeaderInfo,
    HeaderProbe,
    read_config_info,
    read_hf_meta,
    read_safetensors_info,
    read_whisper_info,
)
from autogen.metadata.safetensors_header import EXL2_TENSOR_SUFFIX
from autogen.numfmt import gib_text
from autogen.vision_tower import VisionTower

__all__ = ["SHARD_NAME", "VOCAB_ONLY", "discover", "gguf_ids", "quant_from_name"]

#: PEFT's adapter weights (peft `utils/constants.py` SAFETENSORS_WEIGHTS_NAME, WEIGHTS_NAME).
PEFT_WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin")


#: Records a model input's signature in the metadata cache, for the doit file checker:
#: (path, size, mtime_ns) -> its head hash. May raise OSError.
Signer = Callable[[str, int, int], str]


def _start(path: str) -> bytes:
    """A `.bin` file's first bytes (`rules.FileFacts.read_start`)."""
    try:
        with open(path, "rb") as f:
            return f.read(START_BYTES)
    except OSError:
        return b""


def _key(st: os.stat_result) -> tuple[int, int, int]:
    """What the id ledger knows a file by (`ledger.Ledger`)."""
    return st.st_dev, st.st_ino, st.st_mtime_ns


def _folder_projector(path: str, size: int, info: HeaderInfo | None) -> FolderProjector:
    """A projector of a folder with what its header says: the width it feeds and its tower."""
    meta = info.meta if info is not None else None
    if meta is None:
        return FolderProjector(path=path, size_bytes=size, width=0)
    return FolderProjector(path=path, size_bytes=size, width=meta.projector_width, tower=meta.vision_tower)


def _text_shape(info: HeaderInfo | None) -> tuple[int, str]:
    """(embedding length, architecture) of a model of a folder, what its projector must match;
    (0, "") when its header says nothing."""
    if info is None:
        return 0, ""
    return (info.meta.embedding_length if info.meta is not None else 0), info.arch


def _folder_names(folder: str) -> tuple[str, str]:
    """(publisher, repo) of a folder: the `models--owner--repo` names in the HF cache, else the
    parent's and the folder's own names."""
    cache = hf_cache_repo(folder)
    return cache if cache else (os.path.basename(os.path.dirname(folder)), os.path.basename(folder))




class _Walker:
    def __init__(self, probe: HeaderProbe, config: ConfigProbe, sign: Signer | None, safetensors: HeaderProbe,
                 hf_meta: HeaderProbe, whisper: HeaderProbe, memo: WalkMemo | None = None):
        self.probe = probe
        self.config = config
        self.safetensors = safetensors
        self.hf_meta = hf_meta
        self.whisper = whisper
        #: Row path → the metadata read on the way (its GGUF header, its config.json), handed on.
        self.metas: dict[str, ModelMeta] = {}
        #: Row path → whether its metadata is a config.json (True) or a GGUF header, for every row
        #: with metadata, those of replayed folders too (`walk_memo.FolderRecord.metas`).
        self.meta_kinds: dict[str, bool] = {}
        #: Row path → what draft pairing reads of it (`pairing.draft_facts`).
        self.facts: dict[str, DraftFacts] = {}
        #: The last walk's folder records, and this walk's (`walk_memo`).
        self.memo = memo.folders if memo is not None else {}
        self.records: dict[str, FolderRecord] = {}
        #: Path → (size, mtime) of every file of every folder walked.
        self.stats: dict[str, tuple[int, int]] = {}
        #: The files of the folders replayed from their records (their metadata cache entries stay).
        self.replayed: list[str] = []
        self.sign = sign
        self.rows: list[ModelRow] = []
        #: (st_dev, st_ino) of each row's path: the same file reached twice is one model.
        self.row_keys: list[tuple[int, int]] = []
        #: st_mtime_ns of each row's path: with the key, what tells a renamed file (same inode,
        #: same time) from a new one that reuses a freed inode.
        self.row_times: list[int] = []
        self.ignored: list[Ignored] = []
        self.problems: list[str] = []
        self.unreadable: list[tuple[str, str]] = []
        self.row_errors: list[tuple[ModelRow, str]] = []
        self.downloads: list[tuple[ModelRow, Download]] = []
        self.adapters: list[AdapterFile] = []
        #: (path, what, the reason shown when no model takes it) of each projector, draft, codec,
        #: VAD model and encoder.
        self.sidecars: list[tuple[str, str, str]] = []
        #: Folder key → (the path it was walked as, the root it was walked under).
        self.visited: dict[tuple[int, int], tuple[str, str]] = {}
        #: Keys of the folders met (`tree.folders` keeps it), over every root.
        self.seen: set[tuple[int, int]] = set()
        #: The root being walked, and the roots that nest (reported once, walked once).
        self.root = ""
        self.overlapping: set[frozenset[str]] = set()

    def _add(self, row: ModelRow, st: os.stat_result, stats: dict[str, os.stat_result]) -> ModelRow:
        """Record the row, and the signature of each of its inputs (the doit checker's file_deps)."""
        self.rows.append(row)
        self.row_keys.append((st.st_dev, st.st_ino))
        self.row_times.append(st.st_mtime_ns)
        for path in row.inputs if self.sign is not None else ():
            est = stats.get(path)
            if est is not None:
                with contextlib.suppress(OSError):  # unreadable: the checker meets it and says so
                    self.sign(path, est.st_size, est.st_mtime_ns)
        return row

    # -- folders ------------------------------------------------------------------------------

    def walk(self, top: str, listed: list[Folder] | None = None) -> None:
        """Every folder under `top` (`tree.folders`: the iterator the no-op signature uses too),
        or of `listed`, that listing made in this run (`tree.scanned`): its folders below one the
        walk leaves out (`_walked_subdirs`) are left out here too."""
        walked = {top}
        for folder in listed if listed is not None else folders(top, self.seen):
            if listed is not None and folder.path not in walked:
                continue
            if folder.error is not None:
                what = "read" if folder.stage == "read" else "list"
                self.problems.append(f"{folder.path}: cannot {what} folder ({folder.error.strerror or folder.error})")
                self.unreadable.append((folder.path, folder.error.strerror or str(folder.error)))
            elif folder.again:
                self._seen_again(folder)
            else:
                self._read_or_replay(folder)
                walked.update(entry.path for entry, _ in folder.folders)

    # -- records (`walk_memo`) ------------------------------------------------------------------

    def _read_or_replay(self, folder: Folder) -> None:
        """A folder as its record of the last walk says when its signature is the same, else read."""
        self.stats.update((entry.path, (st.st_size, st.st_mtime_ns)) for entry, st in folder.files)
        sig = signature(folder)
        record = self.memo.get(folder.path)
        if record is not None and record.signature == sig:
            self._replay(folder, record)
            return
        kept = replayable(folder)  # before reading: it drops an Ollama store's folders from the walk
        marks = self._marks()
        self._folder(folder)
        troubled = len(self.problems) > marks[0] or len(self.row_errors) > marks[1] or len(self.unreadable) > marks[2]
        if kept and not troubled:
            self.records[folder.path] = self._record(folder, sig, marks)

    def _marks(self) -> tuple[int, ...]:
        return (len(self.problems), len(self.row_errors), len(self.unreadable), len(self.rows), len(self.ignored),
                len(self.downloads), len(self.adapters), len(self.sidecars))

    def _record(self, folder: Folder, sig: str, marks: tuple[int, ...]) -> FolderRecord:
        """What reading `folder` added (everything after `marks`), as its record."""
        *_, rows, ignored, downloads, adapters, sidecars = marks
        added = self.rows[rows:]
        index = {id(row): i for i, row in enumerate(added)}
        return FolderRecord(
            path=folder.path, signature=sig, rows=tuple(added), row_keys=tuple(self.row_keys[rows:]),
            row_times=tuple(self.row_times[rows:]), ignored=tuple(self.ignored[ignored:]),
            downloads=tuple((index[id(row)], d) for row, d in self.downloads[downloads:]),
            adapters=tuple(self.adapters[adapters:]), sidecars=tuple(self.sidecars[sidecars:]),
            metas=tuple(self.meta_kinds.get(r.path) for r in added), facts=tuple(self.facts.get(r.path) for r in added),
            walked=tuple(entry.name for entry, _ in folder.folders))

    def _replay(self, folder: Folder, record: FolderRecord) -> None:
        """What reading the folder again would add, from its record; its subfolders walked as then."""
        self.visited[folder.key] = (folder.path, self.root)
        self.rows.extend(record.rows)
        self.row_keys.extend(record.row_keys)
        self.row_times.extend(record.row_times)
        self.ignored.extend(record.ignored)
        self.downloads.extend((record.rows[i], d) for i, d in record.downloads)
        self.adapters.extend(record.adapters)
        self.sidecars.extend(record.sidecars)
        self.meta_kinds.update((row.path, hf) for row, hf in zip(record.rows, record.metas, strict=True)
                               if hf is not None)
        self.facts.update((row.path, facts) for row, facts in zip(record.rows, record.facts, strict=True)
                          if facts is not None)
        self.replayed.extend(entry.path for entry, _ in folder.files)
        walked = set(record.walked)
        folder.folders[:] = [(entry, st) for entry, st in folder.folders if entry.name in walked]
        self.records[folder.path] = record

    def _folder(self, folder: Folder) -> None:
        """One folder's models and sidecars; then which of its subfolders are walked."""
        self.visited[folder.key] = (folder.path, self.root)
        broken = []
        for entry, exc in folder.failed:
            if entry.is_symlink():
                broken.append(entry)
            else:
                self.problems.append(f"{entry.path}: cannot stat ({exc.strerror or exc})")
        files = folder.files
        if not self._peft_folder(folder.path, files) and not self._hf_folder(folder.path, folder.st, files, broken):
            rows = self._broken_ggufs(folder.path, broken)
            for entry in broken:
                if entry.name not in rows:
                    self.problems.append(f"{entry.path}: broken symlink (its target {_link_target(entry.path)} "
                                         "is missing)")
        encoders = [entry.name for entry, _ in folder.folders if encoder_of(entry.name) is not None]
        self._files(folder.path, files, encoders)
        folder.folders[:] = self._walked_subdirs(folder.path, [(e, st) for e, st in folder.folders
                                                               if e.name not in encoders])

    def _seen_again(self, folder: Folder) -> None:
        """A folder met twice: a symlink back into the folders being walked is a loop; a root
        inside another root was reported once by `discover`; anything else is walked once."""
        first, root = self.visited[folder.key]
        if folder.again == "loop":
            self.problems.append(f"{folder.path}: symlink loop (already walked as {first}); not walked again")
        elif frozenset((root, self.root)) not in self.overlapping:
            self.problems.append(f"{folder.path}: the same folder as {first}; walked once")

    def _walked_subdirs(self, folder: str, subdirs: list[Stat]) -> list[Stat]:
        """The subfolders walked next: an Ollama store's `manifests/` and `blobs/` are read as a
        store, never walked; of an HF cache's snapshots, the served revision only."""
        if is_store({entry.name for entry, _ in subdirs}):
            self._ollama_store(folder)
            subdirs = [(e, st) for e, st in subdirs if e.name not in (MANIFESTS, BLOBS)]
        if is_snapshots_folder(folder) and subdirs:
            subdirs = self._served_snapshot(folder, subdirs)
        return subdirs

    def _served_snapshot(self, snapshots: str, revisions: list[Stat]) -> list[Stat]:
        """The one revision of an HF cache repo that is walked; the others are listed as ignored."""
        served, why = served_revision(snapshots, {e.name: st.st_mtime_ns for e, st in revisions})
        for entry, _ in revisions:
            if entry.name != served:
                self.ignored.append(Ignored(entry.path, f"older revision of {repo_label(snapshots)}: "
                                                        f"serving {served} ({why})"))
        return [(e, st) for e, st in revisions if e.name == served]

    def _hf_folder(self, folder: str, folder_st: os.stat_result, files: list[tuple[os.DirEntry, os.stat_result]],
                   broken: list[os.DirEntry]) -> bool:
        """An HF model folder becomes a row, skipped with a reason while incomplete (hf_weights).
        True when it did: the folder's broken symlinks are then part of its reason."""
        names = {e.name.lower(): (e, st) for e, st in files}
        broken_names = [e.name for e in broken]
        if "config.json" not in names and "config.json" not in {n.lower() for n in broken_names}:
            return False
        if any(e.name.lower().endswith(".gguf") for e, _ in files):
            # a conversion beside its source: the gguf is the model (docs/maintainers/discovery.md#hf-folders)
            return False
        cache = hf_cache_repo(folder)
        by_name = {e.name: st for e, st in files}
        check = check_weights(folder, by_name, broken_names, self.safetensors,
                              incomplete_blobs(folder) if cache else ())
        if check is None:
            return False
        stats = {e.path: st for e, st in files}
        publisher, base = cache if cache else (os.path.basename(os.path.dirname(folder)), os.path.basename(folder))
        inputs = list(check.files) + ([check.index] if check.index else [])
        info, quant = ConfigInfo(), ""  # a broken config.json link is in the check's reason
        if "config.json" in names:
            config_entry, config_st = names["config.json"]
            inputs.append(config_entry.path)
            info = self.config(config_entry.path, config_st.st_size, config_st.st_mtime_ns)
            quant = info.quant
        if info.reason is not None and info.error is None:
            self.ignored.append(Ignored(folder, info.reason))
            return True
        if MODELOPT_CONFIG in names and info.error is None:  # ModelOpt declares its quantisation beside config.json
            entry, st = names[MODELOPT_CONFIG]
            quant = self.config(entry.path, st.st_size, st.st_mtime_ns).quant or quant
            inputs.append(entry.path)
        foreign, evidence = info.foreign, info.foreign_evidence
        if not foreign and "mlx" in check.formats:
            foreign, evidence, quant = "mlx", "safetensors __metadata__ format mlx", "MLX"
        elif not foreign and "exl2" in check.formats:
            foreign, evidence, quant = "exl2", f"tensors named *{EXL2_TENSOR_SUFFIX}, as exllamav2 writes them", "EXL2"
        row = self._add(ModelRow(id=with_quant(clean_id(base), quant), format="hf", path=folder, quant=quant,
                                 size_bytes=check.have_bytes, publisher=publisher, repo=base,
                                 inputs=tuple(sorted(inputs)), foreign_format=foreign, foreign_evidence=evidence),
                        folder_st, stats)
        reason = info.error or check.reason
        if reason is None and "config.json" in names:
            config_entry, config_st = names["config.json"]
            read = self.hf_meta(config_entry.path, config_st.st_size, config_st.st_mtime_ns)
            reason = self._keep_meta(row, read, hf=True)
        if reason is not None:
            self.row_errors.append((row, reason))
        if check.download is not None:
            self.downloads.append((row, check.download))
        return True

    def _peft_folder(self, folder: str, files: list[tuple[os.DirEntry, os.stat_result]]) -> bool:
        """A PEFT adapter folder (`adapter_config.json` + `adapter_model.safetensors`): an adapter
        waiting for its base (`discovery.pairing`), never a model of its own."""
        by_name = {e.name: (e, st) for e, st in files}
        weights = next((by_name[n] for n in PEFT_WEIGHTS if n in by_name), None)
        if ADAPTER_CONFIG not in by_name or weights is None:
            return False
        entry, st = by_name[ADAPTER_CONFIG]
        info = self.config(entry.path, st.st_size, st.st_mtime_ns)
        if info.error is not None:
            self.ignored.append(Ignored(folder, f"PEFT adapter: {info.error}"))
            return True
        self.adapters.append(AdapterFile(path=folder, kind="peft", size_bytes=weights[1].st_size,
                                         base_name=info.adapter_base, rank=info.adapter_rank, key=_key(weights[1])))
        return True

    def _ollama_store(self, folder: str) -> None:
        """An Ollama models folder: one row per manifest (`name:tag`), read through its layers;
        blobs are never walked as loose files (ollama_store)."""
        scan = scan_store(folder)
        self.problems.extend(scan.problems)
        self.ignored.extend(Ignored(path, reason) for path, reason in scan.ignored)
        for entry in scan.entries:
            self._ollama_entry(entry)

    def _ollama_entry(self, entry: StoreEntry) -> None:
        """The entry's row, keyed by its manifest file itself (two tags of one blob, or a tag
        linked to another, are two models, as `ollama list` shows them), and why it cannot be
        served: a layout problem, else its model blob's header as any GGUF's."""
        try:
            manifest_st = os.lstat(entry.manifest)
        except OSError as exc:
            self.problems.append(f"{entry.manifest}: cannot stat ({exc.strerror or exc})")
            return
        blobs = [b for b in (entry.model, entry.projector, entry.draft) if b is not None]
        stats = {b.path: b.st for b in blobs}
        model, projector = entry.model, entry.projector
        row = self._add(ModelRow(
            id=clean_id(entry.name.shortest), format="gguf", path=model.path if model else entry.manifest,
            quant=entry.quant, size_bytes=model.st.st_size if model else 0, publisher="ollama",
            repo=f"{entry.name.namespace}/{entry.name.model}", manifest=entry.manifest,
            mmproj=projector.path if projector else None, mmproj_bytes=projector.st.st_size if projector else 0,
            mmproj_tower=self._tower(projector),
            draft=entry.draft.path if entry.draft else None, inputs=tuple(stats)), manifest_st, stats)
        if entry.download is not None:
            self.downloads.append((row, entry.download))
        reason = entry.reason
        if reason is None and model is not None:
            info = self.probe(model.path, model.st.st_size, model.st.st_mtime_ns)
            reason = self._gguf_reason(row, info, stats) or self._keep_meta(row, info)
            if reason is None and info.arch.lower() in OLLAMA_ONLY_ARCHS:
                reason = OLLAMA_ONLY_ARCHS[info.arch.lower()]
            if reason is None and info.vision_tensors and info.arch.lower() != PROJECTOR_ARCH:
                reason = PACKED_VISION.format(n=info.vision_tensors)
        for blob, what in ((projector, "projector"), (entry.draft, "draft")):
            if reason is None and blob is not None:
                found = self.probe(blob.path, blob.st.st_size, blob.st.st_mtime_ns)
                if found.error is not None:
                    reason = f"{what} blob {os.path.basename(blob.path)}: {found.error}"
        if reason is not None:
            self.row_errors.append((row, reason))

    def _tower(self, projector: Blob | None) -> VisionTower | None:
        """The vision tower a projector blob's header describes (None: no projector, or none said)."""
        if projector is None:
            return None
        info = self.probe(projector.path, projector.st.st_size, projector.st.st_mtime_ns)
        return info.meta.vision_tower if info.meta is not None else None

    # -- files --------------------------------------------------------------------------------

    def _files(self, folder: str, files: list[tuple[os.DirEntry, os.stat_result]], encoder_folders: list[str]) -> None:
        """Each file of the folder, classified by `rules.classify` (header rules, then name
        rules); models become rows, sidecars pair with the folder's models. `encoder_folders`:
        the names of the folder's whisper.cpp encoder folders (never walked)."""
        stats = {e.path: st for e, st in files}
        publisher, repo = _folder_names(folder)
        candidates, paired, projectors, foreign = self._classified(files, stats, publisher, repo)
        self._whisper(folder, foreign, encoder_folders, stats, (publisher, repo))
        self._foreign(folder, foreign, stats, publisher, repo)
        draft, codec = (paired.get(v) for v in (Verdict.DRAFT, Verdict.CODEC))
        for path, _, what in filter(None, (draft, codec)):
            self.sidecars.append((path, what, f"{what} with no model beside it, not served"))
        shapes = [_text_shape(info) for _, _, info in candidates]
        for projector in projectors:
            self.sidecars.append((projector.path, "projector", f"projector {unpaired_projector(projector, shapes)}"))
        sidecars = tuple(p[0] for p in (draft, codec) if p)
        for (name, st, info), (width, arch) in zip(candidates, shapes, strict=True):
            path = os.path.join(folder, name)
            mmproj = choose_projector(path, width, projectors, arch)
            shard = SHARD_NAME.search(name)
            id_name = name[: shard.start()] + ".gguf" if shard else name
            shards: tuple[str, ...] = ()
            present: tuple[str, ...] = (path,)
            if shard and int(shard.group(2)) > 1:
                names_ = _shard_names(name[: shard.start()], int(shard.group(2)))
                shards = tuple(os.path.join(folder, n) for n in names_)
                present = tuple(s for s in shards if s in stats)
            missing = tuple(s for s in shards if s not in stats)
            model_id, quant = gguf_ids(id_name, repo)
            row = ModelRow(id=model_id, format="gguf", path=path, quant=quant,
                           size_bytes=sum(stats[s].st_size for s in present), publisher=publisher, repo=repo,
                           shards=shards, missing_shards=missing, mmproj=mmproj.path if mmproj else None,
                           mmproj_bytes=mmproj.size_bytes if mmproj else 0,
                           mmproj_tower=mmproj.tower if mmproj else None, draft=draft[0] if draft else None,
                           codec=codec[0] if codec else None,
                           inputs=tuple(dict.fromkeys(present + ((mmproj.path,) if mmproj else ()) + sidecars)))
            self._add(row, st, stats)
            reason = self._gguf_reason(row, info, stats)
            if reason is None and info is not None:
                reason = self._keep_meta(row, info)
            if reason is not None:
                self.row_errors.append((row, reason))

    def _classified(self, files: list[tuple[os.DirEntry, os.stat_result]], stats: dict[str, os.stat_result],
                    publisher: str, repo: str):
        """(models: (file name, stat, header) each, a split set's shard 1 or, headless, its lowest
        shard; the draft and the codec the folder pairs; its projectors, in name order; foreign
        weights by format, and whisper.cpp's files by verdict). SAM models, LoRA adapters and
        dropped files are recorded on the way."""
        names = {e.name for e, _ in files}
        candidates: list[tuple[str, os.stat_result, HeaderInfo | None]] = []
        headless: dict[str, tuple[str, os.stat_result]] = {}
        paired: dict[Verdict, tuple[str, int, str]] = {}
        projectors: list[FolderProjector] = []
        foreign: dict[str, list[tuple[os.DirEntry, os.stat_result]]] = {}
        for entry, st in files:
            facts = FileFacts(entry.name, read_start=lambda e=entry: _start(e.path),
                              read_header=lambda e=entry, s=st: self.probe(e.path, s.st_size, s.st_mtime_ns))
            rule, info = classify(facts)
            verdict = rule.verdict
            if verdict is Verdict.MODEL:
                candidates.append((entry.name, st, info))
            elif verdict is Verdict.PROJECTOR:
                projectors.append(_folder_projector(entry.path, st.st_size, info))
            elif verdict in (Verdict.DRAFT, Verdict.CODEC):
                if verdict in paired:  # the last in name order pairs (MTP and DFlash share one slot)
                    what = paired[verdict][2]
                    self.sidecars.append((paired[verdict][0], what, f"{what}, not paired: another {what} of this "
                                                                     "folder is (the last in name order)"))
                paired[verdict] = (entry.path, st.st_size, rule.what)
            elif verdict is Verdict.SHARD:
                shard = SHARD_NAME.search(entry.name)
                first = _shard_names(entry.name[: shard.start()], int(shard.group(2)))[0]
                if first not in names:
                    headless.setdefault(first, (entry.name, st))  # files come sorted: the lowest shard
            elif verdict is Verdict.LORA:
                self.adapters.append(AdapterFile(path=entry.path, kind="gguf", size_bytes=st.st_size, key=_key(st)))
            elif verdict is Verdict.SAM:
                stem = clean_id(entry.name[: -len(".ggml")].replace("_", "-"))
                self._add(ModelRow(id=stem, format="sam", path=entry.path, size_bytes=st.st_size,
                                   publisher=publisher, repo=repo, inputs=(entry.path,)), st, stats)
            elif verdict is Verdict.FOREIGN:
                foreign.setdefault(rule.what, []).append((entry, st))
            elif verdict in (Verdict.WHISPER, Verdict.VAD, Verdict.ENCODER):
                foreign.setdefault(verdict, []).append((entry, st))
            elif verdict is Verdict.DROPPED:
                arch = info.arch.lower() if info is not None else ""
                self.ignored.append(Ignored(entry.path, rule.what.format(arch=arch) + ", not a model"))
        candidates += [(name, st, None) for name, st in headless.values()]
        return candidates, paired, projectors, foreign

    def _keep_meta(self, row: ModelRow, read: HeaderInfo, *, hf: bool = False) -> str | None:
        """Keep the row's metadata for the stages after discovery; why it has none, else None."""
        if read.meta is None:
            return read.error
        self.metas[row.path] = read.meta
        self.meta_kinds[row.path] = hf
        self.facts[row.path] = draft_facts(read.meta)
        return None

    def _whisper(self, folder: str, classified: dict, encoder_folders: list[str],
                 stats: dict[str, os.stat_result], names: tuple[str, str]) -> None:
        """whisper.cpp's files of a folder (`whisper_files`), taken out of `_classified`'s other
        files: each model a row read by its header, with the folder's VAD model and its own
        encoders; the VAD models and encoders are sidecars, named by the rows that take them."""
        models, vads, encoders = (classified.pop(v, []) for v in (Verdict.WHISPER, Verdict.VAD, Verdict.ENCODER))
        paired = pair_folder(folder, [e.name for e, _ in models], [e.name for e, _ in vads],
                             [e.name for e, _ in encoders] + encoder_folders)
        self.sidecars += [(car.path, car.what, car.unpaired) for car in paired.sidecars]
        vad_bytes = stats[paired.vad].st_size if paired.vad else 0
        for entry, st in models:
            info = self.whisper(entry.path, st.st_size, st.st_mtime_ns)
            quant = info.meta.quant_label if info.meta is not None else quant_from_name(entry.name)
            row = self._add(ModelRow(id=whisper_id(entry.name, names[1]), format="whisper", path=entry.path,
                                     quant=quant, size_bytes=st.st_size, publisher=names[0], repo=names[1],
                                     vad=paired.vad, vad_bytes=vad_bytes, encoders=paired.encoders.get(entry.name, ()),
                                     inputs=(entry.path, *((paired.vad,) if paired.vad else ()))), st, stats)
            reason = self._whisper_reason(row, info, st)
            if reason is not None:
                self.row_errors.append((row, reason))

    def _whisper_reason(self, row: ModelRow, info: HeaderInfo, st: os.stat_result) -> str | None:
        """Why a whisper.cpp model cannot be served: its header, or a file shorter than its
        weights (an interrupted download); else its metadata is kept."""
        if info.error is not None:
            return info.error
        if st.st_size < info.expected_size:
            self.downloads.append((row, Download(have_bytes=st.st_size, want_bytes=info.expected_size)))
            return f"incomplete download (at least {gib_text(info.expected_size)} expected)"
        return self._keep_meta(row, info)

    def _foreign(self, folder: str, found: dict[str, list[tuple[os.DirEntry, os.stat_result]]],
                 stats: dict[str, os.stat_result], publisher: str, repo: str) -> None:
        """Weights in a format no configured engine loads (`metadata.formats`): a pre-GGUF GGML
        `.bin` is a row of its own; an ONNX or OpenVINO export is one row for its folder (named
        after the repo when the folder is its `onnx/` or `openvino/` part)."""
        for entry, st in found.pop("ggml", []):
            model_id, quant = gguf_ids(entry.name, repo)
            self._add(ModelRow(id=model_id, format="ggml", path=entry.path, quant=quant, size_bytes=st.st_size,
                               publisher=publisher, repo=repo, inputs=(entry.path,), foreign_format="ggml",
                               foreign_evidence=f"magic {ggml_magic(_start(entry.path))}"), st, stats)
        for key, entries in sorted(found.items()):
            name = repo if repo.lower() not in ("onnx", "openvino") else os.path.basename(os.path.dirname(folder))
            shown = names_text([e.name for e, _ in entries])
            first_st = entries[0][1]
            self._add(ModelRow(id=with_quant(clean_id(repo_name(name)), key), format=key, path=folder,
                               quant=key.upper(), size_bytes=sum(st.st_size for _, st in entries),
                               publisher=publisher, repo=name, inputs=tuple(e.path for e, _ in entries),
                               foreign_format=key, foreign_evidence=shown), first_st, stats)

    def _broken_ggufs(self, folder: str, broken: list[os.DirEntry]) -> set[str]:
        """A broken symlink named like a model (an HF cache snapshot whose blob is gone) is a row
        skipped with that reason; a broken shard of a set shows as a missing shard. Returns the
        names made rows."""
        rows = set()
        publisher, repo = _folder_names(folder)
        for entry in broken:
            name = entry.name
            facts = FileFacts(name, read_header=lambda: HeaderInfo(error="broken symlink"), read_start=lambda: b"")
            if not name.lower().endswith(".gguf") or classify(facts)[0].verdict is not Verdict.MODEL \
                    or SHARD_NAME.search(name):  # a shard's set names it missing; a sidecar is a warning
                continue
            try:
                st = os.lstat(entry.path)
            except OSError:
                continue
            model_id, quant = gguf_ids(name, repo)
            row = self._add(ModelRow(id=model_id, format="gguf", path=entry.path, quant=quant,
                                     publisher=publisher, repo=repo), st, {})
            self.row_errors.append((row, f"broken symlink (its target {_link_target(entry.path)} is missing)"))
            rows.add(name)
        return rows

    def _gguf_reason(self, row: ModelRow, info: HeaderInfo | None, stats: dict[str, os.stat_result]) -> str | None:
        """Why a GGUF model or split set cannot be served: its header unreadable, shards missing,
        any file shorter than its header says (every shard's header is probed: a download cut
        short in shard 3 leaves shard 1 whole), or no tensors at all (a vocabulary-only file).
        An incomplete download's reason gives the size expected, never the bytes so far (they
        go to `downloads`), so the config is not rewritten while it grows. A downloader's control
        file beside a file (`hf_weights.DOWNLOAD_MARKERS`) says it is still written, whatever its
        size and header say."""
        if (writing := still_written(row.shards or (row.path,), stats)) is not None:
            return writing
        if info is not None and info.error is not None:
            return info.error
        if row.missing_shards:
            shown = ", ".join(os.path.basename(m) for m in row.missing_shards)
            return f"split set is missing {len(row.missing_shards)} of {len(row.shards)} shards ({shown})"
        have = want = 0
        tensors: int | None = 0
        short = []
        for path in row.shards or (row.path,):
            st = stats[path]
            found = info if path == row.path else self.probe(path, st.st_size, st.st_mtime_ns)
            if found.error is not None:
                return f"{os.path.basename(path)}: {found.error}"
            have += st.st_size
            want += max(found.expected_size, st.st_size)
            if st.st_size < found.expected_size:
                short.append(os.path.basename(path))
            tensors = None if tensors is None or found.tensor_count is None else tensors + found.tensor_count
        if short:
            self.downloads.append((row, Download(have_bytes=have, want_bytes=want)))
            if not row.shards:
                return f"incomplete download ({gib_text(want)} expected)"
            return incomplete_text((), short, len(row.shards), want)
        if tensors == 0:
            return VOCAB_ONLY
        return None


def _shard_names(prefix: str, total: int) -> list[str]:
    """Every file name of a split set, in order (llama.cpp's `llama_split_path`)."""
    return [f"{prefix}-{i:05d}-of-{total:05d}.gguf" for i in range(1, total + 1)]


def _uncached_config(path: str, size: int, mtime_ns: int) -> ConfigInfo:
    return read_config_info(path)


def _uncached_safetensors(path: str, size: int, mtime_ns: int) -> HeaderInfo:
    return read_safetensors_info(path)


def _uncached_hf_meta(path: str, size: int, mtime_ns: int) -> HeaderInfo:
    return read_hf_meta(path)


def _uncached_whisper(path: str, size: int, mtime_ns: int) -> HeaderInfo:
    return read_whisper_info(path)


def _link_target(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return "?"


def overlapping_roots(roots: tuple[str, ...]) -> list[tuple[str, str, str]]:
    """(earlier root, later root, how) for each pair of roots where one holds the other."""
    real = [os.path.realpath(r) for r in roots]
    found = []
    for j in range(len(roots)):
        for i in range(j):
            if real[i] == real[j]:
                found.append((roots[i], roots[j], f"{roots[i]} and {roots[j]} are the same folder"))
            elif real[j].startswith(real[i].rstrip(os.sep) + os.sep):
                found.append((roots[i], roots[j], f"{roots[j]} is inside {roots[i]}"))
            elif real[i].startswith(real[j].rstrip(os.sep) + os.sep):
                found.append((roots[i], roots[j], f"{roots[i]} is inside {roots[j]}"))
    return found


@frozen
class Walked:
    """A walk of the roots: what discovery found, and what the library plans with besides."""

    discovery: Discovery
    #: Row path → the metadata the walk read (folders replayed from their record read none).
    metas: dict[str, ModelMeta]
    #: Row path → whether its metadata is an HF config.json (True) or a GGUF header, every row
    #: with metadata included: what the metadata cache is asked for a row the walk did not read.
    meta_kinds: dict[str, bool]
    #: Row path → what draft pairing reads of it.
    facts: dict[str, DraftFacts]
    #: This walk's folder records, for the next (`walk_memo`).
    memo: WalkMemo
    #: Path → (size, mtime) of every file of the folders walked.
    stats: dict[str, tuple[int, int]]
    #: The files of the folders replayed from their records, which no probe looked up: what the
    #: metadata cache keeps of them when it drops the entries no run used.
    replayed: tuple[str, ...] = ()


def discover(roots: tuple[str, ...], probe: HeaderProbe, config: ConfigProbe = _uncached_config,
             sign: Signer | None = None, safetensors: HeaderProbe = _uncached_safetensors,
             previous: Ledger | None = None, hf_meta: HeaderProbe = _uncached_hf_meta,
             prefer: Callable[[str], bool] | None = None, whisper: HeaderProbe = _uncached_whisper) -> Discovery:
    """What `walk_roots` finds, with no record of an earlier walk."""
    return walk_roots(roots, probe, config, sign, safetensors, previous, hf_meta, prefer, whisper=whisper).discovery


def walk_roots(roots: tuple[str, ...], probe: HeaderProbe, config: ConfigProbe = _uncached_config,
               sign: Signer | None = None, safetensors: HeaderProbe = _uncached_safetensors,
               previous: Ledger | None = None, hf_meta: HeaderProbe = _uncached_hf_meta,
               prefer: Callable[[str], bool] | None = None, memo: WalkMemo | None = None,
               whisper: HeaderProbe = _uncached_whisper) -> Walked:
    """Walk every root (in order; a path seen under an earlier root wins). The pipeline passes
    its metadata cache's `gguf`, `config`, `head`, `safetensors`, `hf_meta` and `whisper`; `sign` records each model
    input's head there, for the doit file checker; `previous` is the last run's id ledger (a
    file keeps the id it had); `memo`: the last walk's folder records, replayed for the folders
    that did not change (`walk_memo`). Roots that nest are reported once, as overlapping, and every
    folder is walked once; a file reached twice (a symlink, LM Studio's links into the hub
    cache) is one model, its other path listed as the same file: the first path found, or the
    first that `prefer` accepts (with a `path_map`, one the container can open: LM Studio's
    absolute links into the hub cache lead out of the container's view, the cache's own
    snapshot links do not)."""
    walker = _Walker(probe, config, sign, safetensors, hf_meta, whisper, memo)
    for first, second, how in overlapping_roots(roots):
        walker.problems.append(f"overlapping roots: {how}; each folder is scanned once")
        walker.overlapping.add(frozenset((first, second)))
    scan = scanned(roots)
    for i, root in enumerate(roots):
        if not os.path.exists(root):
            walker.problems.append(f"{root}: model root does not exist")
            continue
        walker.root = root
        walker.walk(root_folder(root), scan[i] if scan is not None else None)
    unique: dict[tuple[int, int], ModelRow] = {}
    times: dict[str, int] = {}
    for row, key, mtime in zip(walker.rows, walker.row_keys, walker.row_times, strict=True):
        times[row.path] = mtime
        kept = unique.setdefault(key, row)
        if kept is not row and prefer is not None and not prefer(kept.path) and prefer(row.path):
            unique[key], kept, row = row, row, kept
        if kept is not row:
            walker.ignored.append(Ignored(row.path, f"same file as {kept.path}", attached=True))
    previous = previous or Ledger()
    renamed = assign_unique_ids(unique.values(), previous.ids)
    by_path = {r.path: r for r in renamed}
    keys = {row.path: key for key, row in unique.items()}
    ledger = Ledger({r.path: (r.id, *keys[r.path], times[r.path]) for r in renamed})
    errors = {by_path[row.path].id: reason for row, reason in walker.row_errors if row.path in by_path}
    downloads = {by_path[row.path].id: d for row, d in walker.downloads if row.path in by_path}
    discovery = Discovery(
        models=tuple(sorted(renamed, key=lambda r: r.id)),
        ignored=tuple(walker.ignored) + _sidecar_reasons(walker.sidecars, renamed),
        problems=tuple(walker.problems),
        unreadable=tuple(walker.unreadable),
        row_errors=errors,
        downloads=downloads,
        adapters=tuple(walker.adapters),
        ledger=ledger,
        id_changes=tuple(id_changes(previous, ledger)) if previous.entries else (),
    )
    return Walked(discovery, metas={path: meta for path, meta in walker.metas.items() if path in by_path},
                  meta_kinds={path: hf for path, hf in walker.meta_kinds.items() if path in by_path},
                  facts={path: facts for path, facts in walker.facts.items() if path in by_path},
                  memo=WalkMemo(walker.records), stats=walker.stats, replayed=tuple(walker.replayed))


def _sidecar_reasons(sidecars: list[tuple[str, str, str]], rows: list[ModelRow]) -> tuple[Ignored, ...]:
    """What each projector, draft, codec, VAD model and encoder is, and which models it serves."""
    users: dict[str, list[str]] = {}
    for row in rows:
        for path in {row.mmproj, row.draft, row.codec, row.vad, *row.encoders} - {None}:
            users.setdefault(path, []).append(row.id)
    out = []
    for path, what, unused in sidecars:
        if path in users:
            out.append(Ignored(path, f"{what} of {', '.join(sorted(users[path]))}", attached=True))
        else:
            out.append(Ignored(path, unused))
    return tuple(out)
