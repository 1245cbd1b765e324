"""Model ids: from a file or folder name, and kept once given (docs/maintainers/discovery.md#model-ids).

An id is a router key clients put in every request, so it must never move to another file:

- it is made from the file's own name (`gguf_ids`), and a generic stem (`model-Q4_K_M.gguf`,
  `ggml-model-q4_0.gguf`) takes its repo folder's name instead, so two repos' generic files do
  not fight over one id;
- a clash is settled by candidates made from the file's own path (`candidates`): the bare id,
  then `-<publisher>`, `-<publisher>-<repo>`, then a hash of the path, never a counter that
  depends on which other files exist;
- the file that held an id on the previous run keeps it (`assign_unique_ids` with the ledger
  of `ids.json` in `cache_dir`, `discovery.ledger`), so a newcomer never takes it, whatever its
  name sorts as;
- an id that changes all the same (the file was renamed) is said in one line (`ledger.id_changes`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

import attrs

from autogen.discovery.rows import ModelRow
from autogen.ids import path_tag, settle_names, slugify

QUANT_TOKEN = re.compile(
    r"(?i)[-_.](I?Q\d+(?:_[A-Z0-9]+)*|TQ\d+(?:_[A-Z0-9]+)*|(?:MX|NV)?FP\d+(?:_[A-Z0-9]+)*|BF\d+|F\d+)"
    r"(?:[._-]|\.gguf$)"
)
#: Characters kept in ids; anything else becomes "-" (ids are router keys and URL parts).
ID_UNSAFE = re.compile(r"[^\w.+-]+")
#: File stems that name no model: converters' and uploaders' defaults (llama.cpp's
#: `ggml-model-<type>.gguf`, transformers' `model`, unsloth's `unsloth.Q4_K_M.gguf`). Such a
#: file takes its repo folder's name.
GENERIC_STEMS = frozenset({"model", "ggml-model", "gguf-model", "model-gguf", "consolidated", "weights", "output",
                           "converted", "unsloth", "ggml", "gguf", "pytorch_model", "pytorch-model"})
#: Folder names that hold models without naming one: a generic file inside keeps its own name.
CONTAINER_FOLDERS = frozenset({"models", "model", "downloads", "llm", "llms", "gguf", "ggml", "weights"})
#: A repo folder's suffix that is not part of the model's name.
_REPO_SUFFIX = re.compile(r"(?i)[-_.](gguf|ggml|onnx|openvino|mlx|exl2|exl3)$")


def quant_from_name(name: str) -> str:
    m = QUANT_TOKEN.search(name)
    return m.group(1).upper() if m else ""


def contains_part(text: str, part: str) -> bool:
    return re.search(rf"(?i)(^|[-_.]){re.escape(part)}([-_.]|$)", text) is not None


def clean_id(text: str) -> str:
    cleaned = ID_UNSAFE.sub("-", text.lower()).strip("-.")
    return cleaned or "model"


def with_quant(base_id: str, quant: str) -> str:
    """`base_id` + `-quant`, unless the base already holds the quant as a part."""
    if quant and not contains_part(base_id, quant.lower()):
        return f"{base_id}-{quant.lower()}"
    return base_id


def repo_name(repo: str) -> str:
    """A repo folder as a model name: `gemma-2-9b-it-GGUF` → `gemma-2-9b-it`."""
    return _REPO_SUFFIX.sub("", repo)


def gguf_ids(name: str, repo: str = "") -> tuple[str, str]:
    """(id, quant) from a shard-stripped file name (docs/maintainers/discovery.md#model-ids); a generic
    stem takes the name of `repo`, the folder the file sits in."""
    quant = quant_from_name(name)
    stem, dot, ext = name.rpartition(".")
    base = stem if dot and ext.lower() in ("gguf", "bin") else name
    if quant and base.lower().endswith(quant.lower()) and len(base) > len(quant) and base[-len(quant) - 1] in "-_.":
        base = base[: -len(quant) - 1]
    if base.lower().endswith("-gguf"):
        base = base[: -len("-gguf")]
    if clean_id(base) in GENERIC_STEMS and clean_id(repo_name(repo)) not in GENERIC_STEMS | CONTAINER_FOLDERS:
        base = repo_name(repo)
    return with_quant(clean_id(base), quant), quant


#: whisper.cpp's model files are `ggml-<model>.bin` (models/download-ggml-model.sh); its ids
#: say the engine instead: `ggml-large-v3-turbo-q5_0.bin` → `whisper-large-v3-turbo-q5_0`.
WHISPER_PREFIX = "whisper"


def whisper_id(name: str, repo: str = "") -> str:
    """The id of a whisper.cpp model file: its stem without `ggml-`, after `whisper-` (unless it
    already starts with it); a generic stem (`ggml-model.bin`, the converter's) takes its repo
    folder's name, as `gguf_ids` does."""
    stem = name[: -len(".bin")] if name.lower().endswith(".bin") else name
    base = stem[len("ggml-"):] if stem.lower().startswith("ggml-") and len(stem) > len("ggml-") else stem
    if clean_id(stem) in GENERIC_STEMS and clean_id(repo_name(repo)) not in GENERIC_STEMS | CONTAINER_FOLDERS:
        base = repo_name(repo)
    base = clean_id(base)
    return base if contains_part(base.split("-", 1)[0], WHISPER_PREFIX) else f"{WHISPER_PREFIX}-{base}"


def candidates(row: ModelRow) -> list[str]:
    """The ids a row may take, in order, each made from its own path alone."""
    out = [row.id]
    for part in (row.publisher, f"{row.publisher}-{row.repo}"):
        slug = slugify(part)
        if slug and f"{row.id}-{slug}" not in out:
            out.append(f"{row.id}-{slug}")
    out.append(f"{row.id}-{path_tag(row.path)}")
    return out


def assign_unique_ids(rows: Iterable[ModelRow], previous: Mapping[str, str] | None = None) -> list[ModelRow]:
    """Resolve id clashes (docs/maintainers/discovery.md#id-clashes). A row keeps the id it had on the
    previous run (`previous`: path → id) while that id is still one of its candidates; the others
    take their first free candidate, in (id, publisher, path) order."""
    previous = previous or {}
    rows = sorted(rows, key=lambda r: (r.id, r.publisher, r.path))
    names = settle_names([candidates(row) for row in rows], [previous.get(row.path) for row in rows])
    return [row if new == row.id else attrs.evolve(row, id=new) for row, new in zip(rows, names, strict=True)]
