"""Multi-node vLLM (`vllm_nodes`): a model that fits no single host runs over named hosts with
tensor parallel per node × pipeline parallel across them, sized per GPU; the hosts that cannot
hold it give the reason; the workers' commands are shown; vLLM 0.33's own parser accepts the
head's and the workers' command lines."""

from __future__ import annotations

import json
import shlex
import subprocess

import pytest
from ruamel.yaml import YAML

from autogen.commands import show, tasks
from autogen.errors import ModelError, SettingsError
from autogen.resolve.nodes import Fleet, Node, plan_nodes
from autogen.settings.schema import Gpu, Override
from tests.fleet_fixtures import HOST_SETTINGS, MULTI_NODE, build_fleet
from tests.runs import generate
from tests.shared import TOOLS, VLLM_VENV, not_set_up

ARGCHECK = TOOLS / "vllm-argcheck" / "vllm_argcheck.py"
MODEL_ID = "llama-3.1-70b-instruct-fp8-bf16"
TWO = (Gpu(0, 24.0), Gpu(1, 24.0))


def fleet_of(*nodes: Node, host: str = "gpu-a") -> Fleet:
    return Fleet(host=host, nodes=nodes)


A = Node("gpu-a", "gpu-a.lan", TWO, 22.0)
B = Node("gpu-b", "gpu-b.lan", TWO, 22.0)


def entry(root, name: str = MODEL_ID) -> dict:
    return YAML(typ="safe", pure=True).load((root / "hosts" / "gpu-a" / "config.yaml").read_text())["models"][name]


def argv(cmd: str) -> list[str]:
    return shlex.split(" ".join(cmd.split()))


def flag(args: list[str], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args else None


# ---------------------------------------------------------------------------------------------
# the layout


def test_tensor_parallel_per_node_pipeline_across_nodes():
    nodes = plan_nodes(Override(match="*", vllm_nodes=("gpu-b",)), fleet_of(A, B))
    assert (nodes.tensor_parallel, nodes.pipeline_parallel, nodes.backend) == (2, 2, "ray")
    assert nodes.master_addr == "gpu-a.lan" and len(nodes.gpus) == 4 and nodes.budget_gb == 88.0


def test_every_node_runs_as_many_ranks_as_the_smallest():
    small = Node("gpu-c", "gpu-c.lan", (Gpu(0, 24.0),), None)
    nodes = plan_nodes(Override(match="*", vllm_nodes=("gpu-c",)), fleet_of(A, small))
    assert (nodes.tensor_parallel, nodes.pipeline_parallel) == (1, 2)
    assert [g.index for g in nodes.gpus] == [0, 0] and nodes.budget_gb == 22.0 * 2  # gpu-a's budget on each


def test_every_gpu_gets_the_tightest_budget_of_the_nodes():
    """Every rank takes the same share, so a roomy head cannot lend budget to a tight worker."""
    roomy = Node("gpu-a", "gpu-a.lan", (Gpu(0, 80.0), Gpu(1, 80.0)), 78.0)
    tight = Node("gpu-c", "gpu-c.lan", (Gpu(0, 16.0), Gpu(1, 16.0)), 14.0)
    nodes = plan_nodes(Override(match="*", vllm_nodes=("gpu-c",)), fleet_of(roomy, tight))
    assert nodes.budget_gb / len(nodes.gpus) == 14.0


def test_a_tensor_parallel_pin_above_a_node_is_refused():
    with pytest.raises(ModelError, match="tensor parallel 4 per node needs 4 GPUs on every node; gpu-a has 2"):
        plan_nodes(Override(match="*", vllm_nodes=("gpu-b",), vllm_tensor_parallel=4), fleet_of(A, B), 4)


def test_a_host_without_gpus_is_refused():
    bare = Node("gpu-b", "gpu-b.lan", (), None)
    with pytest.raises(ModelError, match="host gpu-b declares no GPU of 3 GiB or more"):
        plan_nodes(Override(match="*", vllm_nodes=("gpu-b",)), fleet_of(A, bare))


def test_outside_a_fleet_it_says_where_to_generate_it():
    with pytest.raises(ModelError, match="vllm_nodes \\(gpu-b\\) names fleet hosts: generate it from the front"):
        plan_nodes(Override(match="*", vllm_nodes=("gpu-b",)), None)


# ---------------------------------------------------------------------------------------------
# generated from a fleet


@pytest.fixture
def fleet(tmp_path):
    return build_fleet(tmp_path)


def test_the_head_command_carries_the_parallel_sizes(fleet, tmp_path):
    assert generate(fleet)[0] == 0
    model = entry(tmp_path)
    args = argv(model["cmd"])
    assert flag(args, "--tensor-parallel-size") == "2" and flag(args, "--pipeline-parallel-size") == "2"
    assert flag(args, "--distributed-executor-backend") == "ray" and "--nnodes" not in args
    assert model["metadata"]["nodes"] == "gpu-a,gpu-b"
    # per GPU: a quarter of the 70 GiB, a quarter of the KV (2 KV heads of 8, 40 of 80 layers)
    assert model["metadata"]["kv_bytes_per_token"] == 327680
    max_len = int(flag(args, "--max-model-len"))
    kv_per_gpu = 327680 // 4 * max_len
    assert 17.5 + kv_per_gpu / (1 << 30) + 1.5 <= 0.95 * 24


def test_without_ray_the_head_is_node_rank_0(fleet, tmp_path):
    gpu_a = tmp_path / "hosts" / "gpu-a" / "swapgen.yaml"
    gpu_a.write_text(HOST_SETTINGS + MULTI_NODE + "    vllm_distributed: mp\n")
    assert generate(fleet)[0] == 0
    args = argv(entry(tmp_path)["cmd"])
    assert args[args.index("--distributed-executor-backend"):] == [
        "--distributed-executor-backend", "mp", "--nnodes", "2", "--node-rank", "0", "--master-addr", "gpu-a.lan"]


def test_show_lists_the_worker_commands(fleet, tmp_path, capsys):
    (tmp_path / "hosts" / "gpu-a" / "swapgen.yaml").write_text(HOST_SETTINGS + MULTI_NODE + "    vllm_distributed: mp\n")
    graph = tasks.load(str(fleet))
    try:
        library = graph.hosts[0].library
        assert show.main(library, MODEL_ID, False) == 0
    finally:
        graph.close()
    out = capsys.readouterr().out
    worker = next(line for line in out.splitlines() if "on gpu-b:" in line)
    args = shlex.split(worker.split("on gpu-b: ", 1)[1])
    assert args[-1] == "--headless" and flag(args, "--node-rank") == "1" and flag(args, "--master-addr") == "gpu-a.lan"
    assert "--port" not in args and "--served-model-name" not in args


def test_the_same_host_alone_skips_it_with_the_reason(fleet, tmp_path):
    assert generate(tmp_path / "hosts" / "gpu-a" / "swapgen.yaml")[0] == 0
    text = (tmp_path / "hosts" / "gpu-a" / "config.yaml").read_text()
    assert f'# SKIPPED "{MODEL_ID}": vllm_nodes (gpu-b) names fleet hosts: generate it from the front' in text


def test_hosts_that_cannot_hold_it_give_the_arithmetic(fleet, tmp_path):
    one_card = HOST_SETTINGS.replace("  - {index: 1, vram_gb: 24, name: RTX 4090, vendor: nvidia}\n", "")
    (tmp_path / "hosts" / "gpu-a" / "swapgen.yaml").write_text(one_card + MULTI_NODE)
    (tmp_path / "hosts" / "gpu-b" / "swapgen.yaml").write_text(one_card)
    assert generate(fleet)[0] == 0
    text = (tmp_path / "hosts" / "gpu-a" / "config.yaml").read_text()
    line = next(x for x in text.splitlines() if x.startswith(f'  # SKIPPED "{MODEL_ID}"'))
    assert "needs 37.4 GiB per GPU at max-model-len 4096 (weights 35.0 GiB" in line
    assert "of the smallest 24.0 GiB card of 2 on gpu-a (1 GPU) + gpu-b (1 GPU)" in line


def test_vllm_nodes_on_a_llama_server_model_is_refused(fleet, tmp_path):
    (tmp_path / "hosts" / "gpu-a" / "swapgen.yaml").write_text(
        HOST_SETTINGS + "overrides:\n  - {match: '*gemma*', vllm_nodes: [gpu-b]}\n")
    assert generate(fleet)[0] == 0
    text = (tmp_path / "hosts" / "gpu-a" / "config.yaml").read_text()
    assert '# SKIPPED "gemma-3-12b-it-q4_k_m": vllm_nodes needs a vllm backend; this model resolves to llama-cuda' in text


def test_an_unknown_node_is_a_settings_error(fleet, tmp_path):
    (tmp_path / "hosts" / "gpu-a" / "swapgen.yaml").write_text(HOST_SETTINGS + MULTI_NODE.replace("gpu-b", "gpu-bb"))
    with pytest.raises(SettingsError) as info:
        tasks.load(str(fleet))
    assert info.value.problems[0].endswith("overrides[0].vllm_nodes: no host 'gpu-bb' in the fleet "
                                           "(did you mean 'gpu-b'?) (hosts: gpu-a, gpu-b)")


def test_a_node_listed_twice_is_a_settings_error(fleet, tmp_path):
    (tmp_path / "hosts" / "gpu-a" / "swapgen.yaml").write_text(HOST_SETTINGS + MULTI_NODE.replace("[gpu-b]",
                                                                                                 "[gpu-b, gpu-b]"))
    with pytest.raises(SettingsError) as info:
        tasks.load(str(fleet))
    assert info.value.problems == [f"hosts[0]: {tmp_path / 'hosts' / 'gpu-a' / 'swapgen.yaml'}: overrides[0].vllm_nodes: "
                                   "'gpu-b' is listed twice; each host is one node (one rank)"]


def test_a_change_on_a_worker_host_re_emits_the_head_model(fleet, tmp_path):
    assert generate(fleet)[0] == 0
    (tmp_path / "hosts" / "gpu-b" / "swapgen.yaml").write_text(HOST_SETTINGS.replace("vram_budget_gb: 22",
                                                                                     "vram_budget_gb: 20"))
    rc, graph = generate(fleet)
    assert rc == 0 and graph.hosts[0].stats["emitted"] == 1  # the 70B model only
    assert "gpu-b (2 GPUs)" in (tmp_path / "hosts" / "gpu-a" / "config.yaml").read_text()


# ---------------------------------------------------------------------------------------------
# vLLM's own parser


@pytest.mark.slow
@pytest.mark.skipif(not (VLLM_VENV / "bin" / "python").exists(), reason=not_set_up(f"vLLM's CPU venv ({VLLM_VENV})"))
@pytest.mark.parametrize("backend", ["ray", "mp"])
def test_vllms_own_parser_accepts_the_head_and_the_workers(fleet, tmp_path, backend):
    (tmp_path / "hosts" / "gpu-a" / "swapgen.yaml").write_text(
        HOST_SETTINGS + MULTI_NODE + f"    vllm_distributed: {backend}\n")
    assert generate(fleet)[0] == 0
    config = tmp_path / "hosts" / "gpu-a" / "config.yaml"
    proc = subprocess.run([str(VLLM_VENV / "bin" / "python"), str(ARGCHECK), "--json", str(config)],
                          capture_output=True, text=True, timeout=600)
    results = {r["label"]: r for r in map(json.loads, filter(lambda x: x.startswith("{"), proc.stdout.splitlines()))}
    assert results[MODEL_ID]["ok"], proc.stdout + proc.stderr
    assert results[MODEL_ID]["values"]["tensor_parallel_size"] == 2
    graph = tasks.load(str(fleet))
    try:
        library = graph.hosts[0].library
        job = next(j for j in library.jobs if j.row.id == MODEL_ID)
        plan = library.plan(job)
    finally:
        graph.close()
    workers = [n.split(": ", 1)[1] for n in plan.notes if n.startswith("on gpu-b: ")]
    if backend == "mp":
        assert len(workers) == 1
        proc = subprocess.run([str(VLLM_VENV / "bin" / "python"), str(ARGCHECK), "--json"], input=workers[0] + "\n",
                              capture_output=True, text=True, timeout=600)
        (worker,) = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
        assert worker["ok"], proc.stdout + proc.stderr
    else:
        assert workers == ["ray start --address=gpu-a.lan:6379 --block"]
