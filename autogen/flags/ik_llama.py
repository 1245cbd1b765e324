"""ik_llama.cpp's llama-server flags, declared once: every option its parser takes (`ik_llama_015`,
recorded from ik_llama.cpp's common/common.cpp) and the meaning swapgen gives the ones it writes or
reads back (`KNOBS`), together its vocabulary (`IK`), which the `ik_llama` row names.

ik_llama.cpp forked llama.cpp before common/arg.cpp, so its flags are not mainline's
(docs/maintainers/backends.md#ik_llamacpp-a-row-of-its-own): `-fa` takes `auto|on|off|0|1` and
`-no-fa` turns it off, `--fit` is a switch (mainline's `-fit` takes on/off and is off here by
default), draft lengths are `--draft-max`/`--draft-min`, and the MoE and MLA options users pick
it for are its own (`-mla`, `-amb`, `-no-fmoe`, `-rtr`).
"""

from __future__ import annotations

from autogen.flags.ik_llama_015 import ARCHS, BUILD, OPTIONS
from autogen.flags.llama import LlamaFlags, LlamaOption, OptionTable

#: Meaning → one spelling of each option that carries it (the recorded parser); the meanings
#: it shares with llama.cpp are spelled the same way as `flags.llama.KNOBS` names them.
KNOBS: dict[str, tuple[str, ...]] = {
    "model": ("-m",),
    "host": ("--host",),
    "port": ("--port",),
    "ctx": ("-c",),
    "ngl": ("-ngl",),
    "n_cpu_moe": ("--n-cpu-moe", "--cpu-moe"),
    "flash_attn": ("-fa",),
    "cache_type_k": ("-ctk",),
    "cache_type_v": ("-ctv",),
    "parallel": ("-np",),
    "threads": ("-t",),
    "mmproj": ("--mmproj", "--mmproj-url"),
    "mmproj_offload": ("--no-mmproj-offload",),
    "image_max_tokens": ("--image-max-tokens",),
    "embeddings": ("--embedding",),
    "pooling": ("--pooling",),
    "batch": ("-b",),
    "ubatch": ("-ub",),
    "split_mode": ("-sm",),
    "tensor_split": ("-ts",),
    "fit": ("--fit",),
    # speculative decoding with a draft model (the `-draft` profile)
    "draft_model": ("-md",),
    "draft_ngl": ("-ngld",),
    "cache_type_k_draft": ("-ctkd",),
    "cache_type_v_draft": ("-ctvd",),
    "spec_type": ("--spec-type",),
    "draft_max": ("--draft-max",),
    "draft_min": ("--draft-min",),
    # ik_llama.cpp's own
    "mla": ("-mla",),
    "attn_max_batch": ("-amb",),
    "fused_moe": ("-no-fmoe",),
    "run_time_repack": ("-rtr",),
}


def recorded_table() -> OptionTable:
    """ik_llama.cpp's options, recorded from its parser."""
    return OptionTable(options=tuple(LlamaOption(names=names, negatives=negatives, values=values, env=env,
                                                 is_list=is_list)
                                     for names, negatives, values, env, is_list in OPTIONS), build=BUILD)


#: ik_llama.cpp's vocabulary: its fitting (`--fit`) is off unless asked for, `--log-disable`
#: keeps it from writing "llama.log" into llama-swap's folder, a draft model alone
#: turns speculative decoding on (examples/server/server-context.cpp), with common/common.h's
#: lengths (n_max 16, n_min 0), one slot runs without `--parallel`, and it loads its own list of
#: architectures.
IK = LlamaFlags(table=recorded_table(), knobs=KNOBS, log_off=(("--log-disable",),), draft_lengths=(16, 0),
                archs=ARCHS)
