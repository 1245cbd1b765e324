"""llama-server's flags, declared once: every option of the recorded build (`llama_b11434`,
recorded from llama.cpp's own definitions) and the meaning swapgen gives the ones it writes or
reads back (`KNOBS`). Sizing reads a user's pins by meaning, the emitter replaces its own flag
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


def _spellings() -> dict[str, str]:
    table = recorded_table()
    return {name: knob for knob, flags in KNOBS.items() for flag in flags
            for name in table.by_flag[flag].names + table.by_flag[flag].negatives}


#: Every spelling of each flag swapgen generates or reads, by meaning.
FLAG_KNOBS: dict[str, str] = _spellings()
#: Those of them that take no value (a switch, or the negative spelling of an on/off option).
SWITCHES = frozenset(flag for flag in FLAG_KNOBS
                     if recorded_table().by_flag[flag].values == 0 or flag in recorded_table().by_flag[flag].negatives)
