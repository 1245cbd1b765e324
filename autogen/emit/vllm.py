"""The vLLM emitter: one `vllm serve` entry per GGUF file or HF folder, sized from the budget.

The numbers (`--max-model-len`, the KV-cache size, `--gpu-memory-utilization`, the estimate)
come from `sizing.vllm.size_vllm`; what `extra_args` pin or replace, from `vllm_args`. This
module turns them into the argv, the comment, the metadata and the `swapgen show` notes. A
`--max-model-len` or `--tensor-parallel-size` in `extra_args` is a pin (vLLM takes the last
value, and extra_args come last), so our own flag is left out.

Argv order (docs/maintainers/sizing.md#vllm-argv): exe, `serve <path>`, `--host`, `--port`, `--served-model-name`,
`--quantization gguf` (GGUF only), `--gpu-memory-utilization`, then — new against the Go
original's code, placed where its design note suggests — `--kv-cache-memory-bytes`, then `--max-model-len`,
`--tokenizer`, `--enable-auto-tool-choice --tool-call-parser`, `--tensor-parallel-size`,
`--enable-lora --lora-modules <name>=<path>… --max-lora-rank <r>` (PEFT adapters whose base
this folder is; each adapter's name is an alias of the entry, so a request for it reaches this
vLLM, which serves the adapter under that name), `extra_args`.

Where we differ from the original: the path is passed as is (backslashes are not turned into
`/`; quoting is the renderer's job).
"""

from __future__ import annotations

import json
import re

import attrs

from autogen.cmdline import HOST, quote_arg
from autogen.discovery.rows import Adapter
from autogen.discovery.walk import SHARD_NAME
from autogen.emit.entry import Capabilities, Entry, MetaValue, Plan
from autogen.emit.toolparsers import ParserChoice, choose_tool_parser
from autogen.engines import ENGINES, Engine
from autogen.errors import ModelError
from autogen.flags.vllm import ExtraArgs
from autogen.footprint import DeviceMemory, Footprint, MemoryRecord, Source
from autogen.numfmt import format_g, gib, gib_text, size_gb
from autogen.resolve.context import EmitContext
from autogen.sizing.vllm import VllmSizing, size_vllm
from autogen.versions import format_version, parse_version

#: GGUF left vLLM core in 0.24.0 for the `vllm-gguf-plugin` package (vllm-project/vllm#39612).
GGUF_PLUGIN_SINCE = (0, 24)
#: The ranks `--max-lora-rank` accepts (vllm/config/lora.py `MaxLoRARanks`), and its default.
MAX_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
DEFAULT_LORA_RANK = 16


def peft_adapters(ctx: EmitContext) -> tuple[Adapter, ...]:
    return tuple(a for a in ctx.row.loras if a.kind == "peft")


def lora_rank(adapters: tuple[Adapter, ...]) -> int:
    """The smallest rank vLLM accepts that holds every adapter's (vLLM refuses to load an
    adapter above `--max-lora-rank`)."""
    want = max((a.rank for a in adapters), default=0) or DEFAULT_LORA_RANK
    return next((r for r in MAX_LORA_RANKS if r >= want), MAX_LORA_RANKS[-1])


def lora_slot_bytes(adapters: tuple[Adapter, ...], rank: int) -> int:
    """GPU memory of one adapter slot (vLLM's default `--max-loras 1`), from the largest
    adapter's file scaled to the slot's rank."""
    return max((a.size_bytes * rank // (a.rank or rank) for a in adapters), default=0)


def lora_args(adapters: tuple[Adapter, ...]) -> list[str]:
    """`--enable-lora --lora-modules name=path … --max-lora-rank r`; a path with a comma is
    written as JSON, the other form vLLM's LoRAParserAction reads
    (vllm/entrypoints/common/cli_args.py)."""
    if not adapters:
        return []
    modules = [f"{a.name}={a.path}" if "," not in a.path and "=" not in a.name
               else json.dumps({"name": a.name, "path": a.path}) for a in adapters]
    return ["--enable-lora", "--lora-modules", *modules, "--max-lora-rank", str(lora_rank(adapters))]

def is_split_gguf(ctx: EmitContext) -> bool:
    """A shard set (or a lone shard of one): served by llama.cpp only."""
    return ctx.row.format == "gguf" and (ctx.row.is_split or bool(SHARD_NAME.search(ctx.row.path)))


def model_names(ctx: EmitContext) -> tuple[str, ...]:
    """What else names the model for the tool-parser family rules: the file or folder, its parent
    folder (the HF cache's repo) and GGUF `general.name`."""
    name = ctx.meta.name if ctx.meta is not None else ""
    return (re.split(r"[/\\]", ctx.row.path.rstrip("/\\"))[-1], ctx.row.repo, name)


def served_template(ctx: EmitContext, extra: ExtraArgs) -> bool | None:
    """Does vLLM serve the model with a chat template? A GGUF's own answers for it unless
    `vllm_tokenizer` or a `--chat-template` in `extra_args` brings another; an HF folder's lives
    in `tokenizer_config.json`, which we do not read (None = not known)."""
    ov = ctx.override
    elsewhere = extra.sets_template or (ov is not None and bool((ov.vllm_tokenizer or "").strip()))
    if ctx.meta is None or ctx.meta.source != "gguf" or elsewhere:
        return None
    return ctx.meta.has_chat_template


def vllm_argv(ctx: EmitContext, sizing: VllmSizing, parser: ParserChoice, port: str = "${PORT}") -> tuple[str, ...]:
    """The command line (docs/maintainers/sizing.md#vllm-argv); pure, shared by YAML and `swapgen show`.
    Our `--max-model-len`, `--tensor-parallel-size` and parser flags give way to extra_args'.
    A sleeping model's daemon listens on its own `port` with `--enable-sleep-mode`."""
    ov, extra = ctx.override, sizing.extra
    argv = [ctx.backend.exe or ENGINES[Engine.VLLM].exe, "serve", ctx.row.path, "--host", HOST, "--port", port,
            "--served-model-name", ctx.row.id]
    if ctx.row.format == "gguf":
        argv += ["--quantization", "gguf"]
    argv += ["--gpu-memory-utilization", sizing.util_flag]
    if sizing.kv_cache_bytes is not None:
        argv += ["--kv-cache-memory-bytes", str(sizing.kv_cache_bytes)]
    if extra.max_model_len is None:
        argv += ["--max-model-len", str(sizing.max_model_len)]
    tokenizer = (ov.vllm_tokenizer or "").strip() if ov else ""
    if tokenizer:
        argv += ["--tokenizer", tokenizer]
    if parser.parser and not extra.sets_parser:
        argv += ["--enable-auto-tool-choice", "--tool-call-parser", parser.parser]
    if sizing.tensor_parallel > 1 and extra.tensor_parallel is None:
        argv += ["--tensor-parallel-size", str(sizing.tensor_parallel)]
    if ctx.nodes is not None:
        argv += node_args(ctx, 0)
    argv += lora_args(peft_adapters(ctx))
    if port != "${PORT}" and SLEEP_FLAG not in (ov.extra_args if ov else ()):
        argv.append(SLEEP_FLAG)
    return (*argv, *(ov.extra_args if ov else ()))


#: vLLM's flag that puts weights and KV cache in its cuMem pool, which `/sleep` empties.
SLEEP_FLAG = "--enable-sleep-mode"
#: `/sleep` and `/wake_up` exist only in vLLM's development mode
#: (vllm/entrypoints/launchers/api_server/routers.py `register_api_routers`).
DEV_MODE = "VLLM_SERVER_DEV_MODE=1"


#: Why a sleeping model's level is always 1, for `swapgen show` (docs/maintainers/vllm-sleep.md).
LEVEL_NOTE = ("level 1 always: vllm-wrapper sends the level in the request body and vLLM 0.33 reads the query "
              "string, and a model woken from level 2 would have no weights")


def sleeping(ctx: EmitContext) -> bool:
    return ctx.sleeper is not None and ctx.sleeper.level is not None


def wrapper_argv(ctx: EmitContext, daemon: tuple[str, ...]) -> tuple[str, ...]:
    """`cmd` of a sleeping model: llama-swap's `vllm-wrapper serve` (cmd/vllm-wrapper/main.go
    `serveCmd`) wakes the daemon on its port, or starts it with the argv after `--` and waits as
    long as llama-swap does (its own default, 120 s, kills a vLLM still loading), then proxies
    `${PORT}` to it."""
    return (ctx.settings.vllm_wrapper, "serve", "--vllm-url", f"http://{HOST}:{ctx.sleeper.port}",
            "--listen", f"{HOST}:${{PORT}}", "--wait-timeout", f"{ctx.settings.health_check_timeout}s", "--", *daemon)


def sleep_argv(ctx: EmitContext) -> tuple[str, ...]:
    """`cmdStop` of a sleeping model: `vllm-wrapper sleep` puts the daemon to sleep and then
    stops the serve process (`--stop-pid ${PID}`), which llama-swap would otherwise kill with
    the daemon in its process group. No `--sleep-level`: the wrapper sends it in the body, which
    vLLM never reads, so every sleep is level 1 (`resolve.sleep`)."""
    return (ctx.settings.vllm_wrapper, "sleep", "--vllm-url", f"http://{HOST}:{ctx.sleeper.port}",
            "--stop-pid", "${PID}")


def node_args(ctx: EmitContext, rank: int) -> list[str]:
    """The multi-node flags of node `rank` (0 = the head): pipeline parallel over the nodes, and
    Ray, or vLLM's own multiprocessing executor told the node count, this node's rank and the
    head's address (`ParallelConfig.nnodes`, `node_rank`, `master_addr`, vllm/config/parallel.py)."""
    nodes = ctx.nodes
    args = ["--pipeline-parallel-size", str(nodes.pipeline_parallel), "--distributed-executor-backend", nodes.backend]
    if nodes.backend == "mp":
        args += ["--nnodes", str(len(nodes.nodes)), "--node-rank", str(rank), "--master-addr", nodes.master_addr]
    return args


#: A Ray cluster's default port (`ray start --head`).
RAY_PORT = 6379


def worker_commands(ctx: EmitContext, head_argv: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """(host, shell command) that each node must run before the head's `vllm serve` can start;
    swapgen starts none of them (docs/gpu-hosts.md#a-model-across-hosts-multi-node-vllm). Ray: the head's cluster and
    each worker joining it. mp: each worker's headless `vllm serve` with the head's engine
    flags, its own rank and `--headless` (vllm/entrypoints/cli/serve.py `run_headless`)."""
    nodes = ctx.nodes
    if nodes.backend == "ray":
        head = nodes.nodes[0]
        join = f"ray start --address={nodes.master_addr}:{RAY_PORT} --block"
        return ((head.name, f"ray start --head --port={RAY_PORT}"), *((n.name, join) for n in nodes.nodes[1:]))
    served = ("--host", HOST, "--port", "${PORT}", "--served-model-name", ctx.row.id)
    engine = list(head_argv)
    for i in range(len(engine) - len(served) + 1):
        if tuple(engine[i:i + len(served)]) == served:
            del engine[i:i + len(served)]
            break
    engine = [a for a in engine if a not in ("--enable-auto-tool-choice",)]
    if "--tool-call-parser" in engine:
        i = engine.index("--tool-call-parser")
        del engine[i:i + 2]
    rank_at = engine.index("--node-rank") + 1
    out = []
    for rank, node in enumerate(nodes.nodes[1:], start=1):
        engine[rank_at] = str(rank)
        out.append((node.name, " ".join(quote_arg(a) for a in (*engine, "--headless"))))
    return tuple(out)


def emit_vllm(ctx: EmitContext) -> Plan:
    """One `vllm serve` entry, or a Skip for a split GGUF or a model vLLM could not start."""
    row, ov = ctx.row, ctx.override
    if is_split_gguf(ctx):
        reason = "vllm cannot load split gguf shards; merge them with llama-gguf-split --merge"
        return Plan.skip(row.id, reason)
    row_version = ctx.backend.row.version if ctx.backend.row is not None else ""
    version = parse_version(row_version)
    adapters = peft_adapters(ctx)
    slot = lora_slot_bytes(adapters, lora_rank(adapters))
    sized = attrs.evolve(ctx, row=attrs.evolve(row, size_bytes=row.size_bytes + slot)) if slot else ctx
    try:
        sizing = size_vllm(sized, version)
    except ModelError as exc:
        return Plan.skip(row.id, str(exc))
    parser = _parser(ctx, sizing, version)
    daemon = vllm_argv(ctx, sizing, parser, str(ctx.sleeper.port) if sleeping(ctx) else "${PORT}")
    argv = wrapper_argv(ctx, daemon) if sleeping(ctx) else daemon
    comment = _comment(ctx, sizing, parser, daemon, slot, version) + sleep_lines(ctx)
    used, estimate = _footprints(ctx, sizing, argv)
    footprint = Footprint(engine=ENGINES[Engine.VLLM].label, vram=sizing.est_vram if used is estimate else used.vram,
                          disk=sized.row.size_bytes, memory=used,
                          asleep=ctx.sleeper.gpu_bytes if sleeping(ctx) else 0)
    tools = bool(parser.parser) or sizing.extra.sets_parser
    entry = Entry(id=row.id, argv=argv, comment=tuple(comment), metadata=_metadata(ctx, sizing, parser, footprint),
                  capabilities=Capabilities(tools=True if tools else None, context=sizing.max_model_len),
                  ttl=ctx.ttl, unlisted=bool(ov and ov.unlisted), aliases=tuple(a.name for a in adapters),
                  footprint=footprint, estimate=estimate, context=sizing.context,
                  **({"cmd_stop": sleep_argv(ctx), "env": (DEV_MODE,),
                      "unload_timeout": ctx.sleeper.unload_timeout} if sleeping(ctx) else {}))
    notes = _notes(ctx, sizing, parser, row_version) + tuple(sleep_lines(ctx))
    if sleeping(ctx):
        notes += (LEVEL_NOTE,)
    if ctx.nodes is not None:
        notes += tuple(f"on {host}: {command}" for host, command in worker_commands(ctx, argv))
    return Plan(model_id=row.id, entries=(entry,), notes=notes)


def sleep_lines(ctx: EmitContext) -> list[str]:
    """What sleep mode does to this entry, for its comment and `swapgen show`
    (docs/vllm-sleep.md)."""
    lines = []
    if ctx.sleeper is not None:
        s = ctx.sleeper
        if s.level is None:
            lines.append(f"sleep mode asked, not used: {s.note}")
        else:
            lines += [f"sleeps between requests through vllm-wrapper: daemon on port {s.port}, {s.note}",
                      f"while asleep it keeps {gib_text(s.gpu_bytes)} on each of its GPUs (CUDA context and "
                      "graphs), charged to every model sharing the card",
                      f"unloadTimeout {s.unload_timeout}: llama-swap kills the daemon when a stop takes longer "
                      "(its 10 s wait for the daemon's output pipes, then the copy of the weights)"]
    return lines


def _parser(ctx: EmitContext, sizing: VllmSizing, version: tuple[int, ...] | None) -> ParserChoice:
    """The tool-call parser: a pin, the settings' table, then the built-in rules."""
    meta, ov = ctx.meta, ctx.override
    template = served_template(ctx, sizing.extra)
    markers = meta.chat_template_markers if template and meta.chat_template_scanned else None
    return choose_tool_parser(meta.arch if meta is not None else "", ctx.row.id, names=model_names(ctx),
                              has_chat_template=template, template_markers=markers,
                              vocab_size=meta.vocab_size if meta is not None else 0,
                              pin=ov.vllm_tool_parser if ov else None, table=ctx.settings.tool_parsers,
                              version=version)


def _comment(ctx: EmitContext, sizing: VllmSizing, parser: ParserChoice, argv: tuple[str, ...], slot: int,
             version: tuple[int, ...] | None) -> list[str]:
    """The comment lines: the sizing's choices with their reasons, the parser, nodes, LoRA, GGUF."""
    arch = ctx.meta.arch if ctx.meta is not None else ""
    comment = [f"vllm · {arch or '?'} · {format_g(size_gb(sizing.weights))} GiB · max-model-len "
               f"{sizing.max_model_len} ({sizing.ctx_note})",
               f"gpu-memory-utilization {sizing.util_flag} ({sizing.util_note})"]
    if sizing.kv_cache_bytes is not None:
        comment.append(f"kv-cache-memory-bytes {sizing.kv_cache_bytes} ({sizing.kv_cache_note})")
    else:
        comment.append(f"KV pool not pinned: {sizing.kv_cache_note}")
    if sizing.extra.sets_parser:
        comment.append("tool-call parser set by extra_args")
    elif parser.parser:
        comment.append(f"tool-call parser {parser.parser} ({parser.note})")
    else:
        comment.append(f"no tool-call parser ({parser.note}): vllm rejects requests carrying tools")
    if ctx.nodes is not None:
        comment.append(f"{len(ctx.nodes.nodes)} nodes over {ctx.nodes.backend}: tensor parallel "
                       f"{sizing.tensor_parallel} per node × pipeline parallel {sizing.pipeline_parallel}; "
                       "start the workers first:")
        comment += [f"on {host}: {command}" for host, command in worker_commands(ctx, argv)]
    if adapters := peft_adapters(ctx):
        comment.append(f"LoRA modules {', '.join(a.name for a in adapters)} (PEFT, max rank {lora_rank(adapters)}; "
                       f"one adapter slot of {gib_text(slot)} charged with the weights)")
    if ctx.row.format == "gguf" and (version is None or version >= GGUF_PLUGIN_SINCE):
        which = f"vLLM {format_version(version)}" if version else "vLLM 0.24 and newer"
        comment.append(f"{which} loads GGUF only with the vllm-gguf-plugin package installed")
    return comment


def _metadata(ctx: EmitContext, sizing: VllmSizing, parser: ParserChoice,
              footprint: Footprint) -> tuple[tuple[str, MetaValue], ...]:
    metadata: list[tuple[str, MetaValue]] = [
        ("backend", ctx.backend.backend_id), ("engine", footprint.engine),
        ("arch", ctx.meta.arch if ctx.meta is not None else ""), ("size_gb", footprint.disk_gb),
        ("max_model_len", sizing.max_model_len), ("gpu_util", sizing.gpu_util)]
    if sizing.kv_cache_bytes is not None:
        metadata.append(("kv_cache_bytes", sizing.kv_cache_bytes))
    if ctx.kv is not None and ctx.kv.bytes_per_token is not None:
        metadata.append(("kv_bytes_per_token", ctx.kv.bytes_per_token))
    metadata.append(("est_vram_gb", footprint.vram_gb))
    if parser.parser and not sizing.extra.sets_parser:
        metadata.append(("tool_parser", parser.parser))
    if ctx.nodes is not None:
        metadata.append(("nodes", ",".join(n.name for n in ctx.nodes.nodes)))
    return tuple(metadata)


def _footprints(ctx: EmitContext, sizing: VllmSizing, argv: tuple[str, ...]) -> tuple[MemoryRecord, MemoryRecord]:
    """(the entry's memory record, swapgen's estimate). Per GPU of the tensor × pipeline ranks: the
    weights' share, the overhead for activations, CUDA graphs and the runtime (the sizing's facts),
    and the KV-cache pool filling the rest of what vLLM takes (`--gpu-memory-utilization` × the
    card, or the footprint when there is no card reading); a measurement of this very command wins."""
    world = max(1, sizing.tensor_parallel * sizing.pipeline_parallel)
    total = sizing.est_vram
    model, compute = sizing.fact("weights").bytes // sizing.pooled_over, sizing.fact("overhead").bytes
    names = ([f"GPU{g.index}" for g in ctx.devices] if len(ctx.devices) == world and ctx.nodes is None
             else [f"GPU{i}" for i in range(world)])
    shares = [total // world + (total % world if i == 0 else 0) for i in range(world)]
    estimate = MemoryRecord(source=Source.ESTIMATE, devices=tuple(
        DeviceMemory(name, model, max(0, share - model - compute), min(compute, max(0, share - model)))
        for name, share in zip(names, shares, strict=True)))
    for reading in ctx.readings:
        if reading.argv == argv:
            return reading.engine, estimate
    return estimate, estimate


def _notes(ctx: EmitContext, sizing: VllmSizing, parser: ParserChoice, row_version: str) -> tuple[str, ...]:
    """Every sizing number with its reason, for `swapgen show`: the sizing's facts, one line each.
    The budget and the card head the report (`show.budget_text`), so they are not repeated here."""
    lines = [f"vLLM version {row_version or 'unknown (taken as current)'}"]
    if ctx.nodes is not None:
        lines.append(f"nodes {ctx.nodes.label} (tensor parallel {sizing.tensor_parallel} × pipeline parallel "
                     f"{sizing.pipeline_parallel}, sized per GPU)")
    elif ctx.devices:
        devices = ",".join(str(g.index) for g in ctx.devices)
        lines.append(f"tensor parallel {sizing.tensor_parallel} over devices {devices}, sized per GPU")
    lines.append(f"max-model-len {sizing.max_model_len}: {sizing.ctx_note}")
    lines += [fact.line for fact in sizing.facts if fact.name != "budget"]
    if sizing.state_bytes:
        per_seq = " for one sequence" if sizing.layout is None else ""
        lines.append(f"KV includes {gib(sizing.state_bytes):.3f} GiB of recurrent state{per_seq} "
                     "(vLLM starts only if one request of max-model-len fits)")
    if sizing.layout is not None:
        lines.append("vLLM's start-up check (kv_cache_planning._max_memory_usage_bytes_from_groups):")
        lines += [f"  {part}" for part in sizing.layout.parts(sizing.max_model_len)]
    else:
        lines.append("vLLM's start-up check: every layer charged at max-model-len "
                     "(layers of different widths are not grouped here; never less than vLLM)")
    if sizing.kv_cache_bytes is None:
        lines.append(f"no --kv-cache-memory-bytes: {sizing.kv_cache_note}")
    lines.append(f"gpu-memory-utilization {sizing.util_flag}: {sizing.util_note}")
    lines.append(f"tool-call parser {parser.parser or 'none'}: {parser.note}")
    return tuple(lines)
