"""Never lose a config, never write an invalid one, never interleave two runs, survive kill -9,
and keep hostile file names from turning into flags or macros."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest
from ruamel.yaml import YAML

from autogen import fsutil
from autogen.cmdline import split_command
from autogen.commands import cli
from autogen.router import assemble as router
from autogen.router.validate import validate_text
from tests.builders import SETTINGS, add_model
from tests.gguf_fixtures import Q, write_gguf

HOSTILE = [
    "with space-Q4_0.gguf",
    "quote's-Q4_0.gguf",
    'double"quote-Q4_0.gguf',
    "back\\slash-Q4_0.gguf",
    "dollar$HOME-Q4_0.gguf",
    "ünïcödé 模型-Q4_0.gguf",
    "-leading-dash-Q4_0.gguf",
    "#hash-Q4_0.gguf",
    "trailing-backslash\\",
]


def load_config(path):
    return YAML(typ="safe").load(path.read_text())


@pytest.fixture
def settings(tmp_path):
    path = tmp_path / "swapgen.yaml"
    path.write_text(SETTINGS)
    return path


class TestHostileNames:
    def test_paths_round_trip_through_llama_swap_splitting(self, tmp_path, settings):
        root = tmp_path / "models"
        paths = {}
        for i, name in enumerate(HOSTILE):
            rel = f"pub{i}/{name}" if name.endswith(".gguf") else f"pub{i}/{name}/Model-Q4_0.gguf"
            paths[i] = str(add_model(root, rel))
        assert cli.main(["--settings", str(settings)]) == 0
        text = (tmp_path / "config.yaml").read_text()
        assert validate_text(text) == []
        models = load_config(tmp_path / "config.yaml")["models"]
        given = set()
        for entry in models.values():
            argv = split_command(entry["cmd"])
            given.add(argv[argv.index("-m") + 1])
        assert given == set(paths.values())

    @pytest.mark.parametrize("name", ["macro-${PORT}-Q4_0.gguf", "new\nline-Q4_0.gguf"])
    def test_unsafe_paths_are_skipped_with_a_reason(self, tmp_path, settings, name):
        add_model(tmp_path / "models", f"pub/{name}")
        add_model(tmp_path / "models", "pub/Fine-Q4_0.gguf")
        assert cli.main(["--settings", str(settings)]) == 0
        text = (tmp_path / "config.yaml").read_text()
        assert validate_text(text) == []
        assert "# SKIPPED" in text and "cannot be passed safely" in text
        assert list(load_config(tmp_path / "config.yaml")["models"]) == ["fine-q4_0"]


class TestHostileLibrary:
    def test_every_bad_file_is_a_reason_not_a_crash(self, tmp_path, settings, capsys):
        root = tmp_path / "models/bad"
        root.mkdir(parents=True)
        (root / "empty-Q4_0.gguf").write_bytes(b"")
        (root / "magic-Q4_0.gguf").write_bytes(b"GGML" + b"\0" * 60)
        (root / "huge-string-Q4_0.gguf").write_bytes(
            b"GGUF" + (3).to_bytes(4, "little") + (0).to_bytes(8, "little") + (1).to_bytes(8, "little")
            + (1 << 63).to_bytes(8, "little") + b"x" * 100)
        write_gguf(root / "cut-Q4_0.gguf", "llama", kv={"{arch}.block_count": 2},
                   tensors=[("blk.0.w", (4096, 4096), Q.F16)], sparse_size=1000)
        hf = tmp_path / "models/hf/Broken"
        hf.mkdir(parents=True)
        (hf / "config.json").write_text('{"architectures": ["LlamaForCausalLM"], "num_hidden_layers": "many"}')
        (hf / "model.safetensors").write_bytes(b"\0" * 64)
        add_model(tmp_path / "models", "good/Good-Q4_0.gguf")
        assert cli.main(["--settings", str(settings)]) == 0
        text = (tmp_path / "config.yaml").read_text()
        assert validate_text(text) == [] and "Traceback" not in capsys.readouterr().err
        skipped = [line for line in text.splitlines() if line.strip().startswith("# SKIPPED")]
        assert len(skipped) == 5 and all(line.split(": ", 1)[1].strip() for line in skipped)
        assert list(load_config(tmp_path / "config.yaml")["models"]) == ["good-q4_0"]


class TestNothingLost:
    def test_an_invalid_config_is_not_written(self, tmp_path, settings, monkeypatch, capsys):
        add_model(tmp_path / "models", "pub/A-Q4_0.gguf")
        assert cli.main(["--settings", str(settings)]) == 0
        before = (tmp_path / "config.yaml").read_bytes()

        monkeypatch.setattr(router, "header", lambda s: "healthCheckTimeout: 3\n")
        add_model(tmp_path / "models", "pub/B-Q4_0.gguf")
        assert cli.main(["--settings", str(settings)]) != 0
        assert (tmp_path / "config.yaml").read_bytes() == before
        assert "healthCheckTimeout" in capsys.readouterr().err

    def test_kill_9_at_any_point_keeps_a_valid_config_and_the_next_run_recovers(self, tmp_path, settings):
        for i in range(40):
            add_model(tmp_path / "models", f"pub/M{i:02d}-Q4_0.gguf")
        cmd = [sys.executable, "-m", "autogen.commands.cli", "--settings", str(settings)]
        assert subprocess.run(cmd, capture_output=True).returncode == 0
        for delay in (0.05, 0.15, 0.3, 0.45, 0.6):
            settings.write_text(SETTINGS + f"ttl: {int(delay * 100) + 100}\n")  # every model re-emits
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(delay)
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            text = (tmp_path / "config.yaml").read_text()
            assert validate_text(text) == [] and text.count("ttl: ") == 40
        settings.write_text(SETTINGS + "ttl: 61\n")
        done = subprocess.run(cmd, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert all(e["ttl"] == 61 for e in load_config(tmp_path / "config.yaml")["models"].values())


class TestLock:
    def test_a_second_run_waits_for_the_first(self, tmp_path, settings):
        add_model(tmp_path / "models", "pub/A-Q4_0.gguf")
        cache = tmp_path / "cache"
        with fsutil.run_lock(str(cache)):
            proc = subprocess.Popen([sys.executable, "-m", "autogen.commands.cli", "--settings", str(settings)],
                                    stderr=subprocess.PIPE, text=True)
            line = proc.stderr.readline()
            assert "another run holds" in line and "waiting" in line
            assert not (tmp_path / "config.yaml").exists()
        assert proc.wait(timeout=60) == 0
        assert (tmp_path / "config.yaml").exists()

    def test_timeout_fails_clearly(self, tmp_path):
        with fsutil.run_lock(str(tmp_path)):
            code = ("from autogen import fsutil\n"
                    f"with fsutil.run_lock({str(tmp_path)!r}, timeout=0.3): pass\n")
            done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert done.returncode != 0 and "still holds the lock after 0.3 s" in done.stderr
