"""Validating a generated config at the cost of what changed, not of the whole library.

A config swapgen writes is its head (the header comment, `healthCheckTimeout`, the user's
top-level `llama_swap:` keys), one block per entry, and its tail (groups or the routing matrix).
Whether an entry's block is valid depends on its own text and the head's macros alone; what the
loader checks across entries (duplicate aliases, an alias that is another model's id, group
members, matrix and selector references) reads only each entry's id, aliases and
`filters.setParamsByID` keys.

So a block found valid once, under the same head, is checked again as a stand-in that carries
exactly those (`stand_in`), and the document llama-swap's rules run on (`validate.validate_document`,
the same code `swapgen validate` runs) holds the new blocks in full and the others as
stand-ins. One new model in a library of 2,000 then parses one block and 2,000 one-line
stand-ins instead of the whole file. Any problem sends the real text through the whole check,
so every message names the line of the file that is written.

The blocks found valid are kept in `cache_dir/checked-blocks.json` (`CheckedBlocks`), keyed by
a digest of the head and the block: a changed head (new macros) checks every block again.
"""

from __future__ import annotations

import json
import os

import xxhash
from attrs import frozen

from autogen.fsutil import read_bytes, write_if_changed
from autogen.records import dumps, loads
from autogen.router.validate import Problem, validate_document
from autogen.router.yamllines import LineMap

FILE = "checked-blocks.json"
#: Never started: a stand-in's `proxy` names no `${PORT}`, so its `cmd` needs none.
_STAND_IN_ENTRY = {"cmd": "swapgen-stand-in", "proxy": "http://127.0.0.1:1"}


@frozen
class CheckedBlocks:
    """Blocks found valid: digest of (head, block) → the block's stand-in (`stand_in`)."""

    stand_ins: dict[str, str]


@frozen
class Assembled:
    """A config as its parts: `head + blocks + tail` is the text written."""

    head: str
    #: (entry or skip id, YAML text) per block, in the file's order.
    blocks: tuple[tuple[str, str], ...]
    tail: str

    @property
    def text(self) -> str:
        return self.head + "".join(text for _, text in self.blocks) + self.tail


def _digest(head: str, block: str) -> str:
    return xxhash.xxh3_128_hexdigest((head + "\0" + block).encode("utf-8", "surrogatepass"))


def stand_in(model_id: str, entry: object) -> str:
    """A one-line block with what llama-swap's checks across entries read of `entry` (its
    parsed mapping): the id, the aliases and the `filters.setParamsByID` keys. JSON is a YAML
    flow mapping."""
    data: dict[str, object] = dict(_STAND_IN_ENTRY)
    if isinstance(entry, dict):
        aliases = entry.get("aliases")
        if isinstance(aliases, list):
            data["aliases"] = [a for a in aliases if isinstance(a, str)]
        filters = entry.get("filters")
        params = filters.get("setParamsByID") if isinstance(filters, dict) else None
        if isinstance(params, dict):
            data["filters"] = {"setParamsByID": {key: {} for key in params if isinstance(key, str)}}
    return f"  {json.dumps(model_id)}: {json.dumps(data, sort_keys=True)}\n"


def check_generated(config: Assembled, source: str, cache_dir: str) -> list[Problem]:
    """Every problem llama-swap's rules find in `config.text` (as `validate.validate_text`),
    checking only the blocks not found valid before; remembers the new ones when none is found."""
    memo_path = os.path.join(cache_dir, FILE)
    known = loads("checked-blocks", CheckedBlocks, read_bytes(memo_path))
    stand_ins = known.stand_ins if known is not None else {}
    digests = [_digest(config.head, text) for _, text in config.blocks]
    parts = [stand_ins.get(d, text) for d, (_, text) in zip(digests, config.blocks, strict=True)]
    problems, doc = validate_document(config.head + "".join(parts) + config.tail, source)
    if problems:  # at the lines of the file as written
        return validate_document(config.text, source)[0]
    models = doc.get("models") if isinstance(doc, LineMap) else None
    kept = {}
    for d, (block_id, text), part in zip(digests, config.blocks, parts, strict=True):
        if part is not text:
            kept[d] = part
        elif isinstance(models, dict) and block_id in models:
            kept[d] = stand_in(block_id, models[block_id])
    if kept != stand_ins:
        os.makedirs(cache_dir, exist_ok=True)
        write_if_changed(memo_path, dumps("checked-blocks", CheckedBlocks(kept)), durable=False)
    return problems

