"""`target: llama-server` end to end: the same library, sizing and write rules as the llama-swap
config, written as a models preset; llama-swap-only settings refused by name."""

from __future__ import annotations

import contextlib
import io
import json
import os

import pytest
from ruamel.yaml import YAML

from autogen.cmdline import split_command
from autogen.commands import cli
from autogen.errors import SettingsError
from autogen.flags.llama import recorded_table
from autogen.router.preset_check import check_preset_text
from autogen.settings.load import load_settings
from tests.builders import SETTINGS, add_model
from tests.hf_fixtures import write_config, write_safetensors

PRESET = SETTINGS + "target: llama-server\n"


def run(settings, *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(["--settings", str(settings), *args])
    return rc, out.getvalue(), err.getvalue()


def test_the_preset_is_written_checked_and_left_alone_when_nothing_changed(library):
    settings = library / "swapgen.yaml"
    settings.write_text(PRESET)
    rc, out, _ = run(settings)
    preset = library / "models.ini"  # the target's own default `output`
    assert rc == 0 and preset.exists() and not (library / "config.yaml").exists()
    text = preset.read_text()
    assert check_preset_text(text) == []
    assert "[alpha-q4_k_m]\nmodel = " in text and "[beta-q8_0]\nmodel = " in text
    assert f"swapgen: start llama.cpp's router: /opt/llama/llama-server --models-preset {preset} --models-max" in out
    before = preset.stat().st_mtime_ns
    rc, out, _ = run(settings)
    assert rc == 0 and preset.read_text() == text and preset.stat().st_mtime_ns == before
    assert "0 re-emitted, 2 unchanged; models.ini unchanged" in out


def test_sections_hold_the_llama_swap_entries_arguments(library):
    """The YAML of the same library, read back as llama-swap reads it, has the same arguments."""
    settings = library / "swapgen.yaml"
    assert run(settings)[0] == 0
    config = YAML(typ="safe").load((library / "config.yaml").read_text())
    settings.write_text(PRESET)
    assert run(settings)[0] == 0
    sections: dict[str, dict[str, str]] = {}
    current = None
    for line in (library / "models.ini").read_text().splitlines():
        if line.startswith("["):
            current = sections.setdefault(line[1:-1], {})
        elif " = " in line and current is not None:
            key, value = line.split(" = ", 1)
            current[key] = value
    shared = sections.pop("*", {})
    table = recorded_table()
    for model_id, model in config["models"].items():
        argv = split_command(model["cmd"])
        expected, i = {}, 1
        while i < len(argv):
            option = table.by_flag[argv[i]]
            value = "true" if option.values == 0 else argv[i + 1]
            i += 1 if option.values == 0 else 2
            if option.key not in ("host", "port"):
                expected[option.key] = value
        assert {**shared, **sections[model_id]} == expected


def test_models_no_llama_server_serves_are_listed_with_the_reason(library):
    folder = library / "models" / "meta-llama" / "Llama-3.2-3B-Instruct"
    write_config(folder)
    write_safetensors(folder / "model.safetensors", 6 << 30)
    settings = library / "swapgen.yaml"
    settings.write_text(PRESET.replace("default: true}\n",
                                       "default: true}\n  - {id: vllm, kind: vllm, path: /opt/vllm/bin/vllm}\n"))
    rc, out, _ = run(settings)
    reason = "a vllm model: llama.cpp's router starts llama-server only (target: llama-swap serves it)"
    assert rc == 0
    assert f'swapgen: not in models.ini: "llama-3.2-3b-instruct-bf16": {reason}' in out.splitlines()
    assert f'; SKIPPED "llama-3.2-3b-instruct-bf16": {reason}\n' in (library / "models.ini").read_text()
    rows = json.loads(run(settings, "list", "--json")[1])
    assert {r["id"]: r["skipped"] for r in rows}["llama-3.2-3b-instruct-bf16"] == reason


def test_ik_llama_cpp_models_are_left_out_saying_why_in_one_line(library):
    """llama.cpp's router starts its own llama-server for every section, which has none of
    ik_llama.cpp's flags; the llama-swap config of the same library serves the model."""
    settings = library / "swapgen.yaml"
    ik = "  - {id: ik, kind: ik_llama, path: /opt/ik/llama-server}\noverrides:\n  - {match: '*Beta*', backend: ik}\n"
    settings.write_text(SETTINGS + ik)
    assert run(settings)[0] == 0
    assert "/opt/ik/llama-server" in (library / "config.yaml").read_text()
    settings.write_text(SETTINGS + ik + "target: llama-server\n")
    rc, out, err = run(settings)
    reason = ("an ik_llama.cpp model: llama.cpp's router starts its own llama-server, which has none of "
              "ik_llama.cpp's flags (target: llama-swap serves it)")
    assert rc == 0, err
    assert f'swapgen: not in models.ini: "beta-q8_0": {reason}' in out.splitlines()
    text = (library / "models.ini").read_text()
    assert f'; SKIPPED "beta-q8_0": {reason}\n' in text and "[alpha-q4_k_m]" in text


@pytest.mark.parametrize("name, end", [("Gamma#2-Q4_K_M.gguf", "#"), ("Gamma;2-Q4_K_M.gguf", ";")])
def test_a_model_the_preset_cannot_carry_is_listed_by_the_run(library, name, end):
    """llama.cpp's preset reader ends a value at `;` or `#`: the llama-swap config serves such a
    file, the preset cannot, and the run says so as it does for the models of other engines."""
    add_model(library / "models", f"pub/G-GGUF/{name}")
    settings = library / "swapgen.yaml"
    settings.write_text(PRESET)
    rc, out, _ = run(settings)
    reason = (f"not in the preset: -m '{library / 'models' / 'pub' / 'G-GGUF' / name}': llama.cpp's preset "
              f"reader ends a value at {end!r}; rename the file or drop the argument")
    assert rc == 0
    assert f'swapgen: not in models.ini: "gamma-2-q4_k_m": {reason}' in out.splitlines()
    assert f'; SKIPPED "gamma-2-q4_k_m": {reason}\n' in (library / "models.ini").read_text()


def test_aliases_preloads_and_unload_timeout_carry_over(library):
    settings = library / "swapgen.yaml"
    settings.write_text(PRESET + "overrides:\n  - match: '*Alpha*'\n    llama_swap: {aliases: [alpha], unloadTimeout: 5}\n"
                                 "llama_swap:\n  hooks: {on_startup: {preload: [alpha]}}\n")
    assert run(settings)[0] == 0
    text = (library / "models.ini").read_text()
    section = text[text.index("[alpha-q4_k_m]"):text.index("\n\n", text.index("[alpha-q4_k_m]"))]
    assert section.endswith("alias = alpha\nstop-timeout = 5\nload-on-startup = true")


def test_a_failed_assembly_keeps_the_previous_preset(library):
    settings = library / "swapgen.yaml"
    settings.write_text(PRESET)
    assert run(settings)[0] == 0
    before = (library / "models.ini").read_bytes()
    settings.write_text(PRESET + "llama_swap:\n  hooks: {on_startup: {preload: [gamma]}}\n")
    rc, _, err = run(settings)
    assert rc == 1
    line = PRESET.count("\n") + 2  # the settings file's line that names it
    assert (f"  {settings}:{line}: llama_swap.hooks.on_startup.preload[0]: 'gamma' is not a section of the "
            "preset (a model id or alias it writes)") in err.splitlines()
    assert (library / "models.ini").read_bytes() == before


def test_switching_back_writes_the_llama_swap_config(library):
    settings = library / "swapgen.yaml"
    settings.write_text(PRESET)
    assert run(settings)[0] == 0
    settings.write_text(SETTINGS)
    assert run(settings)[0] == 0
    assert (library / "config.yaml").read_text().startswith("# Generated by swapgen")


@pytest.mark.parametrize(("extra", "problem"), [
    ("routing: auto\n", "routing: plans llama-swap's matrix router; target: llama-server writes a models preset "
                        "for llama.cpp's router, which has no such setting; remove it or use target: llama-swap"),
    ("groups:\n  - {name: g, match: ['*']}\n", "groups: are llama-swap groups; target: llama-server"),
    ("hosts:\n  - {name: a, settings: a.yaml, url: 'http://a:8080'}\n", "hosts: make a fleet of llama-swap peers"),
    ("output_mode: fragment\n", "output_mode: 'fragment' is a llama-swap -config-dir part"),
    ("llama_swap: {apiKeys: [k]}\n", "llama_swap.apiKeys: a llama-swap key; target: llama-server"),
    ("llama_swap: {hooks: {on_startup: {preload: [a], x: 1}}}\n", "llama_swap.hooks.on_startup.x: a llama-swap key"),
    ("overrides:\n  - {match: '*', llama_swap: {filters: {stripParams: top_k}}}\n",
     "overrides[0].llama_swap.filters: a llama-swap key; target: llama-server writes a models preset for "
     "llama.cpp's router, which has no such setting; remove it or use target: llama-swap (it takes aliases, "
     "unloadTimeout)"),
    ("overrides:\n  - {match: '*', unlisted: true}\n", "overrides[0].unlisted: hides a llama-swap entry"),
    ("default_profiles:\n  - {name: big, ctx: 4096, unlisted: true}\n", "default_profiles[0].unlisted: hides"),
])
def test_llama_swap_only_settings_are_refused_by_name(tmp_path, extra, problem):
    settings = tmp_path / "swapgen.yaml"
    settings.write_text(PRESET + extra)
    with pytest.raises(SettingsError) as exc:
        load_settings(settings)
    assert problem in str(exc.value)
    line = PRESET.count("\n") + 1
    assert f"swapgen.yaml:{line}" in str(exc.value) or f"swapgen.yaml:{line + 1}" in str(exc.value)


def test_an_unknown_target_is_a_settings_error(tmp_path):
    settings = tmp_path / "swapgen.yaml"
    settings.write_text(SETTINGS + "target: llama.cpp\n")
    with pytest.raises(SettingsError, match=r"target: expected llama-swap or llama-server, got 'llama\.cpp'"):
        load_settings(settings)


def test_an_explicit_output_is_kept(tmp_path):
    settings = tmp_path / "swapgen.yaml"
    settings.write_text(PRESET + "output: router/presets.ini\n")
    assert load_settings(settings).output == os.path.join(tmp_path, "router", "presets.ini")


def test_show_prints_the_models_sections_with_every_key(library):
    settings = library / "swapgen.yaml"
    settings.write_text(PRESET)
    rc, out, _ = run(settings, "show", "alpha-q4_k_m", "--json")
    fragment = json.loads(out)["fragment"]
    assert rc == 0 and fragment.startswith("; llama · ") and "\n[alpha-q4_k_m]\nmodel = " in fragment
    assert "fit = off\n" in fragment  # a key `[*]` takes in the file stays in the model's own view
