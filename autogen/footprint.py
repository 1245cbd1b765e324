"""What an entry takes, typed: its `Footprint` (the engine, bytes on the devices and in host
RAM, files on disk, the GPUs it is pinned to, its sizing results) and its memory record
(`MemoryRecord`): what the engine holds on each device, part by part, and who said so.

Every served entry carries one `Footprint` (`emit.entry.Entry`); its `metadata` keys
(`est_vram_gb`, `est_ram_gb`, `size_gb`, `devices`, `memory`), its comment, `swapgen show` and
routing are renderings of it, and nothing reads them back (vLLM's `KVCacheSpec` classes carry
their sizes the same way). The config's `metadata.memory` is the record's rendering
(`MemoryRecord.metadata`) and `est_vram_gb` its device total. The parts are llama.cpp's
(`llama_memory_breakdown_print`, common/fit.cpp): `model` (weights), `context` (KV cache and
recurrent state; vLLM's KV-cache pool) and `compute` (graph buffers; vLLM's activations and
runtime), per device, plus what the engine's own report does not show (`unseen`: driver runtime,
swapgen's base charge, a projector) and, on measured figures, a margin.
docs/maintainers/sizing.md#exact-numbers-for-your-machine says when each source is used.

Where the engine reports no accelerator (a CPU build of llama.cpp), its host figures stand for
the device: the budget then bounds what the model takes from RAM.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from enum import StrEnum
from typing import Any

import attrs
from attrs import frozen

from autogen.numfmt import gib_text, size_gb

MIB = 1 << 20
#: Added to what a measurement shows (the "stated margin"): 5% of it, at least 128 MiB. llama.cpp's
#: buffers do not grow after load, but a driver's do a little (CUDA graphs, library workspaces on
#: first use), and a measurement is one start on one day.
MARGIN_SHARE = 0.05
MARGIN_MIN = 128 << 20
#: The `metadata` key the record is written under.
MEMORY_KEY = "memory"
#: The name llama.cpp gives host memory in its reports (common/fit.cpp `common_fit_print`).
HOST_DEVICE = "Host"


class Source(StrEnum):
    """Who produced the figures of a memory record: the `source` of `metadata.memory`."""

    #: swapgen's own model of the engine's allocations (docs/maintainers/sizing.md).
    ESTIMATE = "estimate"
    #: llama.cpp's estimator, `llama-fit-params`, asked about the command (no weights read).
    FIT_PARAMS = "llama-fit-params"
    #: The engine's own report when `swapgen calibrate` started the exact command.
    MEASURED = "measured"


@frozen
class DeviceMemory:
    """One device's bytes in llama.cpp's three parts.

    Example: DeviceMemory(name="CUDA0", model=7_516_192_768, context=2_147_483_648,
    compute=314_572_800).
    """

    #: The engine's device name ("CUDA0", "ROCm1", "Vulkan0", "Host"); an estimate names the
    #: devices it splits over "GPU0", "GPU1", … in the order the command lists them.
    name: str
    model: int
    context: int
    compute: int

    @property
    def total(self) -> int:
        return self.model + self.context + self.compute


@frozen
class MemoryRecord:
    """What one entry takes, per device, and where the figures come from.

    Example: MemoryRecord(source=Source.FIT_PARAMS, devices=(DeviceMemory("CUDA0", …),),
    host=DeviceMemory("Host", 524_288_000, 0, 12_582_912), unseen=(859_832_320,)).
    """

    source: Source
    #: The devices the budget holds (accelerators, or the host on a CPU build), in order.
    devices: tuple[DeviceMemory, ...]
    #: Host memory the engine holds beside the devices (weights kept on the CPU, host buffers);
    #: None = nothing beside the devices.
    host: DeviceMemory | None = None
    #: Per device (same order): bytes the device holds that the engine's report does not show
    #: (driver runtime, swapgen's base charge, a projector on the GPU).
    unseen: tuple[int, ...] = ()
    #: Per device: the safety margin added to measured figures.
    margin: tuple[int, ...] = ()
    #: How the figures were obtained, for `swapgen show` ("" = nothing to add).
    note: str = ""

    def device_bytes(self, i: int) -> int:
        """Everything device `i` holds: its parts, what the report does not show, the margin."""
        return self.devices[i].total + _at(self.unseen, i) + _at(self.margin, i)

    def other(self, i: int) -> int:
        """Device `i`'s bytes outside the three parts (unseen + margin)."""
        return _at(self.unseen, i) + _at(self.margin, i)

    @property
    def vram(self) -> int:
        """Bytes on every device together: what `est_vram_gb` writes."""
        return sum(self.device_bytes(i) for i in range(len(self.devices)))

    def part(self, name: str) -> int:
        """One part ("model", "context", "compute") summed over the devices."""
        return sum(getattr(d, name) for d in self.devices)

    def over(self, budgets: Sequence[int]) -> int:
        """Bytes by which the worst device exceeds its budget (0 = fits). One budget for several
        devices is their pooled budget."""
        if len(budgets) != len(self.devices) or len(budgets) == 1:
            return max(0, self.vram - sum(budgets))
        return max(0, *(self.device_bytes(i) - budget for i, budget in enumerate(budgets)))

    def metadata(self) -> dict[str, Any]:
        """`metadata.memory` as the config writes it: whole MiB, as llama.cpp prints them,
        rounded up (a router reading it must never be told less). docs/maintainers/sizing.md#the-memory-record"""
        devices = [{"device": d.name, "model_mib": mib_up(d.model), "context_mib": mib_up(d.context),
                    "compute_mib": mib_up(d.compute), "other_mib": mib_up(self.other(i))}
                   for i, d in enumerate(self.devices)]
        host = self.host.total if self.host is not None else 0
        return {"source": self.source.value, "devices": devices, "host_mib": mib_up(host)}

    @property
    def host_only(self) -> bool:
        """The engine reported no accelerator: its host figures stand for the device."""
        return len(self.devices) == 1 and self.devices[0].name == HOST_DEVICE

    def whole(self, name: str) -> int:
        """One part over the devices and the host together."""
        return self.part(name) + (getattr(self.host, name) if self.host is not None else 0)

    def spread(self, names: Sequence[str], shares: Sequence[float]) -> MemoryRecord:
        """This single-device record split over `names` in proportion to `shares` (llama-server's
        `-ts`), each part rounded up so no device is told less than its share."""
        if len(names) <= 1 or len(self.devices) != 1:
            return self
        (d,) = self.devices
        whole = sum(shares)

        def cut(n: int) -> list[int]:
            return [math.ceil(n * s / whole) for s in shares]

        parts = zip(names, cut(d.model), cut(d.context), cut(d.compute), strict=True)
        return attrs.evolve(self, devices=tuple(DeviceMemory(*p) for p in parts),
                            unseen=tuple(cut(_at(self.unseen, 0))), margin=tuple(cut(_at(self.margin, 0))))


def flat_record(vram: int, weights_on_gpu: int, host: int) -> MemoryRecord:
    """The memory record of an engine swapgen charges by a flat rule (sd-server, the speech and
    segmentation servers): on the GPU its weights there and the rest of its charge as compute,
    and what it keeps in host RAM. Example: flat_record(4 GiB, 3 GiB, 0) → GPU0 model 3 GiB,
    compute 1 GiB."""
    on_gpu = min(weights_on_gpu, vram)
    devices = (DeviceMemory("GPU0", on_gpu, 0, vram - on_gpu),) if vram else ()
    return MemoryRecord(source=Source.ESTIMATE, devices=devices,
                        host=DeviceMemory(HOST_DEVICE, host, 0, 0) if host else None)


@frozen
class Gap:
    """What the command holds that the engine's estimator cannot be asked about, priced by
    swapgen's rules (llama-fit-params b11434 takes no `--kv-unified`: docs/maintainers/sizing.md)."""

    #: Why, in a sentence ("4 unified slots: llama-fit-params was asked with -np 1").
    why: str
    context: int = 0
    compute: int = 0


@frozen
class Reading:
    """The engine's figures for one command beside swapgen's estimate for the same command: what
    sizing corrects its own model with, and what an entry with that command reports."""

    argv: tuple[str, ...]
    env: tuple[str, ...]
    engine: MemoryRecord
    estimate: MemoryRecord
    #: The KV cache's capacity the engine reported, in tokens (vLLM's `GPU KV cache size`); 0 = none.
    kv_tokens: int = 0


def with_gap(record: MemoryRecord, gap: Gap | None) -> MemoryRecord:
    """The engine's figures plus what its estimator could not be asked about, each part spread
    over the devices as the engine spread that part."""
    if gap is None or not record.devices or not (gap.context or gap.compute):
        return record
    context = _shares(gap.context, [d.context for d in record.devices])
    compute = _shares(gap.compute, [d.compute for d in record.devices])
    devices = tuple(attrs.evolve(d, context=d.context + c, compute=d.compute + g)
                    for d, c, g in zip(record.devices, context, compute, strict=True))
    return attrs.evolve(record, devices=devices, note="; ".join(x for x in (record.note, gap.why) if x))


def margin(measured_bytes: int) -> int:
    """The margin added to `measured_bytes` a measurement shows (`MARGIN_SHARE`, `MARGIN_MIN`)."""
    return max(MARGIN_MIN, int(measured_bytes * MARGIN_SHARE))


def _shares(n: int, weights: Sequence[int]) -> list[int]:
    """`n` split in proportion to `weights` (all of it on the first device when they are all 0)."""
    whole = sum(weights)
    if whole <= 0:
        return [n] + [0] * (len(weights) - 1)
    return [math.ceil(n * w / whole) for w in weights]


def _at(values: tuple[int, ...], i: int) -> int:
    return values[i] if i < len(values) else 0


def mib_up(n: int) -> int:
    """Whole MiB, rounded up."""
    return -(-n // MIB)


@frozen
class Fact:
    """One figure of a sizing, in bytes, with why: a sizer's explained record, which the notes of
    `swapgen show`, the comments and the memory record render, so they cannot disagree.

    Example: Fact("weights", 4_294_967_296, "the files to 0.01 GiB, / 2").
    """

    name: str
    bytes: int | float
    reason: str

    @property
    def line(self) -> str:
        """`weights 4.00 GiB: the files to 0.01 GiB, / 2`, as `swapgen show` prints it."""
        return f"{self.name} {gib_text(self.bytes)}: {self.reason}"


@frozen
class Footprint:
    """What one served entry takes, typed: `metadata`, the comment, `swapgen show`, routing and a
    preset's `--models-max` read it (docs/maintainers/routing.md).

    Example: Footprint(engine="llama.cpp", vram=11_703_567_073, host=0, disk=5_027_784_512,
    gpus=(0,), results=(("ctx", 40960), ("ngl", 37), ("n_cpu_moe", 0), ("kv_type", "f16")),
    memory=MemoryRecord(…)).
    """

    #: The engine as `metadata.engine` names it ("llama.cpp", "vllm", "sd-server", …).
    engine: str
    #: Bytes on every device together (`est_vram_gb`); 0 = no GPU (a CPU-only engine).
    vram: int = 0
    #: Host RAM beside the devices (`est_ram_gb`).
    host: int = 0
    #: Bytes of the model's files as loaded (`size_gb`): what loading it again costs.
    disk: int = 0
    #: The GPUs it is pinned to, by index (`devices`); None = the engine's default devices.
    gpus: tuple[int, ...] | None = None
    #: The sizing results a move to other devices must keep to be the same launch, in order
    #: (llama-server: ctx, ngl, n_cpu_moe, kv_type).
    results: tuple[tuple[str, int | str], ...] = ()
    #: The memory record (`metadata.memory`); None = an engine swapgen does not size per part.
    memory: MemoryRecord | None = None
    #: Bytes it keeps on each of its GPUs while its vLLM daemon sleeps (`resolve.sleep`), in
    #: every routing set; 0 = it stops and keeps nothing.
    asleep: int = 0

    @property
    def vram_gb(self) -> float:
        """`est_vram_gb`: GiB to two decimals, as every entry prints sizes (`numfmt.size_gb`)."""
        return size_gb(self.vram)

    @property
    def host_gb(self) -> float:
        return size_gb(self.host)

    @property
    def disk_gb(self) -> float:
        return size_gb(self.disk)

    def to_data(self) -> dict[str, Any]:
        """Plain data for a fragment file (bytes as integers)."""
        return {"engine": self.engine, "vram": self.vram, "host": self.host, "disk": self.disk,
                "gpus": list(self.gpus) if self.gpus is not None else None,
                "results": [list(r) for r in self.results],
                "memory": record_to_data(self.memory) if self.memory is not None else None, "asleep": self.asleep}

    @classmethod
    def from_data(cls, data: Any) -> Footprint:
        """The footprint of `to_data`; ValueError on anything else."""
        try:
            gpus = data["gpus"]
            return cls(engine=str(data["engine"]), vram=int(data["vram"]), host=int(data["host"]),
                       disk=int(data["disk"]), gpus=tuple(int(g) for g in gpus) if gpus is not None else None,
                       results=tuple((str(k), v) for k, v in data["results"]),
                       memory=record_from_data(data["memory"]) if data["memory"] is not None else None,
                       asleep=int(data["asleep"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a footprint: {exc!r}") from exc


def record_to_data(record: MemoryRecord) -> dict[str, Any]:
    """Plain data for a cache file (bytes as integers)."""
    return attrs.asdict(record, value_serializer=lambda _, __, v: v.value if isinstance(v, Source) else v)


def record_from_data(data: Any) -> MemoryRecord:
    """The record of `record_to_data`; ValueError on anything else (a cache file from another
    version, a hand edit). Built by hand: cattrs would cost every run its import."""
    try:
        devices = tuple(_device(d) for d in data["devices"])
        host = _device(data["host"]) if data["host"] is not None else None
        return MemoryRecord(source=Source(data["source"]), devices=devices, host=host,
                         unseen=tuple(int(n) for n in data["unseen"]), margin=tuple(int(n) for n in data["margin"]),
                         note=str(data["note"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"not a memory record: {exc!r}") from exc


def _device(data: Any) -> DeviceMemory:
    if set(data) != {"name", "model", "context", "compute"} or not all(
            isinstance(data[k], int) for k in ("model", "context", "compute")):
        raise ValueError(f"device fields {sorted(data)}")
    return DeviceMemory(str(data["name"]), data["model"], data["context"], data["compute"])
