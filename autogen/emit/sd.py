"""The image emitter: one stable-diffusion.cpp `sd-server` entry per diffusion GGUF.

Rules: docs/maintainers/classes.md#image-sd-server (detection, full checkpoint vs split, component arms,
budget, argv, YAML). sd-server takes `--listen-port`, not `--port`, and has no `/health`: its
web root answers 200 once loaded (docs/maintainers/llama-swap.md#runtime-behaviour). Argv:

    <exe> --diffusion-model <dit> | -m <checkpoint>  -l 127.0.0.1 --listen-port ${PORT}
      --max-vram <g>  [--vae …] [--clip_l …] [--clip_g …] [--t5xxl …] [--llm …]
      --lora-model-dir <dir>  [--diffusion-fa] [--vae-tiling] [-t <n>] [--backend te=cpu[,vae=cpu]]
      [--guidance <g>] [--offload-to-cpu --vae-on-cpu] [--steps …] [--cfg-scale …]
      [--sampling-method …] [--width …] [--height …] <extra_args>

Components come from the per-model override (a path, or "none" to drop one), else the declared
`encoders:`; a required one that is missing (undeclared, or not on disk) is left out of the
command and named in a `# WARNING` line, as the Go original did: sd-server still starts.
The emitter is pure: component sizes come through the `file_size` callable the dispatcher passes.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence

from attrs import frozen

from autogen import fsutil
from autogen.cmdline import HOST, unsafe_arg_reason
from autogen.emit.entry import Capabilities, Entry, MetaValue, Plan
from autogen.engines import ENGINES, Engine
from autogen.errors import ModelError
from autogen.footprint import Footprint, MemoryRecord, flat_record
from autogen.numfmt import GIB, format_g, gib, round_half_away, size_gb
from autogen.resolve.context import EmitContext
from autogen.resolve.roles import image_arch
from autogen.settings.schema import Encoders, Override

#: Loaded whole with `-m` (sd.cpp cannot version-detect a split SD/SDXL UNet),
#: docs/maintainers/classes.md#full-checkpoint-or-split-load.
FULL_CHECKPOINT_ARCHS = ("sd1", "sd2", "sdxl", "stable-diffusion")
#: The Go original's `VramOverheadGB` (taken off the budget) and image compute reserve
#: (docs/maintainers/classes.md#budget-and---max-vram).
OVERHEAD_GB = 0.5
COMPUTE_GB = 1.5
#: Component roles in argv order, with their sd-server flag.
ROLE_FLAGS = (("vae", "--vae"), ("clip_l", "--clip_l"), ("clip_g", "--clip_g"), ("t5xxl", "--t5xxl"),
              ("llm", "--llm"))
_ENCODER_ROLES = frozenset({"clip_l", "clip_g", "t5xxl", "llm"})
#: Override field per role.
OVERRIDE_FIELD = {"vae": "vae", "clip_l": "clip_l", "clip_g": "clip_g", "t5xxl": "t5xxl",
                  "llm": "llm_text_encoder"}
#: Name tokens of reference-edit models (take an input image), docs/maintainers/classes.md#sd-server-argv.
_EDIT_TOKENS = ("edit", "rapid", "kontext")

#: Every spelling of each flag we generate (sd-server `--help`), by meaning: a flag in
#: extra_args removes ours of the same meaning (docs/maintainers/classes.md#sd-server-argv).
FLAG_KNOBS: dict[str, str] = {
    **dict.fromkeys(("-m", "--model", "--diffusion-model"), "model"),
    **dict.fromkeys(("-l", "--listen-ip"), "listen_ip"),
    "--listen-port": "listen_port",
    "--max-vram": "max_vram",
    "--vae": "vae", "--clip_l": "clip_l", "--clip_g": "clip_g", "--t5xxl": "t5xxl",
    **dict.fromkeys(("--llm", "--qwen2vl"), "llm"),
    "--lora-model-dir": "lora_dir",
    "--diffusion-fa": "diffusion_fa",
    "--vae-tiling": "vae_tiling",
    **dict.fromkeys(("-t", "--threads"), "threads"),
    "--backend": "backend",
    "--guidance": "guidance",
    "--offload-to-cpu": "offload",
    "--vae-on-cpu": "vae_on_cpu",
    "--steps": "steps",
    "--cfg-scale": "cfg_scale",
    "--sampling-method": "sampling_method",
    **dict.fromkeys(("-W", "--width"), "width"),
    **dict.fromkeys(("-H", "--height"), "height"),
}

#: Bytes of a file, or None when it is absent (the dispatcher passes `fsutil.file_size`).
FileSize = Callable[[str], "int | None"]


def is_full_checkpoint(arch: str) -> bool:
    return arch.lower().startswith(FULL_CHECKPOINT_ARCHS)


def arm_components(name: str, arch: str, enc: Encoders) -> tuple[str, dict[str, str | None]]:
    """(arm label, role → declared path or None) for a split-loaded DiT; every role listed is
    required (docs/maintainers/classes.md#components, first match wins). `name` is lower case."""
    arch = arch.lower()
    if "chroma" in name:
        return "chroma", {"vae": enc.flux_vae, "t5xxl": enc.t5xxl}
    if any(k in name for k in ("klein", "flux2", "flux-2")):
        return "flux.2", {"vae": enc.flux2_vae, "llm": enc.llm_text_encoder}
    if "longcat" in name:
        return "longcat", {"vae": enc.flux_vae, "llm": enc.llm_text_encoder}
    if arch.startswith("flux"):
        return "flux", {"vae": enc.flux_vae, "clip_l": enc.clip_l, "t5xxl": enc.t5xxl}
    if arch.startswith("lumina") or arch == "z_image" or "z-image" in name:
        return "z-image", {"vae": enc.zimage_vae or enc.flux_vae, "llm": enc.llm_text_encoder}
    if arch in ("qwen_image", "wan") or "qwen-image" in name or "qwen_image" in name:
        if arch == "wan" and "wan" not in name:  # ERNIE-Image declares arch wan, uses the Flux.2 VAE
            return "ernie-image", {"vae": enc.flux2_vae, "llm": enc.llm_text_encoder}
        return "qwen-image", {"vae": enc.qwen_image_vae, "llm": enc.llm_text_encoder}
    return "generic", {}


@frozen
class Components:
    """The components one model is launched with, and what is missing."""

    #: (role, path, bytes) in argv order, only files that exist.
    present: tuple[tuple[str, str, int], ...]
    #: Required roles with no usable file: (role, why) e.g. ("t5xxl", "not declared").
    missing: tuple[tuple[str, str], ...]
    arm: str

    def bytes_of(self, roles: frozenset[str]) -> int:
        return sum(size for role, _, size in self.present if role in roles)


def resolve_components(ctx: EmitContext, arch: str, file_size: FileSize) -> Components:
    """Arm picks (split DiTs only), then override paths ("none" drops a role); raises
    ModelError for a path the command line cannot carry."""
    name = os.path.basename(ctx.row.path).lower()
    full = is_full_checkpoint(arch)
    arm, wanted = ("full checkpoint", {}) if full else arm_components(name, arch, ctx.settings.encoders)
    picks: dict[str, str | None] = dict(wanted)
    required = set(wanted)
    ov = ctx.override
    for role, field in OVERRIDE_FIELD.items():
        value = getattr(ov, field, None) if ov is not None else None
        if value is None:
            continue
        if value.strip().lower() == "none":
            picks.pop(role, None)
            required.discard(role)
        else:
            picks[role] = os.path.expanduser(value.strip())
    present, missing = [], []
    for role, _flag in ROLE_FLAGS:
        if role not in picks:
            continue
        path = picks[role]
        if not path:
            missing.append((role, "not declared"))
            continue
        if (reason := unsafe_arg_reason(path)) is not None:
            raise ModelError(f"{role} path {path!r} cannot be passed safely: {reason}")
        size = file_size(path)
        if size is None:
            missing.append((role, f"{path} not found"))
        else:
            present.append((role, path, size))
    return Components(present=tuple(present), missing=tuple(m for m in missing if m[0] in required), arm=arm)


@frozen
class SdChoices:
    """Toggles after override > default (docs/maintainers/classes.md#budget-and---max-vram)."""

    offload: bool
    offload_pinned: bool
    vae_on_cpu: bool
    te_on_cpu: bool
    diffusion_fa: bool
    vae_tiling: bool


def _pick(ov: Override | None, name: str, default):
    value = getattr(ov, name, None) if ov is not None else None
    return default if value is None else value


def budget_gb(ctx: EmitContext) -> float:
    """A per-model `vram_budget_gb` is used as is; the fleet budget loses the 0.5 GiB overhead
    the original reserved; never below 1 GiB."""
    ov = ctx.override
    raw = ov.vram_budget_gb if ov is not None and ov.vram_budget_gb else ctx.budget_gb - OVERHEAD_GB
    return max(1.0, round_half_away(raw, 2))


def max_vram(budget: float, offload: bool, resident_gb: float) -> float:
    """sd-server's graph-segment budget: the whole budget when offloading, else what the resident
    weights leave, truncated to 0.1; under 1 GiB left → -1 (sd-server's "reserve" form, 0 would
    disable splitting). docs/maintainers/classes.md#image-worked-examples, example F."""
    if offload:
        return budget
    left = budget - resident_gb
    if left < 1:
        return -1.0
    return math.floor(left * 10 + 1e-6) / 10


def guidance_for(name: str) -> float | None:
    """Distilled guidance for Flux Kontext (2.5) and Fill (30), docs/maintainers/classes.md#image-worked-examples,
    example E."""
    if "kontext" in name:
        return 2.5
    if "fill" in name:
        return 30.0
    return None


def is_reference_edit(name: str) -> bool:
    tokens = set(name.replace("_", "-").replace(".", "-").split("-"))
    return bool(tokens.intersection(_EDIT_TOKENS)) or "qwen-image-2.1" in name.replace("_", "-")


def unet_only_warning(model_id: str) -> str:
    """An SD/SDXL file without baked text encoders (docs/maintainers/classes.md#full-checkpoint-or-split-load).
    Declared CLIP files do not help: sd.cpp tells SD1/SD2/SDXL apart by the baked encoder tensors (`get_sd_version` in
    its `model.cpp` looks for `cond_stage_model.1` / `conditioner.embedders.1` and the
    `cond_stage_model.` token embedding), and `--clip_l`/`--clip_g` load under `text_encoders.`,
    so the entry is still emitted and the user told to fetch the all-in-one checkpoint."""
    return (f"WARNING: {model_id} looks UNet-only (no baked text encoder) - sd.cpp can't load SD/SDXL "
            f"split; supply an all-in-one checkpoint")


def _extra_knobs(extra: Sequence[str]) -> frozenset[str]:
    return frozenset(k for arg in extra if (k := FLAG_KNOBS.get(arg.partition("=")[0])) is not None)


def emit_sd(ctx: EmitContext, file_size: FileSize = fsutil.file_size) -> Plan:
    """One sd-server entry; a ModelError (unsafe component path, no metadata) propagates."""
    row, meta, ov = ctx.row, ctx.meta, ctx.override
    if meta is None:
        raise ModelError("no readable GGUF metadata: cannot tell the image architecture")
    arch = image_arch(meta)
    name = os.path.basename(row.path).lower()
    comps = resolve_components(ctx, arch, file_size)
    budget = budget_gb(ctx)
    model_gib, model_gb = gib(row.size_bytes), size_gb(row.size_bytes)
    pinned = _pick(ov, "offload_to_cpu", None)
    offload = pinned if pinned is not None else model_gib + COMPUTE_GB > budget
    choices = SdChoices(offload=offload, offload_pinned=pinned is not None,
                        vae_on_cpu=_pick(ov, "vae_on_cpu", False), te_on_cpu=_pick(ov, "te_on_cpu", True),
                        diffusion_fa=_pick(ov, "diffusion_fa", True), vae_tiling=_pick(ov, "vae_tiling", True))
    resident = row.size_bytes
    if not choices.vae_on_cpu:
        resident += comps.bytes_of(frozenset({"vae"}))
    if not choices.te_on_cpu:
        resident += comps.bytes_of(_ENCODER_ROLES)
    graph = max_vram(budget, offload, gib(resident))
    argv = sd_argv(ctx, arch, comps, choices, graph, guidance_for(name))

    offload_why = ("pinned by override" if choices.offload_pinned else
                   f"{format_g(model_gb)} + {format_g(COMPUTE_GB)} GiB compute "
                   f"{'>' if offload else '<='} budget")
    comment = [f"sd-server · {arch or '?'} · {format_g(model_gb)} GiB · budget {format_g(budget)} GiB, "
               f"max-vram {format_g(graph)}, offload={'true' if offload else 'false'} ({offload_why})",
               *_component_lines(row.id, arch, meta.has_baked_encoders, comps)]
    memory = _memory(round(budget * GIB), resident, comps, choices)
    footprint = Footprint(engine=ENGINES[Engine.SD].label, vram=memory.vram, disk=row.size_bytes, memory=memory)
    metadata: list[tuple[str, MetaValue]] = [
        ("backend", ctx.backend.backend_id), ("engine", footprint.engine), ("arch", arch),
        ("size_gb", footprint.disk_gb), ("est_vram_gb", footprint.vram_gb), ("max_vram", graph), ("offload", offload)]
    inputs = ("text", "image") if is_reference_edit(name) else ("text",)
    entry = Entry(id=row.id, argv=argv, comment=tuple(comment), metadata=tuple(metadata),
                  capabilities=Capabilities(inputs=inputs, outputs=("image",)), ttl=ctx.ttl,
                  check_endpoint="/", unlisted=bool(ov and ov.unlisted), footprint=footprint, estimate=memory)
    notes = (f"backend {ctx.backend.backend_id} ({ctx.backend.why})",
             f"budget {format_g(budget)} GiB = "
             + ("override vram_budget_gb" if ov is not None and ov.vram_budget_gb
                else f"{format_g(ctx.budget_gb)} - {format_g(OVERHEAD_GB)} overhead"),
             f"resident {format_g(size_gb(resident))} GiB (model"
             + ("" if choices.vae_on_cpu else " + VAE") + ("" if choices.te_on_cpu else " + text encoders") + ")",
             f"components ({comps.arm}): " + (", ".join(f"{r}={p}" for r, p, _ in comps.present) or "none"))
    return Plan(model_id=row.id, entries=(entry,), notes=notes)


def _memory(vram: int, resident: int, comps: Components, choices: SdChoices) -> MemoryRecord:
    """The memory record: the resident weights on the GPU and the rest of the charge as compute;
    in host RAM the components kept on the CPU, and under --offload-to-cpu the weights too (sd.cpp
    keeps them in RAM and moves each stage's onto the GPU to run it)."""
    kept_on_cpu = ((comps.bytes_of(frozenset({"vae"})) if choices.vae_on_cpu else 0)
                   + (comps.bytes_of(_ENCODER_ROLES) if choices.te_on_cpu else 0))
    if choices.offload:
        return flat_record(vram, 0, kept_on_cpu + resident)
    return flat_record(vram, resident, kept_on_cpu)


def _component_lines(model_id: str, arch: str, baked: bool, comps: Components) -> list[str]:
    """The comment lines on the model's text encoders and VAE: baked in, missing, or which."""
    lines = []
    if is_full_checkpoint(arch) and baked:
        lines.append("full checkpoint (-m): text encoders and VAE are baked in")
    elif is_full_checkpoint(arch):
        lines.append(unet_only_warning(model_id))
    elif comps.present:
        lines.append(f"{comps.arm} components: "
                     + ", ".join(f"{role} {os.path.basename(path)}" for role, path, _ in comps.present))
    if comps.missing:
        roles = ", ".join(f"{role} ({why})" for role, why in comps.missing)
        lines.append(f"WARNING: {model_id} needs [{roles}]; declare them under `encoders:` in swapgen.yaml "
                     f"or in its override - generation fails until then")
    return lines


def sd_argv(ctx: EmitContext, arch: str, comps: Components, choices: SdChoices, graph: float,
            guidance: float | None) -> tuple[str, ...]:
    """The command line in the module docstring's order; groups set by extra_args are dropped."""
    row, ov, s = ctx.row, ctx.override, ctx.settings
    model_flag = "-m" if is_full_checkpoint(arch) else "--diffusion-model"
    groups: list[tuple[str, ...]] = [(ctx.backend.exe or ENGINES[Engine.SD].exe,), (model_flag, row.path), ("-l", HOST),
                                     ("--listen-port", "${PORT}"), ("--max-vram", format_g(graph))]
    flags = dict(ROLE_FLAGS)
    groups += [(flags[role], path) for role, path, _ in comps.present]
    lora_dir = _pick(ov, "lora_dir", None)
    lora_dir = os.path.expanduser(lora_dir.strip()) if lora_dir else os.path.dirname(row.path)
    if (reason := unsafe_arg_reason(lora_dir)) is not None:
        raise ModelError(f"lora_dir {lora_dir!r} cannot be passed safely: {reason}")
    groups.append(("--lora-model-dir", lora_dir))
    if choices.diffusion_fa:
        groups.append(("--diffusion-fa",))
    if choices.vae_tiling:
        groups.append(("--vae-tiling",))
    threads = _pick(ov, "threads", s.threads)
    if threads:
        groups.append(("-t", str(threads)))
    placement = ",".join(p for p, on in (("te=cpu", choices.te_on_cpu), ("vae=cpu", choices.vae_on_cpu)) if on)
    if placement:
        groups.append(("--backend", placement))
    if guidance is not None:
        groups.append(("--guidance", format_g(guidance)))
    if choices.offload:
        groups += [("--offload-to-cpu",), ("--vae-on-cpu",)]
    for field, flag in (("steps", "--steps"), ("cfg_scale", "--cfg-scale"), ("sampling_method", "--sampling-method"),
                        ("width", "--width"), ("height", "--height")):
        value = _pick(ov, field, None)
        if value is not None:
            groups.append((flag, format_g(value) if isinstance(value, float) else str(value)))
    extra = tuple(ov.extra_args) if ov is not None else ()
    replaced = _extra_knobs(extra)
    kept = [g for i, g in enumerate(groups) if i == 0 or FLAG_KNOBS.get(g[0]) not in replaced]
    return tuple(token for group in kept for token in group) + extra
