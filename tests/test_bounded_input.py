"""Bounded input: every file a user hands swapgen is read within `bounds` limits (size, values
once YAML aliases expand, nesting depth), and each refusal is one message naming the file.
Hostile inputs that cost minutes, gigabytes or a traceback before (docs/settings.md#limits)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from autogen import bounds
from autogen.bounds import CONFIG, SETTINGS, InputTooLarge, Limits, check_shape, read_input
from autogen.commands import cli
from autogen.errors import SettingsError
from autogen.router.validate import validate_text
from autogen.settings.load import load_settings
from tests.builders import SETTINGS as BASE
from tests.shared import REPO


def bomb(levels: int, name: str = "l") -> list[str]:
    """YAML lines of an alias bomb: each level lists the one before nine times (9**levels values)."""
    lines = [f"{name}0: &{name}0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"{name}{i}: &{name}{i} [" + ", ".join([f"*{name}{i - 1}"] * 9) + "]" for i in range(1, levels + 1)]
    return lines


def inline_bomb(levels: int) -> str:
    """A flow list of the same bomb's levels, anchors and all, as one value (9**levels values)."""
    parts = ["&x0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    parts += [f"&x{i} [" + ", ".join([f"*x{i - 1}"] * 9) + "]" for i in range(1, levels + 1)]
    return "[" + ", ".join(parts) + "]"


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def refused(path) -> SettingsError:
    with pytest.raises(SettingsError) as info:
        load_settings(path)
    return info.value


def swapgen(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """`swapgen ARGS` in a process of its own: a read that never ends fails the test, not the suite."""
    return subprocess.run([sys.executable, "-m", "autogen.commands.cli", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})


class TestReadInput:
    def test_a_regular_file_over_the_limit_is_refused_before_it_is_read(self, tmp_path):
        """A sparse 64 GiB file: refused from its size, so nothing of it is read."""
        huge = tmp_path / "huge.yaml"
        with open(huge, "wb") as f:
            f.truncate(64 << 30)
        with pytest.raises(InputTooLarge, match=r"68,719,476,736 bytes, larger than 1 MiB, the most swapgen reads "
                                                r"of a settings file"):
            read_input(str(huge), SETTINGS)

    def test_an_endless_device_is_read_only_up_to_the_limit(self):
        with pytest.raises(InputTooLarge, match="a device or a pipe longer than 1 MiB"):
            read_input("/dev/zero", SETTINGS)

    def test_a_fifo_nobody_writes_to_reads_as_empty(self, tmp_path):
        fifo = tmp_path / "fifo"
        os.mkfifo(fifo)
        assert read_input(str(fifo), CONFIG) == b""

    def test_a_folder_is_an_oserror_and_a_file_at_the_limit_is_read(self, tmp_path):
        with pytest.raises(IsADirectoryError):
            read_input(str(tmp_path), SETTINGS)
        exact = tmp_path / "exact"
        exact.write_bytes(b"x" * SETTINGS.max_bytes)
        assert len(read_input(str(exact), SETTINGS)) == SETTINGS.max_bytes


class TestCheckShape:
    def test_shared_values_count_as_often_as_they_are_repeated(self):
        level = ["x"] * 9
        for _ in range(5):  # 9**6 values, 9 objects
            level = [level] * 9
        with pytest.raises(InputTooLarge, match="more than 100,000 values once YAML aliases are expanded"):
            check_shape({"a": level}, SETTINGS)

    def test_a_list_inside_itself_stops_at_a_limit(self):
        loop: list = []
        loop.append(loop)
        with pytest.raises(InputTooLarge, match="nested more than 64 deep"):
            check_shape(loop, SETTINGS)

    def test_the_limits_are_inclusive(self):
        small = Limits("a test", 100, max_values=3, max_depth=2)
        check_shape({"a": [1]}, small)  # 3 values, depth 2
        with pytest.raises(InputTooLarge):
            check_shape({"a": [1, 2]}, small)
        with pytest.raises(InputTooLarge):
            check_shape({"a": [[]]}, small)


class TestSettingsFile:
    def test_an_alias_bomb_is_refused_at_once(self, tmp_path):
        """Nine levels expanded to 387 million values (more than 120 s and 4 GB before)."""
        path = tmp_path / "swapgen.yaml"
        path.write_text(BASE + "\n".join(bomb(9)) + "\n")
        assert refused(path).problems == [bounds.too_many_values(SETTINGS)]

    @pytest.mark.parametrize("place", [
        "overrides:\n  - match: '*'\n    extra_args: {bomb}\n",
        "overrides:\n  - match: '*'\n    llama_swap: {{metadata: {{x: {bomb}}}}}\n",
        "llama_swap: {{macros: {{x: {bomb}}}}}\n",
    ])
    def test_an_alias_bomb_inside_one_value_is_refused(self, tmp_path, place):
        path = tmp_path / "swapgen.yaml"
        path.write_text(BASE + place.format(bomb=inline_bomb(6)))
        assert refused(path).problems == [bounds.too_many_values(SETTINGS)]

    def test_lists_nested_5000_deep_are_refused_not_a_recursion_error(self, tmp_path):
        path = tmp_path / "swapgen.yaml"
        path.write_text(f"roots: {nested(5000)}\n")
        assert refused(path).problems == [bounds.too_deep(SETTINGS)]

    def test_lists_nested_65_deep_are_refused_and_64_deep_reach_the_checks(self, tmp_path):
        path = tmp_path / "swapgen.yaml"
        path.write_text(f"roots: {nested(64)}\n")  # depth 65 with the top-level mapping
        assert refused(path).problems == [bounds.too_deep(SETTINGS)]
        path.write_text(f"roots: {nested(63)}\n")
        assert refused(path).problems == ["roots[0]: expected a string, got a list"]

    def test_a_10_mb_settings_file_is_refused_by_its_size(self, tmp_path):
        path = tmp_path / "swapgen.yaml"
        path.write_text(BASE + "".join(f"# {'x' * 97}\n" for _ in range(100_000)))
        (problem,) = refused(path).problems
        assert problem.startswith(f"{path.stat().st_size:,} bytes, larger than 1 MiB")

    def test_a_large_settings_file_within_the_limit_loads(self, tmp_path):
        """2,000 override rows (about 150 KiB): well within the bound, read as usual."""
        rows = "".join(f"  - match: '*model-{i:05d}*'\n    ctx: {4096 + i}\n    extra_args: [--foo, bar]\n"
                       for i in range(2000))
        path = tmp_path / "swapgen.yaml"
        path.write_text(BASE + "overrides:\n" + rows)
        settings = load_settings(path)
        assert len(settings.overrides) == 2000 and settings.overrides[-1].ctx == 4096 + 1999

    def test_the_settings_file_as_an_endless_device_is_refused(self):
        result = swapgen("--settings", "/dev/zero", "list")
        assert result.returncode == 1 and "Traceback" not in result.stderr
        assert "/dev/zero: invalid settings\n  a device or a pipe longer than 1 MiB" in result.stderr

    def test_a_number_of_5000_digits_is_a_settings_error(self, tmp_path):
        path = tmp_path / "swapgen.yaml"
        path.write_text(BASE + "ttl: " + "1" * 5000 + "\n")
        assert "not valid YAML: a value swapgen cannot read" in refused(path).problems[0]


class TestBackendsFile:
    def write(self, tmp_path, backends_file: str) -> object:
        path = tmp_path / "swapgen.yaml"
        path.write_text(f"roots: [models]\nbackends_file: {backends_file}\n")
        return path

    def test_an_endless_device_is_refused(self, tmp_path):
        """`backends_file: /dev/zero` read until the machine killed the process (23.5 GB)."""
        result = swapgen("--settings", str(self.write(tmp_path, "/dev/zero")), "list")
        assert result.returncode == 1 and "Traceback" not in result.stderr
        assert "/dev/zero: invalid settings\n  a device or a pipe longer than 1 MiB" in result.stderr

    def test_an_alias_bomb_and_deep_nesting_are_refused(self, tmp_path):
        (tmp_path / "backends.yaml").write_text("\n".join(bomb(7)) + "\nbackends: []\n")
        assert "more than 100,000 values" in refused(self.write(tmp_path, "backends.yaml")).problems[0]
        (tmp_path / "backends.yaml").write_text(nested(5000) + "\n")
        assert refused(self.write(tmp_path, "backends.yaml")).problems == [bounds.too_deep(SETTINGS)]

    def test_a_backends_file_grown_past_the_limit_is_not_served_from_the_settings_cache(self, tmp_path):
        path = self.write(tmp_path, "backends.yaml")
        (tmp_path / "backends.yaml").write_text("- {id: a, kind: llama, path: /opt/a}\n")
        assert [r.id for r in load_settings(path).backends] == ["a"]
        with open(tmp_path / "backends.yaml", "ab") as f:
            f.truncate(2 << 20)
        assert refused(path).problems[0].startswith("2,097,152 bytes, larger than 1 MiB")


class TestValidate:
    def test_an_endless_device_is_refused(self):
        """`swapgen validate /dev/zero` read until the machine killed the process (23.5 GB)."""
        result = swapgen("validate", "/dev/zero")
        assert result.returncode == 1 and "Traceback" not in result.stderr
        assert result.stdout == "/dev/zero: error: a device or a pipe longer than 64 MiB, the most swapgen reads of " \
                                "a config\n"

    def test_a_fifo_nobody_writes_to_does_not_hang(self, tmp_path):
        fifo = tmp_path / "config.yaml"
        os.mkfifo(fifo)
        result = swapgen("validate", str(fifo), timeout=60)
        assert result.returncode == 1 and "missing required key 'models'" in result.stdout

    def test_an_alias_bomb_and_deep_nesting_are_refused_with_the_shared_messages(self):
        text = "\n".join(bomb(7)) + "\nmodels: {}\n"
        assert [p.message for p in validate_text(text)] == [bounds.too_many_values(CONFIG)]
        assert [p.message for p in validate_text(f"models: {nested(5000)}\n")] == [
            "YAML does not parse: exceeded maximum nesting depth"]
        assert [p.message for p in validate_text(f"models: {nested(100)}\n")] == [bounds.too_deep(CONFIG)]

    def test_a_config_dir_file_and_a_preset_are_read_within_the_same_bound(self, tmp_path):
        (tmp_path / "conf.d").mkdir()
        os.symlink("/dev/zero", tmp_path / "conf.d" / "endless.yaml")
        result = swapgen("validate", "--config-dir", str(tmp_path / "conf.d"))
        assert result.returncode == 1 and "endless.yaml: error: a device or a pipe longer than 64 MiB" in result.stdout
        os.symlink("/dev/zero", tmp_path / "endless.ini")
        result = swapgen("validate", str(tmp_path / "endless.ini"))
        assert result.returncode == 1 and "endless.ini: error: a device or a pipe longer than 64 MiB" in result.stdout

    def test_a_number_of_5000_digits_is_a_problem_not_a_traceback(self, tmp_path, capsys):
        path = tmp_path / "config.yaml"
        path.write_text("models:\n  a:\n    cmd: x ${PORT}\n    ttl: " + "1" * 5000 + "\n")
        assert cli.main(["validate", str(path)]) == 1
        out = capsys.readouterr().out
        assert out.startswith(f"{path}:4: error: models.a.ttl: expected an integer, got '1111") and "5000 characters" in out
