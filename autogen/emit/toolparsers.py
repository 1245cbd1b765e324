"""Which vLLM `--tool-call-parser` a model gets, and which vLLM versions know each name.

vLLM answers every request carrying `tools` with HTTP 400 unless it was started with
`--enable-auto-tool-choice --tool-call-parser X`, and X is the model family's tool-call format.
A WRONG parser does not fail: tool calls come back unparsed in the reply text, which is worse
than the 400. So the table is short on purpose, a name is only emitted when the installed
vLLM registers it, and the user can pin (`vllm_tool_parser`) or extend (`tool_parsers`).
An architecture that several tool formats share (GGUF `llama` holds Llama 2, Llama 3.x and
every Mistral conversion) is decided by the served chat template's markers (`TEMPLATE_MARKERS`),
else by the model's names (`FAMILY_RULES`), or not at all; a template that never mentions
`tools` gets no parser whatever the architecture.
Rules: docs/maintainers/backends.md#tool-call-parser-choice; vLLM `docs/features/tool_calling.md` (which
parser each family needs).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from attrs import frozen

from autogen.metadata.chat_template import TEMPLATE_MARKERS, TOOLS_VAR
from autogen.versions import format_version

#: Architecture (GGUF `general.architecture` or HF `model_type`, lower case) → parser.
#: Mirrors the Go original's `vllmToolParsers` table, both spellings listed, minus
#: its `llama`, `mistral` and `qwen2` rows, which moved to `AMBIGUOUS` / `FAMILY_RULES`.
TOOL_PARSERS: dict[str, str] = {
    "qwen2_moe": "hermes",
    "qwen2moe": "hermes",
    "qwen3": "hermes",
    "qwen3_moe": "hermes",
    "qwen3moe": "hermes",
    "qwen3_next": "hermes",
    "qwen3next": "hermes",
    "qwen3_5": "qwen3_coder",
    "qwen3_5_moe": "qwen3_coder",
    "qwen35": "qwen3_coder",
    "qwen35moe": "qwen3_coder",
    "mistral3": "mistral",
    "gemma4": "gemma4",
    "glm4_moe": "glm45",
    "glm4moe": "glm45",
    "deepseek_v3": "deepseek_v3",
    "granite": "granite",
    "granitemoe": "granite",
    "minimax_m2": "minimax_m2",
    # llama.cpp's GGUF spelling of the same architecture (gguf-py MODEL_ARCH_NAMES); the
    # original listed only the HF one.
    "minimax-m2": "minimax_m2",
    "olmo3": "olmo3",
    # gpt-oss speaks OpenAI's harmony format; vLLM reads it with `openai` (registered from 0.10.2,
    # vllm-project/recipes OpenAI/GPT-OSS.md). HF `model_type` and llama.cpp's GGUF spelling.
    "gpt_oss": "openai",
    "gpt-oss": "openai",
}

#: Architectures several families share, with different tool formats or none: the key alone
#: would be a guess, so only a `FAMILY_RULES` row decides, else no parser. arch → the hint
#: the comment gives. GGUF `llama` also holds Mistral and Mixtral (llama.cpp
#: `convert_hf_to_gguf.py` converts `MistralForCausalLM`/`MixtralForCausalLM` as LLAMA); HF
#: `mistral` holds Zephyr/OpenHermes-style finetunes; `qwen2` holds Qwen2.5-Coder and the
#: DeepSeek-R1 distills.
AMBIGUOUS: dict[str, str] = {
    "llama": "llama3_json for Llama 3.x, mistral for Mistral/Mixtral",
    "mistral": "mistral for Mistral AI's own models",
    "mixtral": "mistral for Mixtral 8x22B",
    "qwen2": "hermes for Qwen2, Qwen2.5 and QwQ",
}

#: A name token starts here (not inside a longer word: "openhermes" is not "hermes").
_AT = r"(?<![a-z0-9])"
_LLAMA_LIKE = frozenset({"llama", "mistral", "mixtral"})
_FINETUNE_BASES = _LLAMA_LIKE | {"qwen2", "qwen3", "qwen3_moe", "qwen3moe"}


@frozen
class FamilyRule:
    """On an architecture in `arches`, a model name matching `pattern` gets `parser` ("" = none).

    Example: FamilyRule(arches=frozenset({"qwen2"}), pattern=re.compile("coder"), parser="",
    why="Qwen2.5-Coder …", beats_template=True).
    """

    arches: frozenset[str]
    pattern: re.Pattern[str]
    parser: str
    why: str
    #: The rule is about what the model emits, which its template cannot contradict (a template
    #: decides over every other rule: it shows the format the model was trained on).
    beats_template: bool = False


def _rule(arches: frozenset[str] | set[str], pattern: str, parser: str, why: str, *,
          beats_template: bool = False) -> FamilyRule:
    return FamilyRule(frozenset(arches), re.compile(_AT + pattern), parser, why, beats_template)


#: First matching row wins; names are the served id, file/folder name, parent folder and
#: GGUF `general.name`, lower-cased. Parsers per vLLM `docs/features/tool_calling.md`.
#: HF `architectures` is not matched: finetunes keep it (Zephyr is `MistralForCausalLM`).
FAMILY_RULES: tuple[FamilyRule, ...] = (
    # finetunes that bring their own chat format, whatever base they were trained from
    _rule(_FINETUNE_BASES, r"hermes[-_ ]?[234](?![0-9])", "hermes", "Nous Hermes 2 Pro/3/4 format"),
    _rule(_FINETUNE_BASES, r"xlam", "xlam", "Salesforce xLAM format"),
    _rule(_FINETUNE_BASES, r"(deepseek|distill|nemotron|tulu|dolphin|openhermes|zephyr|openchat)", "",
          "a finetune with its own chat format"),
    # the families themselves
    _rule({"llama"}, r"llama[-_ ]?3(?![0-9])", "llama3_json", "Llama 3.x JSON format"),
    _rule(_LLAMA_LIKE, r"(mistral|mixtral|ministral|codestral|devstral|magistral)", "mistral",
          "a Mistral AI model"),
    # vllm-project/vllm#32926: Qwen2.5-Coder answers in code blocks, not hermes <tool_call>,
    # although its template asks for <tool_call>
    _rule({"qwen2"}, r"coder", "", "Qwen2.5-Coder does not emit the hermes format", beats_template=True),
    _rule({"qwen2"}, r"(qwen|qwq)", "hermes", "Qwen2/2.5/QwQ hermes format"),
    _rule({"deepseek_v3"}, r"v3[._-]?1(?![0-9])", "deepseek_v31", "DeepSeek-V3.1 format"),
    _rule({"glm4_moe", "glm4moe"}, r"glm[-_ ]?4[._-]?7(?![0-9])", "glm47", "GLM-4.7 format"),
    _rule({"granite"}, r"granite[-_ ]?4", "granite4", "Granite 4.0 format"),
)

def template_parser(markers: Sequence[str]) -> tuple[str, str] | None:
    """(parser, the texts that show it) when the template's format markers agree on one parser
    ("" = a format no shared-arch parser reads); None when they show none or disagree."""
    shown = [shows for name, shows in TEMPLATE_MARKERS.items() if name in markers]
    parsers = {parser for _, parser in shown}
    if len(parsers) != 1:
        return None
    return parsers.pop(), ", ".join(text for text, _ in shown)


#: Mistral's tokenizers from v3 on (32,768 tokens, tekken 131,072) carry `[TOOL_CALLS]`; vLLM's
#: `MistralToolParser.__init__` raises when the token is missing (Mistral 7B v0.1/v0.2, Mixtral
#: 8x7B: 32,000; ChatML finetunes: 32,002).
MISTRAL_TOOL_VOCAB = 32768

#: The newest vLLM whose registry `VLLM_PARSERS_BY_VERSION` lists in full; an unknown backend
#: version is taken to be this one.
VLLM_CURRENT = (0, 33, 0)

_V0_9_0 = (0, 9, 0)
_V0_33_0 = VLLM_CURRENT

#: Every built-in parser name of vLLM 0.33.0 (`vllm/tool_parsers/__init__.py`
#: `_TOOL_PARSERS_TO_REGISTER`, and its `--tool-call-parser` help text) → the first release known to
#: register it. Each version is an UPPER bound (the earliest release where we saw the name),
#: so gating errs towards "no parser" (a 400), never towards an unknown name (a failed start):
#: - 0.9.0: module list of docs.vllm.ai/en/v0.9.0 …/tool_parsers (the oldest release checked;
#:   older releases are not told apart);
#: - 0.9.2, 0.10.0, 0.10.2: the same page for those releases;
#: - 0.10.1: the registry printed by 0.10.1's `invalid tool call parser` error
#:   (vllm-project/recipes#83, which also dates `openai` to 0.10.2);
#: - gemma4 0.19.0 (vllm-project/vllm#39468 runs it on 0.19.0), minimax_m2 0.18.1 and olmo3
#:   0.19.1 (docs.vllm.ai pages of those releases);
#: - 0.33.0 for every other name: present in 0.33.0, first release not established.
VLLM_PARSERS_BY_VERSION: dict[str, tuple[int, ...]] = {
    "deepseek_v3": _V0_9_0,
    "granite": _V0_9_0,
    "granite-20b-fc": _V0_9_0,
    "hermes": _V0_9_0,
    "internlm": _V0_9_0,
    "jamba": _V0_9_0,
    "llama3_json": _V0_9_0,
    "llama4_pythonic": _V0_9_0,
    "mistral": _V0_9_0,
    "phi4_mini_json": _V0_9_0,
    "pythonic": _V0_9_0,
    "xlam": (0, 9, 2),
    "glm45": (0, 10, 0),
    "hunyuan_a13b": (0, 10, 0),
    "kimi_k2": (0, 10, 0),
    "qwen3_coder": (0, 10, 0),
    "llama4_json": (0, 10, 1),
    "step3": (0, 10, 1),
    "deepseek_v31": (0, 10, 2),
    "openai": (0, 10, 2),
    "seed_oss": (0, 10, 2),
    "minimax_m2": (0, 18, 1),
    "gemma4": (0, 19, 0),
    "olmo3": (0, 19, 1),
    "apertus": _V0_33_0,
    "beam": _V0_33_0,
    "cohere_command3": _V0_33_0,
    "cohere_command4": _V0_33_0,
    "deepseek_v32": _V0_33_0,
    "deepseek_v4": _V0_33_0,
    "deepseek_v41": _V0_33_0,
    "dots": _V0_33_0,
    "ernie45": _V0_33_0,
    "functiongemma": _V0_33_0,
    "gigachat3": _V0_33_0,
    "glm47": _V0_33_0,
    "granite4": _V0_33_0,
    "hf": _V0_33_0,
    "hy_v3": _V0_33_0,
    "hy_v4": _V0_33_0,
    "inkling": _V0_33_0,
    "k2_horizon": _V0_33_0,
    "kimi_k3": _V0_33_0,
    "lfm2": _V0_33_0,
    "ling3": _V0_33_0,
    "longcat": _V0_33_0,
    "mimo": _V0_33_0,
    "minicpm5": _V0_33_0,
    "minimax_m3": _V0_33_0,
    "muse": _V0_33_0,
    "muse_glimmer": _V0_33_0,
    "musespark1x": _V0_33_0,
    "plamo3": _V0_33_0,
    "poolside_v1": _V0_33_0,
    "qwen3_json": _V0_33_0,
    "qwen3_xml": _V0_33_0,
    "step3p5": _V0_33_0,
    "step5": _V0_33_0,
}

#: The value that turns the parser off (in a pin or in the settings table).
OFF = "none"



def known_at(name: str, version: tuple[int, ...] | None) -> bool | None:
    """Does vLLM `version` (None = current) register parser `name`? None = a name we do not
    track (a `--tool-parser-plugin` parser, or one newer than our list)."""
    since = VLLM_PARSERS_BY_VERSION.get(name)
    if since is None:
        return None
    return (version or VLLM_CURRENT) >= since


@frozen
class ParserChoice:
    """The parser to emit ("" = none) and why, for the entry's comment and `swapgen show`.

    Example: ParserChoice(parser="qwen3_coder", note="auto: qwen3moe, coder model").
    """

    parser: str
    note: str


def family_rule(arch: str, names: Sequence[str]) -> FamilyRule | None:
    """The first `FAMILY_RULES` row for `arch` that one of `names` matches (case-insensitive)."""
    lowered = [name.lower() for name in names if name]
    for rule in FAMILY_RULES:
        if arch in rule.arches and any(rule.pattern.search(name) for name in lowered):
            return rule
    return None


def choose_tool_parser(
    arch: str,
    model_id: str,
    *,
    names: Sequence[str] = (),
    has_chat_template: bool | None = None,
    template_markers: Sequence[str] | None = None,
    vocab_size: int = 0,
    pin: str | None = None,
    table: Mapping[str, str] | None = None,
    version: tuple[int, ...] | None = None,
) -> ParserChoice:
    """Pick the parser for a model (docs/maintainers/backends.md#tool-call-parser-choice: pin, table, family
    rules, version gating).

    `names` are the model's other names (file or folder name, parent folder, GGUF
    `general.name`), matched with `model_id` against `FAMILY_RULES`. `has_chat_template` is
    False when the served tokenizer is known to lack a chat template (None = not known).
    `template_markers` are the served template's `template_markers`, when it was read whole
    (None = not known): no `tools_var` means no parser; on an `AMBIGUOUS` arch the format
    markers decide over the names (only a `beats_template` rule wins over them).
    `vocab_size` 0 = unknown. `pin` is the override's `vllm_tool_parser` (used verbatim; "none"
    turns it off), `table` the settings' `tool_parsers` (arch → parser or "none", over the
    built-in table and the family rules), `version` the backend row's vLLM version (None =
    unknown, taken as current).
    """
    shown = format_version(version or VLLM_CURRENT)
    pinned = (pin or "").strip()
    if pinned.lower() == OFF:
        return ParserChoice("", "turned off by vllm_tool_parser: none")
    if pinned:
        if known_at(pinned, version) is False:
            return ParserChoice(pinned, f"pinned; vLLM {shown} does not register it")
        return ParserChoice(pinned, "pinned")
    key = arch.strip().lower()
    found = _candidate(arch, key, (model_id, *names), has_chat_template, template_markers, table)
    if isinstance(found, ParserChoice):
        return found
    parser, source = found
    table_hermes = parser == "hermes" and source in ("auto", "tool_parsers")  # not a finetune's
    if table_hermes and key.startswith("qwen3") and "coder" in model_id.lower():
        parser, source = "qwen3_coder", f"{source}, coder model"
    if parser == "mistral" and source != "tool_parsers" and 0 < vocab_size < MISTRAL_TOOL_VOCAB:
        return ParserChoice("", f"a {vocab_size}-token vocabulary has no [TOOL_CALLS] token, which the "
                                f"mistral parser needs; {HOW_TO_PIN}")
    known = known_at(parser, version)
    if known is False:
        since = format_version(VLLM_PARSERS_BY_VERSION[parser])
        return ParserChoice("", f"{parser} needs vLLM {since} or newer, backend is {shown}")
    if known is None:
        source += f"; not a built-in parser of vLLM {format_version(VLLM_CURRENT)}"
    return ParserChoice(parser, f"{source}: {key}")


HOW_TO_PIN = "pin one in an override (vllm_tool_parser: <name>)"


def _candidate(arch: str, key: str, names: Sequence[str], has_chat_template: bool | None,
               template_markers: Sequence[str] | None,
               table: Mapping[str, str] | None) -> tuple[str, str] | ParserChoice:
    """(parser, source) before the coder, vocabulary and version checks; a ParserChoice when the
    evidence already says no parser: the settings' table, then the chat template's format on an
    ambiguous arch, then the family rules, then the built-in table."""
    user = {k.strip().lower(): v.strip() for k, v in (table or {}).items()}
    if has_chat_template is False:
        return ParserChoice("", f"no chat template, so vLLM cannot show the model its tools; {HOW_TO_PIN}")
    if template_markers is not None and TOOLS_VAR not in template_markers:
        return ParserChoice("", "the chat template never mentions tools, so vLLM cannot show the model its "
                                "tools; give it one that does (--chat-template in extra_args) and pin a parser")
    rule = family_rule(key, names)
    by_template = template_parser(template_markers) if template_markers is not None and key in AMBIGUOUS else None
    if key in user:
        if user[key].lower() == OFF:
            return ParserChoice("", f"turned off for arch {arch!r} by tool_parsers")
        return user[key], "tool_parsers"
    if by_template is not None and not (rule is not None and rule.beats_template):
        parser, evidence = by_template
        source = f"auto, chat template has {evidence}"
        if rule is not None and rule.parser != parser:
            source += f" (over the name rule: {rule.why})"
        if not parser:
            return ParserChoice("", f"{source}, a format no parser reads on arch {key}; {HOW_TO_PIN}")
        return parser, source
    if rule is not None:
        if not rule.parser:
            return ParserChoice("", f"{rule.why}, arch {key}; {HOW_TO_PIN}")
        return rule.parser, f"auto, {rule.why}"
    if key in AMBIGUOUS:
        which = "no name" if template_markers is None else "neither a name nor the chat template"
        return ParserChoice("", f"arch {key} covers several tool formats and {which} says which; pin "
                                f"one in an override (vllm_tool_parser: {AMBIGUOUS[key]})")
    parser = TOOL_PARSERS.get(key, "")
    if not parser:
        return ParserChoice("", f"no parser known for arch {arch!r}; set vllm_tool_parser or tool_parsers")
    return parser, "auto"
