"""One generate run in-process, as `swapgen` runs it, keeping the task graph for its counters."""

from __future__ import annotations

from autogen.commands import tasks


def generate(settings, *args: str) -> tuple[int, tasks.TaskGraph]:
    """(doit's exit code, the graph: `stats`, `library`) of `swapgen --settings SETTINGS ARGS…`."""
    graph = tasks.load(str(settings))
    return tasks.run_doit(graph, list(args)), graph
