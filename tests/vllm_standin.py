#!/usr/bin/env python3
"""A stand-in for `vllm serve` with `--enable-sleep-mode`: the HTTP answers of vLLM 0.33.0's API
server for the calls llama-swap's vllm-wrapper makes, without a GPU or a model.

Read from vLLM 0.33.0: `vllm/entrypoints/serve/dev/sleep/api_router.py` (`POST /sleep` reads
`level` (0..2, default 1) and `mode` from the query string only, never the body; `POST /wake_up`
reads repeated `tags`; `GET /is_sleeping`), registered only when `VLLM_SERVER_DEV_MODE` is set
(`vllm/entrypoints/launchers/api_server/routers.py`, `bool(int(value))`); otherwise FastAPI's 404
`{"detail":"Not Found"}`. `GET /health` answers 200 with an empty body asleep or awake
(`vllm/entrypoints/serve/instrumentator/health.py`). A second sleep or a wake of an awake engine
is a logged no-op with 200 (`vllm/v1/executor/abstract.py`).

Usage: vllm_standin.py serve MODEL --host H --port P [any vLLM flags]. Every start and call is
appended as one JSON line to $VLLM_STANDIN_LOG: {"event", "pid", "port", ...}.
A chat request while asleep is answered 503 (real vLLM would hold it until a wake).
"""

from __future__ import annotations

import json
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

MODES = ("abort", "wait", "keep")


def option(argv: list[str], name: str, default: str) -> str:
    return argv[argv.index(name) + 1] if name in argv and argv.index(name) + 1 < len(argv) else default


class Engine:
    def __init__(self, argv: list[str]):
        self.argv = argv
        self.port = int(option(argv, "--port", "8000"))
        self.host = option(argv, "--host", "0.0.0.0")
        self.dev = bool(int(os.environ.get("VLLM_SERVER_DEV_MODE", "0") or "0"))
        self.sleep_mode = "--enable-sleep-mode" in argv
        #: The level it sleeps at; None = awake (level 0 only pauses scheduling, and is asleep too).
        self.level: int | None = None
        self.log_path = os.environ.get("VLLM_STANDIN_LOG", "")

    def record(self, event: str, **data) -> None:
        if not self.log_path:
            return
        line = json.dumps({"event": event, "pid": os.getpid(), "port": self.port, "time": time.time(), **data})
        with open(self.log_path, "a", encoding="utf-8") as f:
            f.write(line + "\n")


def query_error(loc: str, value: str, kind: str, msg: str) -> dict:
    return {"detail": [{"type": kind, "loc": ["query", loc], "msg": msg, "input": value}]}


class Handler(BaseHTTPRequestHandler):
    """vLLM's routes as the engine answers them; `engine` is set by `main`."""

    engine: Engine

    def log_message(self, *args) -> None:  # quiet
        pass

    def send_json(self, status: int, body: dict | None) -> None:
        data = b"" if body is None else json.dumps(body, separators=(",", ":")).encode()
        self.send_response(status)
        if body is not None:
            self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self.route("GET", b"")

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        self.route("POST", self.rfile.read(length) if length else b"")

    def route(self, method: str, body: bytes) -> None:
        url = urlsplit(self.path)
        routes = dict(PUBLIC)
        if self.engine.dev:  # vllm/entrypoints/launchers/api_server/routers.py
            routes |= DEV
        if url.path not in {path for _, path in routes}:
            return self.send_json(404, {"detail": "Not Found"})
        handler = routes.get((method, url.path))
        if handler is None:
            return self.send_json(405, {"detail": "Method Not Allowed"})
        status, reply = handler(self.engine, parse_qs(url.query), body.decode("utf-8", "replace"))
        return self.send_json(status, reply)


def health(engine: Engine, query: dict, body: str) -> tuple[int, dict | None]:
    return 200, None


def models(engine: Engine, query: dict, body: str) -> tuple[int, dict | None]:
    name = option(engine.argv, "--served-model-name", engine.argv[1])
    return 200, {"object": "list", "data": [{"id": name, "object": "model"}]}


def completion(engine: Engine, query: dict, body: str) -> tuple[int, dict | None]:
    engine.record("request", asleep=engine.level is not None)
    if engine.level is not None:
        return 503, {"error": {"message": "the stand-in engine is asleep"}}
    return 200, {"object": "chat.completion", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": f"stand-in on port {engine.port}"},
         "finish_reason": "stop"}]}


def sleep(engine: Engine, query: dict, body: str) -> tuple[int, dict | None]:
    """`level` and `mode` from the query string only; the body is never read."""
    raw = (query.get("level") or ["1"])[-1]
    mode = (query.get("mode") or ["abort"])[-1]
    try:
        level = int(raw)
    except ValueError:
        return 422, query_error("level", raw, "int_parsing",
                                "Input should be a valid integer, unable to parse string as an integer")
    if level < 0:
        return 422, query_error("level", raw, "greater_than_equal", "Input should be greater than or equal to 0")
    if level > 2:
        return 422, query_error("level", raw, "less_than_equal", "Input should be less than or equal to 2")
    if mode not in MODES:
        return 422, query_error("mode", mode, "literal_error", "Input should be 'abort', 'wait' or 'keep'")
    engine.record("sleep", level=level, body=body, already=engine.level is not None)
    if engine.level is None:
        engine.level = level
    return 200, {"status": "sleeping", "level": level}


def wake_up(engine: Engine, query: dict, body: str) -> tuple[int, dict | None]:
    tags = query.get("tags") or None
    engine.record("wake_up", tags=tags, was_level=engine.level)
    engine.level = None
    return 200, {"status": "awake", "tags": tags}


def is_sleeping(engine: Engine, query: dict, body: str) -> tuple[int, dict | None]:
    return 200, {"is_sleeping": engine.level is not None}


PUBLIC = {("GET", "/health"): health, ("GET", "/v1/models"): models,
          ("POST", "/v1/chat/completions"): completion, ("POST", "/v1/completions"): completion}
DEV = {("POST", "/sleep"): sleep, ("POST", "/wake_up"): wake_up, ("GET", "/is_sleeping"): is_sleeping}


def main(argv: list[str]) -> int:
    if not argv or argv[0] != "serve" or len(argv) < 2:
        print("usage: vllm_standin.py serve MODEL --host H --port P [flags]", file=sys.stderr)
        return 2
    engine = Engine(argv)
    engine.record("start", argv=argv, dev_mode=engine.dev, sleep_mode=engine.sleep_mode)
    Handler.engine = engine
    server = ThreadingHTTPServer((engine.host, engine.port), Handler)
    print(f"stand-in vLLM serving {argv[1]} on {engine.host}:{engine.port}", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
