"""Settings declared once (`settings.fields`): each key's check, what it invalidates and its YAML
spelling live on its field, and every reader takes them from there."""

from __future__ import annotations

import attrs
import pytest

from autogen.emit.dispatch import global_inputs
from autogen.emit.llama_profiles import PROFILE_KNOBS
from autogen.errors import SettingsError
from autogen.flags.ik_llama import IK
from autogen.flags.llama import FLAG_KNOBS
from autogen.settings.fields import (
    CONFIG,
    EVERY_FRAGMENT,
    PER_MATCH,
    PER_MODEL,
    WALK,
    inputs_of,
    key_of,
    older_spellings,
)
from autogen.settings.schema import BackendRow, LlamaOptions, Override, Profile, ProfileOptions, Settings
from autogen.settings.structure import PARSERS, _records, structure, unstructure
from autogen.sizing.llama_args import IK_OPTIONS

OUTPUTS = {EVERY_FRAGMENT, CONFIG, PER_MODEL, PER_MATCH, WALK}


def problems(data: dict) -> list[str]:
    with pytest.raises(SettingsError) as info:
        structure({"roots": ["/m"], **data}, Settings, "swapgen.yaml")
    return sorted(info.value.problems)


class TestDeclarations:
    def test_every_top_level_key_says_what_it_invalidates(self):
        """A new key fails here until it is put in every fragment's key, the config's, a model's, or none."""
        undeclared = [a.name for a in attrs.fields(Settings) if a.metadata.get("outputs") is None]
        assert undeclared == []
        assert all(set(a.metadata["outputs"]) <= OUTPUTS for a in attrs.fields(Settings))

    def test_every_named_check_is_a_parser(self):
        named = {a.metadata["check"] for cls in _records(Settings) for a in attrs.fields(cls)
                 if isinstance(a.metadata.get("check"), str)}
        assert named == set(PARSERS)

    def test_llama_options_are_declared_once_and_shared(self):
        """Settings, overrides and profiles hold the very same field declarations."""
        for name in (a.name for a in attrs.fields(LlamaOptions)):
            declared = {cls: attrs.fields_dict(cls)[name] for cls in (Settings, Override, Profile)}
            assert len({(a.metadata["check"], a.metadata["knobs"]) for a in declared.values()}) == 1, name
        shared = {a.name for a in attrs.fields(ProfileOptions)}
        assert shared <= set(attrs.fields_dict(Override)) and shared <= set(attrs.fields_dict(Profile))

    def test_profile_knobs_are_flag_meanings_llama_server_has(self):
        """Each knob is a meaning of ik_llama.cpp's vocabulary, and of llama.cpp's unless it is
        one of ik_llama.cpp's own options, which a llama.cpp row leaves out."""
        assert set(PROFILE_KNOBS) == {"ctx", "kv_type", "parallel", "flash_attn", "threads", "ngl", "mmproj",
                                      "n_cpu_moe", *IK_OPTIONS}
        knobs = {k for knobs in PROFILE_KNOBS.values() for k in knobs}
        assert knobs - set(FLAG_KNOBS.values()) == set(IK_OPTIONS.values())
        assert knobs <= set(IK.flag_knobs.values())


class TestKeys:
    """The code and the settings say profile; the first spellings of its keys are still read, and
    a backend row keeps `variant` for its build (`build` was taken)."""

    def test_keys_where_the_code_names_the_field_otherwise(self):
        renamed = {(cls.__name__, a.name): key_of(a) for cls in _records(Settings) for a in attrs.fields(cls)
                   if key_of(a) != a.name}
        assert renamed == {("BackendRow", "build"): "variant", ("BackendRow", "derived"): "build"}

    def test_the_older_spellings(self):
        older = {cls.__name__: older_spellings(cls) for cls in _records(Settings) if older_spellings(cls)}
        assert older == {"Settings": {"default_variants": "default_profiles"},
                         "Override": {"ctx_variants": "ctx_profiles", "variants": "profiles"}}

    @pytest.mark.parametrize("spelling", ["profiles", "variants"])
    def test_both_spellings_read_into_the_fields(self, spelling):
        ctx = "ctx_variants" if spelling == "variants" else "ctx_profiles"
        settings = structure({"roots": ["/m"], f"default_{spelling}": [{"name": "long", "ctx": 65536}],
                              "backends": [{"id": "b", "kind": "llama", "path": "/b", "variant": "cuda", "build": True}],
                              "overrides": [{"match": "*", ctx: [8192], spelling: [{"name": "fast"}]}]},
                             Settings, "swapgen.yaml")
        assert settings.default_profiles == (Profile(name="long", ctx=65536),)
        assert (settings.backends[0].build, settings.backends[0].derived) == ("cuda", True)
        assert (settings.overrides[0].ctx_profiles, settings.overrides[0].profiles) == ((8192,), (Profile(name="fast"),))

    def test_errors_name_the_key_the_user_wrote(self):
        assert problems({"overrides": [{"match": "*", "variants": [{"name": "x", "ctx": "big"}], "ctx_variants": [0.5]},
                                       {"match": "*", "profiles": [{"name": "x", "ctx": "big"}]}],
                         "backends": [{"id": "b", "kind": "llama", "path": "/b", "variant": 3, "build": "yes"}],
                         "default_variants": [{}]}) == [
            "backends[0].build: expected true or false, got 'yes'",
            "backends[0].variant: expected a string, got 3",
            "default_variants[0].name: required key missing",
            "overrides[0].ctx_variants[0]: expected an integer, got 0.5",
            "overrides[0].variants[0].ctx: expected an integer, got 'big'",
            "overrides[1].profiles[0].ctx: expected an integer, got 'big'",
        ]

    def test_both_spellings_in_one_place_is_an_error_naming_it(self):
        assert problems({"default_profiles": [], "default_variants": []}) == [
            "default_variants: the older spelling of 'default_profiles', which this place gives too; "
            "keep 'default_profiles'"]
        assert problems({"overrides": [{"match": "*", "profiles": [], "ctx_variants": [8192], "variants": []}]}) == [
            "overrides[0].variants: the older spelling of 'profiles', which this place gives too; keep 'profiles'"]

    def test_a_key_of_no_spelling_is_unknown(self):
        assert problems({"default_profile": []}) == [
            "(top level): unknown key 'default_profile' (did you mean 'default_profiles'?)"]

    def test_plain_data_speaks_the_keys_too(self):
        row = BackendRow(id="b", kind="llama", path="/b", build="cuda", derived=True)
        assert unstructure(row) == {"id": "b", "kind": "llama", "path": "/b", "name": "", "default": False,
                                    "version": "", "managed": False, "component": "", "variant": "cuda",
                                    "build": True, "fit_params": "", "sleep": False}


class TestOutputs:
    """What a key invalidates is read from its declaration."""

    BASE = Settings(roots=("/m",))

    @pytest.mark.parametrize(("key", "value"), [("kv_type", "q8_0"), ("ttl", 60), ("tool_parsers", {"x": "hermes"}),
                                                ("target", "llama-server")])
    def test_a_key_of_every_fragment_changes_every_models_settings_key(self, key, value):
        assert global_inputs(attrs.evolve(self.BASE, **{key: value})) != global_inputs(self.BASE)

    @pytest.mark.parametrize(("key", "value"), [("groups", ()), ("health_check_timeout", 60), ("output", "/o.yaml"),
                                                ("vram_budget_gb", 12.0), ("cache_dir", "/c"),
                                                ("allow_vanished_models", True), ("backend_venvs", ("/v",))])
    def test_other_keys_leave_it(self, key, value):
        assert global_inputs(attrs.evolve(self.BASE, **{key: value})) == global_inputs(self.BASE)

    def test_the_config_reads_its_own_keys(self):
        assert inputs_of(attrs.evolve(self.BASE, health_check_timeout=60), CONFIG) != inputs_of(self.BASE, CONFIG)
        assert inputs_of(attrs.evolve(self.BASE, ttl=60), CONFIG) == inputs_of(self.BASE, CONFIG)
