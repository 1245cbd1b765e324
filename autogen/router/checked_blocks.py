"""Validating a generated config at the cost of what changed, not of the whole library.

A config swapgen writes is its head (the header comment, `healthCheckTimeout`, the user's
top-level `llama_swap:` keys), one block per entry, and its tail (groups or the routing matrix).
Whether an entry's block is valid depends on its own text and the head's macros alone; what the
loader checks across entries (duplicate aliases, an alias that is another model's id, group
members, matrix and selector references) reads only each entry's id, aliases and
`filters.setParamsByID` keys.

So a block found valid once, under the same head, is not parsed again: what the checks across
entries read of it (`StandIn`) joins the document the loader's rules run on
(`validate.check_document`, the same code `swapgen validate` runs), which holds the head, the
tail and the new blocks in full. One new model in a library of 2,000 then parses one block.
Any problem sends the real text through the whole check, so every message names the line of
the file that is written.

The blocks found valid are kept in `cache_dir/checked-blocks.json` (`CheckedBlocks`), keyed by
a digest of the head and the block: a changed head (new macros) checks every block again.
"""

from __future__ import annotations

import os

import xxhash
from attrs import frozen

from autogen.records import read_record, write_record
from autogen.router.validate import Problem, validate_document
from autogen.router.yamllines import LineMap, LineSeq

FILE = "checked-blocks.json"
#: Never started: a stand-in's `proxy` names no `${PORT}`, so its `cmd` needs none.
_STAND_IN_CMD, _STAND_IN_PROXY = "swapgen-stand-in", "http://127.0.0.1:1"


@frozen
class StandIn:
    """What llama-swap's checks across entries read of an entry found valid.

    Example: StandIn(model_id="qwen3-8b", aliases=("qwen",), params=("qwen3-8b-fast",)).
    """

    model_id: str
    aliases: tuple[str, ...] = ()
    #: The keys of its `filters.setParamsByID`, which the loader makes aliases of it.
    params: tuple[str, ...] = ()

    @classmethod
    def of(cls, model_id: str, entry: object) -> StandIn:
        """From the entry's parsed mapping."""
        if not isinstance(entry, dict):
            return cls(model_id)
        aliases = entry.get("aliases")
        filters = entry.get("filters")
        params = filters.get("setParamsByID") if isinstance(filters, dict) else None
        return cls(model_id, tuple(a for a in aliases if isinstance(a, str)) if isinstance(aliases, list) else (),
                   tuple(k for k in params if isinstance(k, str)) if isinstance(params, dict) else ())

    def entry(self) -> LineMap:
        """The entry as the checks across entries read it (no line: any problem is looked up
        in the whole text)."""
        entry = _mapping({"cmd": _STAND_IN_CMD, "proxy": _STAND_IN_PROXY})
        if self.aliases:
            aliases = LineSeq(self.aliases)
            aliases.lines = [None] * len(aliases)
            entry["aliases"], entry.lines["aliases"] = aliases, None
        if self.params:
            params = _mapping({key: LineMap() for key in self.params})
            entry["filters"], entry.lines["filters"] = _mapping({"setParamsByID": params}), None
        return entry


def _mapping(values: dict) -> LineMap:
    found = LineMap()
    found.update(values)
    found.lines.update(dict.fromkeys(values))
    return found


@frozen
class CheckedBlocks:
    """Blocks found valid: digest of (head, block) → what the checks across entries read of it."""

    stand_ins: dict[str, StandIn]


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


def _is_entry(block: str) -> bool:
    """A block that holds an entry, not only comment lines (a skipped model's)."""
    return any(line.strip() and not line.lstrip().startswith("#") for line in block.splitlines())


def check_generated(config: Assembled, source: str, cache_dir: str) -> list[Problem]:
    """Every problem llama-swap's rules find in `config.text` (as `validate.validate_text`),
    parsing only the blocks not found valid before; remembers the new ones when none is found."""
    memo_path = os.path.join(cache_dir, FILE)
    known = read_record(memo_path, "checked-blocks", CheckedBlocks)
    stand_ins = known.stand_ins if known is not None else {}
    digests = [_digest(config.head, text) for _, text in config.blocks]
    found = {d: stand_ins[d] for d in digests if d in stand_ins}
    fresh = [(d, block) for d, block in zip(digests, config.blocks, strict=True) if d not in found]
    if found and not any(_is_entry(text) for _, (_, text) in fresh):  # one entry in full keeps `models:` a mapping
        first = next(i for i, d in enumerate(digests) if d in found)
        fresh.insert(0, (digests[first], config.blocks[first]))
        found.pop(digests[first])
    text = config.head + "".join(block for _, (_, block) in fresh) + config.tail
    problems, doc = validate_document(text, source, {s.model_id: s.entry() for s in found.values()})
    if problems:  # at the lines of the file as written
        return validate_document(config.text, source)[0]
    models = doc.get("models") if isinstance(doc, LineMap) else None
    for d, (block_id, _) in fresh:
        if isinstance(models, dict) and block_id in models:
            found[d] = StandIn.of(block_id, models[block_id])
    if found != stand_ins:
        write_record(memo_path, "checked-blocks", CheckedBlocks(found))
    return problems
