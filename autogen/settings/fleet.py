"""A fleet front's hosts: each `hosts:` entry's own settings file, loaded and checked against
the others (docs/gpu-hosts.md).

The front run generates every host's config from that host's settings, on the machine the
front runs on, so a host must declare its GPUs (`gpus` or `card_vram_gb`): probing would read
the front's cards, not the host's. Two hosts (or a host and the front) may not share an output
or a cache folder: each run prunes the fragments its own models do not name.
"""

from __future__ import annotations

import os

from attrs import frozen

from autogen.errors import did_you_mean
from autogen.settings.load import load_settings
from autogen.settings.owned import place_problems
from autogen.settings.schema import Host, Settings


@frozen
class FleetHost:
    """One host of the fleet with its loaded settings.

    Example: FleetHost(host=Host(name="gpu-a", settings="/repo/hosts/gpu-a/swapgen.yaml",
    url="http://gpu-a.lan:8080"), settings=Settings(roots=("/srv/models",), ...)).
    """

    host: Host
    settings: Settings


def load_hosts(front: Settings) -> tuple[FleetHost, ...]:
    """Every host's settings, in `hosts:` order. Raises SettingsError: a host's own file names
    its problems; problems between files are the front's, at `hosts[i]`."""
    hosts = tuple(FleetHost(h, load_settings(h.settings)) for h in front.hosts)
    problems = _conflicts(front, hosts) + _node_problems(hosts) + _place_problems(front, hosts)
    if problems:
        from autogen.settings.structure import settings_error  # noqa: PLC0415 - lazy: only on an error

        raise settings_error(front.source, problems)
    return hosts


def _conflicts(front: Settings, hosts: tuple[FleetHost, ...]) -> list[str]:
    problems = []
    # compared as the file system resolves them: `../gpu-a/cache` is gpu-a's cache
    outputs = {os.path.realpath(front.output): "the front"}
    caches = {os.path.realpath(front.cache_dir): "the front"}
    for i, fh in enumerate(hosts):
        where, s = f"hosts[{i}]", fh.settings
        if s.source == front.source or s.hosts:
            problems.append(f"{where}.settings: {s.source} is a fleet front itself (it has `hosts:`); "
                            "a host's settings list its own model folders")
            continue
        if s.gpus is None and s.card_vram_gb is None:
            problems.append(f"{where}.settings: {s.source} declares no GPUs (`gpus` or `card_vram_gb`); the front "
                            f"cannot probe the cards of {fh.host.name}")
        for path, seen, what in ((s.output, outputs, "output"), (s.cache_dir, caches, "cache_dir")):
            real = os.path.realpath(path)
            if real in seen:
                problems.append(f"{where}.settings: {fh.host.name}'s {what} {real} is also {seen[real]}'s; "
                                f"give each host its own {what}")
            seen.setdefault(real, f"{fh.host.name} (hosts[{i}])")
    return problems


def _place_problems(front: Settings, hosts: tuple[FleetHost, ...]) -> list[str]:
    """The front run writes every host's config and reads every settings file, backends file and
    root of the fleet on one machine: no config may be any of those files or inside any root
    (each file's own settings are checked when it loads: `settings.load.written_place_problems`)."""
    named = [("the front", front), *((f"{fh.host.name}", fh.settings) for fh in hosts)]
    reads = {f"the settings file of {name}": s.source for name, s in named}
    reads |= {f"the backends file of {name}": s.backends_file for name, s in named if s.backends_file}
    roots = [root for _, s in named for root in s.roots]
    problems = []
    for i, fh in enumerate(hosts):
        problems += [f"hosts[{i}]: {fh.settings.source}: {p}"
                     for p in place_problems("output", fh.settings.output, reads, roots)]
    return problems + place_problems("output", front.output, reads, roots)


def _node_problems(hosts: tuple[FleetHost, ...]) -> list[str]:
    """`vllm_nodes` must name other hosts of this fleet, each once (a typo would otherwise be a skip,
    a repeat a second node rank on the same GPUs)."""
    names = [fh.host.name for fh in hosts]
    problems = []
    for i, fh in enumerate(hosts):
        for j, ov in enumerate(fh.settings.overrides):
            for k, node in enumerate(ov.vllm_nodes):
                if node in ov.vllm_nodes[:k]:
                    problems.append(f"hosts[{i}]: {fh.settings.source}: overrides[{j}].vllm_nodes: {node!r} is listed "
                                    "twice; each host is one node (one rank)")
                elif node == fh.host.name:
                    problems.append(f"hosts[{i}]: {fh.settings.source}: overrides[{j}].vllm_nodes: {node!r} is this "
                                    "host, the head; list only the worker hosts")
                elif node not in names:
                    problems.append(f"hosts[{i}]: {fh.settings.source}: overrides[{j}].vllm_nodes: no host {node!r} "
                                    f"in the fleet{did_you_mean(node, names)} (hosts: {', '.join(names)})")
    return problems

