"""GPU inventory: declared in settings, or probed once per process (NVML, else nvidia-smi).

GPUs under 3 GiB are not eligible (display adapters, small iGPUs). The card reading vLLM sizes
against is the pooled total of the eligible GPUs. Tests inject `probe` and never need a GPU.
"""

from __future__ import annotations

import shutil
import subprocess
from functools import lru_cache
from typing import Callable

from autogen.settings import Gpu, Settings

MIN_ELIGIBLE_GIB = 3.0
MIB_PER_GIB = 1024.0


def _probe_nvml() -> tuple[Gpu, ...] | None:
    try:
        import pynvml  # nvidia-ml-py, optional
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
                            vram_gb=total / (1 << 30), vendor="nvidia"))
        return tuple(gpus)
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


def _probe_nvidia_smi() -> tuple[Gpu, ...] | None:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "--query-gpu=index,name,memory.total", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError):
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


@lru_cache(maxsize=1)
def probe_gpus() -> tuple[Gpu, ...]:
    """Probe once per process; () when nothing answers (no GPU, no driver)."""
    return _probe_nvml() or _probe_nvidia_smi() or ()


def eligible(gpus: tuple[Gpu, ...]) -> tuple[Gpu, ...]:
    return tuple(g for g in gpus if g.vram_gb >= MIN_ELIGIBLE_GIB)


def card_vram_gb(settings: Settings, probe: Callable[[], tuple[Gpu, ...]] = probe_gpus) -> float | None:
    """The card reading: `card_vram_gb` from settings (0 = no reading), else the pooled total
    of the eligible declared or probed GPUs; None when there is no reading."""
    if settings.card_vram_gb is not None:
        return settings.card_vram_gb or None
    gpus = eligible(settings.gpus if settings.gpus is not None else probe())
    total = sum(g.vram_gb for g in gpus)
    return total or None
