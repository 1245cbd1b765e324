"""Inputs and accidents that must never cost a config or print a traceback for a user mistake."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from doit.cmd_base import ModuleTaskLoader
from doit.doit_cmd import DoitMain
from ruamel.yaml import YAML

from autogen.commands import cli, tasks
from autogen.discovery import walk
from autogen.emit import llama as emit_llama
from autogen.errors import SwapgenError
from autogen.router.validate import validate_text
from tests.builders import SETTINGS, add_model, llama_kv
from tests.gguf_fixtures import Q, write_gguf
from tests.runs import generate


def run(tmp_path, *args) -> int:
    return cli.main(["--settings", str(tmp_path / "swapgen.yaml"), *args])


def served(tmp_path) -> list[str]:
    return list(YAML(typ="safe").load((tmp_path / "config.yaml").read_text())["models"] or {})


class TestRoots:
    def test_a_missing_root_stops_the_run_and_keeps_the_config(self, library, capsys):
        assert run(library) == 0
        before = (library / "config.yaml").read_bytes()
        (library / "swapgen.yaml").write_text(SETTINGS.replace("roots: [models]", "roots: [modles]"))
        assert run(library) == 1
        err = capsys.readouterr().err
        assert "roots[0]: cannot list" in err and "nothing was written" in err and "Traceback" not in err
        assert (library / "config.yaml").read_bytes() == before

    def test_other_walk_problems_are_warnings(self, library, capsys):
        (library / "models/loop").symlink_to(library / "models")
        assert run(library) == 0
        err = capsys.readouterr().err
        assert "swapgen: warning:" in err and "symlink loop" in err
        assert served(library) == ["alpha-q4_k_m", "beta-q8_0"]


class TestVanishedLibrary:
    """An empty or unreadable place the live config serves models from stops the run."""

    def test_a_root_that_finds_nothing_while_its_models_are_served_stops_the_run(self, library, capsys):
        assert run(library) == 0
        before = (library / "config.yaml").read_bytes()
        (library / "models").rename(library / "elsewhere")
        (library / "models").mkdir()  # an unmounted mount point
        assert run(library) == 1
        err = capsys.readouterr().err
        assert f"roots[0]: {library / 'models'} holds no model" in err and "not mounted" in err
        assert "hidden folder" in err and "allow_vanished_models: true" in err and "Traceback" not in err
        assert (library / "config.yaml").read_bytes() == before

    def test_a_refused_run_moves_no_id(self, tmp_path, capsys):
        """Two files that make one id: the one that had it keeps it once an unmounted disk is back,
        since the run the empty mount point refused did not record a library without them."""
        add_model(tmp_path / "models", "zeta/Model-GGUF/Model-Q4_K_M.gguf")
        (tmp_path / "swapgen.yaml").write_text(SETTINGS)
        assert run(tmp_path) == 0
        add_model(tmp_path / "models", "alpha/Model-GGUF/Model-Q4_K_M.gguf")
        assert run(tmp_path) == 0
        before = (tmp_path / "config.yaml").read_bytes()
        assert '"model-q4_k_m-alpha":' in before.decode()
        (tmp_path / "models").rename(tmp_path / "unmounted")
        (tmp_path / "models").mkdir()
        assert run(tmp_path) == 1
        (tmp_path / "models").rmdir()
        (tmp_path / "unmounted").rename(tmp_path / "models")
        capsys.readouterr()
        assert run(tmp_path) == 0
        assert (tmp_path / "config.yaml").read_bytes() == before
        assert "is now" not in capsys.readouterr().err

    def test_models_moved_into_a_hidden_folder_stop_the_run(self, library, capsys):
        assert run(library) == 0
        (library / "models/pub").rename(library / "models/.pub")
        assert run(library) == 1
        assert "names starting with '.' are not walked" in capsys.readouterr().err

    def test_the_setting_accepts_a_vanished_root_on_purpose(self, library, capsys):
        assert run(library) == 0
        (library / "models/pub").rename(library / "models/.pub")
        with open(library / "swapgen.yaml", "a") as f:
            f.write("allow_vanished_models: true\n")
        assert run(library) == 0
        assert "warning: roots[0]" in capsys.readouterr().err
        assert served(library) == []

    def test_an_unreadable_folder_whose_models_are_served_stops_the_run(self, library, monkeypatch, capsys):
        assert run(library) == 0
        before = (library / "config.yaml").read_bytes()
        locked = str(library / "models/pub/A-GGUF")
        real_scandir = os.scandir

        def scandir(path="."):
            if os.fspath(path) == locked:
                raise PermissionError(13, "Permission denied")
            return real_scandir(path)

        monkeypatch.setattr(os, "scandir", scandir)
        assert run(library) == 1
        err = capsys.readouterr().err
        assert f"{locked}: cannot list this folder (Permission denied)" in err and "permissions" in err
        assert (library / "config.yaml").read_bytes() == before
        locked = str(library / "models/pub/new-downloads")  # nothing served from it: a warning
        os.mkdir(locked)
        assert run(library) == 0
        assert f"warning: {locked}: cannot list folder (Permission denied)" in capsys.readouterr().err

    def test_a_first_run_that_finds_nothing_says_so(self, tmp_path, capsys):
        (tmp_path / "models").mkdir()
        (tmp_path / "swapgen.yaml").write_text(SETTINGS)
        assert run(tmp_path) == 0
        err = capsys.readouterr().err
        assert f"warning: roots[0]: {tmp_path / 'models'} holds no model swapgen can serve (is it mounted?" in err
        assert served(tmp_path) == []

    def test_an_empty_config_never_replaces_a_served_one(self, library, capsys):
        assert run(library) == 0
        (library / "empty").mkdir()
        (library / "swapgen.yaml").write_text(SETTINGS.replace("roots: [models]", "roots: [empty]"))
        assert run(library) == 1
        assert "no model found in any root, but" in capsys.readouterr().err
        assert served(library) == ["alpha-q4_k_m", "beta-q8_0"]


class TestSettingsThatReachNothing:
    def test_one_warning_line_per_glob_that_matches_nothing_and_per_missing_backend(self, library, capsys):
        with open(library / "swapgen.yaml", "a") as f:
            f.write("overrides:\n"
                    "  - {match: '*Alpha*', ctx: 4096}\n"
                    "  - {match: '*Alhpa*', ctx: 2048}\n"
                    "  - {match: '*Alpha*', quant: Q8_0, ctx: 1024}\n"
                    "groups:\n"
                    "  - {name: small, match: ['beta-*', 'gamma-*']}\n")
        assert run(library) == 0
        warnings = [line for line in capsys.readouterr().err.splitlines() if "warning:" in line]
        assert warnings == [
            "swapgen: warning: swapgen.yaml: overrides[1] (match '*Alhpa*') matches no model",
            "swapgen: warning: swapgen.yaml: overrides[2] (match '*Alpha*', quant 'Q8_0') matches no model",
            "swapgen: warning: swapgen.yaml: groups[0].match[1] ('gamma-*', group 'small') matches no model id",
            "swapgen: warning: backend 'llama': /opt/llama/llama-server does not exist; "
            "llama-swap cannot start the models it serves",
        ]

    def test_bare_backend_names_and_existing_paths_are_not_checked(self, library, capsys):
        (library / "swapgen.yaml").write_text(SETTINGS.replace("/opt/llama/llama-server", "llama-server"))
        assert run(library) == 0
        assert "warning" not in capsys.readouterr().err


class TestIncrementalEdges:
    def test_parallel_runs_keep_their_bookkeeping(self, library):
        assert run(library, "-n", "2") == 0
        rc, graph = generate(library / "swapgen.yaml", "-n", "2")
        assert rc == 0 and graph.stats["emitted"] == 0

    def test_a_file_changed_after_loading_is_re_emitted_next_time(self, library):
        """doit records a file's state after the task ran; the key must carry what was read."""
        assert run(library) == 0
        pipeline = tasks.load(str(library / "swapgen.yaml"))
        target = library / "models/pub/A-GGUF/Alpha-Q4_K_M.gguf"
        with open(library / "swapgen.yaml", "a") as f:
            f.write("ttl: 601\n")  # every model has work to do in this run
        kv = llama_kv(ctx=4096)

        write_gguf(target, "llama", kv=kv, tensors=[("token_embd.weight", (256, 1024), Q.F16)])
        try:
            DoitMain(ModuleTaskLoader(pipeline.namespace())).run([])
        finally:
            pipeline.close()
        assert run(library) == 0
        config = YAML(typ="safe").load((library / "config.yaml").read_text())
        assert config["models"]["alpha-q4_k_m"]["metadata"]["ctx"] <= 4096

    def test_a_fragment_cut_short_is_emitted_again_in_the_same_run(self, library):
        """A power loss can keep a fragment's rename and lose its data."""
        assert run(library) == 0
        before = (library / "config.yaml").read_bytes()
        graph = tasks.load(str(library / "swapgen.yaml"))
        graph.close()
        fragment = graph.fragments["alpha-q4_k_m"]
        content = Path(fragment).read_bytes()
        for damage in (b"", b"{not json"):
            with open(fragment, "wb") as f:
                f.write(damage)  # the config task sees its input changed
            assert run(library) == 0
            assert (library / "config.yaml").read_bytes() == before
            assert Path(fragment).read_bytes() == content


class TestOneBadModel:
    def test_an_emitter_bug_costs_one_model_not_the_config(self, library, monkeypatch, capsys):
        real = emit_llama.emit_llama

        def flaky(ctx):
            if ctx.row.id == "alpha-q4_k_m":
                raise RuntimeError("boom")
            return real(ctx)

        monkeypatch.setattr(emit_llama, "emit_llama", flaky)
        assert run(library) == 0
        text = (library / "config.yaml").read_text()
        assert served(library) == ["beta-q8_0"] and validate_text(text) == []
        assert '# SKIPPED "alpha-q4_k_m": internal error while planning (RuntimeError: boom)' in text
        assert "Traceback" in capsys.readouterr().err  # a bug still shows where it is

    def test_a_file_name_that_is_not_utf8_is_skipped_with_a_reason(self, library):
        name = os.fsdecode(b"pub/X/Bad\xff-Q4_0.gguf")
        add_model(library / "models", name)
        assert run(library) == 0
        text = (library / "config.yaml").read_text()
        assert "is not valid UTF-8" in text and validate_text(text) == []
        assert served(library) == ["alpha-q4_k_m", "beta-q8_0"]
        assert cli.main(["--settings", str(library / "swapgen.yaml"), "list"]) == 0

    def test_a_newline_in_a_file_name_keeps_the_listing_one_line_per_model(self, library, capsys):
        add_model(library / "models", "pub/X/new\nline-Q4_0.gguf")
        assert run(library) == 0
        capsys.readouterr()
        assert run(library, "list") == 0
        out = capsys.readouterr().out.splitlines()
        (line,) = [x for x in out if "line-Q4_0.gguf" in x]
        assert line.startswith("new-line-q4_0 ") and "pub/X/new\\nline-Q4_0.gguf  (path " in line
        assert len(out) == 1 + 3 + 1  # the header, three models, the count


class TestOutput:
    def test_a_symlinked_config_keeps_its_link_and_its_mode(self, library):
        real = library / "repo" / "config.yaml"
        real.parent.mkdir()
        real.write_text("# Generated by swapgen from swapgen.yaml: edit that file and re-run swapgen, not this one.\n"
                        "models: {}\n")  # an earlier run's
        real.chmod(0o600)
        (library / "config.yaml").symlink_to(real)
        assert run(library) == 0
        assert (library / "config.yaml").is_symlink()
        assert "alpha-q4_k_m" in real.read_text() and stat.S_IMODE(real.stat().st_mode) == 0o600

    def test_an_output_that_cannot_be_written_is_a_clear_error(self, library, capsys):
        (library / "blocker").write_text("a file, not a folder")
        (library / "swapgen.yaml").write_text(SETTINGS + "output: blocker/config.yaml\n")
        assert run(library) == 1
        err = capsys.readouterr().err
        assert f"output: '{library / 'blocker/config.yaml'}' cannot be created (Not a directory)" in err
        assert "Traceback" not in err

    def test_a_settings_file_name_cannot_inject_a_macro(self, library):
        weird = library / "${env.NOPE}.yaml"
        weird.write_text(SETTINGS.replace("roots: [models]", f"roots: [{library / 'models'}]"))
        assert cli.main(["--settings", str(weird)]) == 0
        text = (library / "config.yaml").read_text()
        assert "${env" not in text and validate_text(text) == []


def test_a_failed_load_releases_the_lock(library, monkeypatch, capsys):
    """An in-process caller (a test, an editor plugin) can run again after a failed load."""
    def broken(*args, **kwargs):
        raise SwapgenError("simulated failure while discovering")

    monkeypatch.setattr(walk, "walk_roots", broken)
    assert run(library) == 1
    monkeypatch.undo()
    assert run(library) == 0 and served(library) == ["alpha-q4_k_m", "beta-q8_0"]


def test_a_no_op_run_removes_the_temp_files_a_killed_run_left(library):
    """A kill between writing a cache file and renaming it leaves a temp file; the next run may
    have no task to run, and still leaves the folder clean."""
    assert run(library) == 0
    cache = library / "cache"
    stale = [cache / ".load-memo.json.k1ll3d.tmp", cache / ".library-memo.json.k1ll3d.tmp",
             cache / ".checked-blocks.json.k1ll3d.tmp", cache / ".metadata.json.k1ll3d.tmp",
             cache / ".gpus.json.k1ll3d.tmp", library / ".config.yaml.k1ll3d.tmp"]
    for path in stale:
        path.write_bytes(b"half a write")
    before = (library / "config.yaml").read_bytes()
    assert run(library) == 0
    assert [p for p in stale if p.exists()] == [] and (library / "config.yaml").read_bytes() == before
