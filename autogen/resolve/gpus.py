"""GPU inventory: declared in settings, or probed once per boot.

NVIDIA cards come from NVML, else `nvidia-smi`; AMD cards from `rocm-smi --showmeminfo vram
--json`, else sysfs (`/sys/class/drm/card*/device/mem_info_vram_total`, amdgpu's file). A probed
inventory numbers NVIDIA cards first (in their own order, which is PCI bus order), then AMD
cards. Ineligible cards (under 3 GiB: display adapters, small iGPUs) stay in the inventory,
because the driver still counts them when it numbers devices, but they are never sized against
nor placed on. The card reading vLLM sizes against by default is the pooled total of the
eligible GPUs. Tests replace the probe functions and never need a GPU.

A probe costs 0.1–1 s, so its inventory is kept in `cache_dir/gpus.json` with the kernel's
boot id: GPUs change with a reboot, and the next boot probes again. Within one boot, a card
added or a driver installed is seen after `rm cache/gpus.json`, or by declaring `gpus:`
(never probed). Without a boot id (not Linux) every run probes.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from functools import lru_cache

import attrs

from autogen.fsutil import write_if_changed
from autogen.numfmt import GIB
from autogen.settings.schema import Gpu, Settings

MIN_ELIGIBLE_GIB = 3.0
MIB_PER_GIB = 1024.0
PROBE_TIMEOUT_S = 10
#: Where amdgpu publishes each card's VRAM size (tests point it at a folder of their own).
SYSFS_DRM = "/sys/class/drm"
#: `rocm-smi --json` key of a card's VRAM size in bytes (rocm_smi.py `showMemInfo`).
ROCM_VRAM_KEY = "VRAM Total Memory (B)"
_CARD = re.compile(r"card(\d+)$")
GPU_CACHE_FILE = "gpus.json"
#: Changes at every boot (proc(5)); tests point it elsewhere.
BOOT_ID = "/proc/sys/kernel/random/boot_id"


def _probe_nvml() -> tuple[Gpu, ...] | None:
    try:
        import pynvml  # noqa: PLC0415 (nvidia-ml-py is optional; probed once per boot)
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:
        return None
    try:
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = pynvml.nvmlDeviceGetName(handle)
            total = pynvml.nvmlDeviceGetMemoryInfo(handle).total
            gpus.append(Gpu(index=i, name=name.decode() if isinstance(name, bytes) else str(name),
                            vram_gb=total / GIB, vendor="nvidia"))
        return tuple(gpus)
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()


def _run(argv: list[str]) -> str | None:
    """Stdout of a probe tool found on PATH; None when absent, failing or hanging."""
    exe = shutil.which(argv[0])
    if exe is None:
        return None
    try:
        return subprocess.run([exe, *argv[1:]], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S,
                              check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None


def _probe_nvidia_smi() -> tuple[Gpu, ...] | None:
    out = _run(["nvidia-smi", "--query-gpu=index,name,memory.total", "--format=csv,noheader,nounits"])
    if out is None:
        return None
    gpus = []
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 3:
            continue
        try:
            gpus.append(Gpu(index=int(parts[0]), name=parts[1], vram_gb=float(parts[2]) / MIB_PER_GIB,
                            vendor="nvidia"))
        except ValueError:
            continue
    return tuple(gpus)


def _probe_rocm_smi() -> tuple[Gpu, ...] | None:
    """`{"card0": {"VRAM Total Memory (B)": "25753026560", …}, …}`; cards in their number order."""
    out = _run(["rocm-smi", "--showmeminfo", "vram", "--json"])
    if out is None:
        return None
    try:
        data = json.loads(out)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    gpus = []
    for key, fields in data.items():
        m = _CARD.match(key)
        if m is None or not isinstance(fields, dict):
            continue
        try:
            total = int(fields.get(ROCM_VRAM_KEY, ""))
        except ValueError:
            continue
        name = str(fields.get("Card series") or f"AMD {key}")
        gpus.append(Gpu(index=int(m.group(1)), name=name, vram_gb=total / GIB, vendor="amd"))
    return tuple(sorted(gpus, key=lambda g: g.index))


def _probe_sysfs() -> tuple[Gpu, ...] | None:
    """amdgpu's `mem_info_vram_total` (bytes) per DRM card; None when no card has one."""
    gpus = []
    for path in glob.glob(os.path.join(SYSFS_DRM, "card*", "device", "mem_info_vram_total")):
        card = os.path.basename(os.path.dirname(os.path.dirname(path)))
        m = _CARD.match(card)
        if m is None:  # connectors such as card0-DP-1
            continue
        try:
            with open(path, encoding="ascii") as f:
                total = int(f.read().strip())
        except (OSError, ValueError):
            continue
        gpus.append(Gpu(index=int(m.group(1)), name=f"AMD {card}", vram_gb=total / GIB, vendor="amd"))
    return tuple(sorted(gpus, key=lambda g: g.index)) or None


def _renumber(gpus: tuple[Gpu, ...], start: int) -> tuple[Gpu, ...]:
    return tuple(Gpu(index=start + i, name=g.name, vram_gb=g.vram_gb, vendor=g.vendor)
                 for i, g in enumerate(sorted(gpus, key=lambda g: g.index)))


@lru_cache(maxsize=1)
def probe_gpus() -> tuple[Gpu, ...]:
    """Probe once per process: NVIDIA cards, then AMD cards, numbered 0…n-1 in that order;
    () when nothing answers (no GPU, no driver)."""
    nvidia = _probe_nvml() or _probe_nvidia_smi() or ()
    amd = _probe_rocm_smi() or _probe_sysfs() or ()
    return _renumber(nvidia, 0) + _renumber(amd, len(nvidia))


def _boot_id() -> str | None:
    try:
        with open(BOOT_ID, encoding="ascii") as f:
            return f.read().strip() or None
    except (OSError, ValueError):
        return None


def remembered_gpus(cache_dir: str, probe: Callable[[], tuple[Gpu, ...]] | None = None) -> tuple[Gpu, ...]:
    """The inventory probed in this boot (`cache_dir/gpus.json`), else probed now (`probe`,
    default `probe_gpus`) and stored."""
    probe = probe or probe_gpus
    boot = _boot_id()
    if boot is None:
        return probe()
    path = os.path.join(cache_dir, GPU_CACHE_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        if data["boot_id"] == boot:
            return tuple(Gpu(index=int(g["index"]), vram_gb=float(g["vram_gb"]), name=str(g["name"]),
                             vendor=str(g["vendor"])) for g in data["gpus"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    found = probe()
    text = json.dumps({"boot_id": boot, "gpus": [attrs.asdict(g) for g in found]}, indent=1, sort_keys=True)
    try:
        os.makedirs(cache_dir, exist_ok=True)
        write_if_changed(path, text.encode(), durable=False)
    except OSError:
        pass  # a read-only cache only costs a probe per run
    return found


@lru_cache(maxsize=4)
def _remembered(cache_dir: str) -> tuple[Gpu, ...]:
    """Once per process and cache: placement asks for the inventory once per model."""
    return remembered_gpus(cache_dir)


def forget_readings() -> None:
    """Probe again on the next ask: for a process that runs many times (`swapgen watch`'s worker)."""
    _remembered.cache_clear()
    probe_gpus.cache_clear()


def eligible(gpus: tuple[Gpu, ...]) -> tuple[Gpu, ...]:
    return tuple(g for g in gpus if g.vram_gb >= MIN_ELIGIBLE_GIB)


def inventory(settings: Settings, probe: Callable[[], tuple[Gpu, ...]] | None = None) -> tuple[Gpu, ...]:
    """Every GPU, eligible or not, by index: the declared `gpus`, else the probed ones (`probe`,
    else this boot's inventory in `cache_dir`)."""
    if settings.gpus is not None:
        gpus = settings.gpus
    else:
        gpus = probe() if probe is not None else _remembered(settings.cache_dir)
    return tuple(sorted(gpus, key=lambda g: g.index))


def card_vram_gb(settings: Settings, probe: Callable[[], tuple[Gpu, ...]] | None = None) -> float | None:
    """The card reading: `card_vram_gb` from settings (0 = no reading), else the pooled total
    of the eligible declared or probed GPUs; None when there is no reading."""
    if settings.card_vram_gb is not None:
        return settings.card_vram_gb or None
    total = sum(g.vram_gb for g in eligible(inventory(settings, probe)))
    return total or None
