"""Which vLLM models sleep between requests instead of stopping, at which level, on which port,
and what their sleeping daemons keep (docs/vllm-sleep.md; the reasoning:
docs/maintainers/vllm-sleep.md).

A sleeping model runs through llama-swap's `vllm-wrapper` (cmd/vllm-wrapper): its vLLM daemon
outlives the entry's process and listens on a fixed port of its own, so the plan is run-wide:
ports must not clash with each other nor with llama-swap's `${PORT}` range, the host's RAM must
hold every sleeper's weights at once, and every model sharing a card with a sleeper must leave
room for what the sleeper keeps there. `plan_sleep` decides it once per run from every job, and
the library hands each job its part (`commands.library.Library.sleep_part`), so each model's key carries
what its fragment reads.

- Level: 1 only. The wrapper sends the level as a JSON body, and vLLM 0.33.0 reads it from the
  query string (vllm/entrypoints/serve/dev/sleep/api_router.py), so every sleep is level 1; and a
  level-2 sleep discards the weights, which `/wake_up` does not load again (vllm/v1/worker/
  gpu_worker.py `wake_up`), so a woken level-2 model would answer from garbage. Level 1 copies
  the weights into pinned host RAM (vllm/device_allocator/cumem.py `sleep`): a model whose
  weights do not fit in what the sleepers may pin stops instead, with the reason.
- Kept on each GPU while asleep: what lies outside vLLM's cuMem pool, the CUDA context and the
  CUDA-graph pool, plus NCCL's buffers with tensor parallel (vllm/device_allocator/
  sleep_mode_backend.py `CuMemBackend.suspend`).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import zlib
from collections.abc import Iterable, Mapping, Sequence

import attrs
from attrs import frozen

from autogen.engines import Engine
from autogen.fsutil import write_if_changed
from autogen.numfmt import GIB, format_g, gib

#: Where sleeping daemons listen: below Linux's ephemeral ports (32768–60999), far from
#: llama-swap's default `startPort` (5800).
SLEEP_PORTS = range(20000, 30000)
#: llama-swap gives `${PORT}` from `startPort` up, one per model (internal/config/macros.go); a
#: sleeper port stays out of this many ports from it (room for models of other config files).
PORT_RANGE_ROOM = 1000
DEFAULT_START_PORT = 5800
#: The ledger of the ports given (`cache_dir`), so a model keeps its port when others come.
PORT_LEDGER = "sleep-ports.json"
#: What a sleeping vLLM keeps on each of its GPUs: the CUDA context and the CUDA-graph pool.
SLEEP_RESIDUE = GIB
#: More per GPU with tensor parallel: NCCL's communicator buffers.
SLEEP_RESIDUE_TP = GIB // 2
#: The share of the host's RAM the sleepers' pinned weights may take together (pinned pages
#: cannot be swapped; the rest is the system's, the page cache's and llama.cpp's CPU layers').
HOST_SHARE = 0.5
#: llama-swap waits this long for a stopped command's output pipes (`cmdWaitDelay`,
#: internal/process/process_command.go); the daemon holds them, so every stop takes it.
WAIT_DELAY_S = 10
#: A level-1 sleep copies the weights to host RAM; at this rate, with room to spare.
COPY_GIB_PER_S = 2
STOP_MARGIN_S = 5


@frozen
class Sleeper:
    """One sleeping vLLM model's part of the plan.

    Example: Sleeper(port=24117, level=1, gpu_bytes=1_073_741_824, host_bytes=8_589_934_592,
    devices=(0,), unload_timeout=19, note="level 1: 8 GiB of weights in host RAM (…)").
    """

    #: The daemon's own port (`--port`, the wrapper's `--vllm-url`).
    port: int
    #: 1, or None when it asked to sleep and cannot (`note` says why): it then stops as usual.
    level: int | None
    #: Bytes it keeps on each of its GPUs while asleep.
    gpu_bytes: int
    #: Host RAM its weights take while asleep.
    host_bytes: int
    #: The GPU indices it runs on; () = the default card.
    devices: tuple[int, ...]
    #: llama-swap's `unloadTimeout` it needs: its own stop waits `WAIT_DELAY_S` for the daemon's
    #: pipes, and a graceful timeout that runs out first kills the daemon's process group.
    unload_timeout: int
    note: str


@frozen
class SleepPlan:
    """Every sleeper of the run by model id, and what the run says about them."""

    sleepers: Mapping[str, Sleeper] = attrs.field(factory=dict)
    warnings: tuple[str, ...] = ()

    def held(self, model_id: str, devices: tuple[int, ...]) -> tuple[int, int, str]:
        """(bytes on all these cards, the most on one of them, who) that the other sleepers keep
        there; a card either side runs on unpinned (the default card) counts as shared."""
        per_card: dict[int | None, int] = {}
        who = []
        for other_id, s in sorted(self.sleepers.items()):
            if other_id == model_id or s.level is None:
                continue
            cards = set(devices) & set(s.devices) if devices and s.devices else {devices[0] if devices else None}
            if not cards:
                continue
            for card in cards:
                per_card[card] = per_card.get(card, 0) + s.gpu_bytes
            who.append(f"{other_id} {_gib(s.gpu_bytes * len(cards))} GiB")
        return sum(per_card.values()), max(per_card.values(), default=0), ", ".join(who)


def asks_to_sleep(engine: str, backend_sleep: bool, override_sleep: bool | None) -> bool:
    """A vLLM model sleeps when its override says so, else when its backend row does."""
    return engine == Engine.VLLM and (override_sleep if override_sleep is not None else backend_sleep)


def port_of(model_id: str, taken: set[int], reserved: range) -> int:
    """A fixed port from the id's hash, the next free one on a clash (wrapping in the range)."""
    size = len(SLEEP_PORTS)
    start = zlib.crc32(model_id.encode("utf-8", "surrogatepass")) % size
    for step in range(size):
        port = SLEEP_PORTS[(start + step) % size]
        if port not in taken and port not in reserved:
            return port
    raise ValueError("no free port for a sleeping vLLM model")  # 10,000 sleepers: not a real library


def start_port_range(llama_swap: Mapping) -> range:
    """llama-swap's `${PORT}` range: `startPort` (the settings' `llama_swap:` key, else 5800) up."""
    start = llama_swap.get("startPort", DEFAULT_START_PORT)
    start = start if isinstance(start, int) and not isinstance(start, bool) else DEFAULT_START_PORT
    return range(start, start + PORT_RANGE_ROOM)


def assign_ports(model_ids: Iterable[str], ledger: Mapping[str, int], reserved: range) -> dict[str, int]:
    """Each id's port: the ledger's when it still may be used, else a new one. Every port of the
    ledger stays taken, also an absent model's: its daemon may still be asleep there."""
    ids = sorted(model_ids)
    taken = {p for p in ledger.values() if p not in reserved}
    ports = {i: ledger[i] for i in ids if ledger.get(i) in taken}
    for model_id in ids:
        if model_id not in ports:
            ports[model_id] = port_of(model_id, taken, reserved)
            taken.add(ports[model_id])
    return ports


def residue(tensor_parallel: int) -> int:
    return SLEEP_RESIDUE + (SLEEP_RESIDUE_TP if tensor_parallel > 1 else 0)


def unload_timeout(weights: int) -> int:
    return WAIT_DELAY_S + math.ceil(gib(weights) / COPY_GIB_PER_S) + STOP_MARGIN_S


@frozen
class Asker:
    """What the plan needs of one model that asks to sleep."""

    model_id: str
    weights: int
    devices: tuple[int, ...]
    tensor_parallel: int
    #: Why it cannot sleep whatever the RAM (a multi-node model); "" = it may.
    refused: str = ""


def plan_sleep(askers: Sequence[Asker], ledger: Mapping[str, int], host_ram: int | None,
               reserved: range) -> SleepPlan:
    """Ports for every asker, level 1 for those whose weights fit in the host RAM left, in id
    order (a new model never takes the RAM of one that already sleeps on a lower id)."""
    ports = assign_ports((a.model_id for a in askers), ledger, reserved)
    room = int(host_ram * HOST_SHARE) if host_ram else None
    pinned = 0
    sleepers = {}
    for a in sorted(askers, key=lambda a: a.model_id):
        gpu = residue(a.tensor_parallel)
        if a.refused:
            level, note = None, a.refused
        elif room is not None and pinned + a.weights > room:
            level, note = None, (f"its {_gib(a.weights)} GiB of weights do not fit in the host RAM sleeping models "
                                 f"may pin ({_gib(room - pinned)} of {_gib(room)} GiB left, half of "
                                 f"{_gib(host_ram)} GiB): it stops instead")
        else:
            pinned += a.weights
            level, note = 1, (f"level 1: its {_gib(a.weights)} GiB of weights wait in pinned host RAM "
                              + (f"({_gib(pinned)} of {_gib(room)} GiB the sleepers may pin, half of "
                                 f"{_gib(host_ram)} GiB)" if room is not None else "(host RAM not known)"))
        sleepers[a.model_id] = Sleeper(port=ports[a.model_id], level=level, gpu_bytes=gpu, host_bytes=a.weights,
                                       devices=a.devices, unload_timeout=unload_timeout(a.weights), note=note)
    return SleepPlan(sleepers=sleepers)


def _gib(n: int) -> str:
    return format_g(round(gib(n), 2))


def host_ram_bytes(declared_gb: float | None) -> int | None:
    """The host's RAM: the settings' `host_ram_gb` (0 = no reading), else the kernel's count."""
    if declared_gb is not None:
        return round(declared_gb * GIB) if declared_gb > 0 else None
    with contextlib.suppress(ValueError, OSError, AttributeError):
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return None


def load_ports(cache_dir: str) -> dict[str, int]:
    """The previous runs' ports; empty when there is none or it cannot be read."""
    try:
        with open(os.path.join(cache_dir, PORT_LEDGER), encoding="utf-8") as f:
            data = json.load(f)["ports"]
        return {str(k): int(v) for k, v in data.items() if int(v) in SLEEP_PORTS}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def save_ports(cache_dir: str, previous: Mapping[str, int], plan: SleepPlan) -> None:
    """The ledger with this run's ports added (absent models keep theirs: see `assign_ports`)."""
    ports = dict(previous) | {i: s.port for i, s in plan.sleepers.items()}
    if ports == previous:
        return
    with contextlib.suppress(OSError):
        os.makedirs(cache_dir, exist_ok=True)
        text = json.dumps({"ports": ports}, sort_keys=True)
        write_if_changed(os.path.join(cache_dir, PORT_LEDGER), text.encode(), durable=False)
