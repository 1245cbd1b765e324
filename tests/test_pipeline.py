"""The task graph end to end: first run, no-op runs, and exactly the re-emits a change calls for."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from ruamel.yaml import YAML

from autogen.commands import cli
from autogen.router.validate import validate_text
from tests.builders import SETTINGS, add_model, llama_kv
from tests.gguf_fixtures import Q, write_split_set
from tests.runs import generate


def run(settings, *args):
    rc, graph = generate(settings, *args)
    return rc, graph.stats


def config(tmp_path):
    return (tmp_path / "config.yaml").read_text()


def read_io() -> int:
    with open("/proc/self/io") as f:
        return int(next(line for line in f if line.startswith("rchar")).split()[1])


class TestIncremental:
    def test_first_run_writes_a_valid_sorted_config(self, library):
        rc, stats = run(library / "swapgen.yaml")
        assert rc == 0 and stats["emitted"] == 2 and stats["config"] == "written"
        text = config(library)
        assert validate_text(text, "config.yaml") == []
        models = YAML(typ="safe").load(text)["models"]
        assert list(models) == ["alpha-q4_k_m", "beta-q8_0"]
        assert models["alpha-q4_k_m"]["cmd"].startswith("/opt/llama/llama-server")

    def test_second_run_executes_no_model_task_and_keeps_the_file(self, library):
        run(library / "swapgen.yaml")
        before = os.stat(library / "config.yaml").st_mtime_ns
        rc, stats = run(library / "swapgen.yaml")
        assert rc == 0 and stats["emitted"] == 0 and "config" not in stats
        assert os.stat(library / "config.yaml").st_mtime_ns == before

    def test_editing_one_override_re_emits_only_that_model(self, library):
        run(library / "swapgen.yaml")
        with open(library / "swapgen.yaml", "a") as f:
            f.write("overrides:\n  - {match: '*Alpha*', ctx: 4096}\n")
        rc, stats = run(library / "swapgen.yaml")
        assert rc == 0 and stats["emitted"] == 1 and stats["config"] == "written"

    def test_adding_a_model_runs_only_its_task_and_config(self, library):
        run(library / "swapgen.yaml")
        add_model(library / "models", "pub/C-GGUF/Gamma-Q4_0.gguf")
        rc, stats = run(library / "swapgen.yaml")
        assert rc == 0 and stats["emitted"] == 1 and stats["config"] == "written"
        assert "gamma-q4_0" in config(library)

    def test_removing_a_model_drops_it(self, library):
        run(library / "swapgen.yaml")
        os.unlink(library / "models/pub/A-GGUF/Alpha-Q4_K_M.gguf")
        rc, stats = run(library / "swapgen.yaml")
        assert rc == 0 and stats["emitted"] == 0 and "alpha" not in config(library)
        assert len(os.listdir(library / "cache/fragments")) == 1

    def test_touch_on_a_sparse_gigabyte_model_reads_only_its_head(self, library):
        run(library / "swapgen.yaml")
        big = library / "models/pub/B-GGUF/Beta-Q8_0.gguf"
        later = time.time() + 5
        os.utime(big, (later, later))
        before = read_io()
        rc, stats = run(library / "swapgen.yaml")
        read = read_io() - before
        assert rc == 0 and stats["emitted"] == 0
        assert read < 8 << 20, f"read {read} bytes for a no-op after a touch"

    def test_deleted_or_hand_edited_output_is_restored(self, library):
        run(library / "swapgen.yaml")
        original = config(library)
        (library / "config.yaml").write_text(original.replace("ttl: 600", "ttl: 5"))
        rc, stats = run(library / "swapgen.yaml")
        assert rc == 0 and stats["emitted"] == 0 and config(library) == original
        os.unlink(library / "config.yaml")
        run(library / "swapgen.yaml")
        assert config(library) == original

    def test_same_inputs_give_the_same_bytes(self, library, tmp_path_factory):
        run(library / "swapgen.yaml")
        first = config(library)
        os.rename(library / "cache", library / "old-cache")
        run(library / "swapgen.yaml")
        assert config(library) == first

    def test_star_switch_re_emits_only_unpinned_models(self, library):
        text = SETTINGS + "  - {id: llama2, kind: llama, path: /opt/b/llama-server}\n" \
                          "overrides:\n  - {match: '*Alpha*', backend: llama}\n"
        (library / "swapgen.yaml").write_text(text)
        run(library / "swapgen.yaml")
        (library / "swapgen.yaml").write_text(text.replace("default: true", "default: false")
                                              .replace("path: /opt/b/llama-server}", "path: /opt/b/llama-server, default: true}"))
        rc, stats = run(library / "swapgen.yaml")
        assert rc == 0 and stats["emitted"] == 1
        assert "/opt/b/llama-server" in config(library)


class TestCommands:
    def test_summary_counts_one_model_in_the_singular(self, library, capsys):
        (library / "models" / "pub" / "B-GGUF" / "Beta-Q8_0.gguf").unlink()
        assert cli.main(["--settings", str(library / "swapgen.yaml")]) == 0
        assert capsys.readouterr().out.splitlines()[-1] == (
            "swapgen: 1 model (1 served, 0 skipped); 1 re-emitted, 0 unchanged; config.yaml written")

    @pytest.mark.parametrize(("settings", "why"), [
        ("gpus: []\n", "none of the declared `gpus` has 3 GiB or more, and no vram_budget_gb is set"),
        ("card_vram_gb: 0\n", "card_vram_gb: 0 (no card reading) and no vram_budget_gb"),
        ("", "no GPU found (no NVIDIA or AMD driver answered: NVML, nvidia-smi, rocm-smi, sysfs), and no "
             "vram_budget_gb is set"),
    ])
    def test_no_budget_and_no_gpu_is_one_clear_line(self, library, capsys, monkeypatch, settings, why):
        """Without a budget every model is sized to 8 GiB: the run says so, why, and what to set."""
        from autogen.resolve import gpus  # noqa: PLC0415 - the probe this test replaces

        monkeypatch.setattr(gpus, "_remembered", lambda cache_dir: ())
        path = library / "swapgen.yaml"
        path.write_text(f"roots: [models]\n{settings}")
        assert cli.main(["--settings", str(path)]) == 0
        err = capsys.readouterr().err.splitlines()
        assert (f"swapgen: warning: {why}: every model is sized to a budget of 8 GiB. Set `vram_budget_gb` (the GiB "
                "one model may use) and `card_vram_gb` (the card's total) in swapgen.yaml, or declare `gpus:`") in err
        assert "# est VRAM" in (library / "config.yaml").read_text() and " of 8 GiB" in (library / "config.yaml").read_text()
        path.write_text(f"roots: [models]\n{settings}vram_budget_gb: 6\n")
        assert cli.main(["--settings", str(path)]) == 0
        assert "sized to a budget" not in capsys.readouterr().err

    def test_exit_non_zero_on_write_fails_a_run_that_wrote_the_config(self, library, capsys):
        """The pre-commit hook's mode: the first run (no config yet) fails, a no-op run passes."""
        argv = ["--settings", str(library / "swapgen.yaml"), "--exit-non-zero-on-write"]
        assert cli.main(argv) == 1
        assert capsys.readouterr().err.splitlines()[-1] == (
            f"swapgen: wrote {library / 'config.yaml'}: review it and `git add` it (--exit-non-zero-on-write)")
        assert (library / "config.yaml").exists()
        assert cli.main(argv) == 0
        (library / "models" / "pub" / "B-GGUF" / "Beta-Q8_0.gguf").unlink()
        assert cli.main(argv) == 1

    def test_list_shows_every_model(self, library, capsys):
        assert cli.main(["--settings", str(library / "swapgen.yaml"), "list"]) == 0
        out = capsys.readouterr().out
        assert "alpha-q4_k_m" in out and "beta-q8_0" in out and "2 served" in out

    def test_bad_settings_exit_1_without_traceback(self, library, capsys):
        (library / "swapgen.yaml").write_text("roots: [models]\nttl: soon\n")
        assert cli.main(["--settings", str(library / "swapgen.yaml")]) == 1
        err = capsys.readouterr().err
        assert "ttl: expected an integer, got 'soon'" in err and "Traceback" not in err
        assert not (library / "config.yaml").exists()

    @pytest.mark.parametrize("command", [["list"], ["info", "model:alpha-q4_k_m"], ["forget"], ["run"]])
    def test_a_reader_that_stops_early_gets_no_traceback(self, library, command):
        """`swapgen list | head -1`, `swapgen info model:x | head`: the pipe closes while swapgen
        still writes (doit's own commands included, which print a traceback for any error)."""
        assert cli.main(["--settings", str(library / "swapgen.yaml")]) == 0
        (library / "models" / "pub" / "A-GGUF" / "Alpha-Q4_K_M.gguf").touch()  # `run` has a task to report
        proc = subprocess.Popen([sys.executable, "-m", "autogen.commands.cli", "--settings",
                                 str(library / "swapgen.yaml"), *command], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        proc.stdout.close()  # the reader is gone before the first line
        err = proc.stderr.read().decode()
        assert proc.wait() == 141 and "Traceback" not in err and "BrokenPipe" not in err

    def test_help_lists_the_commands(self, capsys):
        with pytest.raises(SystemExit) as exit_:
            cli.main(["--help"])
        out = capsys.readouterr().out
        assert exit_.value.code == 0
        for command in ("run", "info model:ID", "forget", "clean", "list [--json]", "show ID", "validate", "backends"):
            assert f"  {command}" in out

    @pytest.mark.parametrize("args", [["list", "--jsn"], ["list", "extra"], ["show", "alpha-q4_k_m", "--jsno"]])
    def test_a_misspelt_option_is_an_error(self, library, capsys, args):
        with pytest.raises(SystemExit) as exit_:
            cli.main(["--settings", str(library / "swapgen.yaml"), *args])
        assert exit_.value.code == 2
        err = capsys.readouterr().err
        assert args[-1] in err or "no argument" in err
        assert "did you mean --json?" in err or "no argument" in err

    def test_info_on_an_unknown_task_names_it_without_a_traceback(self, library, capsys):
        assert cli.main(["--settings", str(library / "swapgen.yaml"), "info", "model:alpha-q4_k"]) == 3
        err = capsys.readouterr().err
        assert "no task 'model:alpha-q4_k' (did you mean 'model:alpha-q4_k_m'?)" in err and "Traceback" not in err
        cli.main(["--settings", str(library / "swapgen.yaml"), "info", "model:alpha-q4_k_m"])  # 1: not run yet
        assert "model:alpha-q4_k_m" in capsys.readouterr().out

    def test_clean_removes_fragments_and_caches_and_keeps_the_config(self, library):
        settings = str(library / "swapgen.yaml")
        assert cli.main(["--settings", settings]) == 0
        before = config(library)
        assert cli.main(["--settings", settings, "clean"]) == 0
        assert config(library) == before
        assert [p.name for p in (library / "cache/fragments").iterdir()] == []
        assert not (library / "cache/metadata.json").exists() and not (library / "cache/load-memo.pickle").exists()
        rc, stats = run(library / "swapgen.yaml")
        assert rc == 0 and stats["emitted"] == 2 and config(library) == before


def test_skip_override_leaves_the_model_out_silently(library, capsys):
    with open(library / "swapgen.yaml", "a") as f:
        f.write("overrides:\n  - {match: '*Alpha*', skip: true}\n")
    rc, _ = run(library / "swapgen.yaml")
    text = config(library)
    assert rc == 0 and "alpha" not in text and list(YAML(typ="safe").load(text)["models"]) == ["beta-q8_0"]
    cli.main(["--settings", str(library / "swapgen.yaml"), "list"])
    assert "skip: true in the matching override" in capsys.readouterr().out


def test_list_shows_reasons_the_emitter_found_once_the_fragment_is_current(library, capsys):
    """A split set pinned to vLLM is refused by the emitter, not at load time."""
    folder = library / "models/pub/S-GGUF"
    folder.mkdir(parents=True)
    write_split_set(folder, "Split-Q8_0", "llama", shards=2, kv=llama_kv(),
                    tensors=[(f"blk.{i}.w", (256, 256), Q.F16) for i in range(4)])
    with open(library / "swapgen.yaml", "a") as f:
        f.write("  - {id: vllm, kind: vllm, path: vllm}\noverrides:\n  - {match: '*Split*', backend: vllm}\n")
    run(library / "swapgen.yaml")
    capsys.readouterr()
    cli.main(["--settings", str(library / "swapgen.yaml"), "list"])
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("split-q8_0"))
    assert "SKIPPED" in line and "split gguf" in line
