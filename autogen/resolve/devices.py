"""Which GPUs a model runs on, and the vendor variables that pin them.

A model's devices are its override's `devices`, else the settings' `devices` (an empty override
list means "no pin"); with none, a vLLM model on a host of several eligible GPUs is placed on the
largest card (ties: the lower index), or the N largest for a tensor-parallel pin (`-tp N` in
`extra_args`, else `vllm_tensor_parallel`), because vLLM runs on one GPU unless tensor-parallel and its
`--gpu-memory-utilization` is a fraction of EACH GPU; every other engine keeps the driver's
default (llama-server spreads layers over every visible GPU, which the pooled budget describes).

The variables follow the RESOLVED backend's build (`BackendRow.build`), never the ★ row's
(docs/maintainers/backends.md#gpu-pins): a model pinned to a vulkan build gets
`GGML_VK_VISIBLE_DEVICES` even when the ★ is a CUDA build. An empty or unknown build (a
legacy exe, a hand-written row, sycl…) is inferred from the vendor of the chosen GPUs: NVIDIA →
cuda, AMD → rocm, anything else → vulkan; a declared GPU without a vendor counts as NVIDIA.

Each variable takes the device's number as that runtime counts it: CUDA counts NVIDIA GPUs only
(`CUDA_DEVICE_ORDER=PCI_BUS_ID` makes its order nvidia-smi's), HIP counts AMD GPUs only, Vulkan
counts every GPU, taken here as the inventory's order (declare `gpus` in Vulkan's order when it
differs). Inventory indices (what `devices` names) therefore differ from the values on a
mixed-vendor host: NVIDIA 0, 1 and AMD 2 → `HIP_VISIBLE_DEVICES=0` for device 2.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import attrs
from attrs import frozen

from autogen.engines import engine_row
from autogen.errors import ModelError
from autogen.numfmt import format_g, round_half_away
from autogen.resolve.gpus import MIN_ELIGIBLE_GIB, eligible
from autogen.settings.schema import BackendRow, Gpu, Override, Settings

CUDA, ROCM, VULKAN, CPU = "cuda", "rocm", "vulkan", "cpu"
#: Build → the variables that pin devices, the last one taking the device list. Metal
#: (one GPU) and cpu builds have none. llama.cpp docs/build.md (CUDA, HIP), ggml-vulkan.cpp
#: (`GGML_VK_VISIBLE_DEVICES`); CUDA's default order is "fastest first", not nvidia-smi's.
VARIABLES: dict[str, tuple[str, ...]] = {
    CUDA: ("CUDA_DEVICE_ORDER=PCI_BUS_ID", "CUDA_VISIBLE_DEVICES"),
    ROCM: ("HIP_VISIBLE_DEVICES",),
    VULKAN: ("GGML_VK_VISIBLE_DEVICES",),
}
#: Build spellings (`BackendRow.build`, detect.py's labels) → the family above.
BUILD_FAMILY = {"cuda": CUDA, "rocm": ROCM, "hip": ROCM, "vulkan": VULKAN, "cpu": CPU, "metal": CPU}
#: The GPU vendor a family can use (vulkan takes any).
FAMILY_VENDOR = {CUDA: "nvidia", ROCM: "amd"}


#: Vendor → the words naming it in a declared `vendor` or a driver's text, matched as whole
#: words ("Intel Corporation" holds "ati" but not the word): lspci's "NVIDIA Corporation",
#: "Advanced Micro Devices, Inc. [AMD/ATI]", "Intel Corporation", "Apple".
VENDOR_WORDS = {
    "nvidia": re.compile(r"\bnvidia\b"),
    "amd": re.compile(r"\b(amd|ati|radeon|amdgpu|advanced micro devices)\b"),
    "intel": re.compile(r"\bintel\b"),
    "apple": re.compile(r"\bapple\b"),
}


def vendor_of(gpu: Gpu) -> str:
    """"nvidia", "amd", "intel", "apple" or the declared text lower-cased; "" counts as NVIDIA."""
    v = gpu.vendor.strip().lower()
    return next((name for name, words in VENDOR_WORDS.items() if words.search(v)), v or "nvidia")


@frozen
class Placement:
    """The GPUs one model runs on and the variables that pin them (empty = the driver's default).

    Example: Placement(gpus=(Gpu(0, 24.0, "RTX 4090", "nvidia"),), values=("0",), family="cuda",
    why="pinned").
    """

    gpus: tuple[Gpu, ...] = ()
    #: Each GPU's number as the build's runtime counts it (aligned with `gpus`).
    values: tuple[str, ...] = ()
    #: "cuda", "rocm", "vulkan" or "cpu" (no variables).
    family: str = ""
    #: "pinned", "settings devices", "largest card (…)", "fits one card of 0,1", plus
    #: "; cuda inferred from nvidia GPUs" when the row does not say its build.
    why: str = ""

    @property
    def label(self) -> str:
        """Inventory indices, as `devices` names them: "0,1"."""
        return ",".join(str(g.index) for g in self.gpus)

    @property
    def env(self) -> tuple[str, ...]:
        names = VARIABLES.get(self.family, ())
        if not self.gpus or not names:
            return ()
        return (*names[:-1], f"{names[-1]}={','.join(self.values)}")

    def only(self, gpu: Gpu, why: str) -> Placement:
        return attrs.evolve(self, gpus=(gpu,), values=(self.values[self.gpus.index(gpu)],), why=why)


NO_PLACEMENT = Placement()


def requested(settings: Settings, override: Override | None) -> tuple[tuple[int, ...], str]:
    """(indices, why) the user asked for, deduplicated in their order; () = no pin."""
    if override is not None and override.devices is not None:
        return tuple(dict.fromkeys(override.devices)), "pinned"
    return tuple(dict.fromkeys(settings.devices or ())), "settings devices"


def describe(gpus: Sequence[Gpu]) -> str:
    """"0: RTX 4090 24 GiB nvidia, 1: UHD 0.5 GiB intel (under 3 GiB)" or "none"."""
    parts = []
    for g in gpus:
        size = format_g(round_half_away(g.vram_gb, 1))
        small = f" (under {format_g(MIN_ELIGIBLE_GIB)} GiB)" if g.vram_gb < MIN_ELIGIBLE_GIB else ""
        parts.append(f"{g.index}: {g.name or 'GPU'} {size} GiB {vendor_of(g)}{small}")
    return ", ".join(parts) or "none"


def _family(row: BackendRow | None, gpus: Sequence[Gpu]) -> tuple[str, str]:
    """(family, note) from the row's build, else from the chosen GPUs' vendor; the note names the
    settings key, `variant`."""
    build = row.build.strip().lower() if row is not None else ""
    family = BUILD_FAMILY.get(build)
    if family is not None:
        return family, ""
    vendors = sorted({vendor_of(g) for g in gpus})
    if len(vendors) > 1:
        raise ModelError(f"devices {','.join(str(g.index) for g in gpus)} mix {' and '.join(vendors)} GPUs and "
                         f"the backend's build is not known: pin a vulkan build (variant: vulkan)")
    family = {"nvidia": CUDA, "amd": ROCM}.get(vendors[0], VULKAN)
    what = f"variant {build!r} unknown" if build else "no variant"
    return family, f"{what}; {family} inferred from {vendors[0]} GPUs"


def _values(family: str, gpus: Sequence[Gpu], inventory: Sequence[Gpu]) -> tuple[str, ...]:
    """Each GPU's number as the runtime counts it (module docstring)."""
    vendor = FAMILY_VENDOR.get(family)
    counted = [g for g in inventory if vendor is None or vendor_of(g) == vendor]
    return tuple(str(counted.index(g)) for g in gpus)


def place(settings: Settings, override: Override | None, row: BackendRow | None, engine: str,
          inventory: Sequence[Gpu], tensor_parallel: tuple[int, str] = (1, "")) -> Placement:
    """The model's placement; raises ModelError for devices the inventory or the build cannot
    serve (the model is skipped with that reason). `tensor_parallel`: (ranks, what pinned them),
    `flags.vllm.vllm_tensor_parallel`, for a vLLM model placed without devices."""
    wanted, why = requested(settings, override)
    usable = eligible(tuple(inventory))
    if wanted:
        by_index = {g.index: g for g in usable}
        unknown = [i for i in wanted if i not in by_index]
        if unknown:
            raise ModelError(f"devices {','.join(map(str, unknown))} not in the GPU inventory "
                             f"({describe(inventory)}); eligible GPUs have {format_g(MIN_ELIGIBLE_GIB)} GiB or more")
        gpus = tuple(by_index[i] for i in wanted)
    elif engine_row(engine).per_card and len(usable) > 1:
        tp, source = tensor_parallel
        ranked = sorted(usable, key=lambda g: (-g.vram_gb, g.index))[:tp]
        gpus = tuple(sorted(ranked, key=lambda g: g.index))
        why = ("largest card: vLLM runs on one GPU without tensor parallel" if len(gpus) == 1
               else f"the {len(gpus)} largest cards for {source} {tp}")
    else:
        return NO_PLACEMENT
    family, note = _family(row, gpus)
    vendor = FAMILY_VENDOR.get(family)
    foreign = [g for g in gpus if vendor is not None and vendor_of(g) != vendor]
    if foreign:
        who = f"backend '{row.id}'" if row is not None else "the backend"
        raise ModelError(f"{who} is a {family} build: device {describe(foreign)} is not an {vendor.upper()} GPU")
    return Placement(gpus=gpus, values=_values(family, gpus, inventory), family=family,
                     why=f"{why}; {note}" if note else why)


def budget_gb(gpus: Sequence[Gpu], settings_budget: float | None) -> float:
    """VRAM budget on these devices: each card's VRAM, capped by the settings' `vram_budget_gb`
    (read as what a model may take of one card), summed over the cards of a split."""
    return sum(min(g.vram_gb, settings_budget) if settings_budget else g.vram_gb for g in gpus)


def key(placement: Placement) -> tuple | None:
    """The model's up-to-date key part: the inventory entries used and how they are pinned."""
    if not placement.gpus:
        return None
    return placement.gpus, placement.values, placement.family, placement.why


def tensor_split(gpus: Sequence[Gpu]) -> str:
    """llama-server `--tensor-split` proportions: each card's VRAM in GiB, 1 decimal ("24,12")."""
    return ",".join(format_g(round_half_away(g.vram_gb, 1)) for g in gpus)
