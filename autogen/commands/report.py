"""What a run tells its user: the task docs `doit list` shows, doit's console reporter
trimmed to what matters, and the one summary line."""

from __future__ import annotations

import json
import os
import sys
from contextlib import contextmanager
from typing import TYPE_CHECKING

from doit.exceptions import TaskFailed
from doit.reporter import ConsoleReporter

from autogen.numfmt import counted

if TYPE_CHECKING:
    from autogen.resolve.job import Job

SUMMARY = "summary.json"


def task_doc(library, job: Job) -> str:
    """One line per model task: role, engine, backend and why, path (and its llama profiles)."""
    where = job.row.path
    if job.error:
        return f"SKIPPED  {job.error}  ({where})"
    doc = f"{job.role.value:<9} {job.engine:<6} {job.backend_id} ({job.backend.why})  {where}"
    # deliberate lazy imports: the load memo keeps the docs, so a no-op run never needs them
    from autogen.emit.llama_profiles import profile_ids  # noqa: PLC0415
    from autogen.engines import Role  # noqa: PLC0415

    profiled = job.role == Role.LLM and job.served_by.profiles
    if profiled and (ids := profile_ids(job.row, job.override, library.settings)):
        doc += "  (+ profiles: " + ", ".join(i[len(job.row.id):] for i in ids) + ")"
    return doc


def summary_line(graph) -> str:
    """`swapgen: 9 models (7 served, 2 skipped); 1 re-emitted, 8 unchanged; config.yaml written`;
    in a fleet, `swapgen: gpu-a: …` per host and `swapgen: front: …, 2 peers, 1 selector; …`.
    A models preset (`target: llama-server`) adds one line per model no llama-server serves
    and the command that starts llama.cpp's router on it."""
    settings = graph.library.settings
    fleet = router = ""
    try:
        with open(os.path.join(settings.cache_dir, SUMMARY), encoding="utf-8") as f:
            counts = json.load(f)
        served = f"{counts['served']} served, {counts['skipped']} skipped"
        if "router" in counts:
            name = os.path.basename(settings.output)
            router = "".join(f"\nswapgen: not in {name}: {json.dumps(mid, ensure_ascii=False)}: {why}"
                             for mid, why in counts["left_out"])
            router += f"\nswapgen: start llama.cpp's router: {counts['router']}"
        if graph.hosts:
            fleet = f", {counted(counts['peers'], 'peer')}, {counted(counts['selectors'], 'selector')}"
    except (OSError, ValueError, KeyError):
        served = "not assembled"
    label = f"{graph.host.name}: " if graph.host is not None else "front: " if graph.hosts else ""
    total, emitted = len(graph.library.models), graph.stats["emitted"]
    output = f"{os.path.basename(settings.output)} {graph.stats.get('config', 'unchanged')}"
    if settings.report and not graph.host:  # the page covers the front's hosts: said on its line
        output += f"; {os.path.basename(settings.report)} {graph.stats.get('report', 'unchanged')}"
    return (f"swapgen: {label}{counted(total, 'model')} ({served}){fleet}; {emitted} re-emitted, "
            f"{total - emitted} unchanged; {output}{router}")


class SummaryReporter(ConsoleReporter):
    """doit's console reporter without a line per up-to-date task, our own failures as one
    clear message on stderr (tracebacks only for bugs), and one summary line. `TaskGraph.reporter`
    is the subclass bound to its graph (doit instantiates reporters itself)."""

    graph = None

    def skip_uptodate(self, task):
        pass

    @contextmanager
    def _to_stderr(self):
        self.outstream, stdout = sys.stderr, self.outstream
        try:
            yield
        finally:
            self.outstream = stdout

    def add_failure(self, task, fail):
        if isinstance(fail, TaskFailed):
            sys.stderr.write(f"swapgen: {fail.message}\n")
            self.failures.append({"task": task, "exception": fail, "shown": True})
        else:
            super().add_failure(task, fail)

    def _write_failure(self, result, write_exception=True):
        with self._to_stderr():
            super()._write_failure(result, write_exception)

    def complete_run(self):
        shown = [f for f in self.failures if f.get("shown")]
        self.failures = [f for f in self.failures if not f.get("shown")]
        with self._to_stderr():
            super().complete_run()
        if self.graph is not None and not self.failures and not shown:
            for graph in (*self.graph.hosts, self.graph):
                self.write(summary_line(graph) + "\n")
