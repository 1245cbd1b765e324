"""vLLM sleep mode through llama-swap's vllm-wrapper (docs/vllm-sleep.md): the entry's `cmd`,
`cmdStop`, env and `unloadTimeout`, fixed ports that never clash, the level chosen from host
RAM, what a sleeping model keeps charged to every model on its card (groups and `routing: auto`),
`swapgen show`, the llama-server preset's reason, and the stand-in vLLM server the slow checks
drive (tests/vllm_standin.py) answering as vLLM 0.33.0's API server does."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zlib
from pathlib import Path

import pytest
import yaml

from autogen.cmdline import split_command
from autogen.commands import cli, sample
from autogen.numfmt import GIB
from autogen.resolve.sleep import (
    SLEEP_PORTS,
    SLEEP_RESIDUE,
    Asker,
    assign_ports,
    plan_sleep,
    start_port_range,
    unload_timeout,
)
from autogen.router.matrix_dsl import compile_sets, expand
from autogen.router.preset import SLEEPER_LEFT_OUT
from autogen.router.validate import validate_text
from tests.runs import generate
from tests.vllm_fixtures import entry_of, make_ctx

STANDIN = Path(__file__).with_name("vllm_standin.py")
CARD = 24.0
BASE = """\
roots: [sample-library]
output: {name}.yaml
cache_dir: cache-{name}
vram_budget_gb: 22
gpus: [{{index: 0, name: RTX 4090, vram_gb: 24, vendor: nvidia}}]
host_ram_gb: {ram}
backends:
  - {{id: llama-cuda, kind: llama, path: llama-server, default: true, variant: cuda}}
  - {{id: vllm, kind: vllm, path: /opt/vllm/bin/vllm, version: "0.33.0", sleep: true}}
  - {{id: sd-cuda, kind: sd, path: sd-server, default: true}}
overrides:
  - {{match: '*Mistral-7B-Instruct-v0.3*', backend: vllm, vllm_tokenizer: mistralai/Mistral-7B-Instruct-v0.3}}
"""
SLEEPERS = ("llama-3.1-8b-instruct-bf16", "mistral-7b-instruct-v0.3-q4_k_m")


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    root = tmp_path_factory.mktemp("sleep")
    sample.build(root / "sample-library")
    return root


def run(library: Path, name: str, extra: str = "", ram: float = 64) -> tuple[dict, str]:
    settings = library / f"{name}.settings.yaml"
    settings.write_text(BASE.format(name=name, ram=ram) + extra)
    rc, _ = generate(settings)
    assert rc == 0
    text = (library / f"{name}.yaml").read_text()
    return yaml.safe_load(text), text


def daemon_port(entry: dict) -> int:
    argv = split_command(entry["cmd"])
    return int(argv[argv.index("--port", argv.index("--")) + 1])


def sleepers(doc: dict) -> dict[str, dict]:
    return {k: m for k, m in doc["models"].items() if "cmdStop" in m}


# --- the entry -----------------------------------------------------------------------------------


def test_a_sleeping_model_runs_vllm_through_the_wrapper(library):
    doc, text = run(library, "entry")
    assert set(sleepers(doc)) == set(SLEEPERS)
    assert "sleep mode asked, not used: its 16.38 GiB of weights do not fit in the host RAM" in text
    for model_id, entry in sleepers(doc).items():
        argv = split_command(entry["cmd"])
        port = daemon_port(entry)
        url = f"http://127.0.0.1:{port}"
        cut = argv.index("--")
        assert argv[:cut] == ["vllm-wrapper", "serve", "--vllm-url", url, "--listen", "127.0.0.1:${PORT}",
                              "--wait-timeout", "300s"]
        daemon = argv[cut + 1:]
        assert daemon[:4] == ["/opt/vllm/bin/vllm", "serve", daemon[2], "--host"]
        assert daemon[daemon.index("--host") + 1] == "127.0.0.1"
        assert daemon[daemon.index("--served-model-name") + 1] == model_id
        assert daemon.count("--enable-sleep-mode") == 1 and "${PORT}" not in " ".join(daemon)
        # no --sleep-level: vLLM never reads the level the wrapper sends (its JSON body)
        assert split_command(entry["cmdStop"]) == ["vllm-wrapper", "sleep", "--vllm-url", url, "--stop-pid", "${PID}"]
        assert entry["env"] == ["VLLM_SERVER_DEV_MODE=1"]
        assert entry["proxy"] == "http://127.0.0.1:${PORT}"
        assert entry["unloadTimeout"] == unload_timeout(round(entry["metadata"]["size_gb"] * GIB)) > 10
    assert validate_text(text, "entry.yaml") == []
    # a model that does not ask stops as usual
    plain = [m for k, m in doc["models"].items() if k not in SLEEPERS]
    assert plain and not any("vllm-wrapper" in m["cmd"] or "cmdStop" in m for m in plain)


def test_override_turns_sleep_off_and_a_user_cmdstop_is_refused(library, capsys):
    doc, _ = run(library, "off", "  - {match: '*Llama-3.1-8B-Instruct*', vllm_sleep: false}\n")
    # the RAM the llama left lets qwen3-8b (16.38 GiB, refused beside it) sleep
    assert set(sleepers(doc)) == {"mistral-7b-instruct-v0.3-q4_k_m", "qwen3-8b-bf16"}
    off = doc["models"]["llama-3.1-8b-instruct-bf16"]
    assert split_command(off["cmd"])[0] == "/opt/vllm/bin/vllm" and "--enable-sleep-mode" not in off["cmd"]
    settings = library / "clash.settings.yaml"
    settings.write_text(BASE.format(name="clash", ram=64).replace(
        "vllm_tokenizer: mistralai/Mistral-7B-Instruct-v0.3}",
        "vllm_tokenizer: mistralai/Mistral-7B-Instruct-v0.3, llama_swap: {cmdStop: 'kill ${PID}'}}"))
    rc, _ = generate(settings)
    assert rc != 0
    assert "overrides[0].llama_swap.cmdStop: swapgen sets cmdStop" in capsys.readouterr().err
    assert not (library / "clash.yaml").exists()


def test_a_bad_sleep_setting_names_its_place(tmp_path, capsys):
    (tmp_path / "m").mkdir()
    settings = tmp_path / "swapgen.yaml"
    settings.write_text("roots: [m]\noverrides:\n  - {match: '*', vllm_sleep: sometimes}\n")
    assert cli.main(["--settings", str(settings), "list"]) != 0
    assert "overrides[0].vllm_sleep" in capsys.readouterr().err


def test_sleep_on_a_row_of_another_engine_is_said_not_ignored(tmp_path, capsys):
    (tmp_path / "m").mkdir()
    settings = tmp_path / "swapgen.yaml"
    settings.write_text("roots: [m]\nvram_budget_gb: 8\nbackends:\n"
                        "  - {id: llama, kind: llama, path: llama-server, default: true, sleep: true}\n")
    cli.main(["--settings", str(settings), "list"])
    assert "backend 'llama': sleep applies to vllm rows only" in capsys.readouterr().err


# --- ports -----------------------------------------------------------------------------------------


def test_ports_are_fixed_distinct_and_outside_llama_swaps_range(library):
    doc, _ = run(library, "ports")
    ports = {k: daemon_port(m) for k, m in sleepers(doc).items()}
    assert len(set(ports.values())) == len(ports)
    assert all(p in SLEEP_PORTS and p not in range(5800, 6800) for p in ports.values())
    again, _ = run(library, "ports")
    assert {k: daemon_port(m) for k, m in sleepers(again).items()} == ports
    # a user's startPort inside the sleepers' range moves them out of llama-swap's
    first = min(ports.values())
    moved, _ = run(library, "start", f"llama_swap: {{startPort: {first - 10}}}\n")
    assert all(daemon_port(m) not in range(first - 10, first + 990) for m in sleepers(moved).values())


def clashing_ids() -> tuple[str, str]:
    """Two ids whose hashes give the same port."""
    seen: dict[int, str] = {}
    for n in range(100_000):
        model_id = f"model-{n}"
        slot = zlib.crc32(model_id.encode()) % len(SLEEP_PORTS)
        if slot in seen:
            return seen[slot], model_id
        seen[slot] = model_id
    raise AssertionError("no clash found")


def test_a_clash_takes_the_next_port_and_a_held_port_never_moves():
    a, b = clashing_ids()
    ports = assign_ports([a, b], {}, range(0))
    assert ports[b] != ports[a]
    assert abs(ports[b] - ports[a]) == 1 or {ports[a], ports[b]} == {20000, 29999}
    # the ledger keeps each its port whatever arrives, and an absent model's port stays taken
    later = assign_ports([b, "zz-new"], {**ports, "gone": ports[a] + 5}, range(0))
    assert later[b] == ports[b] and later["zz-new"] not in {ports[a], ports[a] + 5}
    # a ledger port inside llama-swap's range is given up
    moved = assign_ports([a], {a: 20500}, range(20000, 21000))
    assert moved[a] not in range(20000, 21000)
    assert start_port_range({"startPort": "${env.P}"}) == range(5800, 6800)


# --- host RAM and what a sleeper keeps ------------------------------------------------------------


def test_the_level_follows_host_ram(library):
    # 20 GiB of RAM: the sleepers may pin 10; in id order the bf16 llama (14.96 GiB) does not fit
    doc, text = run(library, "ram", ram=20)
    assert set(sleepers(doc)) == {"mistral-7b-instruct-v0.3-q4_k_m"}
    assert "sleep mode asked, not used: its 14.96 GiB of weights do not fit" in text
    assert "--enable-sleep-mode" not in doc["models"]["llama-3.1-8b-instruct-bf16"]["cmd"]
    plan = plan_sleep([Asker("a", 4 * GIB, (), 1), Asker("b", 4 * GIB, (0, 1), 2, refused="multi-node")],
                      {}, None, range(0))
    assert plan.sleepers["a"].level == 1 and "host RAM not known" in plan.sleepers["a"].note
    assert plan.sleepers["b"].level is None and plan.sleepers["b"].gpu_bytes == SLEEP_RESIDUE + SLEEP_RESIDUE // 2


def held_by_others(doc: dict, model_id: str) -> float:
    return sum(SLEEP_RESIDUE / GIB for k in sleepers(doc) if k != model_id)


def test_every_model_leaves_room_for_the_sleeping_ones(library):
    doc, _ = run(library, "groups")
    for model_id, entry in doc["models"].items():
        meta = entry.get("metadata", {})
        est = meta.get("est_vram_gb") or 0
        assert est + held_by_others(doc, model_id) <= CARD, model_id
        if "gpu_util" in meta:  # vLLM starts only when utilization × card is free
            assert meta["gpu_util"] * CARD <= CARD - held_by_others(doc, model_id), model_id


def test_routing_sets_hold_the_sleepers_share_in_every_set(library):
    doc, text = run(library, "matrix", "routing: auto\n")
    assert "# routing: sleeping vLLM models keep part of their cards in every set" in text
    matrix = doc["routing"]["router"]["settings"]["matrix"]
    roots = compile_sets(list(matrix["sets"].items()), lambda v: matrix["vars"].get(v))
    sets = [m for name in matrix["sets"] for m in expand(roots[name], roots)]
    assert any(not set(SLEEPERS) & s for s in sets)
    for members in sets:
        used = sum(doc["models"][m].get("metadata", {}).get("est_vram_gb") or 0 for m in members)
        kept = sum(SLEEP_RESIDUE / GIB for s in SLEEPERS if s not in members)
        # the budget (22 GiB) is what entries sharing the card may take together, the rest headroom
        limit = CARD if len(members - {"parakeet-tdt-0.6b-v3-q8_0"}) == 1 else 22
        assert used + kept <= limit + 1e-6, (sorted(members), used, kept)
    assert validate_text(text, "matrix.yaml") == []


def test_vllm_sizing_stays_under_what_sleepers_leave():
    ctx = make_ctx(size_gb=8.0, budget=21.0, version="0.33.0")
    import attrs  # noqa: PLC0415

    held = attrs.evolve(ctx, held=(3 * GIB, 3 * GIB, "other 3 GiB"))
    meta = dict(entry_of(held).metadata)
    assert meta["gpu_util"] * CARD <= CARD - 3
    assert meta["gpu_util"] <= dict(entry_of(ctx).metadata)["gpu_util"]


# --- show and the llama-server preset -------------------------------------------------------------


def test_show_explains_sleep_and_the_budget_it_costs_others(library, capsys):
    run(library, "show")
    settings = str(library / "show.settings.yaml")
    assert cli.main(["--settings", settings, "show", "mistral-7b-instruct-v0.3-q4_k_m"]) == 0
    out = capsys.readouterr().out
    assert "sleeps between requests through vllm-wrapper: daemon on port" in out
    assert "while asleep it keeps 1.00 GiB on each of its GPUs" in out
    assert "level 1 always: vllm-wrapper sends the level in the request body" in out
    assert "after 1.00 GiB that sleeping vLLM models keep on its cards (llama-3.1-8b-instruct-bf16 1 GiB)" in out
    assert cli.main(["--settings", settings, "show", "gemma-3-12b-it-q4_k_m"]) == 0
    assert "20 GiB (card 24 GiB), after 2.00 GiB that sleeping vLLM models keep" in capsys.readouterr().out


def test_the_llama_server_preset_says_why_sleepers_are_left_out(library):
    settings = library / "preset.settings.yaml"
    settings.write_text(BASE.format(name="preset", ram=64).replace("output: preset.yaml", "output: preset.ini")
                        + "target: llama-server\n")
    rc, _ = generate(settings)
    assert rc == 0
    text = (library / "preset.ini").read_text()
    for model_id in SLEEPERS:
        assert f'; SKIPPED "{model_id}": {SLEEPER_LEFT_OUT}' in text
    assert SLEEPER_LEFT_OUT.count("\n") == 0


# --- the stand-in vLLM the slow checks drive --------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def standin(tmp_path):
    """Start tests/vllm_standin.py; yields (call, log path); dev mode per request of the test."""
    procs = []

    def start(dev: bool) -> str:
        port = free_port()
        log = tmp_path / f"{port}.jsonl"
        env = {**os.environ, "VLLM_STANDIN_LOG": str(log), "VLLM_SERVER_DEV_MODE": "1" if dev else "0"}
        proc = subprocess.Popen([sys.executable, str(STANDIN), "serve", "/m/x", "--host", "127.0.0.1", "--port",
                                 str(port), "--enable-sleep-mode"], env=env, stdout=subprocess.DEVNULL)
        procs.append(proc)
        base = f"http://127.0.0.1:{port}"
        for _ in range(100):
            if call(base, "GET", "/health")[0] == 200:
                return base
            time.sleep(0.05)
        raise AssertionError("the stand-in did not start")

    yield start
    for proc in procs:
        proc.terminate()
        proc.wait(timeout=5)


def call(base: str, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(base + path, data=body, method=method,
                                     headers={"content-type": "application/json"} if body is not None else {})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except OSError:
        return 0, b""


def test_the_standin_answers_as_vllms_api_server(standin):
    base = standin(dev=True)
    assert call(base, "GET", "/health") == (200, b"")
    # the level comes from the query string; a JSON body is never read (what vllm-wrapper sends)
    assert json.loads(call(base, "POST", "/sleep", b'{"level": 2}')[1]) == {"status": "sleeping", "level": 1}
    assert call(base, "GET", "/health") == (200, b"")  # healthy while asleep
    assert json.loads(call(base, "GET", "/is_sleeping")[1]) == {"is_sleeping": True}
    assert json.loads(call(base, "POST", "/wake_up", b"")[1]) == {"status": "awake", "tags": None}
    assert json.loads(call(base, "POST", "/sleep?level=2")[1]) == {"status": "sleeping", "level": 2}
    status, body = call(base, "POST", "/sleep?level=3")
    assert status == 422 and json.loads(body)["detail"][0]["loc"] == ["query", "level"]
    assert call(base, "GET", "/sleep")[0] == 405
    closed = standin(dev=False)  # without VLLM_SERVER_DEV_MODE the routes do not exist
    assert call(closed, "POST", "/sleep") == (404, b'{"detail":"Not Found"}')
    assert call(closed, "POST", "/wake_up")[0] == 404
