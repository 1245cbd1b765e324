"""Check a llama-swap config as llama-swap would: its JSON schema, then its loader's rules.

Mirrors `internal/config/{load.go,macros.go,config.go}` of mostlygeek/llama-swap
(docs/maintainers/llama-swap.md#loader-rules); the schema tables are in `llamaswap_schema`, the line-keeping YAML
reader in `yamllines`. Every problem is collected, not just the first, each with the line of
the key it concerns. Keys llama-swap silently ignores are reported too: a generator must
never write them.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping

from attrs import frozen

from autogen.bounds import CONFIG, InputTooLarge, read_input
from autogen.cmdline import split_command, strip_comment_lines
from autogen.numfmt import counted, format_g
from autogen.router.llamaswap_schema import DURATION, ERROR, IGNORED, TOP_SPEC, WARNING, check, macro_entries, show
from autogen.router.matrix_dsl import DslError, can_contain_all, compile_sets
from autogen.router.yamllines import Converter, LineMap, compose


@frozen
class Problem:
    """One finding; `str()` gives `FILE:LINE: error: message` (or `warning:`), as compilers do.

    `severity`: "error" (llama-swap refuses the file), "ignored" (llama-swap loads the file and
    silently ignores the key or id), "warning" (depends on where llama-swap runs, e.g. an unset
    `${env.X}`). `swapgen validate` labels the last two `warning` and fails only on errors; a
    generated config must have neither of the first two (`fatal`).
    """

    line: int | None
    message: str
    source: str = "config.yaml"
    severity: str = ERROR

    @property
    def fatal(self) -> bool:
        """swapgen never writes a config with it: llama-swap would refuse the file or drop part of it."""
        return self.severity != WARNING

    @property
    def label(self) -> str:
        """`error` when llama-swap refuses the file, else `warning`: what `swapgen validate` prints and exits on."""
        return "warning" if self.severity in (IGNORED, WARNING) else "error"

    @property
    def where(self) -> str:
        return self.source if self.line is None else f"{self.source}:{self.line}"

    def __str__(self) -> str:
        return f"{self.where}: {self.label}: {self.message}"


class _Report:
    """Problems of one file, in the order found; `add` is what the readers and checks call."""

    def __init__(self, source: str):
        self.source = source
        self.problems: list[Problem] = []

    def add(self, line: int | None, message: str, severity: str = ERROR) -> None:
        self.problems.append(Problem(line, message, self.source, severity))


# --- macros (macros.go: resolveConfigMacros, validateConfigMacroUses) --------------------

_MACRO_USE = re.compile(r"\$\{([a-zA-Z0-9_-]+)\}")
_ENV_MACRO = re.compile(r"\$\{env\.([a-zA-Z_][a-zA-Z0-9_]*)\}")
_DEFAULT_PROXY = "http://localhost:${PORT}"


def _go_format(value) -> str:
    """Go's `fmt.Sprintf("%v", v)` for a macro value interpolated into a string."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if not isinstance(value, float):
        return str(value)
    return format_g(value)


def _expand(text: str, macros):
    """Apply macros last-declared first, as llama-swap does; `${x}` alone keeps x's type."""
    value = text
    for name, macro in reversed(macros):
        slug = "${" + name + "}"
        if value == slug:
            value = macro
            if not isinstance(value, str):
                return value
        elif slug in value:
            value = value.replace(slug, _go_format(macro))
    return value


_HINTS = {
    "PORT": " (${PORT} is only set when cmd uses it)",
    "PID": " (${PID} is only allowed in cmdStop)",
    "MODEL_ID": " (${MODEL_ID} is only set inside a model)",
}


def _resolve(value, macros, path: str, line, report: _Report, declared, allow_pid=False):
    """Expand macros in every string under `value` (in place for containers; keys are not
    targets) and report what stays unresolved (validateConfigMacroUses)."""
    if isinstance(value, str):
        if "${" in value:
            value = _expand(value, macros)
            for match in _MACRO_USE.finditer(value) if isinstance(value, str) else ():
                name = match[1]
                if not (name == "PID" and allow_pid):
                    why = "a macro may only use macros defined before it"
                    hint = _HINTS.get(name, f" ({why})" if name in declared else "")
                    report.add(line, f"{path}: unknown macro '${{{name}}}'{hint}")
                    break
    elif isinstance(value, dict):
        for key, item in value.items():
            at = value.lines[key]
            value[key] = _resolve(item, macros, f"{path}.{key}", at, report, declared, allow_pid)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            at = value.lines[i]
            value[i] = _resolve(item, macros, f"{path}[{i}]", at, report, declared, allow_pid)
    return value


def _resolve_param_keys(model: LineMap, macros, path: str, report: _Report) -> None:
    """`filters.setParamsByID` keys are the one kind of key llama-swap expands."""
    filters = model.get("filters")
    params = filters.get("setParamsByID") if isinstance(filters, dict) else None
    if not isinstance(params, dict):
        return
    out = LineMap()
    where = f"{path}.filters.setParamsByID"
    for key, value in params.items():
        new, line = key, params.lines[key]
        for name, macro in reversed(macros):
            new = new.replace("${" + name + "}", _go_format(macro))
        if match := _MACRO_USE.search(new):
            report.add(line, f"{where}: unknown macro '${{{match[1]}}}' in key '{key}'")
        if new in out:
            report.add(line, f"{where}: keys '{key}' and '{new}' resolve to the same value")
        out[new], out.lines[new] = value, line
    filters["setParamsByID"] = out


def _merged_macros(model_id: str, global_macros: list, local: list) -> list:
    """mergeModelMacros: `MODEL_ID`, the global macros, a model macro replacing a global one."""
    merged = [("MODEL_ID", model_id), *global_macros]
    for name, value in local:
        names = [n for n, _ in merged]
        if name in names:
            merged[names.index(name)] = (name, value)
        else:
            merged.append((name, value))
    return merged


def _resolve_macros(doc: LineMap, report: _Report) -> None:
    """resolveConfigMacros: global macros outside `models`, then each model's own scope."""
    global_macros = macro_entries(doc.get("macros"), "macros", doc.lines.get("macros"), report.add)
    declared = {name for name, _ in global_macros}
    for key in doc.keys() & TOP_SPEC.fields.keys() - {"models", "macros"}:
        doc[key] = _resolve(doc[key], global_macros, key, doc.lines[key], report, declared)
    models = doc.get("models")
    port = 5800  # any number: validity does not depend on it
    for model_id in sorted(models) if isinstance(models, dict) else ():
        model, path, line = models[model_id], f"models.{model_id}", models.lines[model_id]
        if not isinstance(model, dict):
            continue
        local = macro_entries(model.get("macros"), f"{path}.macros", model.lines.get("macros"), report.add)
        merged = _merged_macros(model_id, global_macros, local)
        for field in ("cmd", "cmdStop"):  # comment lines go before any expansion
            if isinstance(model.get(field), str) and strip_comment_lines(model[field]).strip():
                model[field] = strip_comment_lines(model[field])
        cmd = _expand(model["cmd"], merged) if isinstance(model.get("cmd"), str) else None
        if isinstance(cmd, str) and "${PORT}" in cmd:
            merged.insert(0, ("PORT", port))  # expanded after every other macro
            port += 1
        explicit_proxy = model.get("proxy") is not None
        proxy = _expand(model["proxy"] if explicit_proxy else _DEFAULT_PROXY, merged)
        model["proxy"], model.lines["proxy"] = proxy, model.lines.get("proxy", line)
        if isinstance(cmd, str) and isinstance(proxy, str) and "${PORT}" in proxy:
            why = "" if explicit_proxy else f" (no proxy set, so the default {_DEFAULT_PROXY} applies)"
            msg = "proxy uses ${PORT} but cmd does not - ${PORT} is only available when used in cmd"
            report.add(model.lines["proxy"], f"{path}: {msg}{why}")
        known = declared | {name for name, _ in local}
        _resolve_param_keys(model, merged, path, report)
        for field, value in model.items():
            if field not in ("macros", "proxy"):
                where, at = f"{path}.{field}", model.lines[field]
                model[field] = _resolve(value, merged, where, at, report, known, field == "cmdStop")


# --- the loader's cross-references (load.go, internal/router/group.go) --------------------


def _check_models(models: LineMap, report: _Report) -> dict[str, str]:
    """cmd splits to a program, proxy parses, aliases unique; returns alias → model id."""
    owner: dict[str, str] = {}
    for model_id in sorted(models):
        model, path = models[model_id], f"models.{model_id}"
        if not isinstance(model, dict):
            continue
        cmd = model.get("cmd")
        if isinstance(cmd, str) and cmd and not split_command(cmd):
            report.add(model.lines["cmd"], f"{path}.cmd: empty command (only comment lines or blanks)")
        proxy = model.get("proxy")
        if isinstance(proxy, str) and "${" not in proxy and not _parses_as_url(proxy):
            report.add(model.lines["proxy"], f"{path}.proxy: invalid proxy URL {proxy!r}")
        _check_aliases(models, model_id, model.get("aliases"), owner, report)
    for model_id in sorted(models):  # setParamsByID keys become aliases after explicit ones
        _check_params_by_id(models, model_id, owner, report)
    return owner


def _check_aliases(models: LineMap, model_id: str, aliases, owner: dict[str, str], report: _Report) -> None:
    """A model's aliases: unique, and none the id of another model."""
    path = f"models.{model_id}"
    for i, alias in enumerate(aliases if isinstance(aliases, list) else ()):
        if not isinstance(alias, str):
            continue
        at = aliases.lines[i]
        if alias in owner:
            why = f"duplicate alias '{alias}' (already used by model '{owner[alias]}')"
            report.add(at, f"{path}.aliases[{i}]: {why}")
        elif alias in models and alias != model_id:
            why = f"alias '{alias}' is the id of another model, which wins"
            report.add(at, f"{path}.aliases[{i}]: {why}")
        owner.setdefault(alias, model_id)


def _check_params_by_id(models: LineMap, model_id: str, owner: dict[str, str], report: _Report) -> None:
    """A model's `filters.setParamsByID` keys, which the loader makes aliases of it."""
    model = models[model_id]
    filters = model.get("filters") if isinstance(model, dict) else None
    params = filters.get("setParamsByID") if isinstance(filters, dict) else None
    for key in params if isinstance(params, dict) else ():
        where = f"models.{model_id}.filters.setParamsByID"
        if key == model_id:
            continue
        if key in models:
            report.add(params.lines[key], f"{where}: key '{key}' conflicts with an existing model ID")
        elif owner.setdefault(key, model_id) != model_id:
            why = f"duplicate alias '{key}', already used by model {owner[key]}"
            report.add(params.lines[key], f"{where}: {why}")


def _parses_as_url(text: str) -> bool:
    return go_url_problem(text) is None


#: Characters Go's url.Parse accepts in a host besides letters and digits (`shouldEscape`,
#: encodeHost mode) and `%` escapes.
_HOST_CHARS = frozenset("-._~!$&'()*+,;=:[]<>\"")


def go_url_problem(text: str) -> str | None:
    """Why Go's `net/url.Parse` refuses `text` (None: it parses): control characters, a missing
    scheme before `:`, a colon in a scheme-less first segment, a bad `%` escape, a host with
    characters a host cannot have, a non-numeric port."""
    if any(ch < " " or ch == "\x7f" for ch in text):
        return "invalid control character in URL"
    rest, scheme = text.partition("#")[0], ""
    for i, ch in enumerate(rest):  # getScheme
        if ch.isascii() and ch.isalpha():
            continue
        if ch.isascii() and (ch.isdigit() or ch in "+-."):
            if i == 0:
                break
            continue
        if ch == ":":
            if i == 0:
                return "missing protocol scheme"
            scheme, rest = rest[:i], rest[i + 1:]
        break
    if "%" in text and re.search(r"%(?![0-9A-Fa-f]{2})", text):
        return "invalid URL escape"
    rest = rest.partition("?")[0]
    if not scheme and not rest.startswith("/") and ":" in rest.partition("/")[0]:
        return "first path segment in URL cannot contain colon"
    if not rest.startswith("//") or (not scheme and rest.startswith("///")):
        return None
    return _go_host_problem(rest[2:].partition("/")[0].rpartition("@")[2])


def _go_host_problem(host: str) -> str | None:
    """url.Parse's `parseHost`: a bracketed IPv6 literal, else host characters; a numeric port."""
    if host.startswith("["):
        end = host.find("]")
        if end < 0:
            return "missing ']' in host"
        port = host[end + 1:]
        if port and not port.startswith(":"):
            return f"invalid port {port!r} after host"
    else:
        colon = host.rfind(":")
        port = host[colon:] if colon >= 0 else ""
        bad = [ch for ch in host[: colon if colon >= 0 else len(host)]
               if not (ch.isalnum() or ch in _HOST_CHARS or ch == "%" or ord(ch) > 0x7f)]
        if bad:
            return f"invalid character {bad[0]!r} in host name"
    if port and not port[1:].isdigit() and port != ":":
        return f"invalid port {port!r} after host"
    return None


def _check_groups(groups, path: str, models, report: _Report) -> None:
    """load.go's member rules, and group.go's "no model config for" at router start."""
    used_in: dict[str, str] = {}
    for group_id, group in groups.items():
        members = group.get("members") if isinstance(group, dict) else None
        if not isinstance(members, list):
            continue
        seen = set()
        for i, member in enumerate(members):
            at, where = members.lines[i], f"{path}.{group_id}.members[{i}]"
            if not isinstance(member, str):
                continue
            if member in seen:
                report.add(at, f"{where}: duplicate model member {member} found in group: {group_id}")
                continue
            seen.add(member)
            if member in used_in:
                why = f"is used in multiple groups: {used_in[member]} and {group_id}"
                report.add(at, f"{where}: model member {member} {why}")
            used_in.setdefault(member, group_id)
            if member not in models:
                why = f'llama-swap fails to start: no model config for "{member}"'
                report.add(at, f"{where}: {member!r} is not a model id ({why})")


def _check_matrix(path: str, matrix, line, models, report: _Report) -> None:
    """config/matrix.go `ValidateMatrix` beyond the schema: every `evict_costs` key and every
    leaf of a set is a var or a model id, every `+ref` a defined set, no reference cycle; a set
    that does not parse gets the compiler's message. llama-swap stops at its first problem, and
    so does this check (one line per matrix)."""
    variables = _at(matrix, "vars")
    names = {k: v for k, v in variables.items() if isinstance(v, str)}

    def resolve(ident: str) -> str | None:
        return names.get(ident, ident if ident in models else None)

    costs = _at(matrix, "evict_costs")
    for key in costs:
        if resolve(key) is None:
            report.add(costs.lines[key], f'{path}.evict_costs: unknown var or model "{key}"')
            return
    sets = _at(matrix, "sets")
    texts = [(name, text) for name, text in sets.items() if isinstance(text, str)]
    if not texts:
        return  # the schema already says a matrix needs a set
    try:
        compile_sets(texts, resolve)
    except DslError as exc:
        at = sets.lines.get(exc.set_name, line) if exc.set_name is not None else line
        report.add(at, f"{path}: {exc}")


def _matrix_roots(doc: LineMap, models):
    """The compiled sets of the matrix llama-swap uses (set name → expression), or None when
    there is none or it does not compile (`_check_matrix` says why)."""
    found = _effective_matrix(doc)
    if found is None:
        return None
    names = {k: v for k, v in _at(found[1], "vars").items() if isinstance(v, str)}
    texts = [(name, text) for name, text in _at(found[1], "sets").items() if isinstance(text, str)]
    try:
        return compile_sets(texts, lambda ident: names.get(ident, ident if ident in models else None))
    except DslError:
        return None


def _effective_matrix(doc: LineMap):
    """(path, matrix, line) of the matrix llama-swap compiles (load.go: the legacy top-level key,
    else `routing.router.settings.matrix` when `use: matrix`), or None."""
    if isinstance(doc.get("matrix"), dict):
        return "matrix", doc["matrix"], doc.lines["matrix"]
    router = _at(doc, "routing", "router")
    settings = _at(router, "settings")
    if router.get("use") == "matrix" and isinstance(settings.get("matrix"), dict):
        return "routing.router.settings.matrix", settings["matrix"], settings.lines["matrix"]
    return None


def _duration_seconds(text: str) -> float:
    units = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
    total = sum(float(n) * units[u] for n, u in re.findall(r"(\d+(?:\.\d+)?)(ns|us|ms|s|m|h)", text))
    return -total if text.startswith("-") else total


def _at(node, *keys, kind=dict):
    """The value at `keys` below `node` when every step is a mapping and it is a `kind`."""
    for key in keys:
        node = node.get(key) if isinstance(node, dict) else None
    return node if isinstance(node, kind) else kind()


def _check_references(doc: LineMap, report: _Report) -> None:
    models = _at(doc, "models")
    owner = _check_models(models, report)
    router, settings = _at(doc, "routing", "router"), _at(doc, "routing", "router", "settings")
    legacy = doc.get("matrix") is not None or bool(doc.get("groups"))
    if legacy and (router.get("use") or settings.get("matrix") is not None or settings.get("groups")):
        msg = "config uses both the legacy top-level 'matrix'/'groups' keys and the new 'routing.router' block"
        report.add(doc.lines["routing"], msg)
    if doc.get("groups") and doc.get("matrix") is not None:
        report.add(doc.lines["matrix"], "config cannot use both 'groups' and 'matrix'")
    if router.get("use") == "matrix" and settings.get("matrix") is None:
        msg = "routing.router.use is 'matrix' but routing.router.settings.matrix is not set"
        report.add(router.lines["use"], msg)
    for where, block in (("", doc), ("routing.router.settings.", settings)):
        _check_groups(_at(block, "groups"), f"{where}groups", models, report)
        variables = _at(block, "matrix", "vars")
        for var, model_id in variables.items():
            if isinstance(model_id, str) and model_id not in models:
                report.add(variables.lines[var], f"{where}matrix.vars.{var}: {model_id!r} is not a model id")
    effective = _effective_matrix(doc)
    if effective is not None:
        _check_matrix(*effective, models, report)
    known_ids = models.keys() | owner.keys()
    preload = _at(doc, "hooks", "on_startup", "preload", kind=list)
    for i, model_id in enumerate(preload):
        if isinstance(model_id, str) and model_id.strip() and model_id.strip() not in known_ids:
            why = "is not a model id or alias (llama-swap drops it)"
            report.add(preload.lines[i], f"hooks.on_startup.preload[{i}]: {model_id!r} {why}", IGNORED)
    priority = _at(doc, "routing", "scheduler", "settings", "fifo", "priority")
    for model_id in priority.keys() - known_ids:
        msg = f"routing.scheduler.settings.fifo.priority references unknown model {model_id!r}"
        report.add(priority.lines[model_id], msg)
    keys = _at(doc, "apiKeys", kind=list)
    for i, key in enumerate(keys):
        if isinstance(key, str) and " " in key:
            report.add(keys.lines[i], f"apiKeys[{i}]: api key cannot contain spaces")
    check_peers(doc, models, owner, report)
    check_selectors(doc, models, owner, report)
    check_profiles(doc, models, owner, report)
    every = _at(doc, "performance").get("every")
    if isinstance(every, str) and re.search(DURATION, every) and _duration_seconds(every) < 5:
        report.add(doc["performance"].lines["every"], f"performance.every: must be at least 5s (got {every})")


# --- peers, selectors and profiles (peer.go, selectors.go, load.go: validateProfiles) ------


def _peer_models(peers) -> list[tuple[str, str]]:
    """(peer id, model id) of every peer model, each listed once per peer (ResolvePeerModel
    skips a peer's duplicate entries)."""
    pairs = []
    for peer_id in sorted(peers):
        seen = set()
        listed = peers[peer_id].get("models") if isinstance(peers[peer_id], dict) else None
        for model_id in listed if isinstance(listed, list) else ():
            if isinstance(model_id, str) and model_id not in seen:
                seen.add(model_id)
                pairs.append((peer_id, model_id))
    return pairs


def resolve_peer_model(name: str, peers) -> tuple[str, str] | None:
    """`Config.ResolvePeerModel`: an exact `<peer>/<model>` name, else a model id exactly one
    peer lists; an ambiguous name resolves to nothing."""
    pairs = _peer_models(peers)
    for matches in ([p for p in pairs if f"{p[0]}/{p[1]}" == name], [p for p in pairs if p[1] == name]):
        if matches:
            return matches[0] if len(set(matches)) == 1 else None
    return None


def resolve_base_model(name: str, models, aliases: dict[str, str], peers) -> str | None:
    """`Config.ResolveBaseModel`: a local model id or alias (the model it names), else a peer
    model (the name as given)."""
    if name in models:
        return name
    if name in aliases:
        return aliases[name]
    return name if resolve_peer_model(name, peers) is not None else None


def check_peers(doc: LineMap, models, aliases: dict[str, str], report: _Report) -> None:
    """peer.go: `proxy` set and a URL, `models` not empty (UnmarshalYAML), and every
    `<peer>/<model>` name unambiguous and reserved (ValidatePeerNamespace)."""
    peers = _at(doc, "peers")
    for peer_id, peer in peers.items():
        if not isinstance(peer, dict):
            continue
        at, where = peers.lines[peer_id], f"peers.{peer_id}"
        proxy = peer.get("proxy")
        if proxy == "" or ("proxy" in peer and proxy is None):
            report.add(peer.lines.get("proxy", at), f"{where}.proxy: proxy is required")
        elif isinstance(proxy, str) and "${" not in proxy and (why := go_url_problem(proxy)):
            report.add(peer.lines["proxy"], f"{where}.proxy: invalid peer proxy URL ({proxy}): {why}")
        listed = peer.get("models")
        if "models" in peer and (listed is None or listed == []):
            report.add(peer.lines["models"], f"{where}.models: peer models can not be empty")
    owners: dict[str, tuple[str, str]] = {}
    for peer_id, model_id in _peer_models(peers):
        fqn = f"{peer_id}/{model_id}"
        if fqn in owners:
            first = owners[fqn]
            why = f"is ambiguous between peers.{first[0]} model {first[1]!r} and peers.{peer_id} model {model_id!r}"
            report.add(peers.lines[peer_id], f"peers.{peer_id}: peer model name {fqn!r} {why}")
            continue
        owners[fqn] = (peer_id, model_id)
        at = peers.lines[peer_id]
        if fqn in models:
            why = f"model ID {fqn!r} conflicts with fully qualified peer model name"
            report.add(models.lines[fqn], f"models.{fqn}: {why}")
        elif fqn in aliases:
            why = f"alias {fqn!r} of model {aliases[fqn]!r} conflicts with fully qualified peer model name"
            report.add(at, f"peers.{peer_id}: {why}")
        if fqn in _at(doc, "selectors"):
            report.add(at, f"peers.{peer_id}: selector ID {fqn!r} conflicts with fully qualified peer model name")
        for profile_id, profile in _at(doc, "profiles").items():
            if fqn in _at(profile, "pins"):
                why = f"profile {profile_id} pin {fqn!r} conflicts with fully qualified peer model name"
                report.add(at, f"peers.{peer_id}: {why}")


def _group_of(doc: LineMap, models) -> dict[str, tuple[str, bool]]:
    """Model id → (group, swap) as the group router sees it, the implicit `(default)` group
    (swap: true) included (AddDefaultGroupToConfig)."""
    groups = _at(doc, "groups") or _at(doc, "routing", "router", "settings", "groups")
    found: dict[str, tuple[str, bool]] = {}
    for group_id, group in groups.items():
        swap = group.get("swap", True) if isinstance(group, dict) else True
        for member in _at(group, "members", kind=list):
            if isinstance(member, str):
                found[member] = (group_id, swap is not False)
    return {m: found.get(m, ("(default)", True)) for m in models} | found


def _spillover_coexist(doc: LineMap, where: str, local: list[str], models, line, report: _Report) -> None:
    """validateSpilloverCoexistence: with the matrix router, one expanded set holds every local
    target; with groups, every local target is in one group with swap: false."""
    if len(local) < 2:
        return
    if _at(doc, "routing", "router").get("use") == "matrix" or doc.get("matrix") is not None:
        roots = _matrix_roots(doc, models)
        if roots is not None and not can_contain_all(roots, local):
            report.add(line, f"{where}.targets must all appear together in one expanded matrix set")
        return
    group_of = _group_of(doc, models)
    group, swap = group_of.get(local[0], ("", True))
    if not group:
        report.add(line, f"{where} target {local[0]!r} is not in a routing group")
    elif swap:
        report.add(line, f"{where} spillover targets must share a group with swap: false (group {group!r} swaps)")
    elif any(group_of.get(t, ("", True))[0] != group for t in local[1:]):
        report.add(line, f"{where} spillover targets must share one routing group")


def check_selectors(doc: LineMap, models, aliases: dict[str, str], report: _Report) -> None:
    """selectors.go validateSelectors: a name that is no model id or alias, a known strategy,
    targets that resolve (locally for `warm`), no chaining, spillover targets distinct and
    able to run side by side."""
    selectors, peers = _at(doc, "selectors"), _at(doc, "peers")
    for selector_id, selector in selectors.items():
        at, where = selectors.lines[selector_id], f"selectors.{selector_id}"
        if not selector_id.strip():
            report.add(at, "selectors: selector names cannot be empty")
            continue
        if selector_id in models:
            report.add(at, f"{where}: name conflicts with model ID {selector_id!r}")
        elif selector_id in aliases:
            report.add(at, f"{where}: name conflicts with model alias {selector_id!r}")
        if not isinstance(selector, dict):
            continue
        strategy = selector.get("strategy")
        # a missing strategy or target list is the schema's `required` / `minItems` (`check`)
        local = _check_targets(where, strategy, _at(selector, "targets", kind=list), selectors, models, aliases,
                               peers, report)
        if strategy == "spillover":
            _spillover_coexist(doc, where, local, models, at, report)


def _check_targets(where: str, strategy, targets, selectors, models, aliases: dict[str, str], peers,
                   report: _Report) -> list[str]:
    """One selector's targets: each resolves, none is a selector, `warm` ones are local,
    `spillover` ones distinct; returns the local models a spillover runs side by side."""
    resolved, local = [], []
    for i, target in enumerate(targets):
        line = targets.lines[i]
        if not isinstance(target, str):
            continue
        if target in selectors:
            why = f"references selector {target!r}; selector chaining is not supported"
            report.add(line, f"{where}.targets[{i}] {why}")
            continue
        base = resolve_base_model(target, models, aliases, peers)
        if base is None:
            report.add(line, f"{where}.targets[{i}] references unknown model {target!r} "
                             "(not a model id, alias or peer model of this config)")
            continue
        is_local = target in models or target in aliases
        if strategy == "warm" and not is_local:
            report.add(line, f'{where}.targets[{i}] must resolve to a local model for strategy "warm"')
        if strategy == "spillover":
            peer = None if is_local else resolve_peer_model(target, peers)
            name = base if peer is None else f"{peer[0]}/{peer[1]}"
            if name in resolved:
                report.add(line, f"{where}.targets contains duplicate resolved model {name!r}")
            resolved.append(name)
            if is_local:
                local.append(base)
    return local


def check_profiles(doc: LineMap, models, aliases: dict[str, str], report: _Report) -> None:
    """load.go validateProfiles: names and pin names not blank, every non-empty pin target a
    model, alias, peer model or selector."""
    profiles, peers, selectors = _at(doc, "profiles"), _at(doc, "peers"), _at(doc, "selectors")
    for profile_id, profile in profiles.items():
        at = profiles.lines[profile_id]
        if not profile_id.strip():
            report.add(at, "profiles: profile names cannot be empty")
            continue
        if isinstance(profile, list):
            why = "profile must be a mapping with description and pins; the legacy list syntax is no longer supported"
            report.add(at, f"profiles.{profile_id}: {why}")
            continue
        pins = _at(profile, "pins")
        for pin, target in pins.items():
            line = pins.lines[pin]
            if not pin.strip():
                report.add(line, f"profiles.{profile_id}.pins: pin names cannot be empty")
            elif isinstance(target, str) and target and target not in selectors \
                    and resolve_base_model(target, models, aliases, peers) is None:
                report.add(line, f"profiles.{profile_id}.pins.{pin} references unknown model {target!r}")


# --- entry points ------------------------------------------------------------------------


def _env_substituted(text: str, report: _Report) -> str:
    """Phase 1 of the loader: `${env.X}` is replaced in the raw text before YAML parsing."""
    scratch = _Report(report.source)
    root = compose(text, scratch.add)
    if not root:
        return text
    found: dict[str, int] = {}

    def collect(value, line):
        if isinstance(value, str):
            for name in _ENV_MACRO.findall(value):
                found.setdefault(name, line)
        elif isinstance(value, (dict, list)):
            pairs = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in pairs:
                collect(key if isinstance(value, dict) else None, value.lines[key])
                collect(item, value.lines[key])

    try:
        collect(Converter(scratch.add).value(root), 1)
    except (InputTooLarge, RecursionError):
        return text  # the parse proper reports it
    for name, line in found.items():
        value = os.environ.get(name)
        if value is None:
            why = "llama-swap refuses the file unless it is set where it runs"
            report.add(line, f"environment variable '{name}' is not set ({why})", WARNING)
        elif any(ch in value for ch in "\n\r\0"):
            why = "contains newlines or null bytes which are not allowed in YAML substitution"
            report.add(line, f"environment variable '{name}' {why}")
        else:
            escaped = value.replace("\\", "\\\\").replace('"', '\\"')
            text = text.replace("${env." + name + "}", escaped)
    return text


def parse_document(text: str, report, scalars: dict | None = None) -> LineMap | bool | None:
    """One file as llama-swap reads it before merging: `${env.X}` substituted, then YAML. The
    document (a LineMap or another value), None for an empty file, False when it does not parse.
    `report` is anything with `source` and `add(line, message, severity=ERROR)`; `scalars`, when
    given, receives the text and tag of every scalar (`yamllines.Converter`)."""
    if "${env." in text:
        text = _env_substituted(text, report)
    root = compose(text, report.add)
    if root is None or root is False:
        return root
    try:
        return Converter(report.add, scalars).value(root)
    except InputTooLarge as exc:
        report.add(None, str(exc))
    return False


def check_document(doc: LineMap, report, known: Mapping[str, LineMap] | None = None) -> None:
    """The loader's pipeline on a parsed (or merged) document: macros, schema, references.
    `known`: entries checked on their own before (`router.checked_blocks`), by id, holding what
    the checks across entries read: they join `models` for the references alone."""
    _resolve_macros(doc, report)
    check(doc, TOP_SPEC, "", 1, report.add)
    if known:
        models = doc.get("models")
        if not isinstance(models, LineMap):
            models = doc["models"] = LineMap()
        for model_id, entry in known.items():
            models[model_id] = entry
            models.lines[model_id] = None
    _check_references(doc, report)


def validate_document(text: str, source: str,
                      known: Mapping[str, LineMap] | None = None) -> tuple[list[Problem], LineMap | None]:
    """`validate_text`'s problems and the document they were found in (None when it does not
    parse to a mapping); `known`: as `check_document`."""
    report = _Report(source)
    doc = parse_document(text, report)
    if doc is None:  # an empty file
        doc = LineMap()
    if isinstance(doc, LineMap):
        check_document(doc, report, known)
    elif doc is not False:
        report.add(1, f"the top level must be a mapping, got {show(doc)}")
    doc = doc if isinstance(doc, LineMap) else None
    return sorted(report.problems, key=lambda p: p.line or 0), doc


def validate_text(text: str, source: str = "config.yaml") -> list[Problem]:
    """Every reason llama-swap would refuse (or silently ignore part of) this config."""
    return validate_document(text, source)[0]


def read_config(path: str) -> tuple[str | None, Problem | None]:
    """A config's text within `bounds.CONFIG`, or the one problem that stops it being read."""
    try:
        data = read_input(path, CONFIG)
    except InputTooLarge as exc:
        return None, Problem(None, str(exc), path)
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        return None, Problem(None, f"cannot read: {getattr(exc, 'strerror', None) or exc}", path)
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        return None, Problem(None, f"not valid UTF-8 (byte {exc.start})", path)


def validate_file(path: str) -> list[Problem]:
    """`validate_text` on a file; an unreadable file is one problem."""
    text, problem = read_config(path)
    return [problem] if problem else validate_text(text, path)


def model_count(text: str) -> int:
    """How many models a config's text defines (0 when it does not parse)."""
    doc = parse_document(text, _Report(""))
    models = doc.get("models") if isinstance(doc, LineMap) else None
    return len(models) if isinstance(models, dict) else 0


def summary_counts(doc: LineMap) -> str:
    """`3 models, 1 group` (or `…, a matrix of 4 sets`) of a valid config."""
    n = len(_at(doc, "models"))
    matrix = _effective_matrix(doc)
    if matrix is not None:
        k = len(_at(matrix[1], "sets"))
        routing = f"a matrix of {counted(k, 'set')}"
    else:
        g = len(_at(doc, "groups") or _at(doc, "routing", "router", "settings", "groups"))
        routing = counted(g, "group")
    return f"{counted(n, 'model')}, {routing}"


def failed(problems: list[Problem]) -> bool:
    """Whether `swapgen validate` exits 1: an error, not a warning, among the problems."""
    return any(p.label == "error" for p in problems)


def verdict(where: str, problems: list[Problem], doc, valid: str = "valid llama-swap config") -> str:
    """The last line for a file that loads: `config.yaml: valid llama-swap config (3 models,
    0 groups; 1 warning)`."""
    warnings = len(problems)
    return f"{where}: {valid} ({summary_counts(doc)}" + (f"; {counted(warnings, 'warning')})" if warnings else ")")


def main_validate(paths: list[str]) -> int:
    """`swapgen validate [FILE…]`: one line per problem, labelled `error` or `warning`; exit 1
    when some file has an error, else 0. A file without errors ends with a summary line."""
    any_error = False
    for path in paths or ["config.yaml"]:
        text, problem = read_config(path)
        problems, doc = ([problem], None) if problem else validate_document(text, path)
        for p in problems:
            print(p)
        if failed(problems) or doc is None:
            any_error = True
            continue
        print(verdict(path, problems, doc))
    sys.stdout.flush()
    return 1 if any_error else 0
