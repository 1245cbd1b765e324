"""`swapgen`: the same doit tasks as `dodo.py`, from any folder, plus tools around them
(`COMMANDS` is what `swapgen --help` lists)."""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
from types import ModuleType

from autogen import __version__
from autogen.errors import SwapgenError

DOIT_COMMANDS = {"run", "forget", "clean", "info", "ignore", "reset-dep", "dumpdb", "strace"}
#: Task names (`model:ID`, `config`, a fleet's `config:HOST` and `front`).
TASKS = {"model", "config", "front"}

COMMANDS = """commands:
  init                     write a starter swapgen.yaml from the model folders, GPUs and engines found here
  doctor                   say what is missing to serve each library (engines, budget, models in the roots)
  run (default)            generate the config: run the out-of-date model tasks, then config
  model:ID | config        run one task (a fleet: model:HOST/ID, config:HOST, front)
  info model:ID            one task's status, input files and fragment
  forget [model:ID]        forget doit's recorded state (all, or one model)
  clean                    delete fragments and caches (the config stays)
  list [--json]            one line per model
  show ID [--json]         one model's plan and why (a fleet host's: HOST/ID)
  report [PATH] [--json]   write the plan as one self-contained page (default: report.html beside the config)
  calibrate [ID ...] [--timeout S]
                           start each entry (default: all llama-server and vLLM entries) with its
                           real command, record the memory the engine reports, stop it
  validate [FILE ...]      check any llama-swap config or llama.cpp models preset (FILE.ini;
                           default: the settings' output)
  validate [FILE] --config-dir DIR
                           check FILE and DIR's files merged as llama-swap -config-dir merges them
  watch                    generate, then again whenever a root or the settings change (until SIGTERM)
  backends detect [--dry-run] [--json]
                           find installed engines and write backends_file
"""


def import_tasks() -> ModuleType:
    """`commands.tasks` and all it imports, with the garbage collector paused, then frozen: the
    objects the imports make (classes, functions, tables) live as long as the process, and
    without the pause the collections during the imports would walk them again and again
    (about 30 ms of a no-op run of 0.2 s at 1,000 models, benchmarks/bench_library.py). Once per
    process: a caller that imported it already (a test, `swapgen watch`'s next run) keeps its
    collector as it is."""
    loaded = sys.modules.get("autogen.commands.tasks")
    if loaded is not None:
        return loaded
    gc.disable()
    try:
        from autogen.commands import tasks  # noqa: PLC0415 - deliberate: imported under the pause above
    finally:
        gc.freeze()
        gc.enable()
    return tasks


def _run_doit(settings: str | None, args: list[str], fail_on_write: bool = False) -> int:
    """doit's command on the settings' graph; with `fail_on_write`, a run that wrote a config
    exits 1 (what pre-commit expects of a hook that changed a file, new ones included)."""
    tasks = import_tasks()
    graph = tasks.load(settings)
    rc = tasks.run_doit(graph, args)
    written = [g.library.settings.output for g in graph.graphs if g.stats.get("config") == "written"]
    if rc == 0 and fail_on_write and written:
        print(f"swapgen: wrote {', '.join(written)}: review it and `git add` it (--exit-non-zero-on-write)",
              file=sys.stderr)
        return 1
    return rc


def _list(settings: str | None, as_json: bool) -> int:
    from autogen.commands import listing  # noqa: PLC0415 - lazy: generating never lists

    graph = import_tasks().load(settings)
    try:
        rows = listing.rows(graph)
    finally:
        graph.close()
    if as_json:
        from autogen.records import CONVERTER  # noqa: PLC0415 - lazy, as above

        sys.stdout.write(json.dumps(CONVERTER.unstructure(rows, list[listing.ListRow]), indent=2,
                                    ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(listing.table(rows))
    return 0


def _show(settings: str | None, model_id: str, as_json: bool) -> int:
    from autogen.commands import show  # noqa: PLC0415 - lazy: generating never shows

    graph = import_tasks().load(settings)
    try:
        # in a fleet, `HOST/ID` (as `swapgen list` and the front name it) is a host's model
        for host in graph.hosts:
            if model_id.startswith(host.prefix):
                return show.main(host.library, model_id.removeprefix(host.prefix), as_json, host=host.host.name)
        return show.main(graph.library, model_id, as_json, [(host.prefix, host.library) for host in graph.hosts])
    finally:
        graph.close()


def _report(settings: str | None, paths: list[str], as_json: bool) -> int:
    from autogen.commands import plan_page  # noqa: PLC0415 - lazy: generating writes no page unless asked

    graph = import_tasks().load(settings)
    try:
        return plan_page.main(graph, paths[0] if paths else None, as_json)
    finally:
        graph.close()


def _validate_presets(settings: str | None, presets: list[str], configs: list[str]) -> int:
    """Presets checked against the llama-server the settings resolve (its `--help`), else the
    recorded b11434 arguments; any llama-swap configs given too as usual."""
    # lazy: generating never loads the validators
    from autogen.resolve.backends import llama_router_exe  # noqa: PLC0415
    from autogen.router.preset_check import build_keys, main_validate_presets  # noqa: PLC0415
    from autogen.router.validate import main_validate  # noqa: PLC0415
    from autogen.settings.load import load_settings  # noqa: PLC0415

    try:
        exe = llama_router_exe(load_settings(settings))
    except SwapgenError:  # no settings here: the recorded arguments
        exe = None
    failed = main_validate_presets(presets, build_keys(exe))
    return max(failed, main_validate(configs) if configs else 0)


def _calibrate(parser: argparse.ArgumentParser, settings: str | None, args: list[str]) -> int:
    # lazy: a rare command, and it brings the process and log readers
    from autogen.commands import calibrate  # noqa: PLC0415

    ids, seconds = _one_option(parser, "calibrate", args, "--timeout", "seconds", "SECONDS")
    try:
        timeout = float(seconds) if seconds is not None else None
    except ValueError:
        parser.error(f"calibrate: --timeout needs seconds, got {seconds!r}")
    graph = import_tasks().load(settings)
    graph.close()  # the run lock and SIGTERM handler: calibrating can take minutes, and writes no config
    return calibrate.main(graph.library, ids, timeout)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="swapgen", usage="swapgen [OPTIONS] [COMMAND ...]",
                                description="Generate a llama-swap config from model folders.",
                                epilog=COMMANDS, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--settings", help="settings file (default: $SWAPGEN_SETTINGS, else ./swapgen.yaml)")
    p.add_argument("--exit-non-zero-on-write", action="store_true",
                   help="exit 1 when a run writes a config (the pre-commit hook: a changed file fails it)")
    p.add_argument("--version", action="version", version=f"swapgen {__version__}")
    return p


def _only_json_option(parser: argparse.ArgumentParser, command: str, args: list[str]) -> None:
    """`--json` is the one option of `list`, `show` and `report`: a misspelt one is an error, not ignored."""
    for arg in args:
        if arg.startswith("-") and arg != "--json":
            from difflib import get_close_matches  # noqa: PLC0415 - lazy: only on a mistake

            hint = " (did you mean --json?)" if get_close_matches(arg, ["--json"], n=1) else ""
            parser.error(f"{command}: unknown option {arg}{hint}")


def _one_option(parser: argparse.ArgumentParser, command: str, args: list[str], option: str, meaning: str,
                metavar: str) -> tuple[list[str], str | None]:
    """A command's positional arguments and the value of its one option (`--x V` or `--x=V`)."""
    positional, value, i = [], None, 0
    while i < len(args):
        arg = args[i]
        if arg == option or arg.startswith(option + "="):
            value = arg.partition("=")[2] if "=" in arg else (args[i + 1] if i + 1 < len(args) else "")
            i += 1 if "=" in arg else 2
            if not value:
                parser.error(f"{command}: {option} needs {meaning}")
            continue
        if arg.startswith("-"):
            parser.error(f"{command}: unknown option {arg} (the one option is {option} {metavar})")
        positional.append(arg)
        i += 1
    return positional, value


def _config_dir_option(parser: argparse.ArgumentParser, args: list[str]) -> tuple[list[str], str | None]:
    """`validate`'s files and its `--config-dir DIR` (llama-swap's flag: the files of DIR merged
    after the one main FILE)."""
    files, folder = _one_option(parser, "validate", args, "--config-dir", "a folder", "DIR")
    if folder is not None and len(files) > 1:
        parser.error("validate: with --config-dir, give at most one main FILE (llama-swap's -config)")
    return files, folder


def _validate(parser: argparse.ArgumentParser, settings: str | None, args: list[str]) -> int:
    # lazy: generating never loads the validator's YAML reader up front
    from autogen.router.validate import main_validate  # noqa: PLC0415
    from autogen.settings.load import load_settings  # noqa: PLC0415 - lazy, as above

    files, folder = _config_dir_option(parser, args)
    if folder is not None:
        from autogen.router.merge import main_validate_merged  # noqa: PLC0415 - lazy, as above

        return main_validate_merged(files[0] if files else None, folder)
    files = files or [load_settings(settings).output]
    presets = [f for f in files if f.lower().endswith(".ini")]
    if presets:
        return _validate_presets(settings, presets, [f for f in files if f not in presets])
    return main_validate(files)


def _watch(parser: argparse.ArgumentParser, settings: str | None, args: list[str]) -> int:
    if args:
        parser.error("watch takes no argument (the settings say what to watch: roots and `watch:`)")
    from autogen.commands.watch import main_watch  # noqa: PLC0415 (lazy: a long-running command)

    return main_watch(settings)


def _start(parser: argparse.ArgumentParser, settings: str | None, command: str, args: list[str]) -> int:
    """`init` and `doctor`, which take the settings path and nothing else."""
    if args:
        parser.error(f"{command} takes no argument (the settings file: swapgen --settings PATH {command})")
    if command == "init":
        from autogen.commands.starter import main_init  # noqa: PLC0415 (lazy: a rare command)

        return main_init(settings)
    from autogen.commands.doctor import main_doctor  # noqa: PLC0415 (lazy: a rare command)

    return main_doctor(settings)


def _reporting(parser: argparse.ArgumentParser, settings: str | None, command: str, args: list[str]) -> int:
    """`list`, `show ID` and `report [PATH]`, each with `--json` as its one option."""
    _only_json_option(parser, command, args)
    positional = [a for a in args if not a.startswith("-")]
    if command == "list":
        if positional:
            parser.error("list takes no argument but --json")
        return _list(settings, "--json" in args)
    if command == "show":
        if len(positional) != 1:
            parser.error("show needs exactly one model id (see `swapgen list`)")
        return _show(settings, positional[0], "--json" in args)
    if len(positional) > 1:
        parser.error("report takes at most one PATH (where to write the page)")
    return _report(settings, positional, "--json" in args)


def _command(parser: argparse.ArgumentParser, opts: argparse.Namespace, rest: list[str]) -> int:
    command, args = (rest[0], rest[1:]) if rest else ("run", [])
    if command == "validate":
        return _validate(parser, opts.settings, args)
    if command in ("list", "show", "report"):
        return _reporting(parser, opts.settings, command, args)
    if command in ("init", "doctor"):
        return _start(parser, opts.settings, command, args)
    if command == "watch":
        return _watch(parser, opts.settings, args)
    if command == "calibrate":
        return _calibrate(parser, opts.settings, args)
    if command == "backends":
        from autogen.commands.detect import main_backends  # noqa: PLC0415 (lazy: a rare command)

        return main_backends(opts.settings, args)
    if command in DOIT_COMMANDS or command.split(":")[0] in TASKS or command.startswith("-"):
        return _run_doit(opts.settings, rest, opts.exit_non_zero_on_write)
    parser.error(f"unknown command {command!r}")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    tasks = import_tasks()
    parser = _parser()
    opts, rest = parser.parse_known_args(argv)
    try:
        return _command(parser, opts, rest)
    except SwapgenError as exc:
        print(f"swapgen: {exc}", file=sys.stderr)
        return 1
    except tasks.Terminated as exc:
        return 128 + exc.signum
    except KeyboardInterrupt:
        return 130
    except (BrokenPipeError, tasks.ClosedPipe):  # `swapgen list | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 141


if __name__ == "__main__":
    sys.exit(main())
