"""`swapgen validate FILE.ini`: a models preset read as llama.cpp's router reads it
(common/preset.cpp `parse_ini_from_file`, tools/server/server-models.cpp), its keys checked
against the llama-server that will read it."""

from __future__ import annotations

import contextlib
import io
import os
import stat
from pathlib import Path

import pytest

from autogen.commands import cli
from autogen.flags.llama import recorded_table
from autogen.router.llama_options import PRESET_KEYS, help_keys
from autogen.router.preset_check import build_keys, check_preset_text, listed_name, recorded_keys

HELP = Path(__file__).resolve().parent / "data" / "llama_server_help_b11434.txt"

GOOD = """; a preset
version = 1

[*]
fit = off
threads = 8  ; every model

[qwen3-8b]
model = /models/Qwen3 8B.gguf
ctx-size = 40960
c = 40960
"""


def messages(text: str, **kw) -> list[str]:
    return [str(p) for p in check_preset_text(text, "m.ini", **kw)]


def test_the_recorded_table_is_exactly_what_llama_server_help_lists():
    """Every key `--help` of b11434 allows has a recorded option, and no recorded key is made up."""
    recorded = set(recorded_table().by_key) - PRESET_KEYS
    assert recorded == set(help_keys(HELP.read_text(encoding="utf-8")))


class TestLines:
    def test_a_clean_preset_has_no_problem_but_a_repeated_setting(self):
        assert messages(GOOD) == ["m.ini:11: error: [qwen3-8b] c: the same setting as line 10; llama.cpp keeps the last one"]

    @pytest.mark.parametrize("line", ["  ctx-size = 5", "[unclosed", "ctx-size", "[a] junk", "9key = 1"])
    def test_a_line_llama_cpp_cannot_read_fails_the_whole_file(self, line):
        (message,) = messages(f"[a]\nmodel = /m.gguf\n{line}\n")
        assert message.startswith("m.ini:3: error: llama.cpp cannot read this line")

    def test_comments_and_blank_lines_may_be_indented(self):
        assert messages("  ; note\n\t\n[a] ; x\nmodel = /m.gguf # y\n") == []

    def test_a_value_ends_at_a_comment_sign(self):
        """`c = 1;2` is `c = 1` for llama.cpp: the value is what it reads."""
        assert messages("[a]\nmodel = /m.gguf\nembeddings = true;x\n") == []


class TestKeys:
    @pytest.mark.parametrize(("line", "message"), [
        ("ctx-sise = 4", "[a] ctx-sise: not an argument of llama-server (llama-server b11434's recorded arguments) "
                         "(did you mean 'ctx-size'?)"),
        ("host = 0.0.0.0", "[a] host: llama.cpp's router owns it: the router binds every instance to 127.0.0.1; "
                           "remove it"),
        ("port = 8081", "[a] port: llama.cpp's router owns it: the router picks a free port for every instance; "
                        "remove it"),
        ("api-key = k", "[a] api-key: llama.cpp's router owns it: API keys are the router's (start it with "
                        "--api-key); remove it"),
        ("LLAMA_ARG_MODELS_MAX = 2", "[a] LLAMA_ARG_MODELS_MAX: llama.cpp's router owns it: a router setting, "
                                     "not a model's; remove it"),
        ("control-vector-layer-range = 1 2", "[a] control-vector-layer-range: takes two values, which a preset key "
                                             "cannot hold (llama.cpp refuses to start the model)"),
        ("embeddings = yes", "[a] embeddings: 'yes': expected true or false"),
        ("load-on-startup = maybe", "[a] load-on-startup: 'maybe': expected true or false"),
        ("stop-timeout = 2s", "[a] stop-timeout: '2s': expected an integer"),
    ])
    def test_a_bad_key_is_named_with_its_line(self, line, message):
        assert messages(f"[a]\nmodel = /m.gguf\n{line}\n") == [f"m.ini:3: error: {message}"]

    @pytest.mark.parametrize("line", ["ngl = 99", "LLAMA_ARG_N_GPU_LAYERS = 99", "no-mmproj-offload = true",
                                      "LLAMA_ARG_NO_MMPROJ_OFFLOAD = 1", "alias = q,qwen", "load-on-startup = on",
                                      "stop-timeout = 30", "dedup-cache-models = true"])
    def test_every_spelling_llama_cpp_maps_is_accepted(self, line):
        assert messages(f"[a]\nmodel = /m.gguf\n{line}\n") == []

    def test_an_alias_in_star_is_refused(self):
        assert messages("[*]\nalias = x\n") == ["m.ini:2: error: [*] alias: every model would get the same names; "
                                                "give each section its own alias"]

    def test_keys_before_any_section_make_a_model(self):
        assert messages("version = 1\nc = 4096\n") == [
            "m.ini:2: error: keys before the first section make a model named 'default'; put them under [*] for every model"]


class TestNames:
    def test_an_alias_that_is_another_section_is_refused(self):
        assert messages("[a]\nmodel = /a.gguf\n[b]\nmodel = /b.gguf\nalias = a, z\n") == [
            "m.ini:5: error: [b] alias 'a' is already a section: llama.cpp's router refuses the file"]

    def test_two_sections_with_one_alias_are_refused(self):
        assert messages("[a]\nmodel = /a.gguf\nalias = z\n[b]\nmodel = /b.gguf\nalias = z\n") == [
            "m.ini:6: error: [b] alias 'z' is already an alias of [a]: llama.cpp's router refuses the file"]

    def test_a_repeated_section_keeps_only_its_last_keys(self):
        assert messages("[a]\nmodel = /a.gguf\n[a]\nmodel = /b.gguf\n") == [
            "m.ini:3: error: section [a] again (line 1): llama.cpp keeps only the keys after its last header"]

    def test_a_section_without_a_model_is_a_warning(self):
        (problem,) = check_preset_text("[ggml-org/gemma:Q4_K_M]\nc = 4096\n", "m.ini")
        assert not problem.fatal and "has no model key" in problem.message

    @pytest.mark.parametrize(("name", "listed"), [("x:q4_k_m", "x:Q4_K_M"), ("x:gemma-3-Q8_0", "x:Q8_0"),
                                                  ("plain-id", "plain-id"), ("*", "*")])
    def test_listed_names_follow_llama_cpps_tag_rule(self, name, listed):
        assert listed_name(name) == listed


class TestBuildKeys:
    def fake_server(self, tmp_path, help_text: str) -> str:
        exe = tmp_path / "llama-server"
        (tmp_path / "help.txt").write_text(help_text)
        exe.write_text(f"#!/bin/sh\ncat '{tmp_path / 'help.txt'}'\n")
        exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
        return str(exe)

    def test_the_builds_own_help_decides(self, tmp_path):
        """An older build without `--fit`: the key it would refuse is named, with the source."""
        text = "\n".join(line for line in HELP.read_text().splitlines() if not line.startswith("-fit,"))
        keys = build_keys(self.fake_server(tmp_path, text))
        assert keys.source == f"{tmp_path / 'llama-server'} --help"
        (problem,) = check_preset_text("[a]\nmodel = /m.gguf\nfit = off\n", "m.ini", keys)
        assert str(problem).startswith(f"m.ini:3: error: [a] fit: not an argument of llama-server ({keys.source})")

    def test_a_binary_that_does_not_print_options_falls_back_to_the_record(self, tmp_path):
        assert build_keys(self.fake_server(tmp_path, "usage: nothing\n")) == recorded_keys()
        assert build_keys(str(tmp_path / "absent")) == recorded_keys()
        assert build_keys(None) == recorded_keys()


def run(argv: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        rc = cli.main(argv)
    return rc, out.getvalue()


class TestCommand:
    def test_validate_a_preset_file(self, tmp_path, monkeypatch):
        monkeypatch.chdir(tmp_path)  # no settings here: the recorded arguments
        (tmp_path / "models.ini").write_text(GOOD.replace("c = 40960\n", ""))
        assert run(["validate", "models.ini"]) == (
            0, "models.ini: valid llama.cpp models preset (1 model; keys of llama-server b11434's recorded "
               "arguments)\n")

    def test_a_bad_preset_fails_with_one_line_per_problem(self, tmp_path, monkeypatch):
        monkeypatch.chdir(tmp_path)
        (tmp_path / "bad.ini").write_text("[a]\nmodel = /m.gguf\nport = 1\n")
        rc, out = run(["validate", "bad.ini"])
        assert rc == 1 and out.startswith("bad.ini:3: error: [a] port: llama.cpp's router owns it")

    def test_the_settings_llama_server_is_asked(self, tmp_path, monkeypatch):
        monkeypatch.chdir(tmp_path)
        exe = TestBuildKeys().fake_server(tmp_path, HELP.read_text())
        (tmp_path / "swapgen.yaml").write_text(f"roots: [models]\nbackends:\n  - {{id: l, kind: llama, path: {exe}}}\n")
        (tmp_path / "models.ini").write_text("[a]\nmodel = /m.gguf\n")
        rc, out = run(["validate", "models.ini"])
        assert (rc, out) == (0, f"models.ini: valid llama.cpp models preset (1 model; keys of {exe} --help)\n")
        assert os.path.exists(exe)
