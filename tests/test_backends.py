"""Backend registry and resolution (docs/maintainers/backends.md)."""

from __future__ import annotations

import json

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from autogen.engines import ENGINE_OF_KIND, ENGINES, Engine, Role, engine_of, kind_roles
from autogen.errors import ModelError
from autogen.resolve import backends
from autogen.resolve.backends import (
    Resolved,
    candidates,
    legacy_exes,
    resolution_key,
    resolve_backend,
    resolve_embedder,
    role_taken,
    serves,
    sibling,
)
from autogen.settings.schema import BackendRow, Override, Settings
from autogen.settings.structure import structure

LLM, IMAGE, TTS, ASR = Role.LLM, Role.IMAGE, Role.TTS, Role.ASR


def reg(*rows: BackendRow, **fields) -> Settings:
    return Settings(roots=("/models",), backends=rows, **fields)


def row(id: str, kind: str, path: str | None = None, **fields) -> BackendRow:
    return BackendRow(id=id, kind=kind, path=path if path is not None else f"/opt/{id}/bin", **fields)


def pin(backend: str | None) -> Override:
    return Override(match="*", backend=backend)


# ---------------------------------------------------------------------------------------------
# the kind spellings of the engine table

#: docs/maintainers/backends.md's table restated independently: spelling → (engine, roles).
EXPECTED_KINDS = {
    **{k: ("llama", ("llm", "embedding")) for k in ("llama", "llama.cpp", "server")},
    **{k: ("ik_llama", ("llm", "embedding")) for k in ("ik_llama", "ik_llama.cpp", "ik-llama", "ik-llama.cpp")},
    "vllm": ("vllm", ("llm",)),
    **{k: ("sd", ("image",)) for k in ("sd", "sd-server", "image")},
    **{k: ("tts", ("tts",)) for k in ("tts", "tts-server", "speech")},
    **{k: ("ttscpp", ("tts",)) for k in ("ttscpp", "tts.cpp", "kokoro")},
    **{k: ("asr", ("asr",)) for k in ("asr", "parakeet", "parakeet-server", "transcribe")},
    **{k: ("whisper", ("asr",)) for k in ("whisper", "whisper.cpp", "whisper-server")},
    **{k: ("audiocpp", ("tts", "asr")) for k in ("audiocpp", "audio.cpp", "audiocpp-server")},
    **{k: ("sam", ("segment",)) for k in ("sam", "sam3", "segment")},
    **{k: ("upscale", ("upscale",)) for k in ("upscale", "realesrgan", "esrgan")},
    **{k: ("trellis", ("3d",)) for k in ("trellis2", "trellis", "3d")},
}


class TestKindTable:
    def test_table_holds_exactly_the_documented_spellings(self):
        assert {k: (e, ENGINES[e].roles) for k, e in ENGINE_OF_KIND.items()} == EXPECTED_KINDS

    @pytest.mark.parametrize("spelling", sorted(EXPECTED_KINDS))
    def test_every_spelling_matches_case_insensitively_after_trimming(self, spelling):
        engine, roles = EXPECTED_KINDS[spelling]
        for written in (spelling, spelling.upper(), f"  {spelling.title()}\t"):
            assert engine_of(written) == engine
            assert kind_roles(written) == roles
            assert all(serves(written, r) for r in roles)

    def test_engine_names_are_plain_strings(self):
        """Emitted into YAML metadata: a str subclass would trip a strict representer."""
        assert type(engine_of("LLAMA.CPP")) is str
        assert type(resolve_backend(reg(), None, LLM).engine) is str

    def test_every_role_is_served_by_some_kind_and_every_engine_is_used(self):
        assert {r for row in ENGINES.values() for r in row.roles} == set(Role)
        assert set(ENGINE_OF_KIND.values()) == set(Engine)

    @pytest.mark.parametrize("kind", ["custom", "My Engine", "", "llama-server", "vllm2", "koboldcpp"])
    def test_unknown_kind_serves_no_role_and_is_its_own_engine(self, kind):
        assert kind_roles(kind) == ()
        assert engine_of(f" {kind.upper()} ") == kind.lower()
        assert not any(serves(kind, r) for r in Role)

    def test_audiocpp_serves_both_tts_and_asr(self):
        assert serves("Audio.CPP", TTS) and serves("audiocpp-server", ASR)
        assert not serves("audiocpp", LLM)

    def test_unknown_role_is_a_programming_error(self):
        with pytest.raises(ValueError):
            serves("llama", "chat")
        with pytest.raises(ValueError):
            resolve_backend(reg(), None, "video")


class TestRoleTaken:
    def test_parakeet_row_makes_audiocpp_taken_without_any_tts_row(self):
        assert role_taken([row("p", "parakeet")], "audiocpp")

    def test_audiocpp_row_takes_both_of_its_roles(self):
        rows = [row("a", "audio.cpp")]
        assert role_taken(rows, "kokoro") and role_taken(rows, "transcribe")
        assert not role_taken(rows, "llama")

    def test_empty_registry_and_custom_kinds_take_nothing(self):
        assert not role_taken([], "audiocpp")
        assert not role_taken([row("c", "custom")], "custom")
        assert not role_taken([row("c", "custom")], "llama")

    def test_vllm_and_llama_share_the_llm_role(self):
        assert role_taken([row("v", "vllm")], "llama")


# ---------------------------------------------------------------------------------------------
# resolution precedence: docs/maintainers/backends.md#resolution-order (worked example)


@pytest.fixture
def fleet() -> Settings:
    return reg(row("llama-vk", "llama"), row("vllm-1", "vllm", default=True), row("sd-1", "sd"))


class TestResolveAcceptance:
    def test_auto_llm_takes_the_star_over_the_first_listed_llama(self, fleet):
        got = resolve_backend(fleet, None, LLM)
        assert (got.backend_id, got.engine, got.exe, got.why) == ("vllm-1", "vllm", "/opt/vllm-1/bin", "★ of class llm")

    def test_pin_beats_the_star(self, fleet):
        got = resolve_backend(fleet, pin("llama-vk"), LLM)
        assert (got.backend_id, got.engine, got.why) == ("llama-vk", "llama", "pinned")

    def test_stale_pin_falls_back_to_auto_and_says_so(self, fleet):
        got = resolve_backend(fleet, pin("gone"), LLM)
        assert got.backend_id == "vllm-1"
        assert got.why == "pin 'gone' not in registry; ★ of class llm"

    def test_class_without_rows_gets_the_legacy_exe(self, fleet):
        got = resolve_backend(fleet, None, TTS)
        assert got.row is None and got.backend_id == "legacy"
        # the sibling of the server_exe derived from the first llama row
        assert (got.engine, got.exe, got.why) == ("tts", "/opt/llama-vk/tts-server", "legacy tts_server_exe")

    def test_without_star_the_first_row_of_the_class_wins(self):
        got = resolve_backend(reg(row("a", "llama"), row("b", "llama")), None, LLM)
        assert (got.backend_id, got.why) == ("a", "first of class llm")

    def test_first_star_in_list_order_wins_when_several_are_starred(self):
        settings = reg(row("a", "llama"), row("b", "llama", default=True), row("c", "vllm", default=True))
        assert resolve_backend(settings, None, LLM).backend_id == "b"

    def test_star_of_another_class_does_not_count(self):
        settings = reg(row("sd", "sd", default=True), row("a", "llama"))
        assert resolve_backend(settings, None, LLM).why == "first of class llm"

    def test_pin_is_trimmed_and_blank_pin_means_auto(self, fleet):
        assert resolve_backend(fleet, pin("  llama-vk "), LLM).why == "pinned"
        assert resolve_backend(fleet, pin("   "), LLM).why == "★ of class llm"
        assert resolve_backend(fleet, pin(None), LLM).why == "★ of class llm"

    def test_pin_ids_are_case_sensitive(self, fleet):
        assert resolve_backend(fleet, pin("LLAMA-VK"), LLM).backend_id == "vllm-1"

    def test_exe_is_the_trimmed_row_path(self):
        got = resolve_backend(reg(row("a", " Llama ", path="  /opt/my llama/llama-server \n")), None, LLM)
        assert (got.engine, got.exe) == ("llama", "/opt/my llama/llama-server")

    def test_stale_pin_with_empty_registry_reaches_the_legacy_exe(self):
        got = resolve_backend(reg(), pin("x"), LLM)
        assert (got.exe, got.why) == ("llama-server", "pin 'x' not in registry; legacy server_exe")

    def test_settings_built_from_yaml_shapes_resolve_the_same(self):
        settings = structure(
            {
                "roots": ["/m"],
                "backends": [
                    {"id": "ac", "kind": " Audio.CPP ", "path": "/b/audiocpp_server", "default": True},
                    {"id": "pk", "kind": "Parakeet", "path": "/b/parakeet-server"},
                ],
            },
            Settings,
            "swapgen.yaml",
        )
        assert resolve_backend(settings, None, ASR, "audiocpp").backend_id == "ac"
        assert resolve_backend(settings, None, ASR).backend_id == "pk"


# ---------------------------------------------------------------------------------------------
# pins across classes


class TestPinAcrossClasses:
    def test_pin_to_a_row_of_another_class_is_refused_naming_both(self):
        settings = reg(row("sd-main", "sd"), row("l", "llama"))
        with pytest.raises(ModelError) as caught:
            resolve_backend(settings, pin("sd-main"), LLM)
        assert str(caught.value) == "backend 'sd-main' (kind sd, class image) cannot serve a llm model"

    def test_refusal_names_every_class_of_a_multi_class_kind(self):
        with pytest.raises(ModelError) as caught:
            resolve_backend(reg(row("ac", "audio.cpp")), pin("ac"), IMAGE)
        assert str(caught.value) == "backend 'ac' (kind audio.cpp, class tts/asr) cannot serve a image model"

    def test_preferring_resolver_refuses_too(self):
        with pytest.raises(ModelError, match="cannot serve a llm model"):
            resolve_backend(reg(row("k", "kokoro")), pin("k"), LLM, "vllm")

    def test_upscale_row_cannot_be_pinned_by_a_chat_model(self):
        with pytest.raises(ModelError, match=r"class upscale\) cannot serve a llm"):
            resolve_backend(reg(row("up", "realesrgan")), pin("up"), LLM)

    @pytest.mark.parametrize("cls", list(Role))
    def test_custom_kind_row_is_reachable_by_pin_from_any_role(self, cls):
        settings = reg(row("mine", "My-Launcher", path=" /usr/local/bin/launch "))
        got = resolve_backend(settings, pin("mine"), cls)
        assert (got.engine, got.exe, got.why, got.backend_id) == ("my-launcher", "/usr/local/bin/launch", "pinned", "mine")

    def test_custom_kind_row_is_never_auto_picked(self):
        settings = reg(row("mine", "custom", default=True))
        assert all(resolve_backend(settings, None, r).row is None for r in Role)

    def test_tts_model_may_pin_the_other_tts_engine(self):
        settings = reg(row("qwen", "tts", default=True), row("tc", "ttscpp"))
        got = resolve_backend(settings, pin("qwen"), TTS, "ttscpp")
        assert (got.backend_id, got.engine) == ("qwen", "tts")


# ---------------------------------------------------------------------------------------------
# preferring resolver: HF folders and TTS engines


class TestPreferring:
    def test_hf_folder_goes_to_vllm_over_a_starred_llama(self):
        settings = reg(row("llama", "llama", default=True), row("v", "vllm"))
        got = resolve_backend(settings, None, LLM, "vllm")
        assert (got.backend_id, got.engine, got.why) == ("v", "vllm", "first vllm of class llm")
        assert resolve_backend(settings, None, LLM).backend_id == "llama"

    def test_starred_row_of_the_preferred_engine_beats_its_first_row(self):
        settings = reg(row("v1", "vllm"), row("v2", "VLLM", default=True), row("l", "llama"))
        got = resolve_backend(settings, None, LLM, "vllm")
        assert (got.backend_id, got.why) == ("v2", "★ vllm of class llm")

    def test_pin_beats_the_preference(self):
        settings = reg(row("llama", "llama"), row("v", "vllm", default=True))
        got = resolve_backend(settings, pin("llama"), LLM, "vllm")
        assert (got.backend_id, got.engine) == ("llama", "llama")

    def test_no_row_of_the_preferred_engine_falls_back_to_plain_resolution(self):
        settings = reg(row("l1", "llama"), row("l2", "llama", default=True))
        got = resolve_backend(settings, None, LLM, "vllm")
        assert (got.backend_id, got.engine, got.why) == ("l2", "llama", "★ of class llm")

    def test_stale_pin_still_gets_the_preferred_engine(self):
        settings = reg(row("l", "llama", default=True), row("v", "vllm"))
        got = resolve_backend(settings, pin("old"), LLM, "vllm")
        assert (got.backend_id, got.why) == ("v", "pin 'old' not in registry; first vllm of class llm")

    @pytest.mark.parametrize("ttscpp_kind", ["ttscpp", "tts.cpp", "Kokoro"])
    def test_preference_compares_canonical_engines_not_spellings(self, ttscpp_kind):
        settings = reg(row("qwen", "tts-server", default=True), row("tc", ttscpp_kind))
        for prefer in ("ttscpp", "TTS.CPP", "kokoro"):
            assert resolve_backend(settings, None, TTS, prefer).backend_id == "tc"
        assert resolve_backend(settings, None, TTS, "speech").backend_id == "qwen"

    def test_kokoro_model_finds_ttscpp_while_a_talker_keeps_qwentts(self):
        """docs/maintainers/classes.md#tts-worked-examples, example J: qwentts ★ plus a ttscpp row."""
        settings = reg(
            row("qwen", "tts", path="C:/qwentts/tts-server.exe", default=True),
            row("tc", "ttscpp", path="C:/ttscpp/tts-server.exe"),
            tts_server_exe="C:/qwentts/tts-server.exe",
        )
        assert resolve_backend(settings, None, TTS, "ttscpp").exe == "C:/ttscpp/tts-server.exe"
        assert resolve_backend(settings, None, TTS, "tts").exe == "C:/qwentts/tts-server.exe"


# ---------------------------------------------------------------------------------------------
# audio.cpp


class TestAudioCpp:
    def test_audiocpp_star_does_not_push_parakeet_past_an_installed_parakeet_row(self):
        settings = reg(row("pk", "parakeet"), row("ac", "audiocpp", default=True))
        got = resolve_backend(settings, None, ASR)
        assert (got.backend_id, got.engine, got.why) == ("pk", "asr", "first of class asr")

    def test_audiocpp_star_alone_leaves_tts_models_on_the_legacy_exe_never_audiocpp(self):
        settings = reg(row("ac", "audiocpp", path="/b/audiocpp_server", default=True))
        got = resolve_backend(settings, None, TTS, "ttscpp")
        assert (got.row, got.engine, got.exe) == (None, "tts", "tts-server")

    def test_audiocpp_model_resolves_among_audiocpp_rows_only(self):
        settings = reg(row("qwen", "tts", default=True), row("ac", "audio.cpp"))
        got = resolve_backend(settings, None, TTS, "audiocpp")
        assert (got.backend_id, got.engine, got.why) == ("ac", "audiocpp", "first audiocpp of class tts")

    def test_audiocpp_model_pinned_to_a_parakeet_row_falls_through_to_audiocpp(self):
        settings = reg(row("pk", "parakeet"), row("ac", "audiocpp", default=True))
        got = resolve_backend(settings, pin("pk"), ASR, "audiocpp")
        assert (got.backend_id, got.why) == ("ac", "pin 'pk' not in registry; ★ audiocpp of class asr")

    def test_audiocpp_model_pinned_to_a_specific_build_gets_it(self):
        settings = reg(
            row("audiocpp", "audiocpp", default=True, managed=True, component="audiocpp", build="vulkan"),
            row("audiocpp@cuda-0.3", "audiocpp", derived=True, component="audiocpp", build="cuda"),
        )
        got = resolve_backend(settings, pin("audiocpp@cuda-0.3"), TTS, "audiocpp")
        assert (got.backend_id, got.row.build) == ("audiocpp@cuda-0.3", "cuda")

    def test_no_audiocpp_row_resolves_to_no_row(self):
        got = resolve_backend(reg(row("pk", "parakeet")), None, ASR, "audiocpp")
        assert got.row is None

    def test_parakeet_pinned_to_an_audiocpp_row_is_a_no_op(self):
        settings = reg(row("pk", "parakeet"), row("ac", "audiocpp"))
        assert resolve_backend(settings, pin("ac"), ASR).backend_id == "pk"

    def test_candidates_keep_everything_else_and_the_order(self):
        rows = (row("a", "llama"), row("x", "audiocpp-server"), row("b", "sd"), row("y", "Audio.cpp"))
        assert [r.id for r in candidates(rows, ASR, None)] == ["a", "b"]
        assert [r.id for r in candidates(rows, ASR, "audiocpp")] == ["x", "y"]

    def test_an_llm_model_still_sees_audiocpp_rows_and_a_pin_to_one_is_refused(self):
        rows = (row("a", "llama"), row("x", "audiocpp"))
        assert [r.id for r in candidates(rows, LLM, None)] == ["a", "x"]
        with pytest.raises(ModelError, match="class tts/asr"):
            resolve_backend(reg(*rows), pin("x"), LLM)


# ---------------------------------------------------------------------------------------------
# embedders: docs/maintainers/backends.md#embedder-dead-end


EMBED_FLEET = (
    ("managed-lemonade", "llama", "C:/rocm/llama-server.exe"),
    ("managed-llama-server", "llama", "C:/vulkan/llama-server.exe"),
    ("managed-vllm", "vllm", "C:/py/vllm.exe"),
)


def embed_settings(star: str) -> Settings:
    rows = tuple(BackendRow(id=i, kind=k, path=p, default=(i == star)) for i, k, p in EMBED_FLEET)
    return reg(*rows, server_exe="C:/rocm/llama-server.exe")


class TestEmbedder:
    @pytest.mark.parametrize(
        ("star", "pinned", "exe"),
        [
            ("managed-lemonade", "managed-llama-server", "C:/vulkan/llama-server.exe"),
            ("managed-llama-server", "managed-lemonade", "C:/rocm/llama-server.exe"),
            ("managed-llama-server", None, "C:/vulkan/llama-server.exe"),
            ("managed-lemonade", "gone", "C:/rocm/llama-server.exe"),
            ("managed-lemonade", "managed-vllm", "C:/rocm/llama-server.exe"),
        ],
    )
    def test_reference_table(self, star, pinned, exe):
        assert resolve_embedder(embed_settings(star), pin(pinned)).exe == exe

    def test_empty_registry_uses_the_default_server_exe(self):
        got = resolve_embedder(reg(), None)
        assert (got.exe, got.engine, got.backend_id) == ("llama-server", "llama", "legacy")

    def test_vllm_pin_says_why_it_was_ignored(self):
        got = resolve_embedder(embed_settings("managed-lemonade"), pin("managed-vllm"))
        assert (got.backend_id, got.why) == ("managed-lemonade", "vllm 'managed-vllm' cannot embed; ★ of class llm")

    def test_vllm_star_falls_to_the_first_llama_row(self):
        got = resolve_embedder(embed_settings("managed-vllm"), None)
        assert (got.backend_id, got.why) == ("managed-lemonade", "vllm 'managed-vllm' cannot embed; first of class llm")

    def test_vllm_only_registry_falls_to_the_legacy_server_exe(self):
        got = resolve_embedder(reg(row("v", "vllm", default=True), server_exe="/opt/llama/llama-server"), None)
        assert (got.row, got.engine, got.exe) == (None, "llama", "/opt/llama/llama-server")


# ---------------------------------------------------------------------------------------------
# build rows


class TestBuildRows:
    @pytest.fixture
    def settings(self) -> Settings:
        return reg(
            row("llama", "llama", path="/b/llama/active/llama-server", managed=True, component="llama", default=True),
            row("llama@b6000-cuda", "llama", path="/b/llama/b6000-cuda/llama-server", derived=True, build="cuda"),
            row("llama@b5900-vulkan", "llama", path="/b/llama/b5900-vulkan/llama-server", derived=True, build="vulkan"),
        )

    def test_auto_pick_lands_on_the_activated_component_row(self, settings):
        assert resolve_backend(settings, None, LLM).backend_id == "llama"

    def test_a_build_row_is_pinnable_by_id(self, settings):
        got = resolve_backend(settings, pin("llama@b5900-vulkan"), LLM)
        assert (got.exe, got.why, got.row.build) == ("/b/llama/b5900-vulkan/llama-server", "pinned", "vulkan")

    def test_legacy_slot_derivation_lands_on_the_activated_row(self, settings):
        assert legacy_exes(settings)["server_exe"] == "/b/llama/active/llama-server"


# ---------------------------------------------------------------------------------------------
# legacy exes


class TestLegacyExes:
    def test_defaults_are_bare_names_without_a_server_folder(self):
        assert legacy_exes(reg()) == {
            "server_exe": "llama-server",
            "sd_server_exe": "sd-server",
            "tts_server_exe": "tts-server",
            "asr_server_exe": "parakeet-server",
            "sam_server_exe": "sam3_server",
            "trellis_server_exe": "trellis2-server",
            "upscale_exe": "realesrgan-ncnn-vulkan",
        }

    def test_siblings_sit_next_to_a_server_exe_with_a_folder(self):
        exes = legacy_exes(reg(server_exe="/opt/llama/llama-server"))
        assert (exes["sd_server_exe"], exes["tts_server_exe"], exes["asr_server_exe"], exes["sam_server_exe"]) == (
            "/opt/llama/sd-server",
            "/opt/llama/tts-server",
            "/opt/llama/parakeet-server",
            "/opt/llama/sam3_server",
        )

    @pytest.mark.parametrize(
        ("server", "expected"),
        [
            ("C:\\llama\\llama-server.exe", "C:\\llama\\sd-server"),
            ("C:/llama/llama-server.exe", "C:/llama/sd-server"),
            ("D:\\mixed/dir\\llama-server.exe", "D:\\mixed/dir\\sd-server"),
            ("/llama-server", "/sd-server"),
            ("llama-server", "sd-server"),
        ],
    )
    def test_sibling_accepts_either_separator(self, server, expected):
        assert sibling(server, "sd-server") == expected

    def test_explicit_settings_win_over_registry_and_defaults(self):
        settings = reg(
            row("l", "llama", path="/reg/llama-server"),
            row("s", "sd", path="/reg/sd-server"),
            server_exe="/mine/llama-server",
            asr_server_exe=" /mine/asr ",
        )
        exes = legacy_exes(settings)
        assert (exes["server_exe"], exes["sd_server_exe"], exes["tts_server_exe"], exes["asr_server_exe"]) == (
            "/mine/llama-server",
            "/reg/sd-server",
            "/mine/tts-server",
            "/mine/asr",
        )

    def test_blank_settings_value_counts_as_unset(self):
        assert legacy_exes(reg(server_exe="  ", sd_server_exe=""))["sd_server_exe"] == "sd-server"

    def test_first_row_per_kind_fills_its_slot_and_siblings_follow_it(self):
        settings = reg(
            row("v", "vllm", path="/v/vllm"),
            row("a", "llama.cpp", path="/a/llama-server"),
            row("b", "server", path="/b/llama-server"),
            row("q", "speech", path="/q/tts-server"),
        )
        exes = legacy_exes(settings)
        assert (exes["server_exe"], exes["tts_server_exe"], exes["sd_server_exe"]) == (
            "/a/llama-server",
            "/q/tts-server",
            "/a/sd-server",
        )

    def test_a_later_star_wins_its_slot_and_then_nothing_replaces_it(self):
        settings = reg(
            row("a", "llama", path="/a"),
            row("b", "llama", path="/b", default=True),
            row("c", "llama", path="/c", default=True),
            row("d", "llama", path="/d"),
        )
        assert legacy_exes(settings)["server_exe"] == "/b"

    def test_a_first_row_that_is_starred_keeps_its_slot(self):
        settings = reg(row("a", "sd", path="/a", default=True), row("b", "sd-server", path="/b", default=True))
        assert legacy_exes(settings)["sd_server_exe"] == "/a"

    @pytest.mark.parametrize("kind", ["vllm", "ttscpp", "kokoro", "audiocpp", "sam", "upscale", "trellis", "custom"])
    def test_other_kinds_feed_no_slot(self, kind):
        assert legacy_exes(reg(row("x", kind, path="/x/bin", default=True))) == legacy_exes(reg())

    def test_rows_with_blank_paths_are_ignored(self):
        assert legacy_exes(reg(row("a", "llama", path="   ")))["server_exe"] == "llama-server"

    def test_legacy_resolution_uses_the_derived_exe(self):
        settings = reg(row("v", "vllm"), server_exe="/opt/llama/llama-server")
        got = resolve_backend(settings, None, IMAGE)
        assert (got.engine, got.exe, got.why) == ("sd", "/opt/llama/sd-server", "legacy sd_server_exe")

    @pytest.mark.parametrize(
        ("cls", "kind", "exe", "why"),
        [
            (Role.LLM, "llama", "/o/llama-server", "legacy server_exe"),
            (Role.EMBEDDING, "llama", "/o/llama-server", "legacy server_exe"),
            (Role.IMAGE, "sd", "/o/sd-server", "legacy sd_server_exe"),
            (Role.TTS, "tts", "/o/tts-server", "legacy tts_server_exe"),
            (Role.ASR, "asr", "/o/parakeet-server", "legacy asr_server_exe"),
            (Role.SEGMENT, "sam", "/o/sam3_server", "legacy sam_server_exe"),
            (Role.THREE_D, "trellis", "/o/trellis2-server", "legacy trellis_server_exe"),
            (Role.UPSCALE, "upscale", "/o/realesrgan-ncnn-vulkan", "legacy upscale_exe"),
        ],
    )
    def test_every_role_has_a_legacy_fallback(self, cls, kind, exe, why):
        got = resolve_backend(reg(server_exe="/o/llama-server"), None, cls)
        assert (got.row, got.engine, got.exe, got.why, got.backend_id) == (None, kind, exe, why, "legacy")


# ---------------------------------------------------------------------------------------------
# upscale is registry-only


def test_upscale_rows_never_change_what_other_roles_resolve():
    base = reg(row("l", "llama"), row("s", "sd"), row("k", "kokoro"), server_exe="/o/llama-server")
    with_upscale = attrs.evolve(base, backends=(row("up", "esrgan", default=True), *base.backends))
    assert legacy_exes(with_upscale) == legacy_exes(base)
    for role in set(Role) - {Role.UPSCALE}:
        assert resolve_backend(with_upscale, None, role) == resolve_backend(base, None, role)
    assert resolve_backend(with_upscale, None, Role.UPSCALE).backend_id == "up"


# ---------------------------------------------------------------------------------------------
# resolution keys (doit uptodate input)


class TestResolutionKey:
    def test_star_switch_changes_only_auto_models_keys(self):
        before = reg(row("a", "llama", default=True), row("b", "llama"), row("v", "vllm"))
        after = reg(row("a", "llama"), row("b", "llama", default=True), row("v", "vllm"))
        models = {"auto": None, "pinned-a": pin("a"), "pinned-b": pin("b"), "hf": None}

        def keys(settings):
            out = {name: resolution_key(resolve_backend(settings, ov, LLM)) for name, ov in models.items()}
            out["hf"] = resolution_key(resolve_backend(settings, None, LLM, "vllm"))
            return out

        old, new = keys(before), keys(after)
        changed = {name for name in models if old[name] != new[name]}
        assert changed == {"auto"}
        assert (old["auto"]["id"], new["auto"]["id"]) == ("a", "b")

    def test_key_is_plain_json_and_ignores_why(self):
        settings = reg(row("a", "llama", version=" b6000 ", build="cuda"))
        auto, pinned = resolve_backend(settings, None, LLM), resolve_backend(settings, pin("a"), LLM)
        assert auto.why != pinned.why
        assert resolution_key(auto) == resolution_key(pinned)
        key = resolution_key(auto)
        assert key == {"id": "a", "engine": "llama", "exe": "/opt/a/bin", "version": "b6000", "build": "cuda"}
        assert json.loads(json.dumps(key, sort_keys=True)) == key

    def test_version_or_variant_change_changes_the_key(self):
        old = resolve_backend(reg(row("v", "vllm", version="0.10.1")), None, LLM)
        new = resolve_backend(reg(row("v", "vllm", version="0.11.0")), None, LLM)
        assert resolution_key(old) != resolution_key(new)

    def test_legacy_key(self):
        assert resolution_key(resolve_backend(reg(), None, LLM)) == {
            "id": "legacy",
            "engine": "llama",
            "exe": "llama-server",
            "version": "",
            "build": "",
        }


def test_resolved_is_frozen():
    got = resolve_backend(reg(), None, LLM)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        got.exe = "x"  # type: ignore[misc]
    assert isinstance(got, Resolved)


def test_module_does_not_import_heavy_packages():
    assert "gguf" not in vars(backends) and "numpy" not in vars(backends)


# ---------------------------------------------------------------------------------------------
# properties over random registries

_KIND_POOL = [*sorted(ENGINE_OF_KIND), "custom", " LLaMA ", "Audio.CPP"]
_rows = st.lists(
    st.builds(
        BackendRow,
        id=st.sampled_from(["a", "b", "c", "d", "e", "f"]),
        kind=st.sampled_from(_KIND_POOL),
        path=st.sampled_from(["/x/bin", " /y/bin ", "C:\\z\\bin.exe"]),
        default=st.booleans(),
    ),
    max_size=6,
    unique_by=lambda r: r.id,
)


@given(rows=_rows, role=st.sampled_from(list(Role)))
def test_auto_resolution_serves_the_role_or_falls_back_to_legacy(rows, role):
    settings = reg(*rows)
    got = resolve_backend(settings, None, role)
    seen = candidates(tuple(rows), role, None)  # an exclusive engine's rows serve its own models only
    if got.row is None:
        assert not any(serves(r.kind, role) for r in seen)
        assert got.why.startswith("legacy ")
    else:
        assert serves(got.row.kind, role)
        assert got.exe == got.row.path.strip()
        starred = [r for r in seen if r.default and serves(r.kind, role)]
        assert got.row == (starred[0] if starred else next(r for r in seen if serves(r.kind, role)))


@given(rows=_rows, role=st.sampled_from(list(Role)), target=st.sampled_from(["a", "b", "zz"]))
def test_a_pin_either_wins_is_refused_or_is_stale(rows, role, target):
    settings = reg(*rows)
    match = next((r for r in candidates(tuple(rows), role, None) if r.id == target), None)
    if match is not None and kind_roles(match.kind) and not serves(match.kind, role):
        with pytest.raises(ModelError):
            resolve_backend(settings, pin(target), role)
        return
    got = resolve_backend(settings, pin(target), role)
    if match is None:
        assert got.why.startswith(f"pin '{target}' not in registry; ")
        assert attrs.evolve(got, why=resolve_backend(settings, None, role).why) == resolve_backend(settings, None, role)
    else:
        assert (got.row, got.why) == (match, "pinned")
