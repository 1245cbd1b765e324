"""The emitted llama-server command really starts a server that answers (llama.cpp b11434, CPU).

Runs only when `LLAMA_SERVER` points to a binary (build one with
the shared tools' `llama-server-check/run_llama_server_check.sh`); skips otherwise. The tiny
random-weight model comes from that folder's `make_tiny_gguf.py` (the `tiny_model` fixture of
conftest.py). The command goes through the
same path llama-swap uses: `render_cmd` text → `${PORT}` substituted → `split_command`.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from autogen.cmdline import render_cmd, split_command
from autogen.commands import cli
from autogen.discovery.rows import ModelRow
from autogen.emit.llama import emit_llama
from autogen.metadata.gguf_header import read_gguf_header
from autogen.metadata.gguf_meta import meta_from_gguf
from autogen.metadata.kvcost import kv_cost
from autogen.resolve.backends import Resolved
from autogen.resolve.context import EmitContext
from autogen.settings.schema import BackendRow, Override, Settings
from tests.shared import not_set_up
from tests.tiny_model import write_tiny

SERVER = os.environ.get("LLAMA_SERVER", "")
HEALTH_TIMEOUT_S = 120

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not (SERVER and os.access(SERVER, os.X_OK)),
                                 reason=not_set_up("llama-server b11434 ($LLAMA_SERVER)"))]


def emit_for(model: Path, override: Override | None):
    meta = meta_from_gguf(read_gguf_header(model))
    row = ModelRow(id="tiny", format="gguf", path=str(model), size_bytes=model.stat().st_size)
    backend = Resolved(engine="llama", exe=SERVER, row=BackendRow(id="llama-cpu", kind="llama", path=SERVER,
                                                                build="cpu"), why="pinned")
    ctx = EmitContext(row=row, meta=meta, kv=kv_cost(meta), override=override,
                      settings=Settings(roots=(str(model.parent),), threads=2), backend=backend, budget_gb=2.0,
                      card_vram_gb=None, ttl=60)
    plan = emit_llama(ctx)
    assert not plan.skips, plan.skips
    return plan.entries[0]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str, body: dict | None = None, timeout: float = 5) -> tuple[int, dict]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return resp.status, json.loads(resp.read() or b"{}")


def wait_healthy(proc: subprocess.Popen, base: str, log: Path) -> None:
    deadline = time.monotonic() + HEALTH_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"llama-server exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            if get(f"{base}/health", timeout=1)[0] == 200:
                return
        except (urllib.error.URLError, ConnectionError, TimeoutError, json.JSONDecodeError):
            pass
        time.sleep(0.1)
    pytest.fail(f"no healthy /health within {HEALTH_TIMEOUT_S} s:\n{log.read_text()[-3000:]}")


@contextlib.contextmanager
def serving(argv: list[str], base: str, log: Path):
    """Start llama-server with exactly `argv`, wait for /health, stop it afterwards."""
    with log.open("w") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_healthy(proc, base, log)
        yield
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("override", [
    None,
    Override(match="*", kv_type="q8_0", flash_attn="auto", parallel=2),
    Override(match="*", ctx=2048, extra_args=("--ctx-size=4096", "-fa", "on", "--no-warmup")),
], ids=["sized", "q8_0-cache-two-slots", "extra-args-replace"])
def test_emitted_command_starts_a_server_that_answers_a_chat(tiny_model, tmp_path, override):
    entry = emit_for(tiny_model, override)
    argv, sized = entry.argv, dict(entry.metadata)
    port = free_port()
    cmd = render_cmd(argv).replace("${PORT}", str(port))
    launched = split_command(cmd)
    assert launched == [a.replace("${PORT}", str(port)) for a in argv]
    base = f"http://127.0.0.1:{port}"
    with serving(launched, base, tmp_path / "llama-server.log"):
        status, reply = get(f"{base}/v1/chat/completions", {
            "model": "tiny", "max_tokens": 8, "seed": 1,
            "messages": [{"role": "user", "content": "Say hello."}]}, timeout=120)
        assert status == 200
        assert reply["choices"][0]["message"]["content"].strip()
        _, props = get(f"{base}/props")
        assert props["default_generation_settings"]["n_ctx"] == sized["ctx"]  # per slot, as sized
        if override is not None and override.parallel:
            assert props["total_slots"] == override.parallel


def test_every_llama_entry_of_a_generated_config_answers(tiny_model, tmp_path):
    """The whole pipeline: a library holding the tiny model, a config from `swapgen`, and each
    llama-server entry launched as llama-swap launches it (macros on the raw text, then its
    shell splitting)."""
    library = tmp_path / "models" / "pub lisher"
    library.mkdir(parents=True)
    (library / "Tiny Random-F32.gguf").symlink_to(tiny_model)
    settings = tmp_path / "swapgen.yaml"
    settings.write_text(
        "roots: [models]\nvram_budget_gb: 2\ncard_vram_gb: 0\nthreads: 2\n"
        f"backends:\n  - {{id: llama-cpu, kind: llama, path: {json.dumps(SERVER)}, variant: cpu, default: true}}\n"
        "overrides:\n  - match: '*Tiny*'\n    ctx_variants: [4096]\n"
        "    variants: [{name: two slots, parallel: 2, kv_type: q8_0, flash_attn: auto}]\n")
    assert cli.main(["--settings", str(settings)]) == 0
    models = YAML(typ="safe").load((tmp_path / "config.yaml").read_text())["models"]
    launched_ids = []
    for model_id, entry in sorted(models.items()):
        port = free_port()
        argv = split_command(entry["cmd"].replace("${PORT}", str(port)))
        if argv[0] != SERVER:
            continue
        base = f"http://127.0.0.1:{port}"
        with serving(argv, base, tmp_path / f"{model_id}.log"):
            status, reply = get(f"{base}/v1/chat/completions", {
                "model": model_id, "max_tokens": 4, "seed": 1,
                "messages": [{"role": "user", "content": "Hi"}]}, timeout=120)
            assert status == 200 and reply["choices"][0]["message"]["content"] is not None
            launched_ids.append(model_id)
    assert len(launched_ids) == 3, launched_ids  # the model, its -4k tier and its -two-slots variant


def write_real_lora(path: Path, rank: int = 4) -> Path:
    """A LoRA for the tiny model with real (small, random) weights on every attn_q, in
    convert_lora_to_gguf.py's layout: `lora_a` (ne0 = n_embd, ne1 = rank), `lora_b` (rank, n_embd)."""
    import gguf  # noqa: PLC0415 - only the real-server tests write tensor data
    import numpy as np  # noqa: PLC0415

    rng = np.random.default_rng(0)
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_type(gguf.GGUFType.ADAPTER)
    w.add_string(gguf.Keys.Adapter.TYPE, "lora")
    w.add_float32(gguf.Keys.Adapter.LORA_ALPHA, 8.0)
    for block in range(2):
        w.add_tensor(f"blk.{block}.attn_q.weight.lora_a", (rng.standard_normal((rank, 256)) * 0.01).astype(np.float32))
        w.add_tensor(f"blk.{block}.attn_q.weight.lora_b", (rng.standard_normal((256, rank)) * 0.01).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_lora_and_draft_profiles_start_and_answer(tiny_model, tmp_path):
    """A LoRA beside the model becomes `<id>+<adapter>` with `--lora`; a draft of the same
    vocabulary (another tiny model, pinned) becomes `<id>-draft` with `-md … --spec-type
    draft-simple`: llama-server b11434 loads both and answers."""
    library = tmp_path / "models" / "pub"
    library.mkdir(parents=True)
    (library / "Tiny-F32.gguf").symlink_to(tiny_model)
    write_real_lora(library / "tiny-style-LoRA-F32.gguf")
    draft = tmp_path / "drafts" / "tiny-draft-F32.gguf"
    draft.parent.mkdir()
    write_tiny(draft, seed=1)
    settings = tmp_path / "swapgen.yaml"
    settings.write_text(
        "roots: [models]\nvram_budget_gb: 2\ncard_vram_gb: 0\nthreads: 2\n"
        f"backends:\n  - {{id: llama-cpu, kind: llama, path: {json.dumps(SERVER)}, variant: cpu, default: true}}\n"
        f"overrides:\n  - {{match: '*Tiny-F32*', draft: {json.dumps(str(draft))}}}\n")
    assert cli.main(["--settings", str(settings)]) == 0
    models = YAML(typ="safe").load((tmp_path / "config.yaml").read_text())["models"]
    assert set(models) == {"tiny-f32", "tiny-f32+tiny-style-lora", "tiny-f32-draft"}
    for model_id in ("tiny-f32+tiny-style-lora", "tiny-f32-draft"):
        port = free_port()
        argv = split_command(models[model_id]["cmd"].replace("${PORT}", str(port)))
        base = f"http://127.0.0.1:{port}"
        log = tmp_path / f"{model_id}.log"
        with serving(argv, base, log):
            status, reply = get(f"{base}/v1/chat/completions", {
                "model": model_id, "max_tokens": 4, "seed": 1,
                "messages": [{"role": "user", "content": "Hi"}]}, timeout=120)
            assert status == 200 and reply["choices"][0]["message"]["content"] is not None
        text = log.read_text()
        assert ("lora" in text.lower()) if "+" in model_id else ("draft" in text.lower()), text[-2000:]
