"""What a user can do about a model that is not served, from its reason: the plan page and
`swapgen show --json` say it beside each skip (docs/troubleshooting.md#a-model-is-missing-from-the-config).

One ordered table of (words in the reason, what to do), first match wins; a reason no row knows
gets the general advice. The reasons are swapgen's own sentences, so the words are its own.
"""

from __future__ import annotations

#: (lower-case words any of which the reason holds, the hint), first match wins.
HINTS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("incomplete download", "being written", ".incomplete"),
     "Wait for the download to finish: the next run after it completes serves it (`swapgen watch` runs it for you)."),
    (("missing shard", "shard"), "Download the missing shards into the same folder."),
    (("skip: true",), "Remove `skip: true` from the matching override to serve it."),
    (("not a gguf file", "not a safetensors file", "magic", "not valid json", "not utf-8"),
     "It is not a model file (or a damaged one): download it again, or move it out of the roots."),
    (("served by",), "Serve it with the engine the reason names, or pin a backend row of kind `custom` to it in an "
                     "override (docs/model-files.md)."),
    (("needs a vllm backend", "backend registered", "no emitter", "cannot serve"),
     "Add a backend row of an engine that serves it (`swapgen backends detect` finds the installed ones), or pin "
     "one in an override."),
    (("kv cache cost unknown", "block_count", "no readable gguf metadata", "not a real model"),
     "Its header lacks what sizing needs: use another conversion of the model (a recent llama.cpp convert)."),
    (("budget", "does not fit", "cannot start", "over the"),
     "Give it more memory: raise `vram_budget_gb` (or the override's), pin a smaller `ctx`, spread it over more "
     "`devices`, or use a smaller quant."),
    (("split gguf",), "Merge the shards (llama-gguf-split --merge) or serve it with llama-server."),
    (("cannot be passed safely", "${"), "Rename the file or folder: llama-swap would read part of its path as a "
                                        "macro or split it."),
    (("extra_args",), "Fix the override's `extra_args` value the reason names."),
    (("devices", "gpu inventory", "vllm_nodes", "tensor parallel"),
     "Fix the `devices` (or `vllm_nodes`) the reason names: `swapgen show ID` lists the GPUs the host has."),
    (("internal error",), "Please report it, with the output of `swapgen show ID`."),
)
#: For a reason no row knows.
GENERAL = "`swapgen show ID` prints everything swapgen decided for it (docs/troubleshooting.md)."
#: For a file that is not a model of its own.
ATTACHED = "Nothing to do: it is served with the model it belongs to."
IGNORED = "Nothing to do unless you meant it to be served: the reason says what it is (docs/model-files.md)."


def hint_for(reason: str) -> str:
    """The first hint whose words the reason holds, else the general advice."""
    text = reason.lower()
    for words, hint in HINTS:
        if any(w in text for w in words):
            return hint
    return GENERAL
