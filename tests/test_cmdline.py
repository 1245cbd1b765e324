"""`cmd` text ↔ argv, as llama-swap's SanitizeCommand + golib shlex.Posix read it."""

from __future__ import annotations

import importlib
import io
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML
from ruamel.yaml.scalarstring import LiteralScalarString

from autogen.cmdline import HOST, posix_split, quote_arg, render_cmd, split_command, unsafe_arg_reason

# Cases from golib shlex/shlex_test.go TestPosix (the splitter llama-swap uses).
GOLIB_POSIX_CASES = [
    ("", []),
    ("   foo", ["foo"]),
    ("foo   bar", ["foo", "bar"]),
    ('foo"   "bar', ["foo   bar"]),
    ('foo "bar   baz', ["foo", "bar   baz"]),
    ('foo "bar   baz"bag', ["foo", "bar   bazbag"]),
    ('foo "" bar', ["foo", "", "bar"]),
    ("foo'   'bar", ["foo   bar"]),
    ("foo '' bar", ["foo", "", "bar"]),
    ("\\foo", ["foo"]),
    ('f\\"oo', ['f"oo']),
    ("foo\\'", ["foo'"]),
    ('foo "b\\ar"', ["foo", "b\\ar"]),
    ('foo "b\\"ar"', ["foo", 'b"ar']),
    ('foo"\\', ["foo"]),
    ('foo "b\\"ar\'"', ["foo", "b\"ar'"]),
    ("foo 'b\\ar'", ["foo", "b\\ar"]),
    ("foo 'b\\\"ar'", ["foo", 'b\\"ar']),
    ("foo'\\", ["foo\\"]),
]


@pytest.mark.parametrize(("text", "argv"), GOLIB_POSIX_CASES)
def test_splitter_matches_golib_posix_dialect(text, argv):
    assert posix_split(text) == argv
    assert golib_posix_split(text) == argv


def golib_posix_split(line: str) -> list[str]:  # noqa: C901 (one branch per state of shlex.go)
    """Oracle: golib `Dialect.Split` (Posix) transcribed state for state from shlex.go."""
    tokens, token, state = [], None, [" "]
    i = 0
    while i < len(line):
        r, r0 = line[i], line[i + 1] if i + 1 < len(line) else None
        i += 1
        s = state[-1]
        e = None  # golib NoEscape; "" is its EmptyRune
        if r == "\\" and s != "'":
            if r0 is None or r0 == "\n":
                e = ""
            elif s in " A" or r0 in '$`"\\':
                e = r0
        if e is not None:
            i += r0 is not None
            if e == "":
                continue
        if s == " ":
            if e is not None:
                state.append("A")
                token = [e]
            elif r in "'\"":
                state += ["A", r]
                token = []
            elif r not in " \t\n":
                state.append("A")
                token = [r]
        elif s == "A":
            if e is not None:
                token.append(e)
            elif r in "'\"":
                state.append(r)
            elif r in " \t\n":
                state.pop()
                tokens.append("".join(token))
                token = None
            else:
                token.append(r)
        elif e is not None:
            token.append(e)
        elif r == s:
            state.pop()
        else:
            token.append(r)
    if token is not None:
        tokens.append("".join(token))
    return tokens


@settings(max_examples=2000)
@given(st.text(st.sampled_from(list("ab '\"\\\n\t\r$`#"))))
def test_fast_splitter_agrees_with_golib_state_machine(text):
    assert posix_split(text) == golib_posix_split(text)


def test_backslash_at_end_of_text_becomes_a_space_before_splitting():
    """SanitizeCommand's line pass runs first, so golib's `foo'\\` case differs."""
    assert split_command("foo'\\") == ["foo "]


def test_comment_lines_are_dropped_even_when_indented():
    assert split_command("llama-server\n  # -c 4096\n  --port ${PORT}\n") == [
        "llama-server",
        "--port",
        "${PORT}",
    ]


def test_trailing_backslash_joins_lines():
    assert split_command("llama-server \\\n  -m a.gguf\\\n-c 1") == [
        "llama-server",
        "-m",
        "a.gguf",
        "-c",
        "1",
    ]


def test_double_backslash_at_line_end_still_joins_like_llama_swap():
    """SanitizeCommand strips one `\\` then adds a space, which the splitter escapes."""
    assert split_command("a\\\\\nb") == ["a ", "b"]


def test_carriage_return_is_not_a_separator():
    assert split_command("a\rb c") == ["a\rb", "c"]


def test_dollar_is_never_expanded():
    assert split_command('x $HOME "${PORT}" \\$y') == ["x", "$HOME", "${PORT}", "$y"]


HOSTILE_ARGS = [
    "/models/a b/c d.gguf",
    "/models/it's.gguf",
    '/models/say "hi".gguf',
    "/models/back\\slash.gguf",
    "/models/ends-with-backslash\\",
    "\\",
    "'",
    '"',
    "''",
    "$HOME/models/x.gguf",
    "/models/$(rm -rf ~).gguf",
    "/models/`id`.gguf",
    "/models/日本語/モデル.gguf",
    "/models/emoji-🦙.gguf",
    "#not-a-comment",
    "# also not",
    "a#b",
    "/models/nbsp\u00a0name.gguf",
    "/models/trailing space ",
    " leading space",
    "",
    "-",
    "{a,b}",
    "*.gguf",
    "~/x",
]


@pytest.mark.parametrize("arg", HOSTILE_ARGS)
def test_hostile_arg_round_trips_through_quote(arg):
    assert split_command(quote_arg(arg)) == [arg]


@pytest.mark.parametrize("arg", HOSTILE_ARGS)
def test_hostile_arg_round_trips_inside_render(arg):
    argv = [arg, "-m", arg, "--port", "${PORT}", arg]
    assert split_command(render_cmd(argv)) == argv


@pytest.mark.parametrize(
    ("arg", "quoted"),
    [
        ("llama-server", "llama-server"),
        ("/models/a.Q4_K_M.gguf", "/models/a.Q4_K_M.gguf"),
        ("${PORT}", "${PORT}"),
        ("http://127.0.0.1:${PORT}", "http://127.0.0.1:${PORT}"),
        ("/models/日本語.gguf", "/models/日本語.gguf"),
        ("a b", "'a b'"),
        ("$HOME", "'$HOME'"),
        ("it's", '"it\'s"'),
        ("'", "\\'"),
        ("", "''"),
        ("#x", "'#x'"),
        ('a"b\\', "'a\"b\\'"),
    ],
)
def test_quote_is_bare_when_safe_and_short_otherwise(arg, quoted):
    assert quote_arg(arg) == quoted


@pytest.mark.parametrize("arg", HOSTILE_ARGS)
def test_quoted_text_never_ends_in_backslash_or_starts_with_hash(arg):
    quoted = quote_arg(arg)
    assert not quoted.endswith("\\")
    assert not quoted.startswith("#")


def test_render_puts_one_option_per_line_with_its_values():
    argv = ["llama-server", "-m", "/models/a b.gguf", "--port", "${PORT}", "--temp", "-1", "--jinja"]
    assert render_cmd(argv) == (
        "llama-server\n  -m '/models/a b.gguf'\n  --port ${PORT}\n  --temp -1\n  --jinja\n"
    )


def test_render_keeps_positionals_on_the_program_line():
    assert render_cmd(["vllm", "serve", "/m/x", "--port", "${PORT}"]) == (
        "vllm serve /m/x\n  --port ${PORT}\n"
    )


def test_port_macro_is_substituted_in_raw_text_before_splitting():
    """llama-swap replaces `${PORT}` in the text, then splits: quoting must not hide it."""
    argv = ["srv", "--url", "http://h:${PORT}/a b", "--x", "it's ${PORT}", "--y", 'q"${PORT}\\']
    text = render_cmd(argv).replace("${PORT}", "5800")
    assert split_command(text) == [a.replace("${PORT}", "5800") for a in argv]


def test_render_refuses_empty_argv():
    with pytest.raises(ValueError, match="empty argv"):
        render_cmd([])


@pytest.mark.parametrize(
    ("arg", "reason"),
    [
        ("/m/a\nb.gguf", "contains a newline"),
        ("/m/a\0b.gguf", "contains a NUL character"),
        ("/m/a\tb.gguf", "contains a control character (U+0009)"),
        ("/m/a\x1bb.gguf", "contains a control character (U+001B)"),
        ("/m/a\u2028b.gguf", "contains U+2028, which YAML reads as a line break"),
        ("/m/a\udcffb.gguf", "is not valid UTF-8"),
    ],
)
def test_uncarriable_text_is_refused_by_quote_and_reported(arg, reason):
    assert unsafe_arg_reason(arg) == reason
    with pytest.raises(ValueError, match="cannot quote"):
        quote_arg(arg)


@pytest.mark.parametrize(
    ("arg", "reason"),
    [
        ("/models/${PORT}.gguf", "contains '${', which llama-swap would read as a macro"),
        ("/models/${env.HOME}.gguf", "contains '${', which llama-swap would read as a macro"),
        ("-evil.gguf", "starts with '-', which the engine would read as an option"),
        ("", "is empty"),
    ],
)
def test_unsafe_reason_names_the_problem(arg, reason):
    assert unsafe_arg_reason(arg) == reason


@pytest.mark.parametrize("arg", [a for a in HOSTILE_ARGS if a and not a.startswith("-")])
def test_hostile_but_emittable_args_have_no_unsafe_reason(arg):
    assert unsafe_arg_reason(arg) is None


# Any text the emitters may pass: everything except characters YAML cannot carry.
SAFE_TEXT = st.text(
    st.characters(blacklist_categories=("Cc", "Cs"), blacklist_characters="\u2028\u2029\ufeff\ufffe\uffff\x85")
)


@settings(max_examples=300)
@given(st.lists(SAFE_TEXT, min_size=1, max_size=8))
def test_any_safe_argv_round_trips(argv):
    assert split_command(render_cmd(argv)) == argv


@settings(max_examples=300)
@given(SAFE_TEXT)
def test_any_safe_arg_quotes_to_itself(arg):
    assert split_command(quote_arg(arg)) == [arg]


@settings(max_examples=50, deadline=None)
@given(st.lists(SAFE_TEXT, min_size=1, max_size=5))
def test_rendered_cmd_survives_a_ruamel_literal_block(argv):
    """What the fragment renderer writes (a `|` block) loads back to the same text."""
    yaml = YAML()
    buf = io.StringIO()
    yaml.dump({"cmd": LiteralScalarString(render_cmd(argv))}, buf)
    assert "cmd: |" in buf.getvalue()
    assert split_command(yaml.load(buf.getvalue())["cmd"]) == argv


def test_the_loopback_host_is_defined_once_and_every_emitter_uses_it():
    package = Path(importlib.import_module("autogen").__file__).parent
    defining = sorted(str(p.relative_to(package)) for p in package.rglob("*.py")
                      if re.search(r"^HOST\s*=", p.read_text(), re.M))
    assert defining == ["cmdline.py"] and HOST == "127.0.0.1"
    for name in ("llama", "vllm", "sd", "audio", "sam"):
        assert importlib.import_module(f"autogen.emit.{name}").HOST is HOST
