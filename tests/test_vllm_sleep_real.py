"""vLLM sleep mode on the real programs: llama-swap's own `vllm-wrapper`, built from llama-swap's
source (tools/llamaswap-loadcheck/setup.sh), drives a stand-in vLLM (tests/vllm_standin.py,
answering as vLLM 0.33.0's API server) with the `cmd` and `cmdStop` swapgen writes; then llama-swap's
own router and process code (the loader check's `-listen` mode) swaps A → B → A: the second A is a
wake, not a restart, and llama-swap's loader accepts the config. Without the built programs these
checks skip, saying how to build them."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

from autogen.cmdline import split_command
from tests.hf_fixtures import write_config, write_safetensors
from tests.runs import generate
from tests.shared import not_set_up

CACHE = Path(os.environ.get("TMPDIR") or "/tmp") / "llamaswap-loadcheck" / "bin"
WRAPPER = Path(os.environ.get("VLLM_WRAPPER") or CACHE / "vllm-wrapper")
CHECKER = Path(os.environ.get("LLAMASWAP_LOADCHECK") or CACHE / "swapgen-loadcheck")
STANDIN = Path(__file__).with_name("vllm_standin.py")
MODELS = ("model-a-bf16", "model-b-bf16")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not os.access(WRAPPER, os.X_OK),
                       reason=not_set_up(f"llama-swap's vllm-wrapper ({WRAPPER}; building it needs the Go "
                                         "module proxy)")),
]


@pytest.fixture
def config(tmp_path, request):
    """A config of two sleeping vLLM models whose engine is the stand-in (more settings lines:
    the test's indirect parameter), its standin log, and every daemon started (stopped after the
    test, by the pids they logged)."""
    for name in MODELS:
        folder = tmp_path / "models" / name
        write_config(folder)
        write_safetensors(folder / "model.safetensors", 2 << 30)
    (tmp_path / "swapgen.yaml").write_text(f"""\
roots: [models]
output: config.yaml
card_vram_gb: 24
host_ram_gb: 64
health_check_timeout: 30
vllm_wrapper: {WRAPPER}
backends:
  - {{id: standin, kind: vllm, path: {STANDIN}, version: "0.33.0", sleep: true, default: true}}
""" + getattr(request, "param", ""))
    rc, _ = generate(tmp_path / "swapgen.yaml")
    assert rc == 0
    log = tmp_path / "standin.jsonl"
    yield tmp_path / "config.yaml", log
    for pid in {e["pid"] for e in events(log) if e["event"] == "start"}:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)


def events(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def chat(base: str, model: str, timeout: float = 60) -> tuple[int, dict]:
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": "hi"}]}).encode()
    request = urllib.request.Request(base + "/v1/chat/completions", data=body, method="POST",
                                     headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, {}
    except OSError:  # not listening yet
        return 0, {}


def wait_for(check, seconds: float = 30) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {check.__doc__ or check}")


def entry(config: Path, model: str) -> dict:
    return yaml.safe_load(config.read_text())["models"][model]


def test_the_wrapper_commands_sleep_and_wake_the_daemon(config):
    """The entry's `cmd` and `cmdStop` as llama-swap runs them: `cmd` split as llama-swap splits it,
    in a process group of its own, `${PORT}` and `${PID}` filled in."""
    path, log = config
    model = entry(path, MODELS[0])
    env = {**os.environ, "VLLM_STANDIN_LOG": str(log), **dict(e.split("=", 1) for e in model["env"])}
    pids = []
    for _ in range(2):
        port = free_port()
        argv = [a.replace("${PORT}", str(port)) for a in split_command(model["cmd"])]
        serve = subprocess.Popen(argv, env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        pids.append(serve.pid)
        wait_for(lambda port=port: chat(f"http://127.0.0.1:{port}", MODELS[0], 5)[0] == 200)
        stop = [a.replace("${PID}", str(serve.pid)) for a in split_command(model["cmdStop"])]
        assert subprocess.run(stop, env=env, timeout=30, capture_output=True).returncode == 0
        assert serve.wait(timeout=20) == 0  # the serve process ends; the daemon sleeps on
    kinds = [e["event"] for e in events(log)]
    starts = [e for e in events(log) if e["event"] == "start"]
    assert len(starts) == 1 and "--enable-sleep-mode" in starts[0]["argv"] and starts[0]["dev_mode"]
    assert "wake_up" in kinds[kinds.index("sleep"):]  # the second cmd woke it
    sleeps = [e for e in events(log) if e["event"] == "sleep"]
    assert {e["level"] for e in sleeps} == {1} and all(e["body"] == '{"level":1}' for e in sleeps)
    assert not any(e["event"] == "request" and e["asleep"] for e in events(log))
    os.kill(starts[0]["pid"], 0)  # still there, asleep


def listens(checker: Path) -> bool:
    return os.access(checker, os.X_OK) and "-listen" in subprocess.run(
        [str(checker), "-h"], capture_output=True, text=True, timeout=30).stderr


@pytest.mark.skipif(not listens(CHECKER), reason=not_set_up(f"llama-swap's loader check with -listen ({CHECKER})"))
def test_llama_swap_swaps_a_b_a_waking_a_without_a_restart(config):
    path, log = config
    assert subprocess.run([str(CHECKER), "-config", str(path)], capture_output=True, text=True,
                          timeout=60).stdout.startswith("OK ")
    port = free_port()
    out = path.with_name("llama-swap.log")
    with open(out, "w") as sink:
        router = subprocess.Popen([str(CHECKER), "-config", str(path), "-listen", f"127.0.0.1:{port}"],
                                  env={**os.environ, "VLLM_STANDIN_LOG": str(log)}, stdout=sink, stderr=sink)
    try:
        wait_for(lambda: "LISTENING" in out.read_text())
        replies = [chat(f"http://127.0.0.1:{port}", m, 90) for m in (*MODELS, MODELS[0])]
        assert [status for status, _ in replies] == [200, 200, 200], out.read_text()[-3000:]
    finally:
        router.send_signal(signal.SIGTERM)
        router.wait(timeout=60)
    log_of = {m: [e for e in events(log) if e["port"] == port_of(path, m)] for m in MODELS}
    a, b = ([e["event"] for e in log_of[m]] for m in MODELS)
    assert a.count("start") == 1 and b.count("start") == 1, (a, b)  # A was never restarted
    assert "wake_up" in a[a.index("sleep"):] and "sleep" in b  # A slept for B, and woke
    assert {e["pid"] for e in log_of[MODELS[0]]} == {log_of[MODELS[0]][0]["pid"]}
    text = out.read_text()
    assert "vllm-wrapper sleep" not in text or "stop command failed" not in text
    assert "signal: killed" not in text  # no process group was killed: every stop slept


@pytest.mark.parametrize("config", ["ttl: 2\n"], indirect=True)
@pytest.mark.skipif(not listens(CHECKER), reason=not_set_up(f"llama-swap's loader check with -listen ({CHECKER})"))
def test_a_ttl_unload_leaves_the_daemon_asleep(config):
    """A TTL unload stops with the entry's `unloadTimeout`: llama-swap's default 10 s loses the race
    with its own 10 s wait for the daemon's pipes and kills the daemon's process group."""
    path, log = config
    assert entry(path, MODELS[0])["unloadTimeout"] > 10
    port = free_port()
    out = path.with_name("llama-swap.log")
    with open(out, "w") as sink:
        router = subprocess.Popen([str(CHECKER), "-config", str(path), "-listen", f"127.0.0.1:{port}"],
                                  env={**os.environ, "VLLM_STANDIN_LOG": str(log)}, stdout=sink, stderr=sink)
    try:
        wait_for(lambda: "LISTENING" in out.read_text())
        assert chat(f"http://127.0.0.1:{port}", MODELS[0], 90)[0] == 200
        wait_for(lambda: "process stopped by llama-swap" in out.read_text() or "process exited" in out.read_text(),
                 40)
        assert chat(f"http://127.0.0.1:{port}", MODELS[0], 90)[0] == 200
    finally:
        router.send_signal(signal.SIGTERM)
        router.wait(timeout=60)
    kinds = [e["event"] for e in events(log)]
    assert kinds.count("start") == 1 and "wake_up" in kinds[kinds.index("sleep"):], kinds
    assert "signal: killed" not in out.read_text()


@pytest.mark.parametrize("config", ["routing: auto\n", "groups: [{name: vllm, match: ['model-*']}]\n"], indirect=True)
@pytest.mark.skipif(not os.access(CHECKER, os.X_OK), reason=not_set_up(f"llama-swap's loader check ({CHECKER})"))
def test_llama_swap_loads_sleepers_in_a_matrix_and_in_groups(config):
    path, _ = config
    done = subprocess.run([str(CHECKER), "-config", str(path)], capture_output=True, text=True, timeout=60)
    assert done.stdout.startswith("OK "), done.stdout + done.stderr
    assert ("router=matrix" in done.stdout) == ("routing: auto" in path.with_name("swapgen.yaml").read_text())


def port_of(config: Path, model: str) -> int:
    argv = split_command(entry(config, model)["cmd"])
    return int(argv[argv.index("--port", argv.index("--")) + 1])
