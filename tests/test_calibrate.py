"""`swapgen calibrate`: each entry started with its real command, its own memory report kept under
the exact command, used by the next run; failures recorded; nothing left running after a
timeout, a crash, Ctrl-C or SIGTERM. Engines here are scripted fakes that print the lines
llama-server b11434 and vLLM 0.33 print; the last test runs the real llama-server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autogen.commands import cli
from autogen.figures import process as engine_process
from tests.builders import add_model
from tests.gguf_fixtures import write_lora
from tests.shared import not_set_up

#: A fake engine: llama-server's (or vLLM's) memory lines, then /health on --port; FAKE_MODE makes
#: it crash, hang without answering (ignoring SIGTERM), or leave a child that ignores SIGTERM.
FAKE = r'''
import http.server, os, signal, subprocess, sys, time
args = sys.argv[1:]
port = int(args[args.index("--port") + 1])
mode = os.environ.get("FAKE_MODE", "ok")
pids = open(os.environ["FAKE_PIDS"], "a")
pids.write(f"{os.getpid()}\n"); pids.flush()
open(os.environ["FAKE_PIDS"] + ".argv", "w").write("\n".join(args))
if mode in ("hang", "stubborn"):
    child = subprocess.Popen([sys.executable, "-c",
                              "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)"])
    pids.write(f"{child.pid}\n"); pids.flush()
if mode == "crash":
    print("0.00.019.072 E llama_model_load: error loading model: tensor 'blk.0.attn_q.weight' has wrong shape")
    print("0.00.019.632 E srv  llama_server: exiting due to model loading error", flush=True)
    sys.exit(1)
if mode == "hang":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(300)
if "serve" in args:
    print("(Worker_TP0 pid=1) INFO 12-02 01:21:10 [gpu_model_runner.py:5089] Model loading took 1.5 GiB memory and 1.0 seconds")
    print("(Worker_TP0 pid=1) INFO 12-02 01:21:30 [gpu_worker.py:773] Available KV cache memory: 2.25 GiB")
    print("(EngineCore pid=1) INFO 12-02 01:21:31 [kv_cache_utils.py:1148] GPU KV cache size: 73,728 tokens, "
          "Maximum concurrency for 8,192 tokens per request: 9.00x")
else:
    print(f"0.00.1 I verbosity {os.environ.get('LLAMA_ARG_LOG_VERBOSITY')}")
    print("0.00.073.304 I load_tensors:        CUDA0 model buffer size =  1000.00 MiB")
    print("0.00.073.304 I load_tensors:   CPU_Mapped model buffer size =    10.00 MiB")
    print("0.00.075.751 I llama_kv_cache:      CUDA0 KV buffer size =   256.00 MiB")
    print("0.00.536.277 I sched_reserve:      CUDA0 compute buffer size =   300.00 MiB")
sys.stdout.flush()

class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b'{"status":"ok"}')
    def log_message(self, *a):
        pass

http.server.HTTPServer(("127.0.0.1", port), Health).serve_forever()
'''


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


@pytest.fixture
def lib(tmp_path, monkeypatch):
    """A library of one llama GGUF served by a fake llama-server, and one HF-less GGUF on a fake vLLM."""
    engine = tmp_path / "bin" / "llama-server"
    engine.parent.mkdir()
    engine.write_text(f"#!{sys.executable}\n{FAKE}")
    engine.chmod(0o755)
    vllm = tmp_path / "bin" / "vllm"
    vllm.write_text(f"#!{sys.executable}\n{FAKE}")
    vllm.chmod(0o755)
    add_model(tmp_path / "models", "pub/A-GGUF/Alpha-Q4_K_M.gguf")
    add_model(tmp_path / "models", "pub/V-GGUF/Vee-Q4_K_M.gguf")
    settings = tmp_path / "swapgen.yaml"
    settings.write_text(f"roots: [models]\nvram_budget_gb: 8\ncard_vram_gb: 0\nbackends:\n"
                        f"  - {{id: llama, kind: llama, path: {engine}, default: true, variant: cuda}}\n"
                        f"  - {{id: vllm, kind: vllm, path: {vllm}, version: '0.33.0'}}\n"
                        "overrides:\n  - {match: '*Vee*', backend: vllm}\n")
    monkeypatch.setenv("FAKE_PIDS", str(tmp_path / "pids"))
    monkeypatch.setattr(engine_process, "GRACE_S", 1.0)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def swapgen(lib: Path, *args: str) -> int:
    return cli.main(["--settings", str(lib / "swapgen.yaml"), *args])


def config_memory(lib: Path, entry: str) -> dict:
    from ruamel.yaml import YAML  # noqa: PLC0415

    config = YAML(typ="safe").load((lib / "config.yaml").read_text())
    return config["models"][entry]["metadata"]


def command(lib: Path, entry: str) -> str:
    from ruamel.yaml import YAML  # noqa: PLC0415

    return YAML(typ="safe").load((lib / "config.yaml").read_text())["models"][entry]["cmd"]


def pids(lib: Path) -> list[int]:
    path = lib / "pids"
    return [int(p) for p in path.read_text().split()] if path.exists() else []


class TestMeasure:
    def test_the_engine_reports_and_the_next_run_uses_it(self, lib, capsys):
        assert swapgen(lib) == 0
        before = config_memory(lib, "alpha-q4_k_m")
        assert before["memory"]["source"] == "estimate"
        assert swapgen(lib, "calibrate", "alpha-q4_k_m") == 0
        out = capsys.readouterr().out
        assert "measured in" in out and "CUDA0 1.52 GiB" in out
        argv = (lib / "pids.argv").read_text().split("\n")
        assert "${PORT}" not in argv and argv[argv.index("--host") + 1] == "127.0.0.1"
        assert swapgen(lib) == 0
        after = config_memory(lib, "alpha-q4_k_m")
        memory = after["memory"]
        assert memory["source"] == "measured"
        assert memory["devices"][0] == {"device": "CUDA0", "model_mib": 1000, "context_mib": 256,
                                        "compute_mib": 300, "other_mib": memory["devices"][0]["other_mib"]}
        assert memory["host_mib"] == 10
        # swapgen's charges for what the log does not show (CUDA runtime 0.3 GiB, base 0.5 GiB) + the
        # 128 MiB margin, rounded up to a whole MiB
        assert memory["devices"][0]["other_mib"] == 948
        assert after["est_vram_gb"] == pytest.approx((1000 + 256 + 300 + 947.2) / 1024, abs=0.01)
        assert not any(alive(p) for p in pids(lib))

    def test_a_changed_command_or_binary_makes_it_stale(self, lib):
        assert swapgen(lib, "calibrate", "alpha-q4_k_m") == 0
        assert swapgen(lib) == 0 and config_memory(lib, "alpha-q4_k_m")["memory"]["source"] == "measured"
        settings = lib / "swapgen.yaml"
        settings.write_text(settings.read_text() + "  - {match: '*Alpha*', ctx: 4096}\n")
        assert swapgen(lib) == 0 and config_memory(lib, "alpha-q4_k_m")["memory"]["source"] == "estimate"
        settings.write_text(settings.read_text().replace("  - {match: '*Alpha*', ctx: 4096}\n", ""))
        assert swapgen(lib) == 0 and config_memory(lib, "alpha-q4_k_m")["memory"]["source"] == "measured"
        engine = lib / "bin" / "llama-server"
        engine.write_text(engine.read_text() + "\n# rebuilt\n")
        assert swapgen(lib) == 0 and config_memory(lib, "alpha-q4_k_m")["memory"]["source"] == "estimate"

    def test_vllm_weights_and_kv_pool_per_gpu(self, lib, capsys):
        """The measurement sizes the next command (its weights, its KV pool); measuring that one
        too, the run after keeps it and reports the engine's own figures."""
        assert swapgen(lib) == 0
        first = command(lib, "vee-q4_k_m")
        assert swapgen(lib, "calibrate", "vee-q4_k_m") == 0
        assert swapgen(lib) == 0
        resized = command(lib, "vee-q4_k_m")
        assert resized != first and config_memory(lib, "vee-q4_k_m")["memory"]["source"] == "estimate"
        assert swapgen(lib, "calibrate", "vee-q4_k_m") == 0
        assert swapgen(lib) == 0
        assert command(lib, "vee-q4_k_m") == resized
        memory = config_memory(lib, "vee-q4_k_m")["memory"]
        assert memory["source"] == "measured"
        assert memory["devices"][0]["model_mib"] == 1536 and memory["devices"][0]["context_mib"] == 2304
        engine = lib / "bin" / "vllm"
        engine.write_text(engine.read_text() + "\n# rebuilt\n")  # stale figures are never used
        assert swapgen(lib) == 0 and command(lib, "vee-q4_k_m") == first

    def test_a_profile_is_measured_by_its_own_id(self, lib, capsys):
        """A LoRA profile's id is `<model>+<adapter>`; naming it measures that entry alone."""
        write_lora(lib / "models/pub/A-GGUF/alpha-sql-LoRA-F16.gguf", blocks=4, embd=256)
        assert swapgen(lib, "calibrate", "alpha-q4_k_m+alpha-sql-lora") == 0
        out = capsys.readouterr().out
        assert "[1/1] alpha-q4_k_m+alpha-sql-lora: starting" in out
        assert "--lora" in (lib / "pids.argv").read_text().split("\n")

    def test_unknown_id_is_refused(self, lib, capsys):
        assert swapgen(lib, "calibrate", "nope") == 1
        assert "no served entry 'nope'" in capsys.readouterr().err


class TestFailures:
    def test_a_crash_is_recorded_with_the_engines_line_and_listed(self, lib, monkeypatch, capsys):
        monkeypatch.setenv("FAKE_MODE", "crash")
        assert swapgen(lib, "calibrate", "alpha-q4_k_m") == 1
        line = "llama_model_load: error loading model: tensor 'blk.0.attn_q.weight' has wrong shape"
        assert f"failed to start: {line}" in capsys.readouterr().out
        assert swapgen(lib) == 0
        capsys.readouterr()
        assert swapgen(lib, "list") == 0
        listed = next(li for li in capsys.readouterr().out.splitlines() if li.startswith("alpha-q4_k_m "))
        assert "  START FAILED  " in listed and f"alpha-q4_k_m failed to start under calibrate: {line}" in listed
        assert swapgen(lib, "list", "--json") == 0
        row = next(r for r in json.loads(capsys.readouterr().out) if r["id"] == "alpha-q4_k_m")
        assert row["start_errors"] == {"alpha-q4_k_m": line} and row["memory"] == {"alpha-q4_k_m": "estimate"}

    def test_a_timeout_leaves_no_process(self, lib, monkeypatch, capsys):
        monkeypatch.setenv("FAKE_MODE", "hang")
        assert swapgen(lib, "calibrate", "alpha-q4_k_m", "--timeout", "2") == 1
        assert "no answer on http://127.0.0.1:" in capsys.readouterr().out
        assert len(pids(lib)) == 2 and not any(alive(p) for p in pids(lib))

    def test_a_child_that_ignores_sigterm_is_killed(self, lib, monkeypatch):
        monkeypatch.setenv("FAKE_MODE", "stubborn")
        assert swapgen(lib, "calibrate", "alpha-q4_k_m") == 0
        assert len(pids(lib)) == 2 and not any(alive(p) for p in pids(lib))

    @pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 128 + signal.SIGTERM),
                                           (signal.SIGHUP, 128 + signal.SIGHUP)])
    def test_an_interrupted_calibration_leaves_no_process(self, lib, sig, code):
        """Ctrl-C, `kill`, or the terminal closing (SIGHUP): the engine, in a session of its own,
        would not get the signal itself."""
        proc = calibrating(lib)
        proc.send_signal(sig)
        assert proc.wait(60) == code
        assert not any(alive(p) for p in pids(lib))

    def test_ctrl_c_twice_still_stops_the_engine(self, lib):
        """The second Ctrl-C lands while the first stops an engine that ignores SIGTERM: it waits
        until the engine is killed."""
        proc = calibrating(lib)
        proc.send_signal(signal.SIGINT)
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 130
        assert not any(alive(p) for p in pids(lib))

    def test_ctrl_c_while_the_engine_is_being_created(self, lib, monkeypatch):
        """Ctrl-C that lands as the engine's process is created (before swapgen holds it) still
        stops it."""
        started = []
        real_popen = engine_process.subprocess.Popen

        def popen_then_ctrl_c(*args, **kwargs):
            proc = real_popen(*args, **kwargs)
            started.append(proc.pid)
            signal.raise_signal(signal.SIGINT)
            return proc

        monkeypatch.setattr(engine_process.subprocess, "Popen", popen_then_ctrl_c)
        monkeypatch.setenv("FAKE_MODE", "hang")
        assert swapgen(lib, "calibrate", "alpha-q4_k_m") == 130
        assert started and not alive(started[0])


def calibrating(lib: Path) -> subprocess.Popen:
    """`swapgen calibrate` in a process of its own, once its engine (which ignores SIGTERM) and
    that engine's child are running."""
    env = {**os.environ, "FAKE_MODE": "hang"}
    script = ("import sys; from autogen.commands import cli; "
              "from autogen.figures import process as engine_process; engine_process.GRACE_S = 1.0; "
              f"sys.exit(cli.main(['--settings', {str(lib / 'swapgen.yaml')!r}, 'calibrate', 'alpha-q4_k_m']))")
    proc = subprocess.Popen([sys.executable, "-c", script], env=env, cwd=lib)
    deadline = time.monotonic() + 60
    while len(pids(lib)) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(pids(lib)) == 2
    return proc


SERVER = os.environ.get("LLAMA_SERVER", "")


@pytest.mark.slow
@pytest.mark.skipif(not (SERVER and os.access(SERVER, os.X_OK)),
                    reason=not_set_up("llama-server b11434 ($LLAMA_SERVER)"))
def test_the_real_llama_server(tmp_path, tiny_model, capsys):
    """The measured figures are the server's own: its memory breakdown printed at exit agrees."""
    (tmp_path / "models").mkdir()
    os.symlink(tiny_model, tmp_path / "models" / "tiny.gguf")
    settings = tmp_path / "swapgen.yaml"
    settings.write_text(f"roots: [models]\nvram_budget_gb: 2\ncard_vram_gb: 0\nthreads: 2\nbackends:\n"
                        f"  - {{id: llama-cpu, kind: llama, path: {SERVER}, default: true, variant: cpu}}\n")
    assert cli.main(["--settings", str(settings), "calibrate"]) == 0
    log = (tmp_path / "cache" / "calibration-logs" / "tiny.log").read_text()
    breakdown = next(line for line in log.splitlines() if "memory_breakdown_print" in line and "- Host" in line)
    _, model, context, compute = (int(n) for n in breakdown.replace("=", " ").replace("+", " ").split()[-5:-1])
    assert cli.main(["--settings", str(settings)]) == 0
    capsys.readouterr()
    assert cli.main(["--settings", str(settings), "show", "tiny", "--json"]) == 0
    memory = {m["source"]: m for m in json.loads(capsys.readouterr().out)["entries"][0]["memory"]}
    measured = memory["measured"]["devices"][0]
    assert (measured["weights"] >> 20, measured["kv_state"] >> 20) == (model, context)
    assert abs((measured["compute"] >> 20) - compute) <= 1
    assert subprocess.run(["pgrep", "-f", str(tmp_path)], capture_output=True).stdout == b""


def test_a_missing_engine_is_recorded_not_raised(lib, capsys):
    (lib / "bin" / "llama-server").unlink()
    assert swapgen(lib, "calibrate", "alpha-q4_k_m") == 1
    assert "failed to start: cannot start " in capsys.readouterr().out


def test_the_engines_devices_are_the_visible_gpus_in_order():
    from autogen.figures.calibrate import _gpu_index, visible_devices  # noqa: PLC0415

    visible = visible_devices(("CUDA_DEVICE_ORDER=PCI_BUS_ID", "CUDA_VISIBLE_DEVICES=2,3"))
    assert visible == [2, 3] and _gpu_index("CUDA1", 0, visible) == 3 and _gpu_index("Host", 1, visible) is None
    assert _gpu_index("Vulkan0", 0, []) == 0
