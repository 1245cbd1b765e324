"""The segmentation emitter: one `sam3_server` entry per SAM2/SAM3/EdgeTAM `.ggml` file.

Rules: docs/maintainers/classes.md#segmentation-sam and worked example N there. A `.ggml` has no GGUF header, so
there is no metadata: the arch label comes from the file name. Argv:

    <exe> --model <file> --host 127.0.0.1 --port ${PORT} [--threads <n>] --no-gpu <extra_args>

`--no-gpu`: the Go original's router appended it at spawn to every `.ggml` model (its Vulkan SAM
backend returned garbage masks); with no spawn hook in upstream llama-swap it is in `cmd`, which
also makes the zero VRAM charge and the `sam` coexistence group true.
"""

from __future__ import annotations

import os
import re

from autogen.cmdline import HOST
from autogen.emit.entry import Capabilities, Entry, Plan
from autogen.engines import ENGINES, Engine
from autogen.footprint import Footprint, flat_record
from autogen.numfmt import format_g, size_gb
from autogen.resolve.context import EmitContext

_FAMILY = re.compile(r"(?i)sam3|sam2(?:\.\d)?|edgetam")


def sam_arch(path: str) -> str:
    """"sam2.1", "sam3", "edgetam" from the file name; "sam" when only `hiera` names it."""
    m = _FAMILY.search(os.path.basename(path))
    return m.group(0).lower() if m else "sam"


def emit_sam(ctx: EmitContext) -> Plan:
    row, ov, s = ctx.row, ctx.override, ctx.settings
    extra = tuple(ov.extra_args) if ov is not None else ()
    argv = [ctx.backend.exe or ENGINES[Engine.SAM].exe, "--model", row.path, "--host", HOST, "--port", "${PORT}"]
    if s.threads:  # the fleet setting only, as the Go original (docs/maintainers/classes.md#segmentation-sam)
        argv += ["--threads", str(s.threads)]
    if "--no-gpu" not in extra:
        argv.append("--no-gpu")
    arch = sam_arch(row.path)
    size = size_gb(row.size_bytes)
    comment = [f"sam3_server · {arch} · {format_g(size)} GiB · SAM segmentation, {os.path.basename(row.path)}, "
               f"CPU (--no-gpu, no VRAM charge)"]
    footprint = Footprint(engine=ENGINES[Engine.SAM].label, disk=row.size_bytes,
                          memory=flat_record(0, 0, row.size_bytes))
    metadata = (("backend", ctx.backend.backend_id), ("engine", footprint.engine), ("arch", arch),
                ("size_gb", footprint.disk_gb), ("segmentation", True))
    entry = Entry(id=row.id, argv=tuple(argv) + extra, comment=tuple(comment), metadata=metadata,
                  capabilities=Capabilities(inputs=("image",), outputs=("image",)), ttl=ctx.ttl,
                  check_endpoint="/health", unlisted=bool(ov and ov.unlisted), coexist_group="sam",
                  footprint=footprint, estimate=footprint.memory)
    return Plan(model_id=row.id, entries=(entry,), notes=(f"backend {ctx.backend.backend_id} ({ctx.backend.why})",))
