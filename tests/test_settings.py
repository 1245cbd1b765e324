"""Settings: every key accepted, every mistake named by its exact place, paths resolved."""

from __future__ import annotations

import os
import typing

import attrs
import pytest

import autogen.settings.schema as module
from autogen.emit.sd import OVERRIDE_FIELD
from autogen.errors import SettingsError
from autogen.settings.fields import key_of
from autogen.settings.load import load_settings
from autogen.settings.schema import MMPROJ_MODES, SD_COMPONENT_FIELDS, BackendRow, Group, Override, Settings
from autogen.settings.structure import structure


def write(tmp_path, text: str, name: str = "swapgen.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_vllm_distributed_without_nodes_is_an_error(tmp_path):
    assert problems(tmp_path, "roots: [m]\noverrides: [{match: '*big*', vllm_distributed: ray}]\n") == [
        "overrides[0].vllm_distributed: 'ray' needs vllm_nodes (the hosts the model spans); add them or remove "
        "vllm_distributed"]


def problems(tmp_path, text: str) -> list[str]:
    with pytest.raises(SettingsError) as info:
        load_settings(write(tmp_path, text))
    return info.value.problems


FULL = """
roots: [models, ~/more-models]
output: out/config.yaml
cache_dir: .cache
vram_budget_gb: 22.5
card_vram_gb: 24
ttl: 900
health_check_timeout: 120
backends_file: backends.yaml
server_exe: /opt/llama/llama-server
sd_server_exe: /opt/sd/sd-server
tts_server_exe: tts-server
asr_server_exe: parakeet-server
backends:
  - {id: llama-cuda, kind: llama, path: /opt/llama/llama-server, name: CUDA build, default: true,
     version: b11434, managed: true, component: llama.cpp, variant: cuda, build: false}
  - {id: vllm, kind: vllm, path: vllm, version: "0.11.0"}
overrides:
  - match: "*Qwen3*"
    quant: Q4_K_M
    skip: false
    unlisted: true
    backend: vllm
    ctx: 32768
    vram_budget_gb: 20
    vllm_gpu_util: 0.8
    vllm_tensor_parallel: 2
    vllm_tokenizer: Qwen/Qwen3-8B
    vllm_tool_parser: none
    extra_args: "--enforce-eager --seed 1"
    devices: [0, 1]
    ctx_variants: [65536, 131072]
    variants: [{name: coding, ctx: 65536, kv_type: q8_0, extra_args: [--temp, "0.2"]}]
    kv_type: q8_0
    parallel: 2
    flash_attn: "on"
    threads: 8
    ngl: 99
    mmproj: cpu
groups:
  - {name: big, match: ["*70b*"], coexist: false}
tool_parsers: {mymodel: hermes}
gpus: [{index: 0, name: RTX 4090, vram_gb: 24, vendor: nvidia}]
devices: [0]
default_variants: [{name: long, ctx: 131072}]
kv_type: f16
parallel: 1
flash_attn: auto
threads: 6
"""


class TestLoad:
    def test_every_documented_key_is_accepted(self, tmp_path):
        """A file using every key of the settings reference's tables loads, values typed as written."""
        s = load_settings(write(tmp_path, FULL))
        assert s.vram_budget_gb == 22.5 and s.card_vram_gb == 24.0 and s.ttl == 900
        assert s.backends[0] == BackendRow(id="llama-cuda", kind="llama", path="/opt/llama/llama-server",
                                           name="CUDA build", default=True, version="b11434", managed=True,
                                           component="llama.cpp", build="cuda", derived=False)
        ov = s.overrides[0]
        assert ov.extra_args == ("--enforce-eager", "--seed", "1")
        assert ov.profiles[0].extra_args == ("--temp", "0.2")
        assert ov.devices == (0, 1) and ov.ctx_profiles == (65536, 131072)
        assert s.tool_parsers == {"mymodel": "hermes"}
        assert s.gpus[0].vram_gb == 24.0

    def test_relative_paths_resolve_against_the_settings_folder(self, tmp_path):
        s = load_settings(write(tmp_path, FULL))
        assert s.roots[0] == str(tmp_path / "models")
        assert s.roots[1] == os.path.expanduser("~/more-models")
        assert s.output == str(tmp_path / "out/config.yaml")
        assert s.cache_dir == str(tmp_path / ".cache")
        assert s.backends_file == str(tmp_path / "backends.yaml")
        assert s.source == str(tmp_path / "swapgen.yaml")

    def test_defaults(self, tmp_path):
        s = load_settings(write(tmp_path, "roots: [m]\n"))
        assert (s.ttl, s.health_check_timeout, s.vram_budget_gb, s.card_vram_gb) == (600, 300, None, None)
        assert s.output == str(tmp_path / "config.yaml") and s.cache_dir == str(tmp_path / "cache")

    def test_backends_file_replaces_backends_when_non_empty(self, tmp_path):
        write(tmp_path, "- {id: detected, kind: llama, path: /usr/bin/llama-server, managed: true}\n", "b.yaml")
        s = load_settings(write(tmp_path, "roots: [m]\nbackends_file: b.yaml\nbackends: [{id: manual, kind: vllm, path: vllm}]\n"))
        assert [b.id for b in s.backends] == ["detected"]

    def test_empty_or_missing_backends_file_keeps_backends(self, tmp_path):
        write(tmp_path, "[]\n", "b.yaml")
        s = load_settings(write(tmp_path, "roots: [m]\nbackends_file: b.yaml\nbackends: [{id: manual, kind: vllm, path: vllm}]\n"))
        assert [b.id for b in s.backends] == ["manual"]
        s = load_settings(write(tmp_path, "roots: [m]\nbackends_file: nope.yaml\nbackends: [{id: manual, kind: vllm, path: vllm}]\n"))
        assert [b.id for b in s.backends] == ["manual"]

    def test_environment_variable_finds_the_file(self, tmp_path, monkeypatch):
        path = write(tmp_path, "roots: [m]\n", "elsewhere.yaml")
        monkeypatch.setenv("SWAPGEN_SETTINGS", str(path))
        assert load_settings().source == str(path)


class TestErrors:
    def test_wrong_type_names_the_exact_place(self, tmp_path):
        assert problems(tmp_path, "roots: [m]\noverrides:\n  - {match: a}\n  - {match: b}\n  - {match: c, vllm_gpu_util: high}\n") == [
            "overrides[2].vllm_gpu_util: expected a number, got 'high'"]

    def test_unknown_key_suggests_the_right_one(self, tmp_path):
        assert problems(tmp_path, "roots: [m]\noverrides: [{match: a, vllm_gpu_utl: 0.5}]\n") == [
            "overrides[0]: unknown key 'vllm_gpu_utl' (did you mean 'vllm_gpu_util'?)"]

    def test_unknown_top_level_key(self, tmp_path):
        assert problems(tmp_path, "roots: [m]\ncolour: red\n") == ["(top level): unknown key 'colour'"]

    def test_missing_roots(self, tmp_path):
        assert problems(tmp_path, "ttl: 5\n") == ["roots: required key missing"]

    def test_empty_roots(self, tmp_path):
        assert problems(tmp_path, "roots: []\n") == ["roots: list at least one model folder"]

    def test_strings_are_not_numbers_or_booleans(self, tmp_path):
        """cattrs would coerce "600" to 600 and "false" to True; we refuse both."""
        assert problems(tmp_path, 'roots: [m]\nttl: "600"\noverrides: [{match: a, skip: "false"}]\n') == [
            "ttl: expected an integer, got '600'", "overrides[0].skip: expected true or false, got 'false'"]

    def test_bad_values(self, tmp_path):
        assert problems(tmp_path, "roots: [m]\nttl: -2\nhealth_check_timeout: 5\nvram_budget_gb: 0\n"
                                  "overrides: [{match: a, vllm_gpu_util: 1.5, ctx: 0}]\n") == [
            "vram_budget_gb: expected a number above 0 and at most 65536, got 0",
            "ttl: expected an integer from -1 to 2147483647, got -2",
            "health_check_timeout: expected an integer from 15 to 2147483647, got 5",
            "overrides[0].ctx: expected an integer from 1 to 16777216, got 0",
            "overrides[0].vllm_gpu_util: expected a fraction in (0, 1], got 1.5",
        ]

    def test_duplicate_backend_ids_and_blank_paths(self, tmp_path):
        assert problems(tmp_path, "roots: [m]\nbackends: [{id: a, kind: llama, path: x}, {id: a, kind: vllm, path: y}]\n") == [
            "backends[1].id: duplicate id 'a' (also backends[0])"]
        assert problems(tmp_path, "roots: [m]\nbackends: [{id: a, kind: llama, path: '  '}]\n") == [
            "backends[0].path: expected a non-empty string, got '  '"]

    def test_missing_override_match(self, tmp_path):
        assert problems(tmp_path, "roots: [m]\noverrides: [{ctx: 4096}]\n") == ["overrides[0].match: required key missing"]

    def test_not_yaml_names_the_line(self, tmp_path):
        with pytest.raises(SettingsError) as info:
            load_settings(write(tmp_path, "roots: [m\nttl: 5\n"))
        assert f"{tmp_path / 'swapgen.yaml'}:2: not valid YAML" in str(info.value)

    def test_not_a_mapping(self, tmp_path):
        assert problems(tmp_path, "- a\n- b\n") == ["(top level): expected a mapping of settings, got a list"]

    def test_missing_file(self, tmp_path):
        with pytest.raises(SettingsError) as info:
            load_settings(tmp_path / "nope.yaml")
        assert "file not found" in str(info.value)

    def test_message_names_the_file(self, tmp_path):
        with pytest.raises(SettingsError) as info:
            load_settings(write(tmp_path, "roots: [m]\nttl: x\n"))
        path = tmp_path / "swapgen.yaml"
        assert str(info.value) == f"{path}: invalid settings\n  {path}:2: ttl: expected an integer, got 'x'"


class TestMistakesSpeak:
    """Settings errors carry the file and line; kinds, pins and budgets are checked."""

    def error(self, tmp_path, text: str, name: str = "swapgen.yaml") -> str:
        with pytest.raises(SettingsError) as info:
            load_settings(write(tmp_path, text, name))
        return str(info.value)

    def test_every_problem_names_its_line(self, tmp_path):
        text = ("roots: [m]\n"
                "overrides:\n"
                "  - match: '*a*'\n"
                "    vllm_gpu_util: high\n"
                "  - match: '*b*'\n"
                "    ctx: 4096\n"
                "    vllm_gpu_utl: 0.9\n")
        out = self.error(tmp_path, text)
        path = tmp_path / "swapgen.yaml"
        assert f"  {path}:4: overrides[0].vllm_gpu_util: expected a number, got 'high'" in out
        assert f"  {path}:7: overrides[1]: unknown key 'vllm_gpu_utl' (did you mean 'vllm_gpu_util'?)" in out

    @pytest.mark.parametrize("kind, hint", [
        ("vlm", "(did you mean 'vllm'?)"),
        ("llama-server", "(did you mean 'llama'? `kind` names the engine, `path` the executable)"),
        ("koboldcpp", ""),
    ])
    def test_an_unknown_kind_is_an_error_with_a_hint(self, tmp_path, kind, hint):
        out = self.error(tmp_path, f"roots: [m]\nbackends:\n  - {{id: a, kind: {kind}, path: x}}\n")
        assert f"{tmp_path / 'swapgen.yaml'}:3: backends[0].kind: unknown kind {kind!r}{' ' + hint if hint else ''};" in out
        assert "kind 'custom'" in out

    @pytest.mark.parametrize("kind", ["custom", "LLaMA.cpp", " vllm ", "parakeet-server", "Whisper.cpp"])
    def test_known_kinds_and_custom_load(self, tmp_path, kind):
        assert load_settings(write(tmp_path, f"roots: [m]\nbackends: [{{id: a, kind: '{kind}', path: x}}]\n"))

    def test_a_kind_in_the_backends_file_names_that_file_and_line(self, tmp_path):
        write(tmp_path, "- {id: a, kind: llama, path: x}\n- {id: b, kind: vlm, path: y}\n", "backends.yaml")
        out = self.error(tmp_path, "roots: [m]\nbackends_file: backends.yaml\n")
        assert f"{tmp_path / 'backends.yaml'}:2: backends[1].kind: unknown kind 'vlm'" in out

    def test_a_pin_to_an_unknown_backend_is_an_error(self, tmp_path):
        text = ("roots: [m]\n"
                "backends:\n"
                "  - {id: llama-vulkan, kind: llama, path: x}\n"
                "overrides:\n"
                "  - {match: '*a*', backend: llama-vulkn}\n")
        out = self.error(tmp_path, text)
        assert (f"{tmp_path / 'swapgen.yaml'}:5: overrides[0].backend: no backend row has id 'llama-vulkn' "
                "(did you mean 'llama-vulkan'?) (ids: llama-vulkan)") in out

    def test_a_pin_is_checked_on_every_load_and_not_for_detect(self, tmp_path):
        text = "roots: [m]\noverrides: [{match: '*', backend: vllm-main}]\n"
        path = write(tmp_path, text)
        for _ in range(2):  # the second load comes from the settings cache
            assert "no backend row has id 'vllm-main' (ids: none)" in self.error(tmp_path, text)
        assert load_settings(path, check_pins=False).overrides[0].backend == "vllm-main"

    def test_a_pin_is_checked_against_the_backends_file_rows_in_use(self, tmp_path):
        write(tmp_path, "- {id: vllm-main, kind: vllm, path: vllm}\n", "backends.yaml")
        text = ("roots: [m]\nbackends_file: backends.yaml\nbackends: [{id: old, kind: llama, path: x}]\n"
                "overrides: [{match: '*', backend: old}]\n")
        assert "no backend row has id 'old'" in self.error(tmp_path, text)

    @pytest.mark.parametrize("where, text", [
        ("vram_budget_gb", "vram_budget_gb: 29.7\n"),
        ("overrides[0].vram_budget_gb", "overrides: [{match: '*', vram_budget_gb: 30}]\n"),
        ("default_profiles[0].vram_budget_gb", "default_profiles: [{name: big, vram_budget_gb: 25}]\n"),
        ("default_profiles[0].vram_budget_gb", "default_variants: [{name: big, vram_budget_gb: 25}]\n"),
    ])
    def test_a_budget_above_the_card_is_an_error(self, tmp_path, where, text):
        out = self.error(tmp_path, "roots: [m]\ncard_vram_gb: 24\n" + text)
        assert f"{where}: " in out and "GiB is above card_vram_gb (24 GiB)" in out

    def test_a_budget_without_a_card_reading_is_fine(self, tmp_path):
        assert load_settings(write(tmp_path, "roots: [m]\ncard_vram_gb: 0\nvram_budget_gb: 40\n"))
        assert load_settings(write(tmp_path, "roots: [m]\ncard_vram_gb: 24\nvram_budget_gb: 24\n"))


#: The smallest valid mapping per class with list fields (extra_args deliberately takes a string).
MINIMAL = {Settings: {"roots": ["m"]}, Override: {"match": "a"}, Group: {"name": "g"}}


def list_fields(cls) -> list[str]:
    """Keys of fields typed `tuple[...]` (or `tuple[...] | None`), extra_args and path_map (a YAML
    mapping kept as ordered pairs) aside."""
    hints = typing.get_type_hints(cls)
    return [key_of(a) for a in attrs.fields(cls) if a.name not in ("extra_args", "path_map")
            and any(typing.get_origin(t) is tuple for t in (hints[a.name], *typing.get_args(hints[a.name])))]


class TestLists:
    """cattrs iterates a string into a tuple of characters; a list key takes only a YAML list."""

    def test_a_string_root_is_not_split_into_characters(self, tmp_path):
        """`roots: models` names the key instead of scanning folders m, o, d, …"""
        assert problems(tmp_path, "roots: models\n") == ["roots: expected a list, got 'models'"]

    def test_a_string_group_match_is_not_a_bare_star(self, tmp_path):
        """`match: "*qwen*"` would otherwise contain the glob `*` and take every model."""
        assert problems(tmp_path, 'roots: [m]\ngroups: [{name: q, match: "*qwen*"}]\n') == [
            "groups[0].match: expected a list, got '*qwen*'"]

    def test_integer_lists_refuse_strings_and_single_numbers(self, tmp_path):
        assert problems(tmp_path, 'roots: [m]\ndevices: "01"\noverrides: [{match: a, devices: 0, ctx_variants: "4096"}]\n') == [
            "overrides[0].devices: expected a list, got 0",
            "overrides[0].ctx_variants: expected a list, got '4096'",
            "devices: expected a list, got '01'",
        ]

    def test_record_lists_refuse_a_single_mapping_or_string(self, tmp_path):
        assert problems(tmp_path, "roots: [m]\noverrides: {match: a}\ngroups: big\ngpus: {index: 0, vram_gb: 24}\n"
                                  "default_variants: long\nbackends: {id: a, kind: llama, path: x}\n") == [
            "backends: expected a list, got a mapping",
            "overrides: expected a list, got a mapping",
            "groups: expected a list, got 'big'",
            "gpus: expected a list, got a mapping",
            "default_variants: expected a list, got 'long'",
        ]
        assert problems(tmp_path, "roots: [m]\noverrides: [{match: a, variants: coding}]\n") == [
            "overrides[0].variants: expected a list, got 'coding'"]

    def test_a_mapping_is_not_a_list_of_its_keys(self, tmp_path):
        assert problems(tmp_path, "roots: {models: 1}\nbackend_venvs: {venv: x}\n") == [
            "roots: expected a list, got a mapping", "backend_venvs: expected a list, got a mapping"]

    def test_items_are_still_checked_with_their_index(self, tmp_path):
        assert problems(tmp_path, "roots: [m, 3]\ngroups: [{name: g, match: [a, [b]]}]\n") == [
            "roots[1]: expected a string, got 3", "groups[0].match[1]: expected a string, got a list"]

    def test_extra_args_still_takes_one_string_split_like_a_shell(self, tmp_path):
        s = load_settings(write(tmp_path, "roots: [m]\noverrides: [{match: a, extra_args: \"--seed '1 2'\", "
                                          "variants: [{name: v, extra_args: --jinja}]}]\n"))
        assert s.overrides[0].extra_args == ("--seed", "1 2")
        assert s.overrides[0].profiles[0].extra_args == ("--jinja",)

    @pytest.mark.parametrize("cls", list(MINIMAL))
    def test_every_list_field_refuses_a_string(self, cls):
        """Guards list keys added later, whatever their item type."""
        assert list_fields(cls)
        for name in list_fields(cls):
            with pytest.raises(SettingsError) as info:
                structure({**MINIMAL[cls], name: "ab"}, cls, "x")
            assert info.value.problems == [f"{name}: expected a list, got 'ab'"]

    def test_the_guard_covers_every_settings_class_with_a_list_field(self):
        classes = {c for c in vars(module).values() if isinstance(c, type) and attrs.has(c)}
        assert {c for c in classes if list_fields(c)} == set(MINIMAL)


class TestOverridePaths:
    """Override and variant paths resolve like `roots`: relative → settings folder, `~` → home."""

    COMPONENTS = """
roots: [m]
overrides:
  - match: "*flux*"
    vae: ae.safetensors
    clip_l: ~/enc/clip_l.safetensors
    clip_g: /abs/clip_g.safetensors
    t5xxl: enc/t5xxl.safetensors
    llm_text_encoder: ~/llm.gguf
    lora_dir: loras
  - match: "*vl*"
    mmproj: proj/mmproj.gguf
    variants: [{name: a, mmproj: ~/p.gguf}, {name: b, mmproj: cpu}]
default_variants: [{name: long, mmproj: ../shared/mmproj.gguf}, {name: short}]
"""

    @pytest.fixture
    def home(self, tmp_path, monkeypatch):
        home = tmp_path / "home"
        monkeypatch.setenv("HOME", str(home))
        return home

    def test_relative_and_home_paths_come_back_absolute(self, tmp_path, home):
        s = load_settings(write(tmp_path, self.COMPONENTS))
        flux, vl = s.overrides
        assert flux.vae == str(tmp_path / "ae.safetensors")
        assert flux.clip_l == str(home / "enc/clip_l.safetensors")
        assert flux.clip_g == "/abs/clip_g.safetensors"
        assert flux.t5xxl == str(tmp_path / "enc/t5xxl.safetensors")
        assert flux.llm_text_encoder == str(home / "llm.gguf")
        assert flux.lora_dir == str(tmp_path / "loras")
        assert vl.mmproj == str(tmp_path / "proj/mmproj.gguf")
        assert [v.mmproj for v in vl.profiles] == [str(home / "p.gguf"), "cpu"]
        assert [v.mmproj for v in s.default_profiles] == [str(tmp_path / "../shared/mmproj.gguf"), None]

    def test_unset_paths_stay_unset(self, tmp_path):
        ov = load_settings(write(tmp_path, "roots: [m]\noverrides: [{match: a}]\n")).overrides[0]
        assert (ov.vae, ov.lora_dir, ov.mmproj) == (None, None, None)

    def test_none_keeps_dropping_a_component_in_any_case(self, tmp_path):
        """emit_sd reads `value.strip().lower() == "none"` as "drop this component"."""
        s = load_settings(write(tmp_path, "roots: [m]\noverrides: [{match: a, vae: none, clip_l: NONE, "
                                          "t5xxl: ' None ', llm_text_encoder: none}]\n"))
        ov = s.overrides[0]
        assert (ov.vae, ov.clip_l, ov.t5xxl, ov.llm_text_encoder) == ("none", "NONE", " None ", "none")

    @pytest.mark.parametrize("mode", MMPROJ_MODES)
    def test_mmproj_modes_stay_keywords(self, tmp_path, mode):
        s = load_settings(write(tmp_path, f"roots: [m]\noverrides: [{{match: a, mmproj: {mode}, "
                                          f"variants: [{{name: v, mmproj: {mode}}}]}}]\n"
                                          f"default_variants: [{{name: d, mmproj: {mode}}}]\n"))
        assert s.overrides[0].mmproj == s.overrides[0].profiles[0].mmproj == s.default_profiles[0].mmproj == mode

    def test_component_fields_match_what_emit_sd_reads(self):
        assert set(SD_COMPONENT_FIELDS) == set(OVERRIDE_FIELD.values())

    def test_a_cached_load_keeps_resolved_paths(self, tmp_path, home):
        path = write(tmp_path, self.COMPONENTS)
        assert load_settings(path) == load_settings(path)
        assert load_settings(path).overrides[0].vae == str(tmp_path / "ae.safetensors")


class TestDuplicates:
    def test_duplicate_group_names(self, tmp_path):
        assert problems(tmp_path, "roots: [m]\ngroups: [{name: big, match: ['*70b*']}, {name: small}, "
                                  "{name: big, match: ['*72b*']}]\n") == [
            "groups[2].name: duplicate name 'big' (also groups[0])"]

    def test_duplicate_gpu_indices(self, tmp_path):
        assert problems(tmp_path, "roots: [m]\ngpus: [{index: 0, vram_gb: 24}, {index: 1, vram_gb: 24}, "
                                  "{index: 0, vram_gb: 12}]\n") == [
            "gpus[2].index: duplicate index 0 (also gpus[0])"]

    def test_every_duplicate_is_reported_in_one_pass(self, tmp_path):
        assert problems(tmp_path, "roots: [m]\nbackends: [{id: a, kind: llama, path: x}, {id: a, kind: vllm, path: y}]\n"
                                  "groups: [{name: g}, {name: g}, {name: g}]\n"
                                  "gpus: [{index: 1, vram_gb: 8}, {index: 1, vram_gb: 8}]\n") == [
            "backends[1].id: duplicate id 'a' (also backends[0])",
            "groups[1].name: duplicate name 'g' (also groups[0])",
            "groups[2].name: duplicate name 'g' (also groups[0])",
            "gpus[1].index: duplicate index 1 (also gpus[0])",
        ]

    def test_distinct_names_and_indices_load(self, tmp_path):
        s = load_settings(write(tmp_path, "roots: [m]\ngroups: [{name: a}, {name: b}]\n"
                                          "gpus: [{index: 0, vram_gb: 24}, {index: 1, vram_gb: 24}]\n"))
        assert [g.name for g in s.groups] == ["a", "b"] and [g.index for g in s.gpus] == [0, 1]


def test_settings_are_frozen(tmp_path):
    s = load_settings(write(tmp_path, "roots: [m]\n"))
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        s.ttl = 5  # type: ignore[misc]
    assert isinstance(s, Settings)


class TestCache:
    """A cached load is the same object graph as a fresh one, and any edit is seen at once."""

    def test_cached_load_equals_a_fresh_one(self, tmp_path):
        path = write(tmp_path, FULL)
        first = load_settings(path)
        assert load_settings(path) == first

    def test_editing_the_settings_file_is_seen(self, tmp_path):
        path = write(tmp_path, "roots: [m]\nttl: 5\n")
        assert load_settings(path).ttl == 5
        path.write_text("roots: [m]\nttl: 6\n")
        assert load_settings(path).ttl == 6

    def test_editing_the_backends_file_is_seen(self, tmp_path):
        write(tmp_path, "- {id: a, kind: llama, path: /a}\n", "b.yaml")
        path = write(tmp_path, "roots: [m]\nbackends_file: b.yaml\n")
        assert [b.id for b in load_settings(path).backends] == ["a"]
        write(tmp_path, "- {id: b, kind: llama, path: /b}\n", "b.yaml")
        assert [b.id for b in load_settings(path).backends] == ["b"]
        (tmp_path / "b.yaml").unlink()
        assert load_settings(path).backends == ()

    def test_an_invalid_file_is_never_served_from_the_cache(self, tmp_path):
        path = write(tmp_path, "roots: [m]\n")
        load_settings(path)
        path.write_text("roots: [m]\nttl: x\n")
        with pytest.raises(SettingsError):
            load_settings(path)

    def test_a_corrupt_cache_file_is_a_miss(self, tmp_path, monkeypatch):
        path = write(tmp_path, "roots: [m]\nttl: 7\n")
        load_settings(path)
        cache = tmp_path / "xdg"
        monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
        load_settings(path)
        for f in (cache / "swapgen").iterdir():
            f.write_bytes(b"garbage")
        assert load_settings(path).ttl == 7


class TestRouting:
    def test_routing_auto_loads_and_defaults_to_null(self, tmp_path):
        assert load_settings(write(tmp_path, "roots: [m]\nrouting: auto\n")).routing == "auto"
        assert load_settings(write(tmp_path, "roots: [m]\n")).routing is None

    def test_an_unknown_routing_mode_is_refused_with_its_line(self, tmp_path):
        with pytest.raises(SettingsError) as info:
            load_settings(write(tmp_path, "roots: [m]\nttl: 60\nrouting: matrix\n"))
        assert str(info.value).splitlines()[1].strip() == (
            f"{tmp_path / 'swapgen.yaml'}:3: routing: expected auto (or null for groups), got 'matrix'")

    def test_routing_auto_and_groups_exclude_each_other(self, tmp_path):
        """llama-swap refuses a config with both groups and a matrix."""
        with pytest.raises(SettingsError) as info:
            load_settings(write(tmp_path, "roots: [m]\ngroups: [{name: big, match: ['*70b*']}]\nrouting: auto\n"))
        assert str(info.value).splitlines()[1].strip() == (
            f"{tmp_path / 'swapgen.yaml'}:3: routing: 'auto' plans llama-swap's matrix router, which cannot be used "
            "together with groups; remove `groups` (1 declared) or set `routing: null`")
