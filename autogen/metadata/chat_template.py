"""What a model's chat template shows about its tool-call format, read once from the header.

The GGUF reader scans `tokenizer.chat_template` with `template_markers` and stores the names
found (`ModelMeta.chat_template_markers`); the tool-parser choice (`emit.toolparsers`) and the
`tools` capability read those names, never the template itself.
"""

from __future__ import annotations

import re

#: Chat-template markers: name → (text that shows it, parser it implies on an `AMBIGUOUS` arch;
#: "" = a format no parser reads there). Read by `template_markers` from the GGUF's
#: `tokenizer.chat_template` (templates as in each model's `tokenizer_config.json`, copies in
#: llama.cpp `models/templates/*.jinja`).
TEMPLATE_MARKERS: dict[str, tuple[str, str]] = {
    # Llama 3.1 / 3.3 (meta-llama-Llama-3.3-70B-Instruct.jinja): built-in tool calls start with
    # it. Llama 3.2 lacks it; functionary v3.1 (a Llama 3.1 finetune) has it beside <function=.
    "python_tag": ("<|python_tag|>", "llama3_json"),
    # Llama 3.1 / 3.2 / 3.3: the JSON tool-call instruction 'Respond in the format {"name":
    # function name, "parameters": dictionary of argument name and its value}'.
    "llama3_json_prompt": ("dictionary of argument name and its value", "llama3_json"),
    # Mistral's tokenizer v3 and later (Mistral-7B-Instruct-v0.3, Mixtral-8x22B-Instruct-v0.1,
    # Mistral-Nemo-Instruct-2407, Mistral-Small-3.x, Devstral): calls follow [TOOL_CALLS].
    "tool_calls_token": ("[TOOL_CALLS]", "mistral"),
    # Hermes 2 Pro / 3 (NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja), Qwen2 / 2.5 / QwQ
    # (Qwen-QwQ-32B.jinja): JSON calls inside <tool_call></tool_call>.
    "tool_call_xml": ("<tool_call>", "hermes"),
    # Qwen3-Coder XML (<tool_call><function=name><parameter=…>) and functionary v3.1
    # (<function=name>{json}</function>, meetkai-functionary-medium-v3.1.jinja): not hermes JSON.
    "function_xml": ("<function=", ""),
}
#: The template names a `tools` variable at all: one that never does cannot show the model its
#: tools (Llama 2 / 3.0, Mistral v0.1, Zephyr, ChatML finetunes, the DeepSeek-R1 distills).
TOOLS_VAR = "tools_var"
#: `tools` as a word, not `tool_calls`, `<tools>`, `</tools>` or `"tools"` (a key in a string).
#: Prose ("the following tools") also counts: a false "mentions tools" only keeps today's choice,
#: while a missed reference would drop a working parser.
_TOOLS_WORD = re.compile(r"(?<![\w.</'\"])tools(?![\w>'\"])")


def template_markers(template: str) -> tuple[str, ...]:
    """Sorted names of the `TEMPLATE_MARKERS` (and `TOOLS_VAR`) found in a chat template."""
    found = {name for name, (text, _) in TEMPLATE_MARKERS.items() if text in template}
    if _TOOLS_WORD.search(template):
        found.add(TOOLS_VAR)
    return tuple(sorted(found))
