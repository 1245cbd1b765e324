"""docs/troubleshooting.md stays true: each transcript is what swapgen prints on the page's
library (one GGUF under models/, the folder shown as /home/me/llm), stderr first as a terminal
shows it, and each quoted line is one a run prints."""

from __future__ import annotations

import pytest

from autogen.commands import cli
from autogen.resolve import gpus
from tests.builders import add_model
from tests.guide_pages import code_blocks, page, prose, section_blocks

GUIDE = page("troubleshooting.md")
SHOWN = "/home/me/llm"
MODEL = "Qwen/Qwen3-8B-GGUF/Qwen3-8B-Q4_K_M.gguf"
#: Settings the examples after the first one run with: nothing to warn about.
QUIET = """roots: [models]
vram_budget_gb: 8
card_vram_gb: 0
backends:
  - {id: llama-cuda, kind: llama, path: llama-server, default: true}
"""


@pytest.fixture
def llm(tmp_path, monkeypatch):
    """The page's library with no GPU to probe, the current folder its own."""
    add_model(tmp_path / "models", MODEL)
    monkeypatch.setattr(gpus, "probe_gpus", lambda: ())
    monkeypatch.chdir(tmp_path)
    return tmp_path


def swapgen(folder, capsys, *argv: str) -> tuple[int, str]:
    """`$ swapgen ARGV` as the page shows it: the command line, stderr, then stdout."""
    rc = cli.main(list(argv))
    out, err = capsys.readouterr()
    shown = " ".join(["$ swapgen", *argv]) + "\n" + err + out
    return rc, shown.replace(str(folder), SHOWN)


def transcript(heading: str, starts: str) -> str:
    (body,) = [b for lang, b, _ in section_blocks(heading, GUIDE) if lang == "text" and starts in b]
    return body


def test_the_warnings_are_what_a_run_prints(llm, capsys):
    ((_, settings, _),) = [b for b in section_blocks("## Warnings on every run", GUIDE) if b[0] == "yaml"]
    (llm / "swapgen.yaml").write_text(settings)
    rc, shown = swapgen(llm, capsys)
    assert rc == 0
    assert shown == transcript("## Warnings on every run", "$ swapgen\n")


def test_a_root_that_holds_no_model_stops_the_run(llm, capsys):
    (llm / "swapgen.yaml").write_text(QUIET)
    swapgen(llm, capsys)
    (llm / "models").rename(llm / "unmounted")
    (llm / "models").mkdir()
    before = (llm / "config.yaml").read_bytes()
    rc, shown = swapgen(llm, capsys)
    assert rc == 1 and (llm / "config.yaml").read_bytes() == before
    assert shown == transcript("## The run stops: a root holds no model", "$ swapgen\n")


def test_a_renamed_file_is_said_once(llm, capsys):
    (llm / "swapgen.yaml").write_text(QUIET)
    swapgen(llm, capsys)
    shown = transcript("## An id changed", "$ mv ")
    move, rest = shown.split("\n", 1)
    old, new = move.split()[2:]
    (llm / old).rename(llm / new)
    rc, printed = swapgen(llm, capsys)
    assert rc == 0 and printed == rest
    assert "warning" not in swapgen(llm, capsys)[1], "said by the run that gives the new id only"


def test_an_alias_keeps_the_old_name_for_clients(llm, capsys):
    """The fix the page gives: the old id as an alias of the renamed model."""
    (line,) = [ln for ln in GUIDE.read_text().splitlines() if "llama_swap: {aliases: [" in ln]
    alias = line.split("`")[1]
    (llm / "models" / MODEL).rename(llm / "models" / MODEL.replace("Q4_K_M", "Q5_K_M"))
    (llm / "swapgen.yaml").write_text(QUIET + f'overrides:\n  - match: "*Qwen3-8B*"\n    {alias}\n')
    assert swapgen(llm, capsys)[0] == 0
    config = (llm / "config.yaml").read_text()
    assert '"qwen3-8b-q5_k_m":' in config and 'aliases: ["qwen3-8b-q4_k_m"]' in config


def test_the_quoted_skip_reason_is_what_list_shows(llm, capsys):
    (llm / "swapgen.yaml").write_text(QUIET + 'overrides:\n  - {match: "*Qwen3-8B*", skip: true}\n')
    swapgen(llm, capsys)
    _, listed = swapgen(llm, capsys, "list")
    (row,) = [line for line in listed.splitlines() if "SKIPPED" in line]
    reason = row.rsplit("(", 1)[1].rstrip(")")
    assert f"`{reason}`" in prose(GUIDE)
    assert "SKIPPED" not in (llm / "config.yaml").read_text(), "left out on purpose: no `# SKIPPED` line"


def test_every_transcript_is_checked():
    """A new example on the page needs its test here."""
    shown = [b for lang, b, _ in code_blocks(GUIDE) if lang == "text" and b.startswith("$ ")]
    assert len(shown) == 3
