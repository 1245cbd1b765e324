"""The front's part of a fleet config: one `peers:` entry per host, listing the ids that host's
generated config serves, and a `selectors:` entry for each id several hosts serve.

llama-swap's rules (mostlygeek/llama-swap `internal/config/peer.go`, `selectors.go`):
- a peer needs a `proxy` URL and at least one model (`peer models can not be empty`), so a host
  that serves nothing is left out, with a comment;
- `<peer>/<model>` is every peer model's reserved name (v242+); a bare id reaches a peer only
  when exactly one peer lists it, and a local model id or alias wins over it;
- a selector's id may not be a model id, an alias or a `<peer>/<model>` name; `warm` accepts
  local targets only, so replicated peer models get `spillover` (v241+): requests fill the
  hosts in `hosts:` order, one in flight each (the default `settings.spillover: 1`), before the
  next host is used.
The API key is written as `${env.NAME}`: llama-swap substitutes it where the front runs, and
the key itself never reaches the file.
"""

from __future__ import annotations

from collections.abc import Container, Sequence

from attrs import frozen

from autogen.errors import SwapgenError
from autogen.router.fragments import comment_text, quote

SPILLOVER = "spillover"


@frozen
class Peer:
    """One host as the front sees it.

    Example: Peer(name="gpu-a", url="http://gpu-a.lan:8080", api_key_env="GPU_A_KEY",
    models=("gemma-3-12b-it-q4_k_m", "qwen3-8b-bf16")).
    """

    name: str
    url: str
    api_key_env: str | None
    #: The entry ids the host's config serves, sorted.
    models: tuple[str, ...]


@frozen
class FrontPart:
    """The YAML text of `peers:` and `selectors:`, and what it holds (for the run's summary)."""

    text: str
    peers: int
    selectors: int


def qualified(peer: str, model: str) -> str:
    """llama-swap's fully qualified peer model name (`PeerModelFQN`)."""
    return f"{peer}/{model}"


def replicated(peers: Sequence[Peer]) -> dict[str, list[str]]:
    """Model id → the hosts serving it, for ids more than one host serves (hosts in order)."""
    hosts: dict[str, list[str]] = {}
    for peer in peers:
        for model in peer.models:
            hosts.setdefault(model, []).append(peer.name)
    return {model: names for model, names in sorted(hosts.items()) if len(names) > 1}


def check_names(peers: Sequence[Peer], local_ids: Container[str]) -> None:
    """A `<host>/<model>` name that is also one of the front's own ids would make llama-swap
    refuse the file (`ValidatePeerNamespace`); say which model and host instead."""
    for peer in peers:
        for model in peer.models:
            name = qualified(peer.name, model)
            if name in local_ids:
                raise SwapgenError(f"the front serves a model {name!r}, which is also host {peer.name}'s model "
                                   f"{model!r} as llama-swap names it; rename one of them (or an override `skip:`)")


def render_front(peers: Sequence[Peer], local_ids: Container[str]) -> FrontPart:
    """`peers:` then `selectors:` (each only when it has an entry), after the front's own
    `models:` and `groups:`. Raises SwapgenError for a name clash llama-swap would refuse."""
    check_names(peers, local_ids)
    served = [p for p in peers if p.models]
    text = "".join(f"# host {quote(comment_text(p.name))}: no served models, so not a peer "
                   "(llama-swap refuses a peer without models)\n" for p in peers if not p.models)
    lines: list[str] = []
    for peer in served:
        lines.append(f"  {quote(peer.name)}:")
        lines.append(f"    proxy: {quote(peer.url)}")
        if peer.api_key_env:
            lines.append(f"    apiKey: {quote('${env.' + peer.api_key_env + '}')}")
        lines.append("    models:")
        lines.extend(f"      - {quote(m)}" for m in peer.models)
    if lines:
        text += "peers:\n" + "\n".join(lines) + "\n"
    fqns = {qualified(p.name, m) for p in served for m in p.models}
    selector_lines: list[str] = []
    count = 0
    for model, hosts in replicated(served).items():
        shown = comment_text(", ".join(hosts))
        if model in local_ids or model in fqns:
            what = "the front's own model" if model in local_ids else "a <host>/<model> name"
            selector_lines.append(f"  # {quote(comment_text(model))} on {shown}: no selector, the id is {what}")
            continue
        selector_lines.append(f"  # on {shown}: {SPILLOVER} fills them in this order")
        selector_lines.append(f"  {quote(model)}:")
        selector_lines.append(f"    strategy: {SPILLOVER}")
        selector_lines.append("    targets:")
        selector_lines.extend(f"      - {quote(qualified(h, model))}" for h in hosts)
        count += 1
    if count:
        text += "selectors:\n" + "\n".join(selector_lines) + "\n"
    else:  # only comments: a `selectors:` key without entries would be null
        text += "".join(line.lstrip() + "\n" for line in selector_lines)
    return FrontPart(text=text, peers=len(served), selectors=count)
