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

from autogen.cmdline import render_cmd
from autogen.emit.entry import Capabilities, Entry, MetaValue, Plan, Skip
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


def render_entry(entry: Entry) -> str:
    """The YAML lines of one `models.<id>` block, indented for the `models:` map."""
    out = [f"{INDENT}# {comment_text(line)}" for line in entry.comment]
    out.append(f"{INDENT}{quote(entry.id)}:")
    body = INDENT * 2
    out.append(f"{body}cmd: |")
    out.extend(f"{body}{INDENT}{line}" for line in render_cmd(entry.argv).splitlines())
    if entry.env:
        out.append(f"{body}env:")
        out.extend(f"{body}{INDENT}- {quote(e)}" for e in entry.env)
    if entry.check_endpoint is not None:
        out.append(f"{body}checkEndpoint: {quote(entry.check_endpoint)}")
    if entry.ttl is not None:
        out.append(f"{body}ttl: {entry.ttl}")
    if entry.use_model_name is not None:
        out.append(f"{body}useModelName: {quote(entry.use_model_name)}")
    if entry.unlisted:
        out.append(f"{body}unlisted: true")
    if entry.aliases:
        out.append(f"{body}aliases: {_flow_list(entry.aliases)}")
    if entry.metadata:
        out.append(f"{body}metadata:")
        out.extend(f"{body}{INDENT}{key}: {scalar(value)}" for key, value in entry.metadata)
    if entry.capabilities is not None:
        cap_lines = _capabilities(entry.capabilities)
        if cap_lines:
            out.append(f"{body}capabilities:")
            out.extend(f"{body}{INDENT}{line}" for line in cap_lines)
    return "\n".join(out) + "\n"


def render_skip(skip: Skip) -> str:
    return f"{INDENT}# SKIPPED {quote(comment_text(skip.id))}: {comment_text(skip.reason)}\n"


def render_plan(plan: Plan) -> list[tuple[str, str]]:
    """(sort id, text) per block; the config task sorts all blocks of all models by id."""
    blocks = [(e.id, render_entry(e)) for e in plan.entries]
    blocks += [(s.id, render_skip(s)) for s in plan.skips]
    return blocks
