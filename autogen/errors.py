"""Errors meant for users. Anything else reaching the top level is a bug (traceback)."""


class SwapgenError(Exception):
    """A problem the user can fix; printed without a traceback, exit 1."""


class SettingsError(SwapgenError):
    """`swapgen.yaml` (or the backends file) is invalid. `problems` holds one line per error."""

    def __init__(self, source: str, problems: list[str]):
        self.source = source
        self.problems = list(problems)
        super().__init__(f"{source}: " + "; ".join(self.problems))

    def __str__(self) -> str:
        lines = [f"{self.source}: invalid settings"]
        lines += [f"  {p}" for p in self.problems]
        return "\n".join(lines)


class ModelError(Exception):
    """One model cannot be read or served; becomes a `# SKIPPED "<id>": <reason>` line."""
