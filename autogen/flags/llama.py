"""llama-server's flags, declared once: every option of the recorded build (`llama_b11434`,
recorded from llama.cpp's own definitions) and the meaning swapgen gives the ones it writes or
reads back (`KNOBS`), together its vocabulary (`LlamaFlags`, `MAINLINE`; ik_llama.cpp's is
`flags.ik_llama`). Sizing reads a user's pins by meaning, the emitter replaces its own flag
of a meaning the user gave, and llama.cpp's router preset writes each meaning under its key; all
three expand a meaning to every spelling from the recorded table, so no spelling is typed twice.
"""

from __future__ import annotations

import functools

from attrs import frozen

from autogen.flags.llama_b11434 import BUILD, OPTIONS


@frozen
class LlamaOption:
    """One argument of llama-server.

    Example: LlamaOption(names=("-c", "--ctx-size"), negatives=(), values=1, env="LLAMA_ARG_CTX_SIZE").
    """

    names: tuple[str, ...]
    #: The `--no-…` spellings of an on/off option.
    negatives: tuple[str, ...] = ()
    #: Values it takes on a command line: 0 (a switch), 1, or 2 (which a preset cannot carry).
    values: int = 1
    env: str = ""
    #: Repeated occurrences add up, and one value may list several (`--lora a,b`).
    is_list: bool = False

    @property
    def key(self) -> str:
        """The preset key llama.cpp writes for it: its last name without dashes."""
        return self.names[-1].lstrip("-")

    @property
    def keys(self) -> tuple[str, ...]:
        """Every key a preset may spell it with (`get_map_key_opt`)."""
        envs = (self.env, self.env.replace("LLAMA_ARG_", "LLAMA_ARG_NO_")) if self.env and self.negatives else \
            ((self.env,) if self.env else ())
        return (*(n.lstrip("-") for n in self.names + self.negatives), *envs)


@frozen
class OptionTable:
    """Every option of one llama-server build, by command-line spelling and by preset key."""

    options: tuple[LlamaOption, ...]
    build: str

    @functools.cached_property
    def by_flag(self) -> dict[str, LlamaOption]:
        return {name: o for o in self.options for name in o.names + o.negatives}

    @functools.cached_property
    def by_key(self) -> dict[str, LlamaOption]:
        return {key: o for o in self.options for key in o.keys}

    @functools.cached_property
    def by_env(self) -> dict[str, LlamaOption]:
        return {o.env: o for o in self.options if o.env}


@functools.cache
def recorded_table() -> OptionTable:
    """llama-server b11434's options, recorded from llama.cpp's own definitions."""
    return OptionTable(options=tuple(LlamaOption(names=names, negatives=negatives, values=values, env=env,
                                                 is_list=is_list)
                                     for names, negatives, values, env, is_list in OPTIONS), build=BUILD)


#: Meaning → one spelling of each option that carries it (llama-server b11434 `--help`); every
#: other spelling of those options, negatives included, means the same (`FLAG_KNOBS`).
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
    "mmproj": ("-mm", "--mmproj-url", "--mmproj-auto"),
    "mmproj_offload": ("--mmproj-offload",),
    "image_max_tokens": ("--image-max-tokens",),
    "embeddings": ("--embedding",),
    "pooling": ("--pooling",),
    "batch": ("-b",),
    "ubatch": ("-ub",),
    "split_mode": ("-sm",),
    "tensor_split": ("-ts",),
    "swa_full": ("--swa-full",),
    "kv_unified": ("-kvu",),
    "fit": ("-fit",),
    # speculative decoding with a draft model (the `-draft` profile)
    "draft_model": ("-md",),
    "draft_ngl": ("-ngld",),
    "cache_type_k_draft": ("-ctkd",),
    "cache_type_v_draft": ("-ctvd",),
    "spec_type": ("--spec-type",),
    "draft_max": ("--spec-draft-n-max",),
    "draft_min": ("--spec-draft-n-min",),
}


@frozen(eq=False)
class LlamaFlags:
    """One llama-server's command-line vocabulary: every option of its recorded build, the
    meaning swapgen gives the ones it writes or reads back (`knobs`, meaning → one spelling of
    each option that carries it; every other spelling of those options, negatives included, means
    the same), and the few words its emitter writes that differ between projects. llama.cpp's is
    `MAINLINE`, ik_llama.cpp's `flags.ik_llama.IK`; an engine's row names its own (`EngineRow.flags`).
    """

    table: OptionTable
    knobs: dict[str, tuple[str, ...]]
    #: The flag groups that keep load-time fitting off, so the command runs exactly swapgen's
    #: sizing (none: off without a flag).
    fit_off: tuple[tuple[str, ...], ...] = ()
    #: The flag groups that keep the server from writing a log file into the folder it starts in
    #: (llama-swap's): ik_llama.cpp appends to "llama.log" there unless `--log-disable`
    #: (common/log.h); its load report still goes to the console.
    log_off: tuple[tuple[str, ...], ...] = ()
    #: What a draft model alone needs to be used for speculative decoding (b11434: a type).
    draft_type: tuple[str, ...] = ()
    #: The build's own draft lengths (`draft_max`, `draft_min`), written out so the command says
    #: what runs.
    draft_lengths: tuple[int, int] = (16, 0)
    #: The architectures (`general.architecture`) the build loads; empty = not recorded (any).
    archs: frozenset[str] = frozenset()
    #: The slots the server runs without `--parallel`, over one shared KV pool (b11434: 4,
    #: tools/server/server.cpp; ik_llama.cpp: 1).
    auto_slots: int = 1

    @functools.cached_property
    def flag_knobs(self) -> dict[str, str]:
        """Every spelling of each flag swapgen generates or reads, by meaning."""
        return {name: knob for knob, flags in self.knobs.items() for flag in flags
                for name in self.table.by_flag[flag].names + self.table.by_flag[flag].negatives}

    @functools.cached_property
    def switches(self) -> frozenset[str]:
        """Those of them that take no value (a switch, or the negative spelling of an option)."""
        return frozenset(flag for flag in self.flag_knobs
                         if self.table.by_flag[flag].values == 0 or flag in self.table.by_flag[flag].negatives)

    def spelling(self, knob: str) -> str:
        """The flag the emitter writes for a meaning: its first spelling in `knobs`."""
        return self.knobs[knob][0]

    def negative(self, flag: str) -> bool:
        """`flag` is the off spelling of an option (`-no-fa` of ik_llama.cpp's `-fa`)."""
        return flag in self.table.by_flag[flag].negatives


#: llama.cpp b11434's llama-server (docs/maintainers/sizing.md#llamacpps---fit for `-fit off`).
MAINLINE = LlamaFlags(table=recorded_table(), knobs=KNOBS, fit_off=(("-fit", "off"),),
                      draft_type=("--spec-type", "draft-simple"), draft_lengths=(3, 0), auto_slots=4)
#: Every spelling of each flag swapgen generates or reads for llama.cpp, by meaning.
FLAG_KNOBS: dict[str, str] = MAINLINE.flag_knobs
#: Those of them that take no value (a switch, or the negative spelling of an on/off option).
SWITCHES = MAINLINE.switches
