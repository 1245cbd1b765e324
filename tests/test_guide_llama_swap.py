"""docs/llama-swap-settings.md stays true: the settings of "Top-level and per-model keys" and "A
config-dir fragment" run on a library with the models they name, and the output they show is
what swapgen writes and prints (`…` lines stand for lines left out)."""

from __future__ import annotations

import contextlib
import io
import re

import pytest

from autogen.commands import cli
from tests.builders import add_model
from tests.guide_pages import chunks, in_order, page, prose, section_blocks

#: The page, and its two examples' sections.
GUIDE = page("llama-swap-settings.md")
OWN_KEYS = "## Top-level and per-model keys"
FRAGMENT = "## A config-dir fragment (`output_mode: fragment`)"
MODELS = ("Qwen/Qwen3-8B-GGUF/Qwen3-8B-Q4_K_M.gguf", "google/gemma-3-4b-it-GGUF/gemma-3-4b-it-Q4_K_M.gguf")


def block(blocks, lang: str, first_line: str) -> str:
    """The first block of the section in `lang` whose first line is `first_line`."""
    return next(body for lg, body, _ in blocks if lg == lang and body.splitlines()[0] == first_line)


def library(tmp_path, settings: str):
    for rel in MODELS:
        add_model(tmp_path / "models", rel)
    (tmp_path / "swapgen.yaml").write_text(settings)
    return tmp_path


def run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(argv)
    return rc, out.getvalue(), err.getvalue()


def test_own_settings_example_writes_what_it_shows(tmp_path, monkeypatch):
    blocks = section_blocks(OWN_KEYS, GUIDE)
    root = library(tmp_path, block(blocks, "yaml", "# swapgen.yaml"))
    monkeypatch.setenv("LLAMA_SWAP_API_KEY", "k-readme")
    rc, _, err = run(["--settings", str(root / "swapgen.yaml")])
    assert rc == 0, err
    written = (root / "config.yaml").read_text()
    _, shown = block(blocks, "text", "$ swapgen && cat config.yaml").split("\n", 1)
    pieces = chunks(shown)
    assert written.startswith(pieces[0]) and len(pieces) >= 4
    missing = in_order(pieces, written)
    assert missing is None, f"docs/llama-swap-settings.md: not in the generated config (in this order):\n{missing}"


def test_plain_text_key_warning_is_what_a_run_prints(tmp_path):
    root = library(tmp_path, "roots: [models]\noutput: config.yaml\nllama_swap: {apiKeys: [sk-plain]}\n")
    rc, _, err = run(["--settings", str(root / "swapgen.yaml")])
    assert rc == 0
    (line,) = [ln for ln in err.splitlines() if "plain text" in ln]
    line = line.replace(str(root / "config.yaml"), "config.yaml")
    assert f"`{line}`" in prose(GUIDE), line


def test_fragment_example_merges_with_its_main_file(tmp_path, monkeypatch):
    blocks = section_blocks(FRAGMENT, GUIDE)
    root = library(tmp_path, block(blocks, "yaml", "# swapgen.yaml"))
    main = block(blocks, "yaml", "# config.yaml")
    (root / "config.yaml").write_text(main)
    monkeypatch.setenv("LLAMA_SWAP_API_KEY", "k-readme")
    monkeypatch.chdir(root)
    transcript = block(blocks, "text", "$ swapgen && head -n 2 conf.d/50-swapgen.yaml").splitlines()
    rc, _, err = run(["--settings", "swapgen.yaml"])
    assert rc == 0, err
    assert (root / "config.yaml").read_text() == main, "the main file is never touched"
    assert (root / "conf.d/50-swapgen.yaml").read_text().splitlines()[:2] == transcript[1:3]
    command = transcript[3]
    assert command == "$ swapgen validate config.yaml --config-dir conf.d"
    rc, out, _ = run(command.split()[2:])
    assert rc == 0 and out.splitlines() == [transcript[4]]
    assert re.fullmatch(r"\$ llama-swap --config config\.yaml --config-dir conf\.d .*", transcript[5])


@pytest.mark.parametrize(("mistake", "wanted"), [
    (("logLevel: info", "logLevl: info"), ["swapgen.yaml:9: llama_swap.logLevl: "]),
    (("gemma-3-4b-it-q4_k_m]", "gemma-3-4b-it-q8_0]"), ["config.yaml:16: selectors.assistant.targets[1] ",
                                                        "swapgen.yaml:17: llama_swap.selectors.assistant.targets[1]"]),
])
def test_quoted_error_lines_are_what_a_run_prints(tmp_path, monkeypatch, mistake, wanted):
    """The section's settings (its `# swapgen.yaml` line kept, as a reader copies it) with one
    mistake: each line the prose quotes is a line the run prints, whole."""
    blocks = section_blocks(OWN_KEYS, GUIDE)
    root = library(tmp_path, block(blocks, "yaml", "# swapgen.yaml").replace(*mistake))
    monkeypatch.setenv("LLAMA_SWAP_API_KEY", "k-readme")
    rc, _, err = run(["--settings", str(root / "swapgen.yaml")])
    assert rc == 1
    for start in wanted:
        (line,) = [ln.strip() for ln in err.replace(f"{root}/", "").splitlines() if ln.strip().startswith(start)]
        assert f"`{line}`" in prose(GUIDE), line
