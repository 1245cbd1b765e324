"""A model's `cmd` exactly as llama-swap reads it, and argv → `cmd` text that reads back the same.

llama-swap substitutes macros in the raw `cmd` text, then `SanitizeCommand`
(mostlygeek/llama-swap `internal/config/commands.go`) drops lines whose trimmed text starts
with `#`, turns a trailing `\\` into a space, and splits with `shlex.Posix.Split` from
billziss-gh/golib `shlex/shlex.go`. `split_command` mirrors those rules; `render_cmd` writes
argv so that `split_command(render_cmd(argv)) == argv`, keeping `${PORT}` usable.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

#: Every server we start listens on loopback only; llama-swap is the one that faces the network.
HOST = "127.0.0.1"

#: Go `unicode.IsSpace`.
_GO_SPACE = "\t\n\v\f\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000" + "".join(
    map(chr, range(0x2000, 0x200B))
)

#: Left bare: the characters Python's `shlex.quote` leaves bare, plus printable non-ASCII.
_SAFE_ASCII = re.compile(r"[A-Za-z0-9_@%+=:,./-]*")
#: llama-swap's macro pattern (`internal/config/macros.go: macroPatternRegex`).
_MACRO = re.compile(r"\$\{[a-zA-Z0-9_-]+\}")
#: YAML reads these as line breaks (libyaml `IS_BREAK`), so a block scalar cannot hold them.
_YAML_BREAKS = frozenset("\x85\u2028\u2029")
#: A negative number after an option is its value, not a new option line.
_NEGATIVE_NUMBER = re.compile(r"-[0-9.]")


# One piece of a word. An unterminated quote runs to the end of the text, as in golib.
# Backslash: escapes any character outside quotes; inside "…" only $ ` " \ and newline
# (else it stays literal); before a newline or at the very end it yields nothing.
_PIECE = re.compile(
    r"""(?P<space>[ \t\n]+)
      | (?P<bare>[^ \t\n'"\\]+)
      | '(?P<single>[^']*)'?
      | "(?P<double>(?:[^"\\]|\\.|\\\Z)*)"?
      | \\(?P<escaped>.?)""",
    re.VERBOSE | re.DOTALL,
)
_LEXED = re.compile(r"['\"\\\\]")
_SEPARATORS = re.compile(r"[ \t\n]+")
_DQ_ESCAPE = re.compile(r'\\([$`"\\\n]|\Z)')


def posix_split(text: str) -> list[str]:
    """golib `shlex.Posix.Split`: POSIX word splitting without any expansion of `$`.

    Only space, tab and newline separate words (`\\r` and Unicode spaces do not).
    """
    if not _LEXED.search(text):  # the common case: nothing quoted or escaped
        stripped = text.strip(" \t\n")
        return _SEPARATORS.split(stripped) if stripped else []
    tokens: list[str] = []
    word: list[str] | None = None  # None: between words (an escaped newline starts none)
    for m in _PIECE.finditer(text):
        kind = m.lastgroup
        if kind == "space":
            if word is not None:
                tokens.append("".join(word))
                word = None
            continue
        if kind == "escaped":
            piece = m["escaped"]
            if piece in ("", "\n"):
                continue
        elif kind == "double":
            piece = _DQ_ESCAPE.sub(lambda e: e[1].strip("\n"), m["double"])
        else:
            piece = m[kind]
        if word is None:
            word = []
        word.append(piece)
    if word is not None:
        tokens.append("".join(word))
    return tokens


def _go_trim_space(line: str) -> str:
    """Go `strings.TrimSpace` (`unicode.IsSpace`: Python's set minus U+001C..U+001F)."""
    return line.strip(_GO_SPACE)


def strip_comment_lines(cmd: str) -> str:
    """llama-swap `StripComments`: drop lines whose trimmed text starts with `#`.

    The loader does this before macro substitution, so `${PORT}` in a comment line counts
    for nothing.
    """
    if "#" not in cmd:
        return cmd
    return "\n".join(ln for ln in cmd.split("\n") if not _go_trim_space(ln).startswith("#"))


def sanitize_command(cmd: str) -> str:
    """`SanitizeCommand`'s text pass: drop `#` lines, join lines that end in `\\`."""
    cmd = strip_comment_lines(cmd)
    if "\\" not in cmd:
        return cmd
    cleaned = []
    for line in cmd.split("\n"):
        trimmed = _go_trim_space(line)
        cleaned.append(trimmed[:-1] + " " if trimmed.endswith("\\") else line)
    return "\n".join(cleaned)


def split_command(cmd: str) -> list[str]:
    """The argv llama-swap starts for `cmd` on POSIX (after its macro substitution)."""
    return posix_split(sanitize_command(cmd))


def _uncarried_char(arg: str) -> str | None:
    """Why `arg` cannot be written inside a YAML block scalar at all, else None."""
    for ch in arg:
        if ch == "\n":
            return "contains a newline"
        if ch == "\0":
            return "contains a NUL character"
        if ch in _YAML_BREAKS:
            return f"contains U+{ord(ch):04X}, which YAML reads as a line break"
        cat = unicodedata.category(ch)
        if cat == "Cs":
            return "is not valid UTF-8"
        if cat == "Cc" or ch in "\ufeff\ufffe\uffff":
            return f"contains a control character (U+{ord(ch):04X})"
    return None


def _is_bare(arg: str) -> bool:
    rest = _MACRO.sub("", arg)
    return all(
        _SAFE_ASCII.fullmatch(ch) if ch.isascii() else ch.isprintable() for ch in rest
    )


def quote_arg(arg: str) -> str:
    """The shortest text `split_command` reads back as exactly `arg`.

    Bare when only safe characters (macros like `${PORT}` count as safe); else single
    quotes with the `'\\''` trick, or double quotes when shorter. Never ends in `\\`
    (llama-swap would join the next line) and never starts with `#` (a comment line).
    Raises ValueError for text no YAML block scalar can carry (see `unsafe_arg_reason`).
    """
    if (why := _uncarried_char(arg)) is not None:
        raise ValueError(f"cannot quote {arg!r}: {why}")
    if arg and not arg.startswith("#") and _is_bare(arg):
        return arg
    single = "'" + arg.replace("'", "'\\''") + "'"
    if single.startswith("''\\'"):
        single = single[2:]
    if single.endswith("\\'''"):
        single = single[:-2]
    if "'" not in arg:
        return single
    # Inside double quotes only \ and " need escaping here; `$` stays literal so a macro
    # such as ${PORT} keeps its exact text for llama-swap's substitution.
    double = '"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return double if len(double) < len(single) else single


def _is_option(arg: str) -> bool:
    return arg.startswith("-") and len(arg) > 1 and not _NEGATIVE_NUMBER.match(arg)


def render_cmd(argv: Sequence[str]) -> str:
    """Text for a `cmd: |` block scalar: the program (and positionals) on the first line,
    then one option per line with its values, indented by two spaces. Ends in a newline.
    """
    if not argv:
        raise ValueError("cannot render an empty argv")
    lines: list[list[str]] = [[quote_arg(argv[0])]]
    for arg in argv[1:]:
        if _is_option(arg):
            lines.append([])
        lines[-1].append(quote_arg(arg))
    first, *rest = (" ".join(words) for words in lines)
    return "".join([first, "\n", *(f"  {line}\n" for line in rest)])


def unsafe_arg_reason(arg: str) -> str | None:
    """Why a model-derived argument (a path, a name) cannot be emitted safely, else None.

    Emitters turn the reason into a `# SKIPPED` line. Spaces, quotes, backslashes, `$`
    and Unicode are fine: `quote_arg` handles them. Not for the emitter's own flags.
    """
    if arg == "":
        return "is empty"
    if "${" in arg:
        return "contains '${', which llama-swap would read as a macro"
    if (why := _uncarried_char(arg)) is not None:
        return why
    if arg.startswith("-"):
        return "starts with '-', which the engine would read as an option"
    return None
