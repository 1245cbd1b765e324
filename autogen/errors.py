"""Errors meant for users. Anything else reaching the top level is a bug (traceback)."""


def did_you_mean(word: str, choices: list[str]) -> str:
    """` (did you mean 'x'?)`, or "" when nothing is close."""
    from difflib import get_close_matches  # noqa: PLC0415 - lazy: only on a mistake, not every run

    hint = get_close_matches(word, choices, n=1)
    return f" (did you mean {hint[0]!r}?)" if hint else ""


class SwapgenError(Exception):
    """A problem the user can fix; printed without a traceback, exit 1."""


class SettingsError(SwapgenError):
    """`swapgen.yaml` (or the backends file) is invalid. `problems` holds one line per error,
    `lines` the line of the file each one is at (None: not known), shown as `file:line:`."""

    def __init__(self, source: str, problems: list[str], lines: list[int | None] | None = None):
        self.source = source
        self.problems = list(problems)
        self.lines = list(lines) if lines is not None else [None] * len(self.problems)
        super().__init__(f"{source}: " + "; ".join(self.problems))

    def __str__(self) -> str:
        out = [f"{self.source}: invalid settings"]
        for problem, line in zip(self.problems, self.lines, strict=True):
            out.append(f"  {self.source}:{line}: {problem}" if line else f"  {problem}")
        return "\n".join(out)


class ModelError(Exception):
    """One model cannot be read or served; becomes a `# SKIPPED "<id>": <reason>` line."""
