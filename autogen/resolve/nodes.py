"""Multi-node vLLM: the hosts an override's `vllm_nodes` names, and the parallel layout over
their GPUs (docs/gpu-hosts.md#a-model-across-hosts-multi-node-vllm).

Layout: tensor parallel inside a node, pipeline parallel across nodes, as vLLM's multi-node
guide lays them out. Every node runs the same number of ranks (vLLM's multiprocessing executor
gives each node `world_size // nnodes` of them, `EngineArgs.create_engine_config`,
vllm/engine/arg_utils.py; a Ray placement puts one pipeline stage per node), so the tensor
parallel size is the smallest node's GPU count unless `vllm_tensor_parallel` pins a smaller
one. Sizing then runs per GPU against the smallest card used (`sizing.vllm`).
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlsplit

from attrs import frozen

from autogen.errors import ModelError
from autogen.resolve.gpus import eligible
from autogen.settings.schema import Gpu, Host, Override, Settings

DEFAULT_DISTRIBUTED = "ray"


@frozen
class Node:
    """One fleet host as a vLLM node: where it is reached and the GPUs it offers.

    Example: Node(name="gpu-b", address="gpu-b.lan", gpus=(Gpu(0, 24.0), Gpu(1, 24.0)),
    budget_gb=22.0).
    """

    name: str
    #: The host name of its `url` (the head's is vLLM's `--master-addr`).
    address: str
    #: Its eligible GPUs (`gpus` limited to `devices`, or one card of `card_vram_gb`).
    gpus: tuple[Gpu, ...]
    #: Its per-GPU `vram_budget_gb` (None = the whole card).
    budget_gb: float | None


def node_of(host: Host, settings: Settings) -> Node:
    gpus: tuple[Gpu, ...] = ()
    if settings.gpus is not None:
        gpus = eligible(settings.gpus)
        if settings.devices:
            gpus = tuple(g for g in gpus if g.index in settings.devices)
    elif settings.card_vram_gb:
        gpus = (Gpu(index=0, vram_gb=settings.card_vram_gb),)
    return Node(name=host.name, address=urlsplit(host.url).hostname or "", gpus=gpus,
                budget_gb=settings.vram_budget_gb)


@frozen
class Fleet:
    """What a host's run knows of its fleet: its own name and every host as a node."""

    host: str
    nodes: tuple[Node, ...]

    def node(self, name: str) -> Node | None:
        return next((n for n in self.nodes if n.name == name), None)


@frozen
class MultiNode:
    """The layout of one multi-node vLLM model.

    Example: MultiNode(backend="ray", nodes=(head, worker), tensor_parallel=2,
    pipeline_parallel=2, gpus=(…4 GPUs…), budget_gb=88.0).
    """

    #: "ray" or "mp" (`vllm_distributed`).
    backend: str
    #: Head first (node rank 0), then the workers in `vllm_nodes` order.
    nodes: tuple[Node, ...]
    tensor_parallel: int
    pipeline_parallel: int
    #: The GPUs the ranks use: the first `tensor_parallel` of each node.
    gpus: tuple[Gpu, ...]
    #: VRAM budget over those GPUs: the tightest card's (its host's `vram_budget_gb`, else the card)
    #: on each of them, since every rank holds the same share.
    budget_gb: float

    @property
    def master_addr(self) -> str:
        return self.nodes[0].address

    @property
    def label(self) -> str:
        return " + ".join(f"{n.name} ({self.tensor_parallel} GPU{'s' if self.tensor_parallel > 1 else ''})"
                          for n in self.nodes)


def plan_nodes(override: Override, fleet: Fleet | None, tp_pin: int | None = None) -> MultiNode:
    """The layout for an override with `vllm_nodes`; raises ModelError with the reason the
    hosts cannot run it (outside a fleet run, no GPUs declared, a tensor-parallel pin above a
    node's GPUs)."""
    names = ", ".join(override.vllm_nodes)
    if fleet is None:
        raise ModelError(f"vllm_nodes ({names}) names fleet hosts: generate it from the front's settings, "
                         "which know every host's GPUs")
    nodes = []
    for name in (fleet.host, *override.vllm_nodes):
        node = fleet.node(name)
        if node is None:
            raise ModelError(f"vllm_nodes: no host {name!r} in the fleet")
        if not node.gpus:
            raise ModelError(f"vllm_nodes: host {name} declares no GPU of 3 GiB or more")
        if not node.address:
            raise ModelError(f"vllm_nodes: host {name}'s url has no host name for --master-addr")
        nodes.append(node)
    per_node = min(len(n.gpus) for n in nodes)
    if tp_pin is not None and tp_pin > per_node:
        smallest = min(nodes, key=lambda n: len(n.gpus))
        raise ModelError(f"tensor parallel {tp_pin} per node needs {tp_pin} GPUs on every node; "
                         f"{smallest.name} has {per_node}")
    tp = tp_pin or per_node
    gpus = tuple(g for n in nodes for g in n.gpus[:tp])
    # every rank holds the same share (one --gpu-memory-utilization, one KV pin), so the tightest
    # card budget is every card's
    per_gpu = min(min(g.vram_gb, n.budget_gb) if n.budget_gb else g.vram_gb for n in nodes for g in n.gpus[:tp])
    budget = per_gpu * len(gpus)
    return MultiNode(backend=override.vllm_distributed or DEFAULT_DISTRIBUTED, nodes=tuple(nodes),
                     tensor_parallel=tp, pipeline_parallel=len(nodes), gpus=gpus, budget_gb=budget)


def fleet_of(host: str, hosts: Mapping[str, tuple[Host, Settings]]) -> Fleet:
    """The fleet as host `host`'s run sees it."""
    return Fleet(host=host, nodes=tuple(node_of(h, s) for h, s in hosts.values()))
