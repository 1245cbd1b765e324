"""A fleet front: each host's config as a run on that host writes it, the front's peers from the
hosts' served ids, spillover selectors for shared ids, keys as `${env.…}`, only changed files
rewritten, settings mistakes named, and interrupted runs that leave every config consistent."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from autogen.commands import cli, tasks
from autogen.errors import SettingsError
from autogen.router.validate import validate_text
from tests import test_llamaswap_loader as loader
from tests.builders import GIB, add_model
from tests.fleet_fixtures import FRONT_SETTINGS, HOST_SETTINGS, LIBRARIES, build_fleet
from tests.runs import generate

KILLPOINTS = Path(__file__).with_name("killpoints.py")
SECRET = "sk-live-0123456789abcdef"


def load_yaml(path: Path) -> dict:
    return YAML(typ="safe", pure=True).load(path.read_text(encoding="utf-8"))


def configs(root: Path) -> dict[str, Path]:
    return {"front": root / "config.yaml", **{h: root / "hosts" / h / "config.yaml" for h in LIBRARIES}}


def run(front: Path, *args: str) -> tasks.TaskGraph:
    rc, graph = generate(front, *args)
    assert rc == 0
    return graph


@pytest.fixture
def fleet(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("GPU_A_KEY", SECRET)  # set where the generator runs: still never written
    return build_fleet(tmp_path, multi_node=None)


# ---------------------------------------------------------------------------------------------
# what the front and the hosts get


def test_each_host_gets_the_config_a_run_on_that_host_writes(fleet, tmp_path):
    run(fleet)
    for host in LIBRARIES:
        # the same library and settings, its own cache and output (weights are never copied)
        alone = tmp_path / f"alone-{host}"
        alone.mkdir()
        (alone / "swapgen.yaml").write_text(HOST_SETTINGS.replace("roots: [models]", f"roots: [{tmp_path}/hosts/{host}/models]"))
        run(alone / "swapgen.yaml")
        assert (alone / "config.yaml").read_bytes() == configs(tmp_path)[host].read_bytes()


def test_every_peer_model_is_served_by_its_host(fleet, tmp_path):
    run(fleet)
    front = load_yaml(configs(tmp_path)["front"])
    assert front["models"] == {}
    assert list(front["peers"]) == ["gpu-a", "gpu-b"]
    for host, peer in front["peers"].items():
        served = load_yaml(configs(tmp_path)[host])["models"]
        assert peer["models"] == sorted(served), host
    assert front["peers"]["gpu-a"]["proxy"] == "http://gpu-a.lan:8080"


def test_spillover_only_for_models_on_several_hosts(fleet, tmp_path):
    run(fleet)
    front = load_yaml(configs(tmp_path)["front"])
    assert front["selectors"] == {"qwen3-8b-q4_k_m": {
        "strategy": "spillover", "targets": ["gpu-a/qwen3-8b-q4_k_m", "gpu-b/qwen3-8b-q4_k_m"]}}


def test_the_front_is_valid_for_llama_swap(fleet, tmp_path):
    run(fleet)
    for name, path in configs(tmp_path).items():
        assert [str(p) for p in validate_text(path.read_text(), str(path)) if p.fatal] == [], name


def test_api_keys_are_env_references_never_the_key(fleet, tmp_path):
    run(fleet)
    front = configs(tmp_path)["front"].read_text()
    assert 'apiKey: "${env.GPU_A_KEY}"' in front
    assert front.count("apiKey") == 1  # gpu-b has no api_key_env
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p.stat().st_size < 10 * 1024 * 1024]
    assert not [p for p in written if SECRET.encode() in p.read_bytes()]


def test_a_host_that_serves_nothing_is_not_a_peer(fleet, tmp_path):
    shutil.rmtree(tmp_path / "hosts" / "gpu-b" / "models")
    (tmp_path / "hosts" / "gpu-b" / "models").mkdir()
    run(fleet)
    text = configs(tmp_path)["front"].read_text()
    front = load_yaml(configs(tmp_path)["front"])
    assert list(front["peers"]) == ["gpu-a"] and "selectors" not in front
    assert '# host "gpu-b": no served models, so not a peer' in text


def test_a_shared_id_the_front_serves_itself_gets_no_selector(fleet, tmp_path):
    front_models = tmp_path / "front-models"
    add_model(front_models, "Qwen/Qwen3-8B-GGUF/Qwen3-8B-Q4_K_M.gguf")
    fleet.write_text(FRONT_SETTINGS.replace("roots: []", "roots: [front-models]\nbackends:\n"
                                            "  - {id: llama, kind: llama, path: llama-server, default: true}"))
    run(fleet)
    front = load_yaml(configs(tmp_path)["front"])
    assert "qwen3-8b-q4_k_m" in front["models"] and "selectors" not in front
    assert "no selector, the id is the front's own model" in configs(tmp_path)["front"].read_text()


# ---------------------------------------------------------------------------------------------
# regenerating


def stamps(root: Path) -> dict[str, tuple[int, int]]:
    return {name: (p.stat().st_ino, p.stat().st_mtime_ns) for name, p in configs(root).items()}


def test_a_second_run_rewrites_nothing(fleet, tmp_path):
    run(fleet)
    before = stamps(tmp_path)
    graph = run(fleet)
    assert stamps(tmp_path) == before
    assert [g.stats["emitted"] for g in graph.graphs] == [0, 0, 0]


def test_a_host_library_change_updates_that_host_and_the_front_only(fleet, tmp_path):
    run(fleet)
    before = stamps(tmp_path)
    add_model(tmp_path / "hosts" / "gpu-b" / "models", "google/gemma-3-12b-it-GGUF/gemma-3-12b-it-Q4_K_M.gguf")
    graph = run(fleet)
    after = stamps(tmp_path)
    assert after["gpu-a"] == before["gpu-a"]
    assert after["gpu-b"] != before["gpu-b"] and after["front"] != before["front"]
    assert [g.stats["emitted"] for g in graph.graphs] == [0, 0, 1]
    front = load_yaml(configs(tmp_path)["front"])
    assert "gemma-3-12b-it-q4_k_m" in front["peers"]["gpu-b"]["models"]
    assert set(front["selectors"]) == {"gemma-3-12b-it-q4_k_m", "qwen3-8b-q4_k_m"}


def test_a_model_gone_from_one_host_loses_its_selector(fleet, tmp_path):
    run(fleet)
    shutil.rmtree(tmp_path / "hosts" / "gpu-b" / "models" / "Qwen" / "Qwen3-8B-GGUF")
    run(fleet)
    front = load_yaml(configs(tmp_path)["front"])
    assert "selectors" not in front
    assert front["peers"]["gpu-b"]["models"] == ["qwen3-30b-a3b-q4_k_m"]


def test_doit_list_names_each_host_task(fleet, tmp_path, capsys):
    assert cli.main(["--settings", str(fleet), "list"]) == 0
    table = capsys.readouterr().out
    assert "gpu-a/qwen3-8b-q4_k_m" in table and "gpu-b/qwen3-30b-a3b-q4_k_m" in table
    graph = tasks.load(str(fleet))
    try:
        names = [t["name"] for g in graph.graphs for t in g._model_tasks()]
        assert names == ["gpu-a/gemma-3-12b-it-q4_k_m", "gpu-a/qwen3-8b-q4_k_m", "gpu-b/qwen3-30b-a3b-q4_k_m",
                         "gpu-b/qwen3-8b-q4_k_m"]
        assert [t["name"] for t in graph.task_config()] == ["gpu-a", "gpu-b"]
        assert graph.task_front()["task_dep"] == ["config:gpu-a", "config:gpu-b"]
    finally:
        graph.close()


def test_show_of_a_bare_id_names_the_hosts_that_serve_it(fleet, capsys):
    assert cli.main(["--settings", str(fleet), "show", "qwen3-8b-q4_k_m"]) == 1
    assert capsys.readouterr().err == ("swapgen: no model 'qwen3-8b-q4_k_m'; the fleet's hosts have "
                                       "gpu-a/qwen3-8b-q4_k_m, gpu-b/qwen3-8b-q4_k_m\n")


def test_one_host_task_runs_alone(fleet, tmp_path):
    run(fleet, "config:gpu-b")
    assert configs(tmp_path)["gpu-b"].exists()
    assert not configs(tmp_path)["gpu-a"].exists() and not configs(tmp_path)["front"].exists()


def test_a_failed_host_config_keeps_the_front(fleet, tmp_path):
    """The front runs after the hosts' configs: a host whose config cannot be written leaves
    the front as it was, so the front never lists a model that host does not serve."""
    run(fleet)
    before = configs(tmp_path)["front"].read_bytes()
    add_model(tmp_path / "hosts" / "gpu-b" / "models", "x/New-GGUF/New-Q4_K_M.gguf")
    configs(tmp_path)["gpu-b"].unlink()
    configs(tmp_path)["gpu-b"].mkdir()  # the config cannot be written there
    rc, _ = generate(fleet)
    assert rc != 0 and configs(tmp_path)["front"].read_bytes() == before
    configs(tmp_path)["gpu-b"].rmdir()
    run(fleet)
    assert "new-q4_k_m" in load_yaml(configs(tmp_path)["front"])["peers"]["gpu-b"]["models"]


# ---------------------------------------------------------------------------------------------
# settings mistakes


def problems(front: Path) -> list[str]:
    with pytest.raises(SettingsError) as info:
        tasks.load(str(front))
    return info.value.problems


def test_a_host_must_declare_its_gpus(fleet, tmp_path):
    host = tmp_path / "hosts" / "gpu-b" / "swapgen.yaml"
    host.write_text(HOST_SETTINGS.split("gpus:")[0] + "vram_budget_gb: 22\n")
    assert problems(fleet) == [f"hosts[1].settings: {host} declares no GPUs (`gpus` or `card_vram_gb`); "
                               "the front cannot probe the cards of gpu-b"]


def test_hosts_may_not_share_a_cache_or_an_output(fleet, tmp_path):
    (tmp_path / "hosts" / "gpu-b" / "swapgen.yaml").write_text(
        HOST_SETTINGS.replace("output: config.yaml", "output: ../gpu-a/config.yaml\ncache_dir: ../gpu-a/cache"))
    found = problems(fleet)
    assert len(found) == 2 and all(p.startswith("hosts[1].settings: gpu-b's ") for p in found)
    assert "is also gpu-a (hosts[0])'s" in found[0]


def test_host_names_and_urls_are_checked(fleet):
    fleet.write_text(FRONT_SETTINGS.replace("name: gpu-b", "name: gpu a").replace('"http://gpu-b.lan:8080"', "gpu-b"))
    found = problems(fleet)
    assert found[0].startswith("hosts[1].name: expected a host name of letters, digits")
    assert found[1] == "hosts[1].url: expected an http:// or https:// URL of the host's llama-swap, got 'gpu-b'"


def test_a_pasted_key_is_refused_without_being_echoed(fleet):
    fleet.write_text(FRONT_SETTINGS.replace("api_key_env: GPU_A_KEY", f"api_key_env: {SECRET}"))
    found = problems(fleet)
    assert found == ["hosts[0].api_key_env: expected the name of an environment variable (letters, digits, '_'), "
                     "not the key itself (the value is not shown)"]
    assert SECRET not in " ".join(found)


def test_duplicate_host_names(fleet):
    fleet.write_text(FRONT_SETTINGS.replace("name: gpu-b", "name: gpu-a"))
    assert problems(fleet) == ["hosts[1].name: duplicate name 'gpu-a' (also hosts[0])"]


def test_a_host_cannot_be_a_front(fleet, tmp_path):
    host = tmp_path / "hosts" / "gpu-b" / "swapgen.yaml"
    host.write_text(HOST_SETTINGS + "hosts: [{name: x, settings: a.yaml, url: 'http://x'}]\n")
    assert problems(fleet)[0].startswith(f"hosts[1].settings: {host} is a fleet front itself")


def test_a_pure_front_needs_hosts(tmp_path):
    (tmp_path / "s.yaml").write_text("roots: []\n")
    assert problems(tmp_path / "s.yaml") == ["roots: list at least one model folder"]


# ---------------------------------------------------------------------------------------------
# interrupted runs


def interrupted(front: Path, point: int) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(KILLPOINTS), str(point), "SIGKILL", "--settings", str(front)],
                          capture_output=True, text=True, env=os.environ.copy(), timeout=120)


def caches(root: Path) -> list[Path]:
    return [root / "cache", *(root / "hosts" / h / "cache" for h in LIBRARIES)]


def keep(root: Path, name: str) -> None:
    """Caches and configs of the fleet under `root/name` (the weights stay where they are)."""
    shutil.rmtree(root / name, ignore_errors=True)
    for i, folder in enumerate(caches(root)):
        shutil.copytree(folder, root / name / f"cache{i}")
    for key, path in configs(root).items():
        shutil.copy2(path, root / name / f"{key}.yaml")


def put_back(root: Path, name: str) -> None:
    for i, folder in enumerate(caches(root)):
        shutil.rmtree(folder)
        shutil.copytree(root / name / f"cache{i}", folder)
    for key, path in configs(root).items():
        shutil.copy2(root / name / f"{key}.yaml", path)


def test_an_interrupt_at_every_step_leaves_every_config_consistent(fleet, tmp_path):
    """A SIGKILL before any durable step of a run that changed one host, then a normal run:
    every config is what a run from empty caches writes, and no temp file is left."""
    run(fleet)
    keep(tmp_path, "baseline")
    add_model(tmp_path / "hosts" / "gpu-b" / "models", "google/gemma-3-12b-it-GGUF/gemma-3-12b-it-Q4_K_M.gguf",
              size=GIB)
    for folder in caches(tmp_path):
        shutil.rmtree(folder)
    run(fleet)
    fresh = {k: p.read_bytes() for k, p in configs(tmp_path).items()}
    stopped = 0
    for point in range(1, 60):
        put_back(tmp_path, "baseline")
        child = interrupted(fleet, point)
        if child.returncode == 0:
            break
        assert child.returncode == -signal.SIGKILL, child.stderr
        stopped += 1
        run(fleet)
        got = {k: p.read_bytes() for k, p in configs(tmp_path).items()}
        assert got == fresh, f"after a SIGKILL at step {point}"
        assert not [p for p in tmp_path.rglob("*.tmp")], f"temp files after a SIGKILL at step {point}"
    assert stopped >= 8  # gpu-b: metadata, load memo, fragment, summary, config; front: summary, config; doit


def test_a_front_owns_peers_and_selectors(fleet):
    fleet.write_text(FRONT_SETTINGS + "llama_swap:\n  peers: {x: {proxy: 'http://x', models: [a]}}\n")
    assert problems(fleet) == ["llama_swap.peers: a key swapgen owns (a fleet front writes one peer per entry "
                               "of `hosts:`)"]


def test_front_llama_swap_keys_are_kept(fleet, tmp_path):
    fleet.write_text(FRONT_SETTINGS + "llama_swap:\n  apiKeys: ['${env.FRONT_KEY}']\n")
    run(fleet)
    front = load_yaml(configs(tmp_path)["front"])
    assert front["apiKeys"] == ["${env.FRONT_KEY}"] and list(front["peers"]) == ["gpu-a", "gpu-b"]


# ---------------------------------------------------------------------------------------------
# llama-swap's own loader (tools/llamaswap-loadcheck)


@pytest.mark.slow
@pytest.mark.skipif(not os.access(loader.CHECKER, os.X_OK), reason=f"{loader.CHECKER} is absent: build it with "
                    "tools/llamaswap-loadcheck/setup.sh or point $LLAMASWAP_LOADCHECK at it")
def test_llama_swap_loads_the_front_and_every_host(tmp_path):
    front = build_fleet(tmp_path)
    run(front)
    seen = loader.summary(loader.accepted(configs(tmp_path)["front"]))
    assert (seen["models"], seen["peers"], seen["selectors"]) == ("0", "2", "1")
    for host in LIBRARIES:
        loader.accepted(configs(tmp_path)[host])
    # a front with models of its own: local ids beside peers and selectors
    add_model(tmp_path / "front-models", "x/Solo-GGUF/Solo-Q4_K_M.gguf")
    front.write_text(FRONT_SETTINGS.replace("roots: []", "roots: [front-models]\nbackends:\n"
                                            "  - {id: llama, kind: llama, path: llama-server, default: true}"))
    run(front)
    seen = loader.summary(loader.accepted(configs(tmp_path)["front"]))
    assert (seen["models"], seen["peers"], seen["selectors"]) == ("1", "2", "1")
