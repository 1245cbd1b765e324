#!/usr/bin/env python3
"""Record llama.cpp's own allocations into `llama_alloc_b11434.json`, the table the sizing tests
hold swapgen's llama-server estimates to. Not run by the tests; rerun it when llama.cpp moves.

What it does:

1. Writes GGUFs: the architecture files of the llama-memcheck tool (`make_arch_gguf.py`: each
   family's real KV structure at a tiny width), the families it lacks with its helpers (`LAYOUTS`:
   Gemma 4's per-layer widths, Llama 4's chunks) and, for the compute buffer across widths,
   headers of dense models at real widths whose tensor data is a sparse hole (llama.cpp checks
   the file size, never reads the zeros on a `-ngl 0` CPU load).
2. Starts `llama-server` (CPU build, `-ngl 0`) on each under each launch of `LAUNCHES` and parses
   the memory report it logs (the tool's `measure.py` parser): KV cache per part with its cells,
   recurrent state, compute buffer, context geometry.
3. Runs `llama-fit-params -m FILE -c N --fit-print on` (llama.cpp's own estimator, from the same
   build) where it exists and keeps its Host model/context/compute MiB.

Usage: record_llama_alloc.py WORK_DIR [--server PATH] [--fit-params PATH] [--only NAME ...] [--tool DIR]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: The llama-memcheck tool, next to the repository (`--tool` elsewhere, e.g. from a worktree).
TOOL = HERE.parents[2].parent / "shared" / "tools" / "llama-memcheck"
OUT = HERE / "llama_alloc_b11434.json"
MIB = 1 << 20


def _load(name: str, tool: Path = TOOL):
    spec = importlib.util.spec_from_file_location(name, tool / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


#: Launches: name → llama-server flags. `ws` ones are run on sliding-window models only.
LAUNCHES: dict[str, list[str]] = {
    "c4k": ["-c", "4096"],
    "c8k": ["-c", "8192"],
    "c32k": ["-c", "32768"],
    "c128k": ["-c", "131072"],
    "c8k-np1": ["-c", "8192", "--parallel", "1"],
    "c8k-np2": ["-c", "8192", "--parallel", "2"],
    "c9999-np3": ["-c", "9999", "--parallel", "3"],
    "c20000-np2-kvu": ["-c", "20000", "--parallel", "2", "--kv-unified"],
    "c8k-q8": ["-c", "8192", "-ctk", "q8_0", "-ctv", "q8_0", "-fa", "on"],
    "c8k-faoff": ["-c", "8192", "-fa", "off"],
    "c32k-faoff": ["-c", "32768", "-fa", "off"],
    "c8k-swafull": ["-c", "8192", "--swa-full"],
}
SWA_ONLY = {"c8k-swafull"}
#: Launches for the width table (compute buffer from 4k to 128k).
WIDTH_LAUNCHES = ["c4k", "c32k", "c128k", "c8k-np1", "c8k-faoff", "c32k-faoff"]
#: MoE models at real width and depth, asked of llama-fit-params only: llama-server's mmap load
#: reads every page of the file (tens of GB of a sparse hole), the estimator none of them.
FIT_ONLY = {"w-qwen3moe-30b-48l", "w-qwen3moe-235b"}

#: Dense models at real widths: (name, arch, n_embd, n_ff, n_head, n_kv, head_dim, vocab, layers,
#: trained ctx, sliding window, pattern).
WIDTHS = [
    ("w-llama-1b", "llama", 2048, 8192, 32, 8, 64, 128256, 2, 131072, 0, 0),
    ("w-llama-8b", "llama", 4096, 14336, 32, 8, 128, 128256, 2, 131072, 0, 0),
    ("w-llama-70b", "llama", 8192, 28672, 64, 8, 128, 128256, 2, 131072, 0, 0),
    ("w-qwen3-4b", "qwen3", 2560, 9728, 32, 8, 128, 151936, 2, 40960, 0, 0),
    ("w-qwen3-32b", "qwen3", 5120, 25600, 64, 8, 128, 151936, 2, 40960, 0, 0),
    ("w-mistral-small", "llama", 5120, 32768, 32, 8, 128, 131072, 2, 131072, 0, 0),
    ("w-gemma3-12b", "gemma3", 3840, 15360, 16, 8, 256, 262208, 6, 131072, 1024, 6),
    ("w-gemma3-27b", "gemma3", 5376, 21504, 32, 16, 128, 262208, 6, 131072, 1024, 6),
    ("w-qwen3moe-30b", "qwen3moe", 2048, 6144, 32, 4, 128, 151936, 2, 40960, 0, 0, (128, 8, 768)),
    # every layer of Qwen3-30B-A3B and of Qwen3-235B-A22B (FIT_ONLY)
    # a header without `expert_feed_forward_length`, as some converters write it
    ("w-qwen3moe-30b-nokey", "qwen3moe", 2048, 6144, 32, 4, 128, 151936, 2, 40960, 0, 0, (128, 8, 768, False)),
    ("w-qwen3moe-30b-48l", "qwen3moe", 2048, 6144, 32, 4, 128, 151936, 48, 40960, 0, 0, (128, 8, 768)),
    ("w-qwen3moe-235b", "qwen3moe", 4096, 12288, 64, 4, 128, 151936, 94, 40960, 0, 0, (128, 8, 1536)),
]


def width_spec(mc, name, arch, n_embd, n_ff, n_head, n_kv, hd, vocab, layers, ctx, swa, pattern, moe=None):
    hp = {"context_length": ctx, "embedding_length": n_embd, "block_count": layers,
          "feed_forward_length": n_ff, "attention.head_count": n_head, "attention.head_count_kv": n_kv,
          "attention.key_length": hd, "attention.value_length": hd,
          "attention.layer_norm_rms_epsilon": 1e-6, "rope.freq_base": 1000000.0}
    if swa:
        hp["attention.sliding_window"] = swa
        hp["attention.sliding_window_pattern"] = pattern
    if moe:
        hp.update({"expert_count": moe[0], "expert_used_count": moe[1]})
        if len(moe) < 4 or moe[3]:  # (…, False): no key; llama.cpp then takes n_ff / n_expert_used
            hp["expert_feed_forward_length"] = moe[2]
    s = mc.Spec(arch, f"{name}: n_embd {n_embd}, n_ff {n_ff}, {n_head} heads / {n_kv} KV x {hd}, vocab {vocab}",
                hp, vocab=vocab, zero=True, stem=name)
    mc._embed_out(s, n_embd, tied=True)
    for i in range(layers):
        p = f"blk.{i}."
        s.t(p + "attn_norm.weight", n_embd)
        mc._qkvo(s, i, n_embd, n_head, n_kv, hd)
        if arch in ("qwen3", "qwen3moe", "gemma3"):
            s.t(p + "attn_q_norm.weight", hd)
            s.t(p + "attn_k_norm.weight", hd)
        if arch == "gemma3":
            s.t(p + "post_attention_norm.weight", n_embd)
            s.t(p + "post_ffw_norm.weight", n_embd)
        s.t(p + "ffn_norm.weight", n_embd)
        if moe:
            mc._moe(s, i, n_embd, moe[2], moe[0])
        else:
            mc._swiglu(s, i, n_embd, n_ff)
    return s


def gemma4_spec(mc):
    """Gemma 4's layout at a tiny width: 5 sliding layers of 2 KV heads × 64 for 1 full one of
    1 × 128 (per-layer head widths and KV heads), window 512, the pattern as a per-layer array."""
    n_embd, n_layer, n_head = 256, 12, 4
    pattern = [i % 6 != 5 for i in range(n_layer)]
    kv = [2 if sliding else 1 for sliding in pattern]
    s = mc.Spec("gemma4", "Gemma-4 layout (sliding 2 KV heads x 64, full 1 x 128, window 512)", {
        "context_length": 131072, "embedding_length": n_embd, "block_count": n_layer,
        "feed_forward_length": 512, "attention.head_count": n_head, "attention.head_count_kv": kv,
        "attention.key_length": 128, "attention.value_length": 128,
        "attention.key_length_swa": 64, "attention.value_length_swa": 64,
        "rope.dimension_count": 128, "rope.dimension_count_swa": 64,
        "attention.sliding_window": 512, "attention.sliding_window_pattern": pattern,
        "attention.layer_norm_rms_epsilon": 1e-6, "rope.freq_base": 1000000.0, "rope.freq_base_swa": 10000.0,
        "embedding_length_per_layer_input": 0}, stem="gemma4")
    mc._embed_out(s, n_embd, tied=True)
    for i in range(n_layer):
        p, hd = f"blk.{i}.", 64 if pattern[i] else 128
        s.t(p + "attn_norm.weight", n_embd)
        mc._qkvo(s, i, n_embd, n_head, kv[i], hd)
        s.t(p + "attn_q_norm.weight", hd)
        s.t(p + "attn_k_norm.weight", hd)
        s.t(p + "post_attention_norm.weight", n_embd)
        if i == pattern.index(False):  # the full layers' proportional rope, shared by all of them
            s.t("rope_freqs.weight", hd // 2, f32=True)
        s.t(p + "ffn_norm.weight", n_embd)
        mc._swiglu(s, i, n_embd, 512)
        s.t(p + "post_ffw_norm.weight", n_embd)
    return s


def llama4_spec(mc):
    """Llama 4's layout at a tiny width: chunked attention (n_swa 8192) on three layers of four,
    MoE with a shared expert on every other layer (src/models/llama4.cpp)."""
    n_embd, n_layer, n_head, n_kv, hd, n_exp, n_ff_exp = 256, 8, 8, 2, 64, 2, 128
    s = mc.Spec("llama4", "Llama-4 layout (chunked 3 of 4 layers, 2 experts every other layer)", {
        "context_length": 1 << 20, "embedding_length": n_embd, "block_count": n_layer,
        "feed_forward_length": 512, "attention.head_count": n_head, "attention.head_count_kv": n_kv,
        "attention.key_length": hd, "attention.value_length": hd, "rope.dimension_count": hd,
        "attention.layer_norm_rms_epsilon": 1e-5, "rope.freq_base": 500000.0,
        "expert_count": n_exp, "expert_used_count": 1, "expert_feed_forward_length": n_ff_exp,
        "interleave_moe_layer_step": 2}, stem="llama4")
    mc._embed_out(s, n_embd)
    for i in range(n_layer):
        p = f"blk.{i}."
        s.t(p + "attn_norm.weight", n_embd)
        mc._qkvo(s, i, n_embd, n_head, n_kv, hd)
        s.t(p + "ffn_norm.weight", n_embd)
        if (i + 1) % 2:
            mc._swiglu(s, i, n_embd, 512)
            continue
        mc._moe(s, i, n_embd, n_ff_exp, n_exp)
        for part, ne in (("gate", (n_embd, n_ff_exp)), ("up", (n_embd, n_ff_exp)), ("down", (n_ff_exp, n_embd))):
            s.t(p + f"ffn_{part}_shexp.weight", *ne)
    return s


#: Families the tool's set lacks, written here with its helpers: name → spec builder.
LAYOUTS = {"gemma4": gemma4_spec, "llama4": llama4_spec}


def write_sparse(mc, spec, out: Path) -> Path:
    """The GGUF header of `spec` with its tensor data left as a hole of the right length."""
    # lazy: the recorder's other commands run without numpy or gguf installed
    import gguf  # noqa: PLC0415
    import numpy as np  # noqa: PLC0415

    tokens, scores, types = mc.build_vocab(spec.vocab)
    w = gguf.GGUFWriter(str(out), spec.arch)
    w.add_string("general.type", "model")
    w.add_string("general.name", f"memcheck-{spec.stem}")
    w.add_string("general.description", spec.mirrors)
    w.add_uint32("general.file_type", int(gguf.LlamaFileType.MOSTLY_F16))
    for k, v in spec.hp.items():
        mc._add_kv(w, f"{spec.arch}.{k}", v)
    w.add_string("tokenizer.ggml.model", "llama")
    w.add_array("tokenizer.ggml.tokens", tokens)
    w.add_array("tokenizer.ggml.scores", scores)
    w.add_array("tokenizer.ggml.token_type", types)
    for key, value in (("bos", 1), ("eos", 2), ("unknown", 0), ("eot", 4)):
        w.add_uint32(f"tokenizer.ggml.{key}_token_id", value)
    w.add_string("tokenizer.chat_template", mc.CHAT_TEMPLATE)
    total = 0
    for name, ne, dtype in spec.tensors:
        np_dtype = np.float16 if dtype == "f16" else np.float32
        nbytes = int(np.prod(ne)) * np.dtype(np_dtype).itemsize
        w.add_tensor_info(name, tuple(reversed(ne)), np.dtype(np_dtype), nbytes)
        total += -(-nbytes // 32) * 32
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()
    with open(out, "r+b") as f:
        f.seek(0, 2)
        f.truncate(f.tell() + 64 + total)
    return out


FIT_RX = re.compile(r"^(Host|\S+)\s+(\d+)\s+(\d+)\s+(\d+)\s*$")


def fit_params(binary: str, model: Path, args: list[str]) -> dict | None:
    proc = subprocess.run([binary, "-m", str(model), *args, "--fit-print", "on"], capture_output=True,
                          text=True, timeout=300)
    for line in (proc.stdout + proc.stderr).splitlines():
        if m := FIT_RX.match(line.strip()):
            return {"device": m.group(1), "model_mib": int(m.group(2)), "context_mib": int(m.group(3)),
                    "compute_mib": int(m.group(4))}
    return None


#: Header keys swapgen reads that the tool's key list lacks: one expert's FFN width, the
#: sliding layers' head widths.
EXTRA_DIMS = ("expert_feed_forward_length", "attention.key_length_swa", "attention.value_length_swa")


def gguf_dims(ms, model: Path) -> dict:
    """The tool's header dims, with `EXTRA_DIMS`."""
    import gguf  # noqa: PLC0415 - as in write_sparse

    dims = ms.gguf_dims(model)
    fields = gguf.GGUFReader(str(model)).fields
    for key in EXTRA_DIMS:
        field = fields.get(f"{dims['arch']}.{key}")
        if field is not None:
            dims[key] = int(field.parts[-1][0])
    return dims


def record(ms, model: Path, name: str, launch: str, server: str, logs: Path, fitp: str | None,
           reuse: bool = False) -> dict:
    args = LAUNCHES[launch]
    if name in FIT_ONLY:
        return {"model": name, "launch": launch, "args": args, "status": "fit-params only",
                "gguf": gguf_dims(ms, model), "fit_params": fit_params(fitp, model, args) if fitp else None}
    log = logs / f"{name}__{launch}.log"
    parsed = ms.parse_log(log.read_text(errors="replace")) if log.is_file() and reuse else {}
    if parsed.get("compute_bytes"):
        status = {"status": "loaded"}  # the log of an earlier run of this same launch
    else:
        status = ms.run_server(server, model, args, log, 180.0)
        parsed = ms.parse_log(log.read_text(errors="replace"))
    rec = {"model": name, "launch": launch, "args": args, "status": status["status"],
           "gguf": gguf_dims(ms, model),
           "ctx": parsed["ctx"], "flash_attn": parsed["flash_attn_effective"],
           "kv_caches": [{k: c[k] for k in ("part", "bytes", "cells", "layers", "n_seq_max", "n_stream",
                                            "type_k", "type_v")} for c in parsed["kv_caches"]],
           "kv_bytes": parsed["kv_bytes"], "kv_swa_bytes": parsed["kv_swa_bytes"],
           "kv_swa_cells": parsed["kv_swa_cells"], "kv_full_cells": parsed["kv_full_cells"],
           "rs": [{k: r[k] for k in ("bytes", "cells", "layers")} for r in parsed["rs"]],
           "rs_bytes": parsed["rs_bytes"], "compute_bytes": parsed["compute_bytes"],
           "output_bytes": parsed["output_bytes"], "errors": parsed["errors"][-3:]}
    if fitp:
        fit_args = [a for a in args if a != "--swa-full"] + (["--swa-full"] if "--swa-full" in args else [])
        rec["fit_params"] = fit_params(fitp, model, fit_args)
    print(f"{name:20s} {launch:15s} {status['status']:7s} KV {rec['kv_bytes'] / MIB:9.2f} "
          f"(swa {rec['kv_swa_bytes'] / MIB:8.2f}, cells {rec['kv_swa_cells']}) RS {rec['rs_bytes'] / MIB:7.2f} "
          f"compute {rec['compute_bytes'] / MIB:8.2f} fit {rec.get('fit_params')}", flush=True)
    return rec


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("work", help="folder for the GGUFs and server logs")
    ap.add_argument("--server", default="/tmp/llama-e2e/bin/llama-server")
    ap.add_argument("--fit-params", default="/tmp/llama-e2e/build/bin/llama-fit-params")
    ap.add_argument("--only", action="append", help="only these model names")
    ap.add_argument("--tool", default=str(TOOL), help="the llama-memcheck folder")
    ap.add_argument("--out", default=str(OUT), help=f"the JSON table (default {OUT.name})")
    ap.add_argument("--fit-tiny-only", action="store_true",
                    help="run llama-fit-params on the tiny architecture files only (it reads the whole vocab)")
    ap.add_argument("--reuse-logs", action="store_true", help="parse a launch's earlier log instead of rerunning it")
    args = ap.parse_args(argv)
    mc, ms = _load("make_arch_gguf", Path(args.tool)), _load("measure", Path(args.tool))
    work = Path(args.work)
    models, logs = work / "models", work / "logs"
    models.mkdir(parents=True, exist_ok=True)
    logs.mkdir(parents=True, exist_ok=True)
    fitp = args.fit_params if Path(args.fit_params).is_file() else None
    jobs: list[tuple[Path, str, list[str]]] = []
    for arch, make in mc.SPECS.items():
        path = models / mc.file_name(arch)
        if not path.is_file():
            mc.write_gguf(make(), path)
        swa = bool(make().hp.get("attention.sliding_window"))
        jobs.append((path, arch, [n for n in LAUNCHES if swa or n not in SWA_ONLY]))
    for name, make in LAYOUTS.items():
        path = models / mc.file_name(name)
        if not path.is_file():
            mc.write_gguf(make(mc), path)
        jobs.append((path, name, list(LAUNCHES)))
    for row in WIDTHS:
        path = models / f"memcheck-{row[0]}-F16.gguf"
        if not path.is_file():
            write_sparse(mc, width_spec(mc, *row), path)
        jobs.append((path, row[0], WIDTH_LAUNCHES))
    out = Path(args.out)
    old = json.loads(out.read_text()) if out.is_file() else {"records": []}
    records = [r for r in old["records"] if args.only and r["model"] not in args.only]
    for path, name, launches in jobs:
        if args.only and name not in args.only:
            continue
        estimator = None if name.startswith("w-") and args.fit_tiny_only else fitp
        records += [record(ms, path, name, launch, args.server, logs, estimator, args.reuse_logs)
                    for launch in launches]
    doc = {"llama_server_version": ms.server_version(args.server),
           "how": "tests/data/record_llama_alloc.py: llama-server CPU build, -ngl 0, byte counts are "
                  "llama.cpp's logged MiB (2 decimals) x 2**20; fit_params = llama-fit-params --fit-print on (MiB)",
           "records": records}
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {out} ({len(records)} records)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
