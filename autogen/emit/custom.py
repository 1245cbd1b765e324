"""A model in a format no engine swapgen knows loads (MLX, EXL2/EXL3, ONNX, OpenVINO, GGML),
claimed by an override that pins a backend row of kind `custom`.

swapgen knows nothing of that engine's flags, so it writes the least it can stand behind:

    <exe> <model path> <extra_args>

`extra_args` must carry `${PORT}` (how the engine takes its port is the user's to say:
`[--port, "${PORT}"]` for TabbyAPI or `mlx_lm.server`); without it llama-swap could not reach
the engine, and the model is skipped saying so. No sizing: the estimate is the file size.
"""

from __future__ import annotations

from autogen.emit.entry import Entry, Plan
from autogen.footprint import Footprint
from autogen.metadata.formats import FOREIGN_FORMATS
from autogen.numfmt import format_g
from autogen.resolve.context import EmitContext

PORT_MACRO = "${PORT}"


def emit_custom(ctx: EmitContext) -> Plan:
    row, ov = ctx.row, ctx.override
    extra = ov.extra_args if ov is not None else ()
    if not any(PORT_MACRO in arg for arg in extra):
        return Plan.skip(row.id, f"backend {ctx.backend.backend_id} is of kind custom: its port flag is yours to give; "
                                 f"put it in the override's extra_args, e.g. [--port, \"{PORT_MACRO}\"]")
    fmt = FOREIGN_FORMATS[row.foreign_format].name if row.foreign_format else row.format
    footprint = Footprint(engine=ctx.backend.engine, disk=row.size_bytes)
    entry = Entry(id=row.id, argv=(ctx.backend.exe, row.path, *extra),
                  comment=(f"custom · {fmt} · {format_g(footprint.disk_gb)} GiB · backend "
                           f"{ctx.backend.backend_id} ({ctx.backend.why}); command from extra_args, not sized",),
                  metadata=(("backend", ctx.backend.backend_id), ("engine", footprint.engine),
                            ("format", fmt), ("size_gb", footprint.disk_gb)),
                  ttl=ctx.ttl, unlisted=bool(ov and ov.unlisted), footprint=footprint)
    return Plan(model_id=row.id, entries=(entry,),
                notes=(f"backend {ctx.backend.backend_id} ({ctx.backend.why}): kind custom, command "
                       "= exe, model path, extra_args",))
