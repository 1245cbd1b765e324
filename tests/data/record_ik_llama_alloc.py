#!/usr/bin/env python3
"""Record ik_llama.cpp's own allocations into `ik_llama_alloc_015.json`, the table
tests/test_ik_llama_memory.py holds swapgen's ik_llama.cpp estimates to. Not run by the tests;
rerun it on a new ik_llama.cpp build.

What it does:

1. Writes GGUFs: the llama-memcheck tool's architecture files that ik_llama.cpp loads (its
   gemma2 and gpt-oss files do not: ik asks gemma2 for a known model size and gpt-oss for its
   attention biases), and headers of real-width models whose tensor data is a sparse hole
   (`record_llama_alloc.write_sparse`): Llama-3.1-8B and Qwen3-30B-A3B widths, and DeepSeek-style
   MLA at DeepSeek-V2-Lite's width (new conversion, an `attn_kv_b` one, and one from before the
   `_mla` keys) and at DeepSeek-V3's.
2. Starts ik_llama.cpp's `llama-server` (CPU build, `-ngl 0`) on each under each launch of
   `LAUNCHES` and parses the report it logs: `llm_load_tensors: CPU buffer size`,
   `llama_kv_cache_init: CPU KV buffer size`, `llama_init_from_model: CPU compute buffer size`,
   the output buffer and `n_ctx`.

Usage: record_ik_llama_alloc.py WORK_DIR --server PATH [--only NAME ...] [--tool DIR]
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from record_llama_alloc import TOOL, _load, gguf_dims, width_spec, write_sparse  # noqa: E402

OUT = HERE / "ik_llama_alloc_015.json"
MIB = 1 << 20

#: Launches: name → ik_llama.cpp llama-server flags (its defaults: one slot, flash attention
#: on, `-mla 3`, fused MoE). `mla` ones run on MLA models only, `moe` ones on MoE models.
LAUNCHES: dict[str, list[str]] = {
    "c8k": ["-c", "8192"],
    "c32k": ["-c", "32768"],
    "c128k": ["-c", "131072"],
    "c8k-np2": ["-c", "8192", "--parallel", "2"],
    "c9999-np3": ["-c", "9999", "--parallel", "3"],
    "c8k-q8": ["-c", "8192", "-ctk", "q8_0", "-ctv", "q8_0"],
    "c8k-faoff": ["-c", "8192", "-fa", "off"],
    "c10000-faoff": ["-c", "10000", "-fa", "off"],
    "c8k-ub1024": ["-c", "8192", "-ub", "1024"],
    "c8k-rtr": ["-c", "8192", "-rtr"],
    "c8k-faoff-amb64": ["-c", "8192", "-fa", "off", "-amb", "64"],
    "c8k-mla0": ["-c", "8192", "-mla", "0"],
    "c8k-mla1": ["-c", "8192", "-mla", "1"],
    "c8k-mla2": ["-c", "8192", "-mla", "2"],
    "c8k-mla1-faoff": ["-c", "8192", "-mla", "1", "-fa", "off"],
    "c8k-mla2-faoff": ["-c", "8192", "-mla", "2", "-fa", "off"],
    "c8k-nofmoe": ["-c", "8192", "-no-fmoe"],
    "c8k-cpumoe": ["-c", "8192", "--cpu-moe"],
}
MLA_ONLY = {"c8k-faoff-amb64", "c8k-mla0", "c8k-mla1", "c8k-mla2", "c8k-mla1-faoff", "c8k-mla2-faoff"}
MOE_ONLY = {"c8k-nofmoe", "c8k-cpumoe"}
#: The tool's architectures ik_llama.cpp loads.
TINY = ("llama", "qwen3", "qwen3moe", "gemma3", "phi3", "deepseek2", "falcon")
#: Launches of the real-width files (their load reads the header only, their compute is real).
WIDE = ["c8k", "c32k", "c8k-np2", "c8k-q8", "c8k-faoff", "c8k-ub1024", "c8k-rtr", "c8k-faoff-amb64", "c8k-mla0",
        "c8k-mla1", "c8k-mla2", "c8k-mla1-faoff", "c8k-nofmoe", "c8k-cpumoe"]


def mla_spec(mc, name: str, n_embd: int, n_head: int, n_expert: int, n_used: int, n_ff_exp: int, n_ff: int,
             vocab: int, kv_b: bool = False, pre_mla: bool = False):
    """DeepSeek-style MLA (q_lora 1536, kv_lora 512 + rope 64, nope 128, v 128), 2 layers: one
    dense, one MoE with a shared expert. `kv_b`: the older `attn_kv_b` tensor instead of
    `attn_k_b`/`attn_v_b`; `pre_mla`: no `_mla` keys (per-head widths, head_count_kv = heads)."""
    q_lora, rank, nope, rope, v = 1536, 512, 128, 64, 128
    hp = {"context_length": 163840, "embedding_length": n_embd, "block_count": 2, "feed_forward_length": n_ff,
          "attention.head_count": n_head, "attention.head_count_kv": 1, "attention.key_length": rank + rope,
          "attention.value_length": rank, "attention.key_length_mla": nope + rope, "attention.value_length_mla": v,
          "attention.q_lora_rank": q_lora, "attention.kv_lora_rank": rank, "attention.layer_norm_rms_epsilon": 1e-6,
          "rope.dimension_count": rope, "rope.freq_base": 10000.0, "leading_dense_block_count": 1,
          "vocab_size": vocab, "expert_count": n_expert, "expert_used_count": n_used, "expert_shared_count": 1,
          "expert_feed_forward_length": n_ff_exp, "expert_weights_scale": 1.0, "expert_gating_func": 1}
    if pre_mla:
        hp.update({"attention.head_count_kv": n_head, "attention.key_length": nope + rope,
                   "attention.value_length": v})
        del hp["attention.key_length_mla"], hp["attention.value_length_mla"]
    s = mc.Spec("deepseek2", f"{name}: n_embd {n_embd}, {n_head} heads, MLA 512 + 64, {n_expert} experts x "
                f"{n_ff_exp} / {n_used} used, vocab {vocab}", hp, vocab=vocab, zero=True, stem=name)
    mc._embed_out(s, n_embd)
    for i in range(2):
        p = f"blk.{i}."
        for t, ne in (("attn_norm", (n_embd,)), ("attn_q_a_norm", (q_lora,)), ("attn_q_a", (n_embd, q_lora)),
                      ("attn_q_b", (q_lora, n_head * (nope + rope))), ("attn_kv_a_norm", (rank,)),
                      ("attn_kv_a_mqa", (n_embd, rank + rope)), ("attn_output", (n_head * v, n_embd)),
                      ("ffn_norm", (n_embd,))):
            s.t(p + t + ".weight", *ne)
        if kv_b or pre_mla:
            s.t(p + "attn_kv_b.weight", rank, n_head * (nope + v))
        else:
            s.t(p + "attn_k_b.weight", nope, rank, n_head)
            s.t(p + "attn_v_b.weight", rank, v, n_head)
        if i == 0:
            mc._swiglu(s, i, n_embd, n_ff)
            continue
        mc._moe(s, i, n_embd, n_ff_exp, n_expert)
        for t, ne in (("gate", (n_embd, n_ff_exp)), ("up", (n_embd, n_ff_exp)), ("down", (n_ff_exp, n_embd))):
            s.t(f"{p}ffn_{t}_shexp.weight", *ne)
    return s


def wide_specs(mc, lc) -> list:
    """The real-width files (record_llama_alloc's Llama-8B and Qwen3-30B-A3B rows, and MLA)."""
    rows = {row[0]: row for row in lc.WIDTHS}
    return [width_spec(mc, *rows["w-llama-8b"]), width_spec(mc, *rows["w-qwen3moe-30b"]),
            mla_spec(mc, "w-dsv2-lite", 2048, 16, 64, 6, 1408, 10944, 102400),
            mla_spec(mc, "w-dsv2-lite-kvb", 2048, 16, 64, 6, 1408, 10944, 102400, kv_b=True),
            mla_spec(mc, "w-dsv2-lite-pre-mla", 2048, 16, 64, 6, 1408, 10944, 102400, pre_mla=True),
            mla_spec(mc, "w-dsv3", 7168, 128, 8, 8, 2048, 18432, 129280)]


_RX = {
    "model": re.compile(r"llm_load_tensors:\s+(\S+) buffer size =\s+([\d.]+) MiB"),
    "kv": re.compile(r"llama_kv_cache_init:\s+(\S+) KV buffer size =\s+([\d.]+) MiB"),
    "output": re.compile(r"llama_init_from_model:\s+(\S+)\s+output buffer size =\s+([\d.]+) MiB"),
    "compute": re.compile(r"llama_init_from_model:\s+(\S+) compute buffer size =\s+([\d.]+) MiB"),
    "ctx": re.compile(r"llama_init_from_model: (n_ctx|n_ubatch|flash_attn|mla_attn|attn_max_b|fused_moe)\s+= (\S+)"),
}


def parse_log(text: str) -> dict:
    """ik_llama.cpp's load report (module docstring), in bytes (MiB with 2 decimals × 2**20)."""
    out: dict = {"model_bytes": 0, "kv_bytes": 0, "output_bytes": 0, "compute_bytes": 0, "ctx": {}, "errors": []}
    for line in text.splitlines():
        for part in ("model", "kv", "output"):
            if m := _RX[part].search(line):
                out[f"{part}_bytes"] += round(float(m.group(2)) * MIB)
        if m := _RX["compute"].search(line):
            out["compute_bytes"] = round(float(m.group(2)) * MIB)  # a graph reserved again replaces it
        if m := _RX["ctx"].search(line):
            out["ctx"][m.group(1)] = int(m.group(2)) if m.group(2).lstrip("-").isdigit() else m.group(2)
        if "error" in line.lower() and "GPU" not in line:
            out["errors"].append(line.strip())
    return out


def run_server(server: str, model: Path, args: list[str], log_path: Path, timeout: float = 300.0) -> str:
    """Start the server on a free port, wait for /health or its exit, stop it by its PID."""
    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        port = so.getsockname()[1]
    argv = [server, "-m", str(model), "--host", "127.0.0.1", "--port", str(port), "-ngl", "0", *args]
    with open(log_path, "w") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        status, start = "timeout", time.time()
        try:
            while time.time() - start < timeout:
                if proc.poll() is not None:
                    status = "exited"
                    break
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as resp:
                        if resp.status == 200:
                            status = "loaded"
                            break
                except OSError:  # not up yet
                    pass
                time.sleep(0.25)
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(10)
    return status


def _launches(dims: dict, names: list[str]) -> list[str]:
    mla = "attention.kv_lora_rank" in dims
    moe = "expert_count" in dims
    return [n for n in names if (mla or n not in MLA_ONLY) and (moe or n not in MOE_ONLY)]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("work", type=Path, help="where the GGUFs and logs go")
    p.add_argument("--server", required=True, help="ik_llama.cpp's llama-server")
    p.add_argument("--only", action="append", help="only these models")
    p.add_argument("--tool", type=Path, default=TOOL, help="the llama-memcheck tool's folder")
    args = p.parse_args(argv)
    mc, ms, lc = _load("make_arch_gguf", args.tool), _load("measure", args.tool), sys.modules["record_llama_alloc"]
    (args.work / "logs").mkdir(parents=True, exist_ok=True)
    models = []
    for arch in TINY:
        models.append((arch, mc.write_gguf(mc.SPECS[arch](), args.work / mc.file_name(arch)), list(LAUNCHES)))
    for spec in wide_specs(mc, lc):
        models.append((spec.stem, write_sparse(mc, spec, args.work / f"{spec.stem}.gguf"), WIDE))
    records = []
    for name, path, launches in models:
        if args.only and name not in args.only:
            continue
        dims = gguf_dims(ms, path)
        for launch in _launches(dims, launches):
            log = args.work / "logs" / f"{name}__{launch}.log"
            status = run_server(args.server, path, LAUNCHES[launch], log)
            parsed = parse_log(log.read_text(errors="replace"))
            records.append({"model": name, "launch": launch, "args": LAUNCHES[launch], "status": status,
                            "gguf": {**dims, "file_bytes": 0}, **parsed, "errors": parsed["errors"][-3:]})
            print(f"{name:20s} {launch:16s} {status:7s} KV {parsed['kv_bytes'] / MIB:9.2f} "
                  f"compute {parsed['compute_bytes'] / MIB:9.2f} model {parsed['model_bytes'] / MIB:9.2f}", flush=True)
    how = ("ik_llama.cpp llama-server (ik-llama-cpp-python 0.1.5 sdist, CPU build, -ngl 0), "
           "tests/data/record_ik_llama_alloc.py")
    OUT.write_text(json.dumps({"llama_server_version": "ik-llama-cpp-python 0.1.5", "how": how,
                               "records": records}, indent=1) + "\n")
    print(f"wrote {OUT} ({len(records)} records)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
