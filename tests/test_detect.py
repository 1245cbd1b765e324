"""`swapgen backends detect` against fake engine executables on a temporary PATH and HOME."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from autogen.commands import cli, detect
from autogen.errors import SettingsError
from autogen.figures import probes as engine_probes
from autogen.settings.load import load_backends_file, load_settings
from autogen.settings.schema import BackendRow

SLEEP = shutil.which("sleep") or "/bin/sleep"
FAST = 0.5  # probe timeout in tests: the hanging engine is stopped after this many seconds

LLAMA_CUDA = """\
case "$1" in
  --version) echo "version: 11434 (abc1234)" >&2; echo "built with cc for x86_64-linux-gnu" >&2 ;;
  --list-devices) echo "Available devices:"; echo "  CUDA0: NVIDIA GeForce RTX 4090 (24080 MiB, 23500 MiB free)" ;;
esac
"""
VLLM = 'echo "INFO 01-01 some startup log"\necho "0.11.0"\n'
#: ik_llama.cpp's llama-server, CPU build: its `--help` lists `--mla-use` and, without GPU
#: offload, no `--gpu-layers`; it exits 1 (recorded in tests/data/ik_llama_server_help_015.txt).
IK_LLAMA_CPU = """\
case "$1" in
  --version) echo "version: 3861 (1a2b3c4)" >&2; echo "built with cc for x86_64-linux-gnu" >&2 ;;
  --help) echo "  -mla,  --mla-use                enable MLA (default: 3)"; exit 1 ;;
esac
"""
SD = 'echo "stable-diffusion.cpp version 1.2.3, commit deadbeef"\n'
HANGS = f'{SLEEP} 30\n'
FAILS = 'echo "error: unknown argument: $1" >&2\nexit 1\n'


def engine(folder: Path, name: str, body: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


@pytest.fixture
def home(tmp_path, monkeypatch):
    """An empty HOME and a PATH with only `tmp/bin`; system places limited to HOME's."""
    home = tmp_path / "home"
    (tmp_path / "bin").mkdir()
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.setattr(detect, "SYSTEM_PLACES", ("~/.local/bin", "~/*/build/bin"))
    return home


def settings_file(tmp_path: Path, extra: str = "") -> Path:
    path = tmp_path / "swapgen.yaml"
    path.write_text("roots: [models]\nbackends_file: backends.yaml\n" + extra)
    return path


def run(settings: Path, **kw) -> dict:
    return detect.detect(load_settings(settings), timeout=FAST, **kw)


def rows(tmp_path: Path) -> dict[str, BackendRow]:
    return {r.id: r for r in load_backends_file(tmp_path / "backends.yaml")}


class TestFinding:
    def test_engines_on_path_become_managed_rows_with_version_and_variant(self, tmp_path, home):
        bin_ = tmp_path / "bin"
        engine(bin_, "llama-server", LLAMA_CUDA)
        engine(bin_, "vllm", VLLM)
        engine(bin_, "sd-server", SD)
        report = run(settings_file(tmp_path))
        got = rows(tmp_path)
        assert sorted(got) == ["llama-cuda", "sd", "vllm"]
        llama = got["llama-cuda"]
        assert (llama.kind, llama.version, llama.build, llama.component) == ("llama", "b11434", "cuda", "llama.cpp")
        assert llama.managed and llama.path == str(bin_ / "llama-server")
        assert (got["vllm"].version, got["vllm"].build) == ("0.11.0", "cuda")
        assert got["sd"].version == "1.2.3"
        assert report["written"] and sorted(report["added"]) == ["llama-cuda", "sd", "vllm"]

    def test_first_row_of_each_class_takes_the_star_gpu_build_first(self, tmp_path, home):
        engine(tmp_path / "bin", "llama-server", LLAMA_CUDA)
        engine(tmp_path / "bin", "vllm", VLLM)
        engine(tmp_path / "bin", "sd-server", SD)
        run(settings_file(tmp_path))
        got = rows(tmp_path)
        assert got["llama-cuda"].default and got["sd"].default
        assert not got["vllm"].default  # llm already has its ★ (llama sorts first)

    def test_ik_llama_cpps_llama_server_is_told_from_llama_cpps_and_leaves_it_the_star(self, tmp_path, home):
        """Both binaries are called llama-server; ik_llama.cpp's `--help` (which exits 1) says
        which it is, quietly, and a found fork takes no ★ from llama.cpp."""
        engine(tmp_path / "bin", "llama-server", LLAMA_CUDA)
        engine(home / "ik_llama.cpp" / "build" / "bin", "llama-server", IK_LLAMA_CPU)
        report = run(settings_file(tmp_path))
        got = rows(tmp_path)
        assert sorted(got) == ["ik_llama-cpu", "llama-cuda"]
        ik = got["ik_llama-cpu"]
        assert (ik.kind, ik.version, ik.build, ik.component) == ("ik_llama", "b3861", "cpu", "ik_llama.cpp")
        assert got["llama-cuda"].default and not ik.default
        assert not any("--help" in note for note in report["notes"])

    def test_ik_llama_cpp_alone_takes_the_star(self, tmp_path, home):
        engine(tmp_path / "bin", "llama-server", IK_LLAMA_CPU)
        run(settings_file(tmp_path))
        assert rows(tmp_path)["ik_llama-cpu"].default

    def test_a_symlinked_binary_is_one_row(self, tmp_path, home):
        real = engine(home / "llama.cpp" / "build" / "bin", "llama-server", LLAMA_CUDA)
        (home / ".local" / "bin").mkdir(parents=True)
        (home / ".local" / "bin" / "llama-server").symlink_to(real)
        os.symlink(real, tmp_path / "bin" / "llama-server")
        run(settings_file(tmp_path))
        assert list(rows(tmp_path)) == ["llama-cuda"]
        assert rows(tmp_path)["llama-cuda"].path == str(tmp_path / "bin" / "llama-server")  # $PATH first

    def test_libraries_beside_the_binary_name_the_variant(self, tmp_path, home):
        folder = home / "llama.cpp" / "build" / "bin"
        engine(folder, "llama-server", LLAMA_CUDA)  # its --list-devices says CUDA; the libraries win
        (folder / "libggml-vulkan.so").write_bytes(b"")
        (folder / "libggml-base.so").write_bytes(b"")
        engine(tmp_path / "bin", "parakeet-server", 'echo "parakeet-server v0.3.1"\n')
        (tmp_path / "lib").mkdir()
        (tmp_path / "lib" / "libggml-cpu-haswell.so").write_bytes(b"")
        run(settings_file(tmp_path))
        got = rows(tmp_path)
        assert got["llama-vulkan"].build == "vulkan"
        assert (got["asr-cpu"].build, got["asr-cpu"].version) == ("cpu", "0.3.1")

    def test_vllm_in_a_listed_venv_reads_version_and_torch_build_from_disk(self, tmp_path, home):
        for name, lib in (("venv-cuda", "libtorch_cuda.so"), ("venv-rocm", "libtorch_hip.so"),
                          ("venv-cpu", "libtorch_cpu.so")):
            site = tmp_path / name / "lib" / "python3.11" / "site-packages"
            (site / "vllm-0.10.2.dist-info").mkdir(parents=True)
            (site / "torch" / "lib").mkdir(parents=True)
            (site / "torch" / "lib" / lib).write_bytes(b"")
            engine(tmp_path / name / "bin", "vllm", FAILS)  # never asked: the dist-info answers
        report = run(settings_file(tmp_path, "backend_venvs: [venv-cuda, venv-rocm, venv-cpu]\n"))
        got = rows(tmp_path)
        assert sorted(got) == ["vllm", "vllm-2", "vllm-3"]
        assert {(r.version, r.build) for r in got.values()} == {
            ("0.10.2", "cuda"), ("0.10.2", "rocm"), ("0.10.2", "cpu")}
        assert report["notes"] == []

    def test_tts_server_of_tts_cpp_is_kind_ttscpp(self, tmp_path, home):
        engine(home / "TTS.cpp" / "build" / "bin", "tts-server", FAILS)
        engine(tmp_path / "bin", "tts-server", 'echo "qwentts version 0.2.0"\n')
        run(settings_file(tmp_path))
        got = rows(tmp_path)
        assert got["ttscpp"].component == "tts.cpp" and got["tts"].component == "qwentts.cpp"
        assert got["tts"].default and not got["ttscpp"].default  # one tts class, one ★


    def test_whisper_server_is_found_asked_nothing_and_leaves_parakeet_the_star(self, tmp_path, home):
        """whisper-server has no --version: its parser prints the usage for any unknown argument
        and exits 0, so it is not asked, and no note says a version is missing. The ★ of class asr
        stays with the row detect found first (the registry's rules)."""
        asked = tmp_path / "asked"
        engine(tmp_path / "bin", "parakeet-server", 'echo "parakeet-server v0.3.1"\n')
        engine(tmp_path / "bin", "whisper-server", f'echo "$@" >> {asked}\n')
        (tmp_path / "lib").mkdir()
        (tmp_path / "lib" / "libggml-cuda.so").write_bytes(b"")
        report = run(settings_file(tmp_path))
        got = rows(tmp_path)
        assert (got["whisper-cuda"].kind, got["whisper-cuda"].component, got["whisper-cuda"].version) == \
            ("whisper", "whisper.cpp", "")
        assert got["asr-cuda"].default and not got["whisper-cuda"].default
        assert not asked.exists() and report["notes"] == []

    @pytest.mark.parametrize(("body", "variant"), [
        ("# a CPU build names its backends only to load them: cuda vulkan metal\n", "cpu"),
        ('echo "%s: found %d CUDA devices (Total VRAM: %zu MiB):"\n', "cuda"),
        ('echo "%s: found %d ROCm devices (Total VRAM: %zu MiB):"\n', "rocm"),
        ('echo "ggml_vulkan: Found %zu Vulkan devices"\n', "vulkan"),
    ])
    def test_a_static_whisper_server_is_the_build_compiled_into_it(self, tmp_path, home, body, variant):
        engine(tmp_path / "bin", "whisper-server", body)
        run(settings_file(tmp_path))
        (found,) = rows(tmp_path).values()
        assert (found.id, found.build) == (f"whisper-{variant}", variant)

    @pytest.mark.parametrize("name", ["audiocpp_server", "audiocpp-server"])
    def test_audiocpp_is_found_by_the_name_its_rows_default_to_and_the_dashed_one(self, tmp_path, home, name):
        engine(tmp_path / "bin", name, 'echo "audio.cpp 0.3.1"\n')
        run(settings_file(tmp_path))
        (found,) = rows(tmp_path).values()
        assert (found.kind, found.path) == ("audiocpp", str(tmp_path / "bin" / name))


class TestProbes:
    def test_a_hanging_engine_is_stopped_and_recorded_without_a_version(self, tmp_path, home):
        engine(tmp_path / "bin", "sam3_server", HANGS)
        report = run(settings_file(tmp_path))
        assert rows(tmp_path)["sam"].version == ""
        assert report["notes"] == [f"{tmp_path / 'bin' / 'sam3_server'}: `--version` gave no answer within 0.5 s (stopped it)"]

    def test_a_failing_version_probe_leaves_an_empty_version_and_a_note(self, tmp_path, home):
        engine(tmp_path / "bin", "audiocpp-server", FAILS)
        report = run(settings_file(tmp_path))
        assert rows(tmp_path)["audiocpp"].version == ""
        assert report["notes"] == [
            f"{tmp_path / 'bin' / 'audiocpp-server'}: `--version` failed (exit 1): error: unknown argument: --version"]

    @pytest.mark.parametrize(("read", "text", "version"), [
        (engine_probes.llama_version, "version: 11434 (abc1234)\nbuilt with MSVC 19.40 for x64\n", "b11434"),
        (engine_probes.llama_version,
         "version: 0.6.0-dev (build 11434, commit unknown)\nbuilt with GNU 12.2.0 for Linux x86_64\n", "b11434"),
        (engine_probes.llama_version, "garbage\n", ""),
        (engine_probes.parse_version, "WARNING something 1.2\n0.11.0\n", "0.11.0"),
        (engine_probes.parse_version, "sd-server version: v2.0.1\n", "2.0.1"),
        (engine_probes.parse_version, "usage: sd-server [options]\n", ""),
    ])
    def test_version_parsing(self, read, text, version):
        assert read(text) == version

    @pytest.mark.parametrize(("text", "variant"), [
        ("Available devices:\n  ROCm0: AMD Radeon RX 7900 XTX (24560 MiB, 24000 MiB free)\n", "rocm"),
        ("Available devices:\n  Vulkan0: Intel(R) Arc(tm) (16000 MiB, 15000 MiB free)\n", "vulkan"),
        ("Available devices:\n  MTL0: Apple M1 Pro (12124 MiB, 12123 MiB free)\n", "metal"),
        ("Available devices:\n", "cpu"),
        ("error: unknown argument\n", ""),
    ])
    def test_list_devices_parsing(self, text, variant):
        assert engine_probes.parse_devices(text) == variant


class TestRewrite:
    def test_second_run_leaves_the_file_byte_identical_and_untouched(self, tmp_path, home):
        engine(tmp_path / "bin", "llama-server", LLAMA_CUDA)
        engine(tmp_path / "bin", "vllm", VLLM)
        settings = settings_file(tmp_path)
        run(settings)
        target = tmp_path / "backends.yaml"
        before, stat = target.read_bytes(), target.stat()
        report = run(settings)
        assert target.read_bytes() == before and target.stat().st_mtime_ns == stat.st_mtime_ns
        assert (report["written"], report["changed"], report["added"]) == (False, False, [])

    def test_manual_rows_are_untouched_and_take_neither_an_id_nor_the_star(self, tmp_path, home):
        """Once the file has rows, `backends:` is not read: its ★ and ids must not shape the file's."""
        engine(tmp_path / "bin", "llama-server", LLAMA_CUDA)
        engine(tmp_path / "bin", "sd-server", SD)
        settings = settings_file(tmp_path, "backends:\n  - {id: mine, kind: llama, path: /x/llama-server, default: true}\n"
                                           "  - {id: llama-cuda, kind: llama, path: /y/llama-server}\n")
        text = settings.read_bytes()
        report = run(settings)
        got = rows(tmp_path)
        assert settings.read_bytes() == text and "mine" not in got
        assert sorted(got) == ["llama-cuda", "sd"]  # not llama-cuda-2
        assert got["llama-cuda"].default and got["sd"].default
        assert ("rows in backends.yaml replace the 2 rows under `backends:` when settings load (docs/settings.md: "
                "`backends_file`): pins to mine then name no row (a settings error until they name one)") in report["notes"]

    def test_a_pin_to_a_row_only_under_backends_is_refused_once_the_file_has_rows(self, tmp_path, home):
        """What detect's note says: the pin names no row of the registry in use, so settings stop
        loading, naming the pin and the file's ids, until it names one."""
        engine(tmp_path / "bin", "llama-server", LLAMA_CUDA)
        settings = settings_file(tmp_path, "backends:\n  - {id: mine, kind: llama, path: /x/llama-server}\n"
                                           "overrides:\n  - {match: '*qwen*', backend: mine}\n")
        assert "pins to mine then name no row" in run(settings)["notes"][-1]
        with pytest.raises(SettingsError) as refused:
            load_settings(settings)
        assert "overrides[0].backend: no backend row has id 'mine' (ids: llama-cuda)" in str(refused.value)

    def test_an_existing_managed_star_is_never_stolen(self, tmp_path, home):
        old = engine(tmp_path / "old", "llama-server", LLAMA_CUDA)
        (tmp_path / "backends.yaml").write_text(detect.FILE_HEADER +
            f"- {{id: llama-old, kind: llama, path: {old}, default: true, managed: true, version: b1}}\n")
        engine(tmp_path / "bin", "llama-server", LLAMA_CUDA)
        report = run(settings_file(tmp_path))
        got = rows(tmp_path)
        assert got["llama-old"].default and got["llama-old"].version == "b11434"  # id and ★ kept, version read
        assert not got["llama-cuda"].default
        assert report["updated"] == ["llama-old: version b1 → b11434", "llama-old: variant - → cuda"]

    def test_a_removed_binary_drops_its_row_and_says_so(self, tmp_path, home):
        engine(tmp_path / "bin", "llama-server", LLAMA_CUDA)
        sd = engine(tmp_path / "bin", "sd-server", SD)
        settings = settings_file(tmp_path)
        run(settings)
        sd.unlink()
        report = run(settings)
        assert list(rows(tmp_path)) == ["llama-cuda"]
        assert report["dropped"] == [{"id": "sd", "path": str(sd)}]
        assert f"dropped: sd ({sd} is gone)" in detect.format_report(report)

    def test_unmanaged_rows_of_the_file_are_kept(self, tmp_path, home):
        # a file detect wrote, with a row added by hand below its header
        (tmp_path / "backends.yaml").write_text(detect.FILE_HEADER + "- {id: by-hand, kind: custom, path: /opt/x/serve}\n")
        engine(tmp_path / "bin", "llama-server", LLAMA_CUDA)
        run(settings_file(tmp_path))
        assert list(rows(tmp_path)) == ["by-hand", "llama-cuda"]

    def test_two_builds_of_one_variant_get_distinct_stable_ids(self, tmp_path, home):
        engine(home / "a" / "build" / "bin", "llama-server", LLAMA_CUDA)
        engine(home / "b" / "build" / "bin", "llama-server", LLAMA_CUDA)
        settings = settings_file(tmp_path)
        run(settings)
        first = rows(tmp_path)
        assert sorted(first) == ["llama-cuda", "llama-cuda-2"]
        assert first["llama-cuda"].path.startswith(str(home / "a")) and first["llama-cuda"].default
        run(settings)
        assert rows(tmp_path) == first

    def test_dry_run_writes_nothing(self, tmp_path, home):
        engine(tmp_path / "bin", "llama-server", LLAMA_CUDA)
        report = run(settings_file(tmp_path), dry_run=True)
        assert not (tmp_path / "backends.yaml").exists()
        assert report["changed"] and not report["written"]
        assert detect.format_report(report).endswith(f"dry run: {tmp_path / 'backends.yaml'} would be written\n")
        run(settings_file(tmp_path))
        engine(tmp_path / "bin", "sd-server", SD)
        report = run(settings_file(tmp_path), dry_run=True)
        assert detect.format_report(report).endswith(f"dry run: {tmp_path / 'backends.yaml'} would be rewritten\n")
        run(settings_file(tmp_path))
        assert detect.format_report(run(settings_file(tmp_path), dry_run=True)).endswith("would be left unchanged\n")

    def test_nothing_found_writes_an_empty_list(self, tmp_path, home):
        run(settings_file(tmp_path))
        assert load_backends_file(tmp_path / "backends.yaml") == ()


class TestCommand:
    def test_settings_without_backends_file_is_an_error_with_the_hint(self, tmp_path, home, capsys):
        (tmp_path / "swapgen.yaml").write_text("roots: [models]\n")
        with pytest.raises(SettingsError, match=r"add `backends_file: backends\.yaml`"):
            detect.detect(load_settings(tmp_path / "swapgen.yaml"))
        assert cli.main(["--settings", str(tmp_path / "swapgen.yaml"), "backends", "detect"]) == 1
        assert "backends_file: required by `swapgen backends detect`" in capsys.readouterr().err
        assert not (tmp_path / "backends.yaml").exists()

    def test_cli_prints_one_line_per_row_and_what_changed(self, tmp_path, home, capsys):
        engine(tmp_path / "bin", "llama-server", LLAMA_CUDA)
        settings = settings_file(tmp_path)
        assert cli.main(["--settings", str(settings), "backends", "detect"]) == 0
        out = capsys.readouterr().out.splitlines()
        assert out[0].split() == ["★", "llama-cuda", "llama", "b11434", "cuda", str(tmp_path / "bin" / "llama-server")]
        assert out[1:] == ["added: llama-cuda", f"wrote {tmp_path / 'backends.yaml'}"]

    def test_json_output_parses(self, tmp_path, home, capsys):
        engine(tmp_path / "bin", "vllm", VLLM)
        assert cli.main(["--settings", str(settings_file(tmp_path)), "backends", "detect", "--json", "--dry-run"]) == 0
        report = json.loads(capsys.readouterr().out)
        assert [r["id"] for r in report["rows"]] == ["vllm"] and report["dry_run"]


class TestGuideExample:
    """docs/engines.md "swapgen backends detect": its settings, on a machine laid out as it says (a
    CPU build in ~/.local/bin, a CUDA build of a source checkout, vLLM in ~/venvs/vllm), print and
    write what the page shows (HOME shown as /home/me)."""

    CPU_BUILD = 'case "$1" in --version) echo "version: 6123 (0f1e2d3)" >&2 ;; --list-devices) echo "Available devices:" ;; esac\n'
    CUDA_BUILD = 'echo "version: 6123 (0f1e2d3)" >&2\n'

    @staticmethod
    def blocks() -> dict[str, str]:
        from tests.guide_pages import page, section_blocks  # noqa: PLC0415 - the guide's helpers, only here

        return {body.split("\n", 1)[0]: body
                for _, body, _ in section_blocks("## swapgen backends detect", page("engines.md"))}

    def test_settings_output_and_file_are_a_real_run(self, tmp_path, home, capsys):
        engine(home / ".local" / "bin", "llama-server", self.CPU_BUILD)
        cuda = engine(home / "llama.cpp" / "build" / "bin", "llama-server", self.CUDA_BUILD)
        (cuda.parent / "libggml-cuda.so").write_bytes(b"")
        site = home / "venvs" / "vllm" / "lib" / "python3.12" / "site-packages"
        (site / "vllm-0.11.0.dist-info").mkdir(parents=True)
        (site / "torch" / "lib").mkdir(parents=True)
        (site / "torch" / "lib" / "libtorch_cuda.so").write_bytes(b"")
        engine(home / "venvs" / "vllm" / "bin", "vllm", FAILS)
        blocks = self.blocks()
        folder = home / "swapgen"
        folder.mkdir()
        (folder / "swapgen.yaml").write_text(blocks["# swapgen.yaml"].replace("/home/me", str(home)))
        assert cli.main(["--settings", str(folder / "swapgen.yaml"), "backends", "detect"]) == 0
        shown = capsys.readouterr().out.replace(str(home), "/home/me")
        assert "$ swapgen backends detect\n" + shown == blocks["$ swapgen backends detect"]
        written = (folder / "backends.yaml").read_text().replace(str(home), "/home/me")
        assert "# backends.yaml\n" + written == blocks["# backends.yaml"]
