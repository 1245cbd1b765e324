"""Plan → YAML text, one block per router entry, rendered by hand for byte stability and speed.

Each model task renders its blocks once; the config task only sorts and concatenates them
(ruamel would take seconds to dump 1,000 entries). Every scalar we write is either a plain
number or a JSON-quoted string (JSON escapes are valid YAML double-quoted escapes); `cmd` is a
literal block scalar with one option per line. Comments never carry a newline or `${`
(llama-swap substitutes `${env.X}` in the raw text before parsing, comments included).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from autogen.cmdline import render_cmd
from autogen.emit.entry import Capabilities, Entry, MetaValue, Plan, Skip
from autogen.footprint import MEMORY_KEY
from autogen.numfmt import format_g

INDENT = "  "


def scalar(value: MetaValue) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return json.dumps(str(value))
        return format_g(value)
    return quote(value)


def quote(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def comment_text(text: str) -> str:
    """One comment line: no line breaks, no macro openers."""
    flat = " ".join(text.split())
    return flat.replace("${", "$ {")


def _flow_list(items: tuple[str, ...]) -> str:
    return "[" + ", ".join(quote(i) for i in items) + "]"


def _capabilities(cap: Capabilities) -> list[str]:
    lines = []
    if cap.inputs:
        lines.append(f"in: {_flow_list(cap.inputs)}")
    if cap.outputs:
        lines.append(f"out: {_flow_list(cap.outputs)}")
    if cap.tools is not None:
        lines.append(f"tools: {scalar(cap.tools)}")
    if cap.reranker is not None:
        lines.append(f"reranker: {scalar(cap.reranker)}")
    if cap.context is not None:
        lines.append(f"context: {cap.context}")
    return lines


# --- plain YAML data as the user wrote it (`llama_swap:` blocks) ------------------------------

_BARE_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
#: Words a YAML reader takes for booleans or null (yaml.v3's YAML 1.2 ones in any case, and
#: YAML 1.1's `yes`/`on`/…, which PyYAML and older tools still read so): quoted.
_YAML_WORDS = frozenset(("y", "n", "yes", "no", "on", "off", "true", "false", "null"))


def yaml_key(key: str) -> str:
    """A mapping key: bare when every YAML reader gives back the same string, else JSON-quoted."""
    return key if _BARE_KEY.fullmatch(key) and key.lower() not in _YAML_WORDS else quote(key)


def _data_scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, float) and not math.isfinite(value):
        return ".nan" if math.isnan(value) else ("-.inf" if value < 0 else ".inf")
    text = scalar(value)
    if isinstance(value, float) and "." not in text:
        # a float keeps a point: `1` would be an int, and YAML 1.1 readers take `1e+20` for text
        mantissa, e, exponent = text.partition("e")
        return f"{mantissa}.0{e}{exponent}"
    return text


def render_data(key: str, value: Any, indent: str) -> list[str]:
    """`key: value` in block style at `indent`: mappings and lists nest, every string is
    JSON-quoted (so `${env.X}` stays inside one double-quoted scalar and YAML 1.1/1.2 words
    keep their type), empty containers are `{}` / `[]`."""
    head = f"{indent}{yaml_key(key)}:"
    if isinstance(value, dict):
        if not value:
            return [f"{head} {{}}"]
        lines = [head]
        for k, v in value.items():
            lines += render_data(k, v, indent + INDENT)
        return lines
    if isinstance(value, list):
        if not value:
            return [f"{head} []"]
        lines = [head]
        for item in value:
            lines += _render_item(item, indent + INDENT)
        return lines
    return [f"{head} {_data_scalar(value)}"]


def _render_item(item: Any, indent: str) -> list[str]:
    """One list item: `- scalar`, or a nested container under `- ` (flow-free, like the rest)."""
    if isinstance(item, dict) and item:
        inner = [line for k, v in item.items() for line in render_data(k, v, indent + INDENT)]
        return [f"{indent}- {inner[0].lstrip()}", *inner[1:]]
    if isinstance(item, list) and item:
        inner = [line for sub in item for line in _render_item(sub, indent + INDENT)]
        return [f"{indent}- {inner[0].lstrip()}", *inner[1:]]
    if isinstance(item, (dict, list)):
        return [f"{indent}- {'{}' if isinstance(item, dict) else '[]'}"]
    return [f"{indent}- {_data_scalar(item)}"]


def render_entry(entry: Entry) -> str:
    """The YAML lines of one `models.<id>` block, indented for the `models:` map."""
    out = [f"{INDENT}# {comment_text(line)}" for line in entry.comment]
    out.append(f"{INDENT}{quote(entry.id)}:")
    body = INDENT * 2
    out.append(f"{body}cmd: |")
    out.extend(f"{body}{INDENT}{line}" for line in render_cmd(entry.argv).splitlines())
    out += _process_keys(entry, body)
    if entry.use_model_name is not None:
        out.append(f"{body}useModelName: {quote(entry.use_model_name)}")
    if entry.unlisted:
        out.append(f"{body}unlisted: true")
    if entry.aliases:
        out.append(f"{body}aliases: {_flow_list(entry.aliases)}")
    if entry.concurrency_limit is not None:
        out.append(f"{body}concurrencyLimit: {entry.concurrency_limit}")
    user = dict(entry.llama_swap)
    for key, value in entry.llama_swap:
        if key != "metadata":
            out.extend(render_data(key, value, body))
    out.extend(_metadata(entry, user.get("metadata") or {}, body))
    if entry.capabilities is not None:
        cap_lines = _capabilities(entry.capabilities)
        if cap_lines:
            out.append(f"{body}capabilities:")
            out.extend(f"{body}{INDENT}{line}" for line in cap_lines)
    return "\n".join(out) + "\n"


def _process_keys(entry: Entry, body: str) -> list[str]:
    """How llama-swap runs the entry: `cmdStop`, `proxy`, `env`, `checkEndpoint`, `ttl`, `unloadTimeout`."""
    out = []
    if entry.cmd_stop:
        out.append(f"{body}cmdStop: |")
        out.extend(f"{body}{INDENT}{line}" for line in render_cmd(entry.cmd_stop).splitlines())
    if entry.proxy is not None:
        out.append(f"{body}proxy: {quote(entry.proxy)}")
    if entry.env:
        out.append(f"{body}env:")
        out.extend(f"{body}{INDENT}- {quote(e)}" for e in entry.env)
    if entry.check_endpoint is not None:
        out.append(f"{body}checkEndpoint: {quote(entry.check_endpoint)}")
    if entry.ttl is not None:
        out.append(f"{body}ttl: {entry.ttl}")
    if entry.unload_timeout is not None:
        out.append(f"{body}unloadTimeout: {entry.unload_timeout}")
    return out


def _metadata(entry: Entry, user: dict[str, Any], body: str) -> list[str]:
    """`metadata`: ours, the memory record, then the user's own keys."""
    memory = entry.footprint.memory if entry.footprint is not None else None
    if not (entry.metadata or user or memory):
        return []
    out = [f"{body}metadata:"]
    out.extend(f"{body}{INDENT}{key}: {scalar(value)}" for key, value in entry.metadata)
    if memory is not None:
        out.extend(render_data(MEMORY_KEY, memory.metadata(), body + INDENT))
    for key, value in user.items():
        out.extend(render_data(key, value, body + INDENT))
    return out


def render_skip(skip: Skip) -> str:
    return f"{INDENT}# SKIPPED {quote(comment_text(skip.id))}: {comment_text(skip.reason)}\n"


def render_plan(plan: Plan) -> list[tuple[str, str]]:
    """(sort id, text) per block; the config task sorts all blocks of all models by id."""
    blocks = [(e.id, render_entry(e)) for e in plan.entries]
    blocks += [(s.id, render_skip(s)) for s in plan.skips]
    return blocks
