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


def make_handler(engine: Engine):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # quiet, like vLLM's access log filtered
            pass

        def send_json(self, status: int, body: dict | None) -> None:
            data = b"" if body is None else json.dumps(body, separators=(",", ":")).encode()
            self.send_response(status)
            if body is not None:
                self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def dev_route(self) -> bool:
            return engine.dev and urlsplit(self.path).path in ("/sleep", "/wake_up", "/is_sleeping")

        def do_GET(self) -> None:
            path = urlsplit(self.path).path
            if path == "/health":
                return self.send_json(200, None)
            if path == "/is_sleeping" and engine.dev:
                return self.send_json(200, {"is_sleeping": engine.level is not None})
            if path == "/v1/models":
                return self.send_json(200, {"object": "list", "data": [{"id": option(engine.argv, "--served-model-name",
                                                                               engine.argv[1]), "object": "model"}]})
            if self.dev_route():
                return self.send_json(405, {"detail": "Method Not Allowed"})
            return self.send_json(404, {"detail": "Not Found"})

        def do_POST(self) -> None:
            url = urlsplit(self.path)
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length).decode("utf-8", "replace") if length else ""
            query = parse_qs(url.query)
            if url.path == "/sleep" and engine.dev:
                return self.sleep(query, body)
            if url.path == "/wake_up" and engine.dev:
                tags = query.get("tags") or None
                engine.record("wake_up", tags=tags, was_level=engine.level)
                engine.level = None
                return self.send_json(200, {"status": "awake", "tags": tags})
            if url.path in ("/v1/chat/completions", "/v1/completions"):
                engine.record("request", path=url.path, asleep=engine.level is not None)
                if engine.level is not None:
                    return self.send_json(503, {"error": {"message": "the stand-in engine is asleep"}})
                return self.send_json(200, {"object": "chat.completion", "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": f"stand-in on port {engine.port}"},
                     "finish_reason": "stop"}]})
            if self.dev_route():
                return self.send_json(405, {"detail": "Method Not Allowed"})
            return self.send_json(404, {"detail": "Not Found"})

        def sleep(self, query: dict, body: str) -> None:
            raw = (query.get("level") or ["1"])[-1]
            mode = (query.get("mode") or ["abort"])[-1]
            try:
                level = int(raw)
            except ValueError:
                return self.send_json(422, query_error("level", raw, "int_parsing",
                                                       "Input should be a valid integer, unable to parse string as an integer"))
            if level < 0 or level > 2:
                kind, msg = ("greater_than_equal", "Input should be greater than or equal to 0") if level < 0 else \
                    ("less_than_equal", "Input should be less than or equal to 2")
                return self.send_json(422, query_error("level", raw, kind, msg))
            if mode not in MODES:
                return self.send_json(422, query_error("mode", mode, "literal_error",
                                                       "Input should be 'abort', 'wait' or 'keep'"))
            engine.record("sleep", level=level, body=body, already=engine.level is not None)
            if engine.level is None:
                engine.level = level
            return self.send_json(200, {"status": "sleeping", "level": level})

    return Handler


def main(argv: list[str]) -> int:
    if not argv or argv[0] != "serve" or len(argv) < 2:
        print("usage: vllm_standin.py serve MODEL --host H --port P [flags]", file=sys.stderr)
        return 2
    engine = Engine(argv)
    engine.record("start", argv=argv, dev_mode=engine.dev, sleep_mode=engine.sleep_mode)
    server = ThreadingHTTPServer((engine.host, engine.port), make_handler(engine))
    print(f"stand-in vLLM serving {argv[1]} on {engine.host}:{engine.port}", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
