"""llama-server's arguments as a models preset names them, and the ones llama.cpp's router owns.

A preset key is an argument without its dashes (`ctx-size`, `c`, `no-mmproj-offload`) or its
environment variable (`LLAMA_ARG_CTX_SIZE`); `common/preset.cpp` (`get_map_key_opt`) maps every
spelling to one option, and llama.cpp's own writer (`common_preset::to_ini`) uses the last name
of the positive list, which swapgen writes too. An on/off option is written `key = true|false`
(a negative spelling in a command line becomes `= false`).

The table is llama-server b11434's (`llama_options_b11434`); `swapgen validate` checks a preset
against the `--help` of the resolved build when it can run it (`help_keys`).
"""

from __future__ import annotations

import re

from autogen.flags.llama import OptionTable
from autogen.flags.llama_b11434 import PRESET_ONLY

#: The environment names of the options llama.cpp's router sets or removes for every instance
#: (tools/server/server-models.cpp `unset_reserved_args`, `server_model_meta::update_args`):
#: a preset's value is never what runs.
ROUTER_OWNED: dict[str, str] = {
    "LLAMA_ARG_HOST": "the router binds every instance to 127.0.0.1",
    "LLAMA_ARG_PORT": "the router picks a free port for every instance",
    "LLAMA_ARG_LOG_COLORS": "instances follow the router's log colours",
    "LLAMA_API_KEY": "API keys are the router's (start it with --api-key)",
    "LLAMA_ARG_API_KEY_FILE": "API keys are the router's (start it with --api-key-file)",
    "LLAMA_ARG_SSL_KEY_FILE": "TLS is the router's",
    "LLAMA_ARG_SSL_CERT_FILE": "TLS is the router's",
    "LLAMA_ARG_MODELS_DIR": "a router setting, not a model's",
    "LLAMA_ARG_MODELS_MAX": "a router setting, not a model's",
    "LLAMA_ARG_MODELS_PRESET": "a router setting, not a model's",
    "LLAMA_ARG_MODELS_AUTOLOAD": "a router setting, not a model's",
}
#: The section's other names: the router reads a section's `alias` (comma-separated) as names
#: that route to it, then starts the instance with `--alias <section>` (`server_models::add_model`).
ALIAS_ENV = "LLAMA_ARG_ALIAS"
#: A key llama.cpp's preset reader skips ("reserved for future use", `load_from_ini`).
VERSION_KEY = "version"


def owner_of(table: OptionTable, key: str) -> str | None:
    """Why the router owns the option `key` names (None: the section's to set)."""
    option = table.by_key.get(key)
    return ROUTER_OWNED.get(option.env) if option is not None else None


#: The preset-only keys (`load-on-startup`, `stop-timeout`, `dedup-cache-models`).
PRESET_KEYS = frozenset(PRESET_ONLY)

_HELP_ENV = re.compile(r"\(env: ([A-Z0-9_]+)\)")


def help_keys(text: str) -> frozenset[str]:
    """The preset keys a `llama-server --help` text allows: each option's names without dashes
    and its environment variable (an on/off option's `LLAMA_ARG_NO_…` too), as `get_map_key_opt`
    maps them."""
    keys: set[str] = set()
    names: list[str] = []
    for line in text.splitlines():
        if line.startswith("-") and not line.startswith("-----"):
            names = list(_names(line))
            keys.update(n.lstrip("-") for n in names)
        env = _HELP_ENV.search(line)
        if env:
            keys.add(env.group(1))
            negative = [n.startswith(("--no-", "-no-")) for n in names]
            if any(negative) and not all(negative):
                keys.add(env.group(1).replace("LLAMA_ARG_", "LLAMA_ARG_NO_"))
    return frozenset(keys)


def _names(line: str):
    """The option names opening a `--help` line (`-c,    --ctx-size N` → -c, --ctx-size)."""
    for word in line.split():
        if not word.startswith("-"):
            return
        yield word.rstrip(",")
