"""Never empty a config through a bad number: every numeric settings key has a finite range,
declared once and stated in docs/settings.md#numbers, and `swapgen validate` refuses every
integer llama-swap's loader refuses (Go's 64-bit int through gopkg.in/yaml.v3)."""

from __future__ import annotations

import os
import subprocess
from typing import get_args

import attrs
import pytest

from autogen.commands import cli
from autogen.commands.tasks import check_llama_swap_keys
from autogen.errors import ModelError, SettingsError
from autogen.flags.vllm import read_extra_args
from autogen.router.validate import validate_text
from autogen.router.yamllines import plain_scalar
from autogen.settings.fields import Check, key_of
from autogen.settings.load import load_settings
from autogen.settings.schema import Gpu, Override, Profile, Settings, Watch
from autogen.settings.structure import _inner_types, _is_list_field, _records, structure
from tests.builders import SETTINGS
from tests.test_llamaswap_loader import CHECKER
from tests.test_readme import documented

#: The keys a record of each kind needs besides the one under test.
NEEDS = {Settings: {}, Override: {"match": "*"}, Profile: {"name": "p"}, Gpu: {"index": 0, "vram_gb": 24}, Watch: {}}


def numeric_fields() -> list[tuple[type, attrs.Attribute]]:
    """Every settings key whose value is a number or a list of numbers, in every record."""
    return [(cls, a) for cls in _records(Settings) for a in attrs.fields(cls)
            if a.name != "source" and set(_inner_types(a.type)) & {int, float}]


NUMERIC = numeric_fields()
IDS = [f"{cls.__name__}.{key_of(a)}" for cls, a in NUMERIC]


def document(cls: type, key: str, value) -> dict:
    """A settings document with `key: value` in a record of `cls`."""
    record = {**NEEDS[cls], key: value}
    return {Settings: {"roots": [], **record}, Override: {"roots": [], "overrides": [record]},
            Profile: {"roots": [], "overrides": [{"match": "*", "profiles": [record]}]},
            Gpu: {"roots": [], "gpus": [record]}, Watch: {"roots": [], "watch": record}}[cls]


def problems(data: dict) -> list[str]:
    try:
        structure(data, Settings, "swapgen.yaml")
    except SettingsError as exc:
        return exc.problems
    return []


def is_list(a: attrs.Attribute) -> bool:
    return any(_is_list_field(t) for t in (a.type, *get_args(a.type)))


def place(cls: type, key: str) -> str:
    return {Settings: "", Override: "overrides[0].", Profile: "overrides[0].profiles[0].", Gpu: "gpus[0].",
            Watch: "watch."}[cls] + key


def test_the_numeric_keys_are_found():
    assert {"Settings.vram_budget_gb", "Settings.ttl", "Override.ctx", "Override.ctx_profiles", "Override.devices",
            "Profile.parallel", "Gpu.index", "Watch.poll_interval_seconds", "Override.cfg_scale"} <= set(IDS)


@pytest.mark.parametrize(("cls", "field"), NUMERIC, ids=IDS)
class TestEveryNumericKey:
    def test_it_declares_a_range_check(self, cls, field):
        assert isinstance(field.metadata.get("check"), Check), f"{cls.__name__}.{field.name} has no range"

    def test_huge_and_infinite_values_are_refused_at_its_place(self, cls, field):
        key = key_of(field)
        huge = [10**20, float("inf"), float("nan"), -float("inf"), 10**400] if float in _inner_types(field.type) \
            else [10**20, -(10**20), 2**63]
        for value in huge:
            found = problems(document(cls, key, [value] if is_list(field) else value))
            where = place(cls, key) + ("[0]" if is_list(field) else "")
            assert [p.split(": ")[0] for p in found] == [where], (value, found)

    def test_its_row_in_the_reference_states_the_range(self, cls, field):
        check = field.metadata["check"]
        span = check.expected.removeprefix("expected an ").removeprefix("expected a ")
        cell = documented(cls)[key_of(field)][1]
        if is_list(field):
            assert span.removeprefix("integer ") in cell, (cell, span)
        else:
            assert cell == span

    def test_the_default_is_within_the_range(self, cls, field):
        default = field.default
        if isinstance(default, (int, float)) and not isinstance(default, bool):
            assert field.metadata["check"].test(default)


class TestTheIssuesCases:
    @pytest.mark.parametrize("text", [".inf", "1e309", ".nan", "-.inf"])
    def test_an_infinite_budget_is_refused_at_its_line(self, tmp_path, text):
        """`.inf` passed, and every model then failed with OverflowError: a 2-model config became `models: {}`."""
        path = tmp_path / "swapgen.yaml"
        path.write_text(SETTINGS.replace("vram_budget_gb: 8", f"vram_budget_gb: {text}"))
        with pytest.raises(SettingsError) as info:
            load_settings(path)
        shown = {".inf": ".inf", "1e309": ".inf", ".nan": ".nan", "-.inf": "-.inf"}[text]
        assert str(info.value).splitlines()[1] == (
            f"  {path}:2: vram_budget_gb: expected a number above 0 and at most 65536, got {shown}")

    @pytest.mark.parametrize("key", ["ttl", "ctx", "ngl", "threads", "parallel"])
    def test_integers_of_ten_to_the_twenty_never_reach_the_config(self, library, capsys, key):
        before = (library / "config.yaml").exists()
        where = key if key == "ttl" else f"overrides[0].{key}"
        extra = f"{key}: 100000000000000000000\n" if key == "ttl" else \
            f"overrides:\n  - match: '*'\n    {key}: 100000000000000000000\n"
        (library / "swapgen.yaml").write_text(SETTINGS + extra)
        assert cli.main(["--settings", str(library / "swapgen.yaml")]) == 1
        err = capsys.readouterr().err
        assert f": {where}: expected an integer from " in err and "got 100000000000000000000" in err
        assert (library / "config.yaml").exists() == before

    def test_a_budget_written_as_400_digits_is_refused_not_an_overflow(self):
        assert problems({"roots": [], "vram_budget_gb": 10**400}) == [
            "vram_budget_gb: expected a number above 0 and at most 65536, got a 401-digit integer"]

    def test_list_items_are_checked_at_their_index(self):
        assert problems({"roots": [], "devices": [0, -1, "x", None]}) == [
            "devices[1]: expected an integer from 0 to 1023, got -1", "devices[2]: expected an integer, got 'x'",
            "devices[3]: expected an integer, got nothing"]
        assert problems({"roots": [], "overrides": [{"match": "*", "ctx_profiles": [65536, 0]}]}) == [
            "overrides[0].ctx_profiles[1]: expected an integer from 1 to 16777216, got 0"]

    def test_the_bounds_themselves_are_accepted(self):
        data = {"roots": [], "ttl": 2**31 - 1, "vram_budget_gb": 65536, "card_vram_gb": 0, "parallel": 256,
                "threads": 512, "devices": [0, 1023],
                "overrides": [{"match": "*", "ctx": 1 << 24, "ngl": 0, "ctx_profiles": [1], "vllm_tensor_parallel": 1024}]}
        assert problems(data) == []


# --- what llama-swap's loader refuses -------------------------------------------------------


def model(line: str) -> str:
    return f"models:\n  m:\n    cmd: llama-server --port ${{PORT}}\n    {line}\n"


#: yaml.v3 resolve.go: ParseInt, then ParseUint, then a float; past float64, a string.
GO_SCALARS = [
    ("9223372036854775807", 2**63 - 1), ("-9223372036854775808", -(2**63)),
    ("9223372036854775808", 2**63), ("18446744073709551615", 2**64 - 1),
    ("18446744073709551616", 1.8446744073709552e19), ("100000000000000000000", 1e20),
    ("-9223372036854775809", -9.223372036854776e18), ("1e400", "1e400"), ("1" * 5000, "1" * 5000),
    ("0x" + "f" * 17, "0x" + "f" * 17), ("0" * 80 + "1", 1), ("017", 15), ("1_000", 1000),
]


@pytest.mark.parametrize(("text", "value"), GO_SCALARS, ids=[t[:24] for t, _ in GO_SCALARS])
def test_plain_scalars_resolve_as_yaml_v3_does(text, value):
    got = plain_scalar(text)
    assert got == value and type(got) is type(value)


INT_KEYS = [
    "healthCheckTimeout: {n}", "globalTTL: {n}", "startPort: {n}", "metricsMaxInMemory: {n}",
    "routing:\n  scheduler:\n    settings:\n      fifo:\n        priority:\n          m: {n}",
]
MODEL_INT_KEYS = ["ttl: {n}", "unloadTimeout: {n}", "concurrencyLimit: {n}", "timeouts:\n      connect: {n}",
                  "capabilities:\n      context: {n}"]


@pytest.mark.parametrize("n", ["9223372036854775808", "100000000000000000000", "-100000000000000000000", "1e400"])
def test_validate_refuses_every_integer_the_loader_refuses(n):
    """yaml.v3 decode.go: an `int` field takes an !!int that fits and a !!float up to MaxInt64; the
    loader refuses 2**63 (!!int), 1e+20 (!!float) and 1e400 (!!str)."""
    texts = [model("") + key.format(n=n) + "\n" for key in INT_KEYS]
    texts += [model(key.format(n=n)) for key in MODEL_INT_KEYS]
    for text in texts:
        errors = [p for p in validate_text(text) if p.label == "error"]
        assert errors, text


def test_validate_accepts_the_largest_integer_the_loader_accepts():
    assert validate_text(model("ttl: 9223372036854775807")) == []


class TestLlamaSwapKeysInTheSettings:
    def refused(self, tmp_path, extra: str) -> str:
        path = tmp_path / "swapgen.yaml"
        path.write_text(SETTINGS + extra)
        with pytest.raises(SettingsError) as info:
            check_llama_swap_keys(load_settings(path))
        return str(info.value)

    def test_an_integer_past_go_int_is_refused_at_its_line(self, tmp_path):
        shown = self.refused(tmp_path, "llama_swap:\n  globalTTL: 100000000000000000000\n")
        assert ":7: llama_swap.globalTTL: expected an integer llama-swap reads (Go's int: -9223372036854775808 to " \
               "9223372036854775807), got 100000000000000000000" in shown

    def test_free_data_holds_no_integer_llama_swap_would_turn_into_a_float(self, tmp_path):
        shown = self.refused(tmp_path, "overrides:\n  - match: '*'\n    llama_swap:\n      metadata:\n"
                                       "        big: 100000000000000000000\n")
        assert "overrides[0].llama_swap.metadata.big: expected an integer llama-swap reads" in shown


@pytest.mark.slow
@pytest.mark.skipif(not os.access(CHECKER, os.X_OK), reason="llama-swap's loader check is not built "
                    "(bash scripts/setup-slow-checks.sh)")
@pytest.mark.parametrize("n", ["9223372036854775807", "9223372036854775808", "100000000000000000000", "1.5"])
def test_the_real_loader_agrees(tmp_path, n):
    """Where `validate` accepts, llama-swap's loader accepts; where the loader refuses, so does `validate`."""
    config = tmp_path / "config.yaml"
    config.write_text(model(f"ttl: {n}"))
    loaded = subprocess.run([str(CHECKER), "-config", str(config)], capture_output=True, text=True,
                            timeout=60).returncode == 0
    valid = not [p for p in validate_text(config.read_text()) if p.label == "error"]
    assert loaded or not valid


class TestNumbersInExtraArgs:
    """`extra_args` pins the sizing to its numbers: one past what the engine parses is a skip
    with its reason, never a config llama-swap refuses (a `-c 1e20` pin reached the entry's
    `capabilities.context`)."""

    def test_a_huge_llama_server_pin_skips_the_model_and_the_config_stays_valid(self, library, capsys):
        (library / "swapgen.yaml").write_text(SETTINGS + "overrides:\n  - match: '*Alpha*'\n"
                                              "    extra_args: [-c, '100000000000000000000']\n")
        assert cli.main(["--settings", str(library / "swapgen.yaml")]) == 0
        text = (library / "config.yaml").read_text()
        assert ("# SKIPPED \"alpha-q4_k_m\": extra_args: -c '100000000000000000000': expected an integer from 0 to "
                "2147483647") in text
        assert '"beta-q8_0":' in text and [p for p in validate_text(text) if p.fatal] == []

    @pytest.mark.parametrize("args", [["--max-model-len", "100000000000000000000"], ["--max-model-len", "1e400"],
                                      ["--max-model-len", "1e308k"], ["-tp", "2000"],
                                      ["--max-num-batched-tokens", "9" * 5000]])
    def test_vllm_numbers_past_a_c_int_are_refused(self, args):
        with pytest.raises(ModelError, match=f"extra_args {args[0].replace('-tp', '--tensor-parallel-size')} "):
            read_extra_args(args)
