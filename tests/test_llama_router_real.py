"""A generated models preset really runs llama.cpp's router (llama-server b11434, CPU).

Runs when `LLAMA_SERVER` points to a binary, or one is at `${E2E_WORK:-$TMPDIR/llama-e2e}/bin/
llama-server` (the shared tools' `llama-server-check/run_llama_server_check.sh` builds it there);
skips otherwise. The router starts on 127.0.0.1 with the file swapgen wrote; `GET /models` must
list every section with exactly the arguments of the llama-swap entry of the same id (its
`status.args`, read back through llama.cpp's own option table), the preloaded model loaded; a
chat request through an alias loads and answers; the router is stopped by its PID, and so is any
instance it left.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import shlex
import shutil
import signal
import socket
import struct
import subprocess
import time
import urllib.error
import urllib.request
import zlib
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from autogen.cmdline import split_command
from autogen.commands import cli
from autogen.flags.llama import recorded_table
from autogen.router.llama_options import ALIAS_ENV, ROUTER_OWNED
from tests.hf_fixtures import write_config, write_safetensors
from tests.shared import not_set_up
from tests.test_llama_server_real import write_real_lora
from tests.tiny_model import write_tiny, write_tiny_projector

E2E_WORK = Path(os.environ.get("E2E_WORK") or Path(os.environ.get("TMPDIR") or "/tmp") / "llama-e2e")
SERVER = os.environ.get("LLAMA_SERVER") or str(E2E_WORK / "bin" / "llama-server")
START_TIMEOUT_S = 120

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not os.access(SERVER, os.X_OK),
                                 reason=not_set_up(f"llama-server b11434 ({SERVER}; $LLAMA_SERVER)"))]


def library(root: Path, model: Path, target: str) -> Path:
    """Two llama models (one with a ctx profile, an alias and a preload), and an HF folder only
    vLLM serves."""
    models = root / "models"
    for rel in ("pub lisher/Tiny Random-F32.gguf", "other/Small Chat-Q8_0.gguf"):  # a space, to prove quoting
        (models / rel).parent.mkdir(parents=True, exist_ok=True)
        if not (models / rel).exists():
            shutil.copyfile(model, models / rel)  # two files: discovery serves one file once
    folder = models / "meta-llama" / "Llama-3.2-3B-Instruct"
    write_config(folder)
    write_safetensors(folder / "model.safetensors", 1 << 30)
    settings = root / f"{target}.yaml"
    settings.write_text(
        f"roots: [models]\ntarget: {target}\ncache_dir: cache-{target}\nvram_budget_gb: 2\ncard_vram_gb: 0\n"
        "threads: 2\n"
        f"backends:\n  - {{id: llama-cpu, kind: llama, path: {json.dumps(SERVER)}, variant: cpu, default: true}}\n"
        "  - {id: vllm, kind: vllm, path: /opt/vllm/bin/vllm, version: 0.33.0}\n"
        "overrides:\n  - match: '*Tiny*'\n    ctx_variants: [4096]\n    flash_attn: 'off'\n"
        "    llama_swap: {aliases: [tiny]}\n"
        + ("llama_swap:\n  hooks: {on_startup: {preload: [tiny]}}\n  unloadTimeout: 5\n"
           if target == "llama-server" else ""))
    return settings


def generate(settings: Path) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert cli.main(["--settings", str(settings)]) == 0
    return out.getvalue()


def arguments(argv: list[str]) -> dict[str, str]:
    """Preset key → value of a llama-server command line, as llama.cpp's table names them,
    without what the router sets for every instance (address, name, log colours)."""
    table = recorded_table()
    found, i = {}, 1
    while i < len(argv):
        option = table.by_flag[argv[i]]
        if option.values == 0:
            value, i = ("false" if argv[i] in option.negatives else "true"), i + 1
        else:
            value, i = argv[i + 1], i + 2
        if option.env not in ROUTER_OWNED and option.env != ALIAS_ENV:
            found[option.key] = value
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(url: str, body: dict | None = None, timeout: float = 5) -> dict:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        assert resp.status == 200
        return json.loads(resp.read() or b"{}")


def children(pid: int) -> list[int]:
    """The processes `pid` started (the router's instances), from /proc."""
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            found += [int(p) for p in (task / "children").read_text().split()]
    return found


def models_when_ready(proc: subprocess.Popen, base: str, log: Path, wanted: set[str]) -> list[dict]:
    """`GET /models` once the preloaded models are loaded."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"llama-server exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        with contextlib.suppress(urllib.error.URLError, ConnectionError, TimeoutError, json.JSONDecodeError):
            data = request(f"{base}/models", timeout=2)["data"]
            if wanted <= {m["id"] for m in data if m["status"]["value"] == "loaded"}:
                return data
        time.sleep(0.2)
    pytest.fail(f"the router did not load {sorted(wanted)} within {START_TIMEOUT_S} s:\n{log.read_text()[-3000:]}")


@contextlib.contextmanager
def router(command: str, cwd: Path, env: dict[str, str] | None = None):
    """The router started with the command the run printed, on 127.0.0.1: yields (process, base
    URL, log, the instances seen), then stops it by its PID, and any instance it left by theirs."""
    port = free_port()
    log = cwd / "router.log"
    with log.open("w") as out:
        proc = subprocess.Popen([*shlex.split(command), "--host", "127.0.0.1", "--port", str(port)],
                                stdout=out, stderr=subprocess.STDOUT, cwd=cwd, env={**os.environ, **(env or {})})
    instances: set[int] = set()
    try:
        yield proc, f"http://127.0.0.1:{port}", log, instances
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        for pid in instances:  # an instance the router did not stop is stopped by its PID too
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    assert proc.returncode == 0, log.read_text()[-3000:]


def test_the_generated_preset_runs_llama_cpps_router(tiny_model, tmp_path):
    yaml_settings = library(tmp_path, tiny_model, "llama-swap")
    generate(yaml_settings)
    config = YAML(typ="safe").load((tmp_path / "config.yaml").read_text())
    settings = library(tmp_path, tiny_model, "llama-server")
    printed = generate(settings)
    preset = tmp_path / "models.ini"
    command = next(line.split("router: ", 1)[1] for line in printed.splitlines() if "start llama.cpp's router" in line)
    assert command.startswith(f"{SERVER} --models-preset {preset} --models-max ")
    assert 'not in models.ini: "llama-3.2-3b-instruct-bf16"' in printed

    served = {mid: model for mid, model in config["models"].items() if "llama-server" in model["cmd"]}
    assert set(served) == {"tiny-random-f32", "tiny-random-f32-4k", "small-chat-q8_0"}
    with router(command, tmp_path) as (proc, base, log, instances):
        listed = {m["id"]: m for m in models_when_ready(proc, base, log, {"tiny-random-f32"})}
        assert set(listed) == set(served)  # every section, and nothing else (the vLLM model is left out)
        for mid, model in served.items():
            assert arguments(listed[mid]["status"]["args"]) == arguments(split_command(model["cmd"])), mid
            assert listed[mid]["aliases"] == model.get("aliases", [])
        reply = request(f"{base}/v1/chat/completions", {
            "model": "tiny", "max_tokens": 8, "seed": 1,
            "messages": [{"role": "user", "content": "Say hello."}]}, timeout=120)
        assert reply["model"] == "tiny-random-f32" and reply["choices"][0]["message"]["content"].strip()
        request(f"{base}/v1/chat/completions", {
            "model": "small-chat-q8_0", "max_tokens": 4, "messages": [{"role": "user", "content": "Hi."}]},
            timeout=120)
        instances.update(children(proc.pid))
        assert len(instances) == 2


def image_url(side: int = 28) -> str:
    """A `side` × `side` RGB gradient as a PNG data URL (an image the tiny projector reads)."""
    rows = b"".join(b"\x00" + b"".join(bytes([x * 9 % 256, y * 9 % 256, 128]) for x in range(side))
                    for y in range(side))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))
    return "data:image/png;base64," + base64.b64encode(png).decode()


def test_hostile_names_adapters_drafts_and_projectors_reach_the_router(tiny_model, tmp_path):
    """File names with `=`, `[`, unicode and a comma (a LoRA: llama-server splits `--lora` at
    commas), a draft pairing, a vision projector, and a file the preset cannot name (`#`): every
    section the router lists has the llama-swap entry's arguments and answers (the vision model
    an image too); the `#` file is listed by the run."""
    models = tmp_path / "models"
    for rel in ("odd/we=ird[1]-F32.gguf", "uni/Modèle Ünï-F32.gguf", "odd/hash#tag-F32.gguf", "pub/Styled-F32.gguf",
                "vis/Visionary-F32.gguf"):
        (models / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(tiny_model, models / rel)
    write_real_lora(models / "pub" / "sty,le-LoRA-F32.gguf")
    write_tiny_projector(models / "vis" / "mmproj-Visionary-F32.gguf")
    (tmp_path / "drafts").mkdir()
    draft = write_tiny(tmp_path / "drafts" / "tiny-draft-F32.gguf", seed=1)
    outputs = {}
    for target, output in (("llama-swap", "config.yaml"), ("llama-server", "models.ini")):
        settings = tmp_path / f"{target}.yaml"
        settings.write_text(
            f"roots: [models]\ntarget: {target}\noutput: {output}\ncache_dir: cache-{target}\nvram_budget_gb: 2\n"
            "card_vram_gb: 0\nthreads: 2\n"
            f"backends:\n  - {{id: llama-cpu, kind: llama, path: {json.dumps(SERVER)}, variant: cpu, default: true}}\n"
            f"overrides:\n  - {{match: '*we=ird*', draft: {json.dumps(str(draft))}}}\n")
        outputs[target] = generate(settings)
    assert 'not in models.ini: "hash-tag-f32": not in the preset: ' in outputs["llama-server"]
    config = YAML(typ="safe").load((tmp_path / "config.yaml").read_text())
    served = {mid: model for mid, model in config["models"].items() if mid != "hash-tag-f32"}
    assert {"we-ird-1-f32-draft", "styled-f32+sty-le-lora", "modèle-ünï-f32", "visionary-f32"} <= set(served)
    assert "--mmproj" in split_command(served["visionary-f32"]["cmd"])
    command = next(line.split("router: ", 1)[1] for line in outputs["llama-server"].splitlines()
                   if "start llama.cpp's router" in line)
    with router(command, tmp_path) as (proc, base, log, instances):
        listed = {m["id"]: m for m in models_when_ready(proc, base, log, set())}
        assert set(listed) == set(served)
        for mid, model in sorted(served.items()):
            assert arguments(listed[mid]["status"]["args"]) == arguments(split_command(model["cmd"])), mid
            reply = request(f"{base}/v1/chat/completions", {
                "model": mid, "max_tokens": 4, "messages": [{"role": "user", "content": "Hi."}]}, timeout=120)
            assert reply["model"] == mid and reply["choices"][0]["message"]["content"] is not None, mid
            instances.update(children(proc.pid))
        reply = request(f"{base}/v1/chat/completions", {"model": "visionary-f32", "max_tokens": 4, "messages": [
            {"role": "user", "content": [{"type": "text", "text": "What is it?"},
                                         {"type": "image_url", "image_url": {"url": image_url()}}]}]}, timeout=120)
        assert reply["usage"]["prompt_tokens"] > 20  # the image's tokens came through the projector


def test_models_of_llama_cpps_own_cache_keep_llama_cpps_fit(tiny_model, tmp_path):
    """The router also lists every GGUF of the Hugging Face cache (`LLAMA_CACHE`) and gives it the
    preset's `[*]`: no context, offload or fit switch made for the preset's models reaches it."""
    settings = library(tmp_path, tiny_model, "llama-server")
    command = next(line.split("router: ", 1)[1] for line in generate(settings).splitlines()
                   if "start llama.cpp's router" in line)
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hf-cache" / "models--pub--Cached-GGUF"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    (repo / "snapshots" / commit).mkdir(parents=True)
    shutil.copyfile(tiny_model, repo / "snapshots" / commit / "Cached-Q8_0.gguf")
    with router(command, tmp_path, {"LLAMA_CACHE": str(tmp_path / "hf-cache")}) as (proc, base, log, _):
        listed = {m["id"]: m for m in models_when_ready(proc, base, log, {"tiny-random-f32"})}
        cached = arguments(listed["pub/Cached-GGUF:Q8_0"]["status"]["args"])
    assert cached["hf-repo"] == "pub/Cached-GGUF:Q8_0"
    assert not {"ctx-size", "n-gpu-layers", "fit", "flash-attn"} & set(cached), cached
