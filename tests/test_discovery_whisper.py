"""whisper.cpp's files in a model folder: models read by their header and named for the engine,
the Silero VAD model paired as projectors are, encoders named as what they are and never served
(docs/maintainers/discovery.md#whispercpp), laid out as llama-swap's unified image keeps them."""

from __future__ import annotations

import os

from autogen.discovery.walk import walk_roots
from autogen.metadata.cache import MetaCache
from tests.whisper_fixtures import write_silero, write_whisper


def walked(tmp_path, cache: MetaCache | None = None):
    cache = cache or MetaCache(str(tmp_path / "cache"))
    found = walk_roots((str(tmp_path / "models"),), cache.gguf, cache.config, safetensors=cache.safetensors,
                       whisper=cache.whisper)
    cache.save()
    return found


def run(tmp_path, cache: MetaCache | None = None):
    return walked(tmp_path, cache).discovery


def ignored(found) -> dict[str, str]:
    return {os.path.basename(i.path): i.reason for i in found.ignored}


def unified(tmp_path):
    """`/models` of llama-swap's unified image: several sizes and types, two VAD models, a Core ML
    folder and an OpenVINO encoder with its cache."""
    folder = tmp_path / "models" / "whisper"
    write_whisper(folder / "ggml-tiny.bin", "tiny", 4, 4)
    write_whisper(folder / "ggml-base.en.bin", "base", 6, 6, english=True)
    write_whisper(folder / "ggml-base.en-q5_1.bin", "base", 6, 6, "q5_1", english=True)
    write_whisper(folder / "ggml-large-v3-turbo-q5_0.bin", "large-v3-turbo", 32, 4, "q5_0")
    write_silero(folder / "ggml-silero-v5.1.2.bin")
    write_silero(folder / "ggml-silero-v6.2.0.bin")
    (folder / "ggml-base.en-encoder.mlmodelc" / "weights").mkdir(parents=True)
    (folder / "ggml-base.en-encoder.mlmodelc" / "weights" / "weight.bin").write_bytes(b"\0" * 64)
    (folder / "ggml-tiny-encoder-openvino.xml").write_text("<net/>")
    (folder / "ggml-tiny-encoder-openvino.bin").write_bytes(b"\0" * 64)
    (folder / "ggml-tiny-encoder-openvino-cache").mkdir()
    (folder / "ggml-tiny-encoder-openvino-cache" / "blob.bin").write_bytes(b"lmgg" + b"\0" * 64)
    return folder


class TestModels:
    def test_ids_come_from_the_file_names_and_the_quant_from_the_header(self, tmp_path):
        unified(tmp_path)
        rows = {r.id: r for r in run(tmp_path).models}
        assert sorted(rows) == ["whisper-base.en", "whisper-base.en-q5_1", "whisper-large-v3-turbo-q5_0",
                                "whisper-tiny"]
        assert {r.quant for r in rows.values()} == {"F16", "Q5_1", "Q5_0"}
        assert all(r.format == "whisper" and not r.foreign_format for r in rows.values())

    def test_the_header_is_handed_on_as_metadata(self, tmp_path):
        unified(tmp_path)
        found = walked(tmp_path)
        turbo = next(r for r in found.discovery.models if r.id == "whisper-large-v3-turbo-q5_0")
        shape = found.metas[turbo.path].whisper
        assert (shape.n_audio_layer, shape.n_text_layer, shape.n_mels, shape.quant) == (32, 4, 128, "Q5_0")

    def test_a_generic_converter_name_takes_its_folder(self, tmp_path):
        write_whisper(tmp_path / "models" / "whisper-small-german" / "ggml-model.bin", "small")
        (row,) = run(tmp_path).models
        assert row.id == "whisper-small-german"

    def test_a_cut_download_is_skipped_with_the_size_expected(self, tmp_path):
        path = write_whisper(tmp_path / "models" / "ggml-medium.bin", "medium", 24, 24)
        os.truncate(path, path.stat().st_size // 2)
        found = run(tmp_path)
        assert found.row_errors["whisper-medium"].startswith("incomplete download (at least 1.43 GiB expected)")
        assert found.downloads["whisper-medium"].have_bytes == path.stat().st_size

    def test_a_damaged_header_is_a_skip_reason_not_a_crash(self, tmp_path):
        path = write_whisper(tmp_path / "models" / "ggml-base.bin", "base")
        data = bytearray(path.read_bytes())
        data[44:48] = (4).to_bytes(4, "little")  # ftype 4: whisper.cpp would abort in an assertion
        path.write_bytes(bytes(data))
        assert run(tmp_path).row_errors == {"whisper-base": "whisper.cpp header: ftype 4 names no weight type "
                                                            "whisper.cpp loads"}

    def test_a_second_run_reads_no_file(self, tmp_path):
        unified(tmp_path)
        run(tmp_path)
        warm = MetaCache(str(tmp_path / "cache"))
        again = walked(tmp_path, warm)
        assert warm.reads == 0 and len(again.discovery.models) == 4 and len(again.metas) == 4


class TestVad:
    def test_the_newest_silero_pairs_with_every_model_of_its_folder(self, tmp_path):
        folder = unified(tmp_path)
        found = run(tmp_path)
        newest = str(folder / "ggml-silero-v6.2.0.bin")
        assert {r.vad for r in found.models} == {newest}
        assert all(newest in r.inputs and r.vad_bytes == os.path.getsize(newest) for r in found.models)
        reasons = ignored(found)
        assert reasons["ggml-silero-v6.2.0.bin"] == ("Silero VAD model of whisper-base.en, whisper-base.en-q5_1, "
                                                     "whisper-large-v3-turbo-q5_0, whisper-tiny")
        assert reasons["ggml-silero-v5.1.2.bin"] == ("Silero VAD model, not paired: ggml-silero-v6.2.0.bin of this "
                                                     "folder is newer")

    def test_numbers_in_names_compare_as_numbers(self, tmp_path):
        folder = tmp_path / "models"
        write_whisper(folder / "ggml-tiny.bin")
        write_silero(folder / "ggml-silero-v6.2.0.bin")
        write_silero(folder / "ggml-silero-v10.0.0.bin")
        (row,) = run(tmp_path).models
        assert row.vad.endswith("ggml-silero-v10.0.0.bin")

    def test_a_vad_model_alone_is_listed_not_served(self, tmp_path):
        write_silero(tmp_path / "models" / "vad" / "ggml-silero-v6.2.0.bin")
        found = run(tmp_path)
        assert found.models == ()
        assert ignored(found) == {"ggml-silero-v6.2.0.bin": "Silero VAD model with no whisper.cpp model beside it, "
                                                            "not served"}


class TestEncoders:
    def test_a_core_ml_folder_serves_the_model_and_its_quantizations(self, tmp_path):
        folder = unified(tmp_path)
        found = run(tmp_path)
        rows = {r.id: r for r in found.models}
        coreml = str(folder / "ggml-base.en-encoder.mlmodelc")
        assert rows["whisper-base.en"].encoders == rows["whisper-base.en-q5_1"].encoders == (coreml,)
        assert ignored(found)["ggml-base.en-encoder.mlmodelc"] == ("Core ML encoder of whisper-base.en, "
                                                                   "whisper-base.en-q5_1")

    def test_openvino_files_and_cache_belong_to_their_exact_model(self, tmp_path):
        unified(tmp_path)
        found = run(tmp_path)
        tiny = next(r for r in found.models if r.id == "whisper-tiny")
        assert [os.path.basename(p) for p in tiny.encoders] == [
            "ggml-tiny-encoder-openvino-cache", "ggml-tiny-encoder-openvino.bin", "ggml-tiny-encoder-openvino.xml"]
        reasons = ignored(found)
        assert {reasons[os.path.basename(p)] for p in tiny.encoders} == {"OpenVINO encoder of whisper-tiny"}

    def test_encoder_folders_are_not_walked(self, tmp_path):
        unified(tmp_path)
        found = run(tmp_path)
        assert not any("weights" in i.path or "blob.bin" in i.path for i in found.ignored)
        assert len(found.models) == 4  # the ggml-magic blob in the OpenVINO cache is not a model

    def test_an_encoder_without_its_model_says_which_model_it_wants(self, tmp_path):
        (tmp_path / "models" / "ggml-medium-encoder.mlmodelc").mkdir(parents=True)
        assert ignored(run(tmp_path)) == {"ggml-medium-encoder.mlmodelc": "Core ML encoder of ggml-medium.bin, "
                                                                          "which is not in this folder; not served"}
