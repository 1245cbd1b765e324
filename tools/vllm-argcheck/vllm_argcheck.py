#!/usr/bin/env python3
"""Parse `vllm serve` command lines with vLLM's own CLI parser (no GPU, no model).

Usage:
    vllm_argcheck.py [--json] < lines.txt        # one command line per line
    vllm_argcheck.py [--json] config.yaml        # every llama-swap model whose cmd is `X serve ...`

Each command is cleaned the way llama-swap does it (lines starting with `#` dropped, a trailing
`\\` joins lines), macros are expanded (`${PORT}` -> 8000, `${MODEL_ID}`, global and model
`macros`, `${env.X}`), it is split with POSIX shlex, and the words after `serve` go through the
very parser `vllm serve` builds (ServeSubcommand.subparser_init under a `vllm` top-level
FlexibleArgumentParser, exactly as vllm/entrypoints/cli/main.py does), then through the checks
vLLM runs before loading a model: ServeSubcommand.validate, validate_api_server_args,
AsyncEngineArgs.from_cli_args, CacheConfig's field checks. On top of that, --tool-call-parser
and --reasoning-parser must name a parser registered in this vLLM (unless a --*-parser-plugin
is given), and a --quantization this vLLM does not know without a plugin (gguf in 0.33.0)
gets a warning.

Prints `OK <label>: key=value ...` or `FAIL <label>: <message>` per command; vLLM warnings
(deprecated flags, duplicate keys, --model instead of positional) follow as indented lines.
Exit status: 0 all OK, 1 any FAIL, 2 no vLLM / bad usage / nothing to check.

It needs the CPU-only venv made by vllm_cpu_env.sh (beside this file); run with any other python it
re-executes itself with ${VLLM_CPU_VENV:-${TMPDIR:-/tmp}/vllm-cpu}/bin/python.
"""
from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import logging
import os
import re
import shlex
import sys
import time

FIELDS = (
    "model", "max_model_len", "gpu_memory_utilization", "kv_cache_memory_bytes",
    "tensor_parallel_size", "tokenizer", "quantization", "enable_auto_tool_choice",
    "tool_call_parser", "served_model_name", "host", "port",
)
PORT = "8000"
_MACRO = re.compile(r"\$\{([^}]*)\}")


def _ensure_vllm() -> None:
    if importlib.util.find_spec("vllm") is not None:
        return
    venv = os.environ.get("VLLM_CPU_VENV") or os.path.join(os.environ.get("TMPDIR") or "/tmp", "vllm-cpu")
    py = os.path.join(venv, "bin", "python")
    if os.path.exists(py) and os.path.realpath(sys.prefix) != os.path.realpath(venv):
        os.execv(py, [py, os.path.abspath(__file__), *sys.argv[1:]])
    sys.exit(f"vllm_argcheck: vLLM is not importable by {sys.executable} and {venv} has no "
             "working vLLM; build it with vllm_cpu_env.sh (beside this file)")


# ------------------------------------------------------------------ reading command lines

def clean_cmd(cmd: str) -> str:
    """llama-swap's cleaning: drop `#` comment lines, join lines ending in a backslash."""
    kept = [ln for ln in cmd.splitlines() if not ln.lstrip().startswith("#")]
    return re.sub(r"\\\r?\n", " ", "\n".join(kept)).replace("\n", " ").strip()


def expand_macros(text: str, macros: dict[str, str]) -> tuple[str, list[str]]:
    """Substitute ${name}; returns the text and the names left unexpanded."""
    def sub(m: re.Match) -> str:
        name = m.group(1)
        if name in macros:
            return macros[name]
        if name.startswith("env.") and name[4:] in os.environ:
            return os.environ[name[4:]]
        return m.group(0)

    for _ in range(16):  # macros may refer to earlier macros
        new = _MACRO.sub(sub, text)
        if new == text:
            break
        text = new
    return text, sorted(set(_MACRO.findall(text)))


def _scalar(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def commands_from_yaml(path: str) -> list[tuple[str, str, dict]]:
    import yaml
    with open(path, encoding="utf-8") as fh:
        doc = yaml.safe_load(fh)
    if not isinstance(doc, dict) or not isinstance(doc.get("models"), dict):
        sys.exit(f"vllm_argcheck: {path}: not a llama-swap config (no `models` mapping)")
    gmacros = {str(k): _scalar(v) for k, v in (doc.get("macros") or {}).items()}
    out = []
    for mid, model in doc["models"].items():
        if not isinstance(model, dict) or not isinstance(model.get("cmd"), str):
            continue
        macros = dict(gmacros)
        macros.update({str(k): _scalar(v) for k, v in (model.get("macros") or {}).items()})
        macros.update(PORT=PORT, MODEL_ID=str(mid))
        out.append((str(mid), clean_cmd(model["cmd"]), macros))
    return out


def commands_from_lines(text: str) -> list[tuple[str, str, dict]]:
    out, buf, start = [], "", 0
    for n, line in enumerate(text.splitlines(), 1):
        if not buf:
            start = n
        if line.rstrip().endswith("\\"):
            buf += line.rstrip()[:-1] + " "
            continue
        full, buf = (buf + line).strip(), ""
        if full and not full.startswith("#"):
            out.append((f"line {start}", full, {"PORT": PORT}))
    if buf.strip():
        out.append((f"line {start}", buf.strip(), {"PORT": PORT}))
    return out


# ------------------------------------------------------------------ vLLM's parser

class _Collect(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.records: list[str] = []

    def emit(self, record):
        self.records.append(record.getMessage().strip().replace("\n", " "))


class ServeChecker:
    def __init__(self):
        os.environ["VLLM_TARGET_DEVICE"] = "cpu"   # no GPU here: vLLM must pick its CPU platform
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
        os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")
        t0 = time.perf_counter()
        import vllm
        import vllm.entrypoints.cli.serve as serve_mod
        import vllm.logger as vllm_logger
        from vllm.config import CacheConfig
        from vllm.entrypoints.common import cli_args
        from vllm.reasoning import ReasoningParserManager
        from vllm.tool_parsers import ToolParserManager
        from vllm.utils.argparse_utils import FlexibleArgumentParser

        self.vllm, self.cli_args, self.vllm_logger = vllm, cli_args, vllm_logger
        self.cache_config = CacheConfig
        self.flexible = FlexibleArgumentParser
        self.version = getattr(vllm, "__version__", "?")
        # Same construction as vllm/entrypoints/cli/main.py, serve subcommand only.
        self.parser = FlexibleArgumentParser(prog="vllm", description="vLLM CLI")
        subparsers = self.parser.add_subparsers(required=False, dest="subparser")
        self.serve = serve_mod.ServeSubcommand()
        self.serve.subparser_init(subparsers).set_defaults(dispatch_function=self.serve.cmd)
        # vLLM loads its general plugins (e.g. vllm-gguf-plugin's "gguf") before it checks
        # --quantization; do the same so an installed plugin counts.
        from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS
        from vllm.plugins import load_general_plugins
        load_general_plugins()
        self.quant_methods = list(QUANTIZATION_METHODS)
        self.tool_parsers = list(ToolParserManager.list_registered())
        self.reasoning_parsers = list(ReasoningParserManager.list_registered())
        self.collect = _Collect()
        vlog = logging.getLogger("vllm")
        for h in list(vlog.handlers):
            vlog.removeHandler(h)
        vlog.addHandler(self.collect)
        vlog.propagate = False
        self.load_s = time.perf_counter() - t0

    def _reset_once_caches(self):
        for name in ("_print_warning_once", "_print_info_once", "_print_debug_once"):
            fn = getattr(self.vllm_logger, name, None)
            if hasattr(fn, "cache_clear"):
                fn.cache_clear()
        self.flexible._search_keyword = None

    def parse(self, serve_args: list[str]):
        """(namespace, None, warnings) on success, (None, message, warnings) on failure."""
        self._reset_once_caches()
        self.collect.records = []
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                args = self.parser.parse_args(["serve", *serve_args])
        except SystemExit as e:
            text = err.getvalue()
            m = re.search(r"^[^\n]*?: error: .*", text, re.M | re.S)
            if e.code == 0:
                return None, "the command asks for --help (vllm would print help and exit)", []
            return None, (m.group(0).strip() if m else text.strip() or f"exit {e.code}"), \
                self.collect.records
        except Exception as e:
            return None, f"{type(e).__name__}: {e}", self.collect.records
        # What `vllm serve` does next: validate, then model_tag wins over --model.
        try:
            self.serve.validate(args)
        except Exception as e:
            return None, f"{type(e).__name__}: {e}", self.collect.records
        if getattr(args, "model_tag", None) is not None:
            args.model = args.model_tag
        try:  # vLLM's own checks at server setup and engine-args creation
            self.cli_args.validate_api_server_args(args)
            problem = self._registered_parsers(args)
            if problem is None:
                self.vllm.AsyncEngineArgs.from_cli_args(args)
                # The model-independent part of create_engine_config's CacheConfig (0 < util <= 1).
                self.cache_config(gpu_memory_utilization=args.gpu_memory_utilization,
                                  kv_cache_memory_bytes=args.kv_cache_memory_bytes)
        except Exception as e:
            detail = e.args[0] if isinstance(e, KeyError) and e.args else e
            detail = " ".join(ln.strip() for ln in str(detail).splitlines()
                              if ln.strip() and "errors.pydantic.dev" not in ln)
            problem = f"{type(e).__name__}: {detail}"
        if problem:
            return None, problem, self.collect.records
        notes = list(self.collect.records)
        quant = getattr(args, "quantization", None)
        if quant and quant not in self.quant_methods:
            hint = (" (GGUF support is out of tree in this vLLM: it needs the vllm-gguf-plugin "
                    "package, `pip install 'vllm[extra-quant]'`)" if quant == "gguf" else "")
            notes.append(f"argcheck: --quantization {quant!r} parses, but this vLLM {self.version} "
                         f"without plugins would stop at startup with 'Unknown quantization "
                         f"method: {quant}'{hint}")
        return args, None, notes

    def _registered_parsers(self, args) -> str | None:
        tool = getattr(args, "tool_call_parser", None)
        if tool and not getattr(args, "tool_parser_plugin", "") and tool not in self.tool_parsers:
            return (f"--tool-call-parser {tool!r} is not registered in vLLM {self.version} "
                    f"(registered: {', '.join(self.tool_parsers)})")
        reasoning = getattr(args, "reasoning_parser", None)
        if reasoning and not getattr(args, "reasoning_parser_plugin", "") \
                and reasoning not in self.reasoning_parsers:
            return (f"--reasoning-parser {reasoning!r} is not registered in vLLM {self.version} "
                    f"(registered: {', '.join(self.reasoning_parsers)})")
        return None


# ------------------------------------------------------------------ main

def check(label: str, cmd: str, macros: dict, checker: ServeChecker, *, from_yaml: bool):
    """Returns a result dict, or None for a YAML model that is not `X serve ...`."""
    text, unknown = expand_macros(cmd, macros)
    try:
        argv = shlex.split(text)
    except ValueError as e:
        return {"label": label, "ok": False, "error": f"cannot split the command: {e}"}
    if len(argv) < 2 or argv[1] != "serve":
        if from_yaml:
            return None
        return {"label": label, "ok": False, "error": "not a `vllm serve ...` command line"}
    if unknown:
        return {"label": label, "ok": False,
                "error": "unexpanded macro(s): " + ", ".join("${" + u + "}" for u in unknown)}
    t0 = time.perf_counter()
    args, error, warnings = checker.parse(argv[2:])
    res = {"label": label, "ok": error is None, "parse_s": round(time.perf_counter() - t0, 4)}
    if error is None:
        res["values"] = {f: getattr(args, f, None) for f in FIELDS}
    else:
        res["error"] = error
    if warnings:
        res["warnings"] = warnings
    return res


def main(argv: list[str]) -> int:
    as_json = "--json" in argv
    rest = [a for a in argv if a != "--json"]
    if any(a in ("-h", "--help") for a in rest) or len(rest) > 1:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    _ensure_vllm()
    if rest:
        items, from_yaml = commands_from_yaml(rest[0]), True
    else:
        items, from_yaml = commands_from_lines(sys.stdin.read()), False
    if not items:
        print("vllm_argcheck: no command line to check", file=sys.stderr)
        return 2
    checker = ServeChecker()
    results = [r for r in (check(lbl, cmd, mac, checker, from_yaml=from_yaml)
                           for lbl, cmd, mac in items) if r is not None]
    if not results:
        print("vllm_argcheck: no `vllm serve` command to check", file=sys.stderr)
        return 2
    for r in results:
        if as_json:
            print(json.dumps(r, default=str))
            continue
        if r["ok"]:
            vals = " ".join(f"{k}={json.dumps(v, default=str)}" for k, v in r["values"].items())
            print(f"OK   {r['label']}: {vals}")
        else:
            print(f"FAIL {r['label']}: {r['error']}")
        for w in r.get("warnings", []):
            print(f"     warning: {w}")
    failed = sum(not r["ok"] for r in results)
    print(f"vllm_argcheck: vLLM {checker.version}: {len(results) - failed} OK, {failed} failed "
          f"(loading vLLM's parser {checker.load_s:.1f}s)", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
