"""Host paths in, served paths out: `path_map` applied to a finished plan.

Discovery and sizing read the files where swapgen runs, on the host; a container (llama-swap's
published images bundle llama-server) mounts the same files under another folder. This one
transform rewrites every path of a plan's commands, env values and side files (audio.cpp's JSON)
after the emitters have run, so a flag an emitter adds later (a LoRA, a draft) is covered with
no code of its own, and every target rendered from the plan (llama-swap's YAML, a preset file)
carries served paths.

Which text is a path: an occurrence, on whole path components, of a mapped host folder, of a
root, or of a file the plan reads (`plan_files`: the model's files and the settings' component
paths). It may stand alone or inside `NAME=PATH`, `--flag=PATH`, `PATH:SCALE`, a comma list or
a JSON string; `/mnt/models2` is not under `/mnt/models`. A file of the plan, or a root, that no
pair covers is an error naming the model and the path (`keep` serves a folder as it is). A root
or host folder that is a symlink also matches by its real path, and a file whose links lead out
of every served folder (an absolute link to a host path, `..` above a mount) is refused: the
container could not open it. The first word of a command is the backend's `path`, the executable
as the container sees it, and is never rewritten.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable
from typing import TYPE_CHECKING

import attrs
from attrs import frozen

from autogen.discovery.rows import ModelRow
from autogen.settings.schema import MMPROJ_MODES, SD_COMPONENT_FIELDS, Override, Settings

if TYPE_CHECKING:  # `PathMap` is read on every run, the plans only when a model is emitted
    from autogen.emit.entry import Plan

#: Characters that may stand next to a path inside one argument: `NAME=PATH`, `PATH:SCALE`,
#: `a,b`, a JSON string's quotes, white space.
_SEPARATORS = "\\s=,:;\"'"
_BEFORE = f"(?<![^{_SEPARATORS}])"
_AFTER = f"(?![^{_SEPARATORS}/)\\]}}])"
#: Symlinks followed while checking that the container can open a file (the kernel's own limit).
MAX_LINKS = 40


def _below(path: str, folder: str) -> str | None:
    """The part of `path` under `folder` ("" for the folder itself, else "/…"), on whole
    components; None when it is not under it."""
    if folder == "/":
        return path if path.startswith("/") else None
    if path == folder:
        return ""
    return path[len(folder):] if path.startswith(folder + "/") else None


def _join(folder: str, rest: str) -> str:
    return (rest or "/") if folder == "/" else folder + rest


@frozen
class PathMap:
    """`settings.path_map` with the links resolved that run (`of`), ready to serve paths.

    Example: PathMap(pairs=(("/mnt/models", "/models"),), roots=("/home/me/models",),
    linked_roots=(("/home/me/models", "/mnt/models"),)).
    """

    #: (host folder, served folder) in match order; a host folder that is a link is followed
    #: by its real path; `keep` serves the folder as itself.
    pairs: tuple[tuple[str, str], ...]
    roots: tuple[str, ...] = ()
    #: (root, its real path) for each root that is, or lies under, a symlink.
    linked_roots: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, settings: Settings) -> PathMap | None:
        """None when the settings map nothing (paths are served as they are)."""
        if not settings.path_map:
            return None
        pairs = []
        for pair in settings.path_map:
            for host in dict.fromkeys((pair.host, os.path.realpath(pair.host))):
                pairs.append((host, host if pair.served is None else pair.served))
        roots = tuple(os.path.normpath(r) for r in settings.roots)
        linked = tuple((r, real) for r in roots if (real := os.path.realpath(r)) != r)
        return cls(pairs=tuple(pairs), roots=roots, linked_roots=linked)

    def serve(self, path: str) -> str | None:
        """The path the container opens for host `path`; None = outside every mapped folder."""
        for form in self._forms(path):
            for host, served in self.pairs:
                rest = _below(form, host)
                if rest is not None:
                    return _join(served, rest)
        return None

    def _forms(self, path: str) -> Iterable[str]:
        """`path` as written, then through the real path of each linked root it lies under."""
        yield path
        for root, real in self.linked_roots:
            rest = _below(path, root)
            if rest is not None:
                yield _join(real, rest)

    def host_of(self, served: str) -> str | None:
        """The host path behind a path inside the container; None = no mapped folder holds it."""
        for host, folder in self.pairs:
            rest = _below(served, folder)
            if rest is not None:
                return _join(host, rest)
        return None

    def unreachable(self, path: str) -> str | None:
        """Where the container's lookup of `path` leaves the mapped folders, following its links
        as the container would (an absolute target is a path inside the container); None when
        it stays inside them, or when `path` is not on the host (nothing to follow). Reads link
        targets only, never a file."""
        served = self.serve(path)
        if served is None:
            return path
        if not os.path.lexists(path):
            return None
        done, todo, links = "/", served.split("/")[1:], 0
        while todo:
            part = todo.pop(0)
            if part in ("", "."):
                continue
            if part == "..":
                done = os.path.dirname(done)
                continue
            step = _join(done, "/" + part)
            host = self.host_of(step)
            if host is None:
                if any(_below(folder, step) is not None for _, folder in self.pairs):
                    done = step  # a folder on the way to a mount point, e.g. `/mnt` of `/mnt/models`
                    continue
                return step
            try:
                info = os.lstat(host)
            except OSError:
                return step
            if stat.S_ISLNK(info.st_mode):
                links += 1
                target = os.readlink(host)
                if links > MAX_LINKS:
                    return step
                todo = target.split("/") + todo
                if target.startswith("/"):
                    done = "/"
                continue
            done = step
        return None


def plan_files(row: ModelRow, override: Override | None, settings: Settings, plan: Plan) -> tuple[str, ...]:
    """Every host path the plan may name: the model's files, the settings' component paths, the
    side files it writes. Any of them in a command must be served from a mapped folder."""
    paths = [row.path, *row.inputs, *row.shards, row.mmproj, row.draft, row.codec, *(a.path for a in row.loras)]
    paths += [v for v in attrs.astuple(settings.encoders) if v]
    if override is not None:
        paths += [getattr(override, name) for name in SD_COMPONENT_FIELDS]
        paths += [override.lora_dir, override.mmproj, override.draft, *(p.mmproj for p in override.profiles)]
    paths += [p.mmproj for p in settings.default_profiles]
    paths += [path for path, _ in plan.files]
    return tuple(dict.fromkeys(p for p in paths if p and p.startswith("/") and p.lower() not in MMPROJ_MODES))


def serve_plan(plan: Plan, path_map: PathMap, files: Iterable[str], opened: Iterable[str] = ()) -> Plan:
    """The plan with every host path served through `path_map` (module docstring). `files`:
    `plan_files`; `opened`: the files the engine opens though its command names only the first
    shard or the folder (the row's inputs). A path no pair covers, or that the container could
    not open, becomes a `path_map` problem of the plan (`Plan.conflicts`): the run stops naming
    it, and the config stays as it was."""
    files = tuple(files)
    anchors = {host: path_map.serve(host) for host, _ in path_map.pairs if host != "/"}
    anchors |= {p: path_map.serve(p) for p in (*path_map.roots, *files)}
    pattern = re.compile(_BEFORE + "(" + "|".join(map(re.escape, sorted(anchors, key=len, reverse=True))) + ")"
                         + _AFTER)
    outside: dict[str, None] = {}
    met: set[str] = set()

    def serve_text(text: str) -> str:
        def replace(match: re.Match) -> str:
            host = match.group(1)
            met.add(host)
            served = anchors[host]
            if served is None:
                outside[_path_at(text, match.start())] = None
                return host
            return served

        return pattern.sub(replace, text)

    entries = tuple(attrs.evolve(e, argv=(e.argv[0], *map(serve_text, e.argv[1:])), env=tuple(map(serve_text, e.env)))
                    for e in plan.entries)
    side = tuple((path, serve_text(text)) for path, text in plan.files)
    problems = [f"path_map: model {plan.model_id!r}: {path} is outside every mapped folder; map a folder above "
                f"it, or serve it as it is with `{_suggested_folder(path, path_map)}: keep`" for path in outside]
    checked = [p for p in files if p in met] + ([p for p in opened if p not in met] if entries else [])
    for path in checked:
        if anchors.get(path) is not None and (where := path_map.unreachable(path)) is not None:
            problems.append(f"path_map: model {plan.model_id!r}: {path} is served as {anchors[path]}, but the "
                            f"container's lookup reaches {where}, outside every mapped folder (a link to a host "
                            "path); use a relative link, or map the folder it points into")
    return attrs.evolve(plan, entries=entries, files=side, conflicts=(*plan.conflicts, *problems))


def _path_at(text: str, start: int) -> str:
    """The path that starts at `start`: to the end of the argument, a JSON string's closing
    quote or the line."""
    return re.split(r"[\"\n]", text[start:], maxsplit=1)[0]


def _suggested_folder(path: str, path_map: PathMap) -> str:
    """The root the path lies under, else its folder."""
    for root in path_map.roots:
        if _below(path, root) is not None:
            return root
    return os.path.dirname(path) or path
