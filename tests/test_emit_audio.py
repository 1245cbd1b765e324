"""Speech emitters: qwentts / TTS.cpp (example I, J), audio.cpp (K), parakeet ASR (L), classifiers (P)."""

from __future__ import annotations

import json

import attrs
import pytest

from autogen.discovery.rows import ModelRow
from autogen.emit.audio import emit_asr, emit_audiocpp, emit_tts
from autogen.emit.dispatch import build_plan
from autogen.engines import Engine, Role
from autogen.errors import ModelError
from autogen.metadata.model_meta import ModelMeta
from autogen.resolve.context import EmitContext
from autogen.resolve.job import make_job, resolve_for
from autogen.resolve.roles import audiocpp_task, model_role, preferred_engine
from autogen.settings.schema import BackendRow, Override, Settings

GIB = 1 << 30
TALKER = "/models/tts/qwen-talker-1.7b-base-Q8_0.gguf"
CODEC = "/models/tts/qwen-tokenizer-12hz-Q8_0.gguf"
KOKORO = "D:/models/tts/Kokoro_no_espeak_Q8_0.gguf"
QWENTTS_ROW = BackendRow(id="qwentts", kind="tts", path="C:/qwentts/tts-server.exe", default=True)
TTSCPP_ROW = BackendRow(id="ttscpp", kind="ttscpp", path="C:/ttscpp/tts-server.exe")
AUDIOCPP_ROW = BackendRow(id="audiocpp", kind="audiocpp", path="/backends/audiocpp_server", default=True,
                          managed=True, build="vulkan")


def row(path, size_gb=1.0, **kw) -> ModelRow:
    return ModelRow(id=path.rsplit("/", 1)[-1].lower().removesuffix(".gguf"), format="gguf", path=path,
                    size_bytes=int(size_gb * GIB), **kw)


def ctx_for(r: ModelRow, meta: ModelMeta, settings: Settings, override=None) -> EmitContext:
    role = model_role(r, meta)
    backend = resolve_for(settings, override, r, role, meta)
    return EmitContext(row=r, meta=meta, kv=None, override=override, settings=settings, backend=backend,
                       budget_gb=8.0, card_vram_gb=None, ttl=600)


def plan_for(r, meta, settings, override=None):
    job = make_job(attrs_evolve(settings, override), r, meta, None, None)
    return build_plan(job, meta, settings)


def attrs_evolve(settings, override):
    return attrs.evolve(settings, overrides=(override,) if override else ())


def settings(*rows, **kw) -> Settings:
    return Settings(roots=("/models",), backends=rows, cache_dir="/cache", **kw)


def qwen3(**kw):
    return ModelMeta(source="gguf", arch="qwen3", **kw)


class TestQwenTTS:
    def test_example_i_talker_with_codec(self):
        s = settings(tts_server_exe="tts-server")
        ctx = ctx_for(row(TALKER, codec=CODEC), qwen3(), s)
        (entry,) = emit_tts(ctx, {CODEC: int(0.2 * GIB)}.get).entries
        assert entry.argv == ("tts-server", "--model", TALKER, "--codec", CODEC,
                              "--voices-dir", "/models/tts/voices/qwen-talker-1.7b-base-Q8_0", "--port", "${PORT}")
        assert entry.check_endpoint == "/health" and entry.use_model_name is None
        assert entry.capabilities.inputs == ("text",) and entry.capabilities.outputs == ("audio",)
        meta = dict(entry.metadata)
        assert meta["est_vram_gb"] == 1.5 and meta["voice_clone"] is True
        assert entry.coexist_group is None  # qwentts runs on the GPU: exclusive group
        assert entry.comment[0].startswith("qwentts.cpp · qwen3 · 1 GiB · ")

    def test_the_dispatcher_reads_the_codec_size_from_disk(self, tmp_path):
        """`emit.dispatch` leaves `file_size` at `fsutil.file_size`: a 0.5 GiB codec on disk is charged, an absent one is not."""
        codec = tmp_path / "qwen-tokenizer-12hz-Q8_0.gguf"
        talker = row(str(tmp_path / "qwen-talker-1.7b-base-Q8_0.gguf"), codec=str(codec))
        missing = plan_for(talker, qwen3(), settings(QWENTTS_ROW)).entries[0]
        with open(codec, "wb") as f:
            f.truncate(GIB // 2)
        present = plan_for(talker, qwen3(), settings(QWENTTS_ROW)).entries[0]
        assert dict(missing.metadata)["est_vram_gb"] == 1.3  # talker 1 + 0.3
        assert dict(present.metadata)["est_vram_gb"] == 1.8  # talker 1 + codec 0.5 + 0.3

    def test_talker_without_codec_is_skipped_not_emitted_broken(self):
        plan = plan_for(row(TALKER), qwen3(), settings())
        assert not plan.entries and "codec" in plan.skips[0].reason


class TestTTSCpp:
    FLEET = settings(QWENTTS_ROW, TTSCPP_ROW, tts_server_exe="C:/qwentts/tts-server.exe")

    def test_example_j_kokoro_prefers_the_ttscpp_row_over_the_tts_star(self):
        ctx = ctx_for(row(KOKORO), ModelMeta(source="gguf", arch="kokoro"), self.FLEET)
        (entry,) = emit_tts(ctx, {}.get).entries
        assert entry.argv == ("C:/ttscpp/tts-server.exe", "--model-path", KOKORO, "--host", "127.0.0.1",
                              "--port", "${PORT}")
        assert entry.use_model_name == "Kokoro_no_espeak_Q8_0"
        assert entry.coexist_group == "tts" and "est_vram_gb" not in dict(entry.metadata)
        assert not any(line.startswith("WARNING") for line in entry.comment)

    def test_example_j_talker_in_the_same_fleet_keeps_qwentts(self):
        ctx = ctx_for(row(TALKER, codec=CODEC), qwen3(), self.FLEET)
        (entry,) = emit_tts(ctx, {}.get).entries
        assert entry.argv[:2] == ("C:/qwentts/tts-server.exe", "--model") and "--codec" in entry.argv

    def test_example_j_kokoro_pinned_to_the_qwentts_row_uses_it(self):
        ctx = ctx_for(row(KOKORO, codec=CODEC), ModelMeta(source="gguf", arch="kokoro"), self.FLEET,
                      Override(match="*", backend="qwentts"))
        (entry,) = emit_tts(ctx, {}.get).entries
        assert entry.argv[:2] == ("C:/qwentts/tts-server.exe", "--model")

    def test_example_j_audiocpp_star_alone_gives_ttscpp_on_the_legacy_exe_with_a_warning(self):
        s = settings(AUDIOCPP_ROW, tts_server_exe="C:/qwentts/tts-server.exe")
        ctx = ctx_for(row(KOKORO), ModelMeta(source="gguf", arch="kokoro"), s)
        (entry,) = emit_tts(ctx, {}.get).entries
        assert entry.argv[:2] == ("C:/qwentts/tts-server.exe", "--model-path")
        assert any(line.startswith("WARNING: no TTS.cpp backend") for line in entry.comment)

    def test_auto_pick_of_the_other_tts_engine_is_a_skip(self):
        plan = plan_for(row(KOKORO), ModelMeta(source="gguf", arch="kokoro"), settings(QWENTTS_ROW))
        assert not plan.entries and "no ttscpp" in plan.skips[0].reason

    def test_threads_only_from_the_override_as_a_long_flag(self):
        ctx = ctx_for(row(KOKORO), ModelMeta(source="gguf", arch="kokoro"), self.FLEET,
                      Override(match="*", threads=4))
        (entry,) = emit_tts(ctx, {}.get).entries
        assert entry.argv[-2:] == ("--n-threads", "4")


class TestAudioCpp:
    MOSS = "/models/speech/moss-tts-nano-100m-q8_0.gguf"

    def meta(self, family):
        return ModelMeta(source="gguf", arch="audiocpp", audio_family=family)

    def test_example_k_tts_argv_config_and_yaml(self):
        ctx = ctx_for(row(self.MOSS, size_gb=0.2), self.meta("moss_tts_nano"), settings(AUDIOCPP_ROW))
        plan = emit_audiocpp(ctx)
        (entry,) = plan.entries
        config = "/cache/audiocpp/moss-tts-nano-100m-q8_0.json"
        assert entry.argv == ("/backends/audiocpp_server", "--host", "127.0.0.1", "--port", "${PORT}",
                              "--backend", "vulkan", "--max-loaded-models", "1", "--voice-dir", "/models/speech/voices",
                              "--config", config)
        assert "--model" not in entry.argv
        meta = dict(entry.metadata)
        assert meta["est_vram_gb"] == 0.6 and meta["voice_clone"] is True and meta["task"] == "tts"
        assert entry.check_endpoint == "/health"
        assert entry.capabilities.inputs == ("text",) and entry.capabilities.outputs == ("audio",)
        ((path, text),) = plan.files
        assert path == config
        assert json.loads(text)["models"] == [{"id": "moss-tts-nano-100m-q8_0", "family": "moss_tts_nano",
                                               "path": self.MOSS, "task": "tts"}]

    def test_example_k_asr_family_on_a_cuda_build(self):
        s = settings(BackendRow(id="ac", kind="audio.cpp", path="/b/audiocpp_server", build="cuda"))
        ctx = ctx_for(row("/models/speech/qwen3-asr-0.6b.gguf"), self.meta("qwen3_asr"), s)
        (entry,) = emit_audiocpp(ctx).entries
        assert entry.argv[5:7] == ("--backend", "cuda")
        assert entry.capabilities.inputs == ("audio",) and entry.capabilities.outputs == ("text",)
        assert "voice_clone" not in dict(entry.metadata)

    @pytest.mark.parametrize("family,reason", [("ace_step", "music"), ("brand_new_tts", "unknown"),
                                               ("", "no audiocpp.model_spec.family")])
    def test_example_k_unserved_unknown_and_missing_families_are_skipped(self, family, reason):
        plan = plan_for(row(self.MOSS), self.meta(family), settings(AUDIOCPP_ROW))
        assert not plan.entries and reason in plan.skips[0].reason

    def test_example_k_row_without_variant_gives_no_backend_flag_and_a_note(self):
        s = settings(BackendRow(id="hand", kind="audiocpp", path="/b/audiocpp_server"))
        (entry,) = emit_audiocpp(ctx_for(row(self.MOSS), self.meta("moss_tts_nano"), s)).entries
        assert "--backend" not in entry.argv and any(line.startswith("NOTE") for line in entry.comment)

    def test_example_k_empty_registry_warns_and_still_emits(self):
        (entry,) = emit_audiocpp(ctx_for(row(self.MOSS), self.meta("moss_tts_nano"), settings())).entries
        assert entry.argv[0] == "audiocpp_server"
        assert any(line.startswith("WARNING: no audio.cpp backend") for line in entry.comment)

    def test_a_pin_to_a_parakeet_row_is_a_no_op_for_audiocpp(self):
        s = settings(AUDIOCPP_ROW, BackendRow(id="pk", kind="parakeet", path="/b/parakeet-server"))
        ctx = ctx_for(row(self.MOSS), self.meta("moss_tts_nano"), s, Override(match="*", backend="pk"))
        assert ctx.backend.exe == "/backends/audiocpp_server"


class TestParakeet:
    PATH = "C:/models/asr/parakeet-tdt-0.6b-v3-q8_0.gguf"
    META = ModelMeta(source="gguf", arch="parakeet")

    def test_example_l_argv_and_yaml(self):
        (entry,) = emit_asr(ctx_for(row(self.PATH, 0.7), self.META, settings(asr_server_exe="parakeet-server"))).entries
        assert entry.argv == ("parakeet-server", "--model", self.PATH, "--port", "${PORT}")
        assert entry.check_endpoint == "none" and entry.ttl == 600 and entry.coexist_group == "asr"
        assert entry.capabilities.inputs == ("audio",) and entry.capabilities.outputs == ("text",)
        assert "est_vram_gb" not in dict(entry.metadata)

    def test_example_l_pin_wins_over_the_star_and_auto_follows_it(self):
        a = BackendRow(id="a", kind="asr", path="/a/parakeet-server", default=True)
        b = BackendRow(id="b", kind="parakeet", path="/b/parakeet-server")
        pinned = Override(match="*", backend="b")
        assert ctx_for(row(self.PATH), self.META, settings(a, b), pinned).backend.exe == "/b/parakeet-server"
        assert ctx_for(row(self.PATH), self.META, settings(a, b)).backend.exe == "/a/parakeet-server"

    def test_example_l_audiocpp_star_never_captures_parakeet(self):
        only_ac = settings(AUDIOCPP_ROW, server_exe="/opt/llama/llama-server")
        assert ctx_for(row(self.PATH), self.META, only_ac).backend.exe == "/opt/llama/parakeet-server"
        with_row = settings(AUDIOCPP_ROW, BackendRow(id="pk", kind="parakeet", path="/pk/parakeet-server",
                                                     default=True))
        assert ctx_for(row(self.PATH), self.META, with_row).backend.exe == "/pk/parakeet-server"


class TestClassifiers:
    """Worked example P (docs/maintainers/classes.md#speech-detection), through the dispatcher's `model_role`."""

    @pytest.mark.parametrize("arch,name,role", [
        ("qwen3-tts", "model.gguf", Role.TTS), ("qwen3", "qwen-talker-1.7b.gguf", Role.TTS), ("qwentts-codec", "x.gguf", Role.TTS),
        ("kokoro", "x.gguf", Role.TTS), ("llama", "Kokoro_espeak_f16.gguf", Role.TTS), ("llama", "Parler_TTS_Mini_Q5_0.gguf", Role.TTS),
        ("qwen35moe", "Qwen3.6-35B-A3B-Q4_K_M.gguf", Role.LLM), ("llama", "Diamond-Coder-7B-Q4_K_M.gguf", Role.LLM),
        ("parakeet", "x.gguf", Role.ASR), ("llama", "parakeet-tdt-0.6b.gguf", Role.ASR), ("fastconformer", "x.gguf", Role.ASR),
        ("llama", "nemotron-3.5-asr-streaming-q8_0.gguf", Role.ASR), ("llama", "nemotron-speech-streaming.gguf", Role.ASR),
        ("nemotron", "Nemotron-4-340B-Instruct-Q4_K_M.gguf", Role.LLM), ("llama", "Llama-3.1-8B.gguf", Role.LLM),
        ("audiocpp", "x.gguf", Role.TTS), ("bert", "bge-m3.gguf", Role.EMBEDDING),
    ])
    def test_roles(self, arch, name, role):
        assert model_role(row(f"/m/{name}"), ModelMeta(source="gguf", arch=arch)) == role

    def test_a_family_key_makes_audiocpp_whatever_the_arch(self):
        meta = ModelMeta(source="gguf", arch="qwen3", audio_family="qwen3_tts")
        assert model_role(row("/m/qwen3-tts-talker.gguf"), meta) == Role.TTS
        assert preferred_engine(row("/m/qwen3-tts-talker.gguf"), Role.TTS, meta) == Engine.AUDIOCPP
        assert audiocpp_task(meta) == "tts"

    def test_an_audiocpp_asr_family_is_an_asr_model_that_prefers_audiocpp(self):
        meta = ModelMeta(source="gguf", arch="audiocpp", audio_family="parakeet_tdt")
        assert model_role(row("/m/parakeet-tdt.gguf"), meta) == Role.ASR
        assert preferred_engine(row("/m/parakeet-tdt.gguf"), Role.ASR, meta) == Engine.AUDIOCPP

    def test_an_embedder_is_tested_before_every_audio_class(self):
        meta = ModelMeta(source="gguf", arch="qwen3", pooling_type=3)
        assert model_role(row("/m/parakeet-embed.gguf"), meta) == Role.EMBEDDING

    def test_a_pin_to_a_row_of_another_class_is_refused(self):
        s = settings(BackendRow(id="llama", kind="llama", path="/l/llama-server"))
        with pytest.raises(ModelError, match="cannot serve a tts model"):
            resolve_for(s, Override(match="*", backend="llama"), row(TALKER), Role.TTS, qwen3())
