"""whisper.cpp's model header and what whisper-server allocates: the header read and checked
(hostile files too), and the estimate held to the figures whisper.cpp 1.8.5 printed
(tests/data/whisper_alloc_1.8.5.json, recorded by tests/data/record_whisper_alloc.py)."""

from __future__ import annotations

import json
import struct

import pytest

from autogen.errors import ModelError
from autogen.metadata.whisper_header import HEADER, WhisperShape, parse_whisper_header, read_whisper_header
from autogen.sizing.whisper import whisper_memory
from tests.shared import DATA
from tests.whisper_fixtures import write_whisper

RECORDED = json.loads((DATA / "whisper_alloc_1.8.5.json").read_text())["shapes"]
MB = 1_000_000
#: The parts whisper.cpp prints, by the record's names.
PARTS = ("kv_self", "kv_cross", "kv_pad", "conv", "encode", "cross", "decode")


def _shape_of(tmp_path, shape) -> WhisperShape:
    path = write_whisper(tmp_path / "m.bin", shape["width"], shape["audio_layers"], shape["text_layers"],
                         shape["type"], english=shape["english"])
    return read_whisper_header(str(path))


def _label(shape) -> str:
    fa = "fa" if shape["flash_attn"] else "no-fa"
    return f"{shape['width']}-{shape['audio_layers']}+{shape['text_layers']}-{shape['type']}-{fa}"


@pytest.mark.parametrize("shape", RECORDED, ids=_label)
def test_each_part_is_what_whisper_cpp_printed(tmp_path, shape):
    """Every printed figure, to the 0.01 MB it is printed with: the weights from the header, the
    three caches and the four compute buffers."""
    memory = whisper_memory(_shape_of(tmp_path, shape), shape["flash_attn"])
    printed = shape["printed_mb"]
    ours = {f.name.replace(" ", "_"): f.bytes for f in (*memory.caches, *memory.compute)}
    assert round(memory.weights.bytes / MB, 2) == printed["model"]
    assert {p: round(ours[p] / MB, 2) for p in PARTS} == {p: printed[p] for p in PARTS}
    total = sum(printed.values()) * MB
    assert abs(memory.printed - total) <= 0.10 * total


@pytest.mark.parametrize("width", ["tiny", "base", "large-v3-turbo"])
def test_the_three_widths_the_issue_names_are_recorded_with_a_layer_or_two(width):
    assert any(s["width"] == width and max(s["audio_layers"], s["text_layers"]) <= 2 for s in RECORDED)


def test_the_fallback_and_flash_attention_are_said():
    shape = WhisperShape(51866, 1500, 1280, 20, 32, 448, 1280, 20, 4, 128, 8, 2)
    with_fa, without = whisper_memory(shape, True), whisper_memory(shape, False)
    assert without.compute_bytes > with_fa.compute_bytes  # 20 heads of 1500² F32 scores
    assert with_fa.fallback.bytes == 3 * with_fa.caches[0].bytes
    assert "not printed" in with_fa.fallback.reason and "Q5_0" in with_fa.weights.reason


class TestHeader:
    def test_a_real_shape_reads_back(self, tmp_path):
        path = write_whisper(tmp_path / "ggml-large-v3-turbo-q5_0.bin", "large-v3-turbo", 32, 4, "q5_0")
        shape = read_whisper_header(str(path))
        assert (shape.n_vocab, shape.n_audio_state, shape.n_audio_layer, shape.n_text_layer, shape.n_mels) == \
            (51866, 1280, 32, 4, 128)
        assert (shape.quant, shape.qntvr, shape.multilingual) == ("Q5_0", 2, True)
        assert shape.least_file_bytes <= path.stat().st_size < shape.least_file_bytes + MB

    def test_an_english_model_is_not_multilingual(self, tmp_path):
        shape = read_whisper_header(str(write_whisper(tmp_path / "m.bin", "base", english=True)))
        assert not shape.multilingual and shape.n_vocab == 51864

    @staticmethod
    def header(*hparams, ftype=1, mel=(80, 201), magic=b"lmgg") -> bytes:
        return magic + struct.pack("<11i", *hparams, ftype) + struct.pack("<2i", *mel)

    GOOD = (51865, 1500, 384, 6, 4, 448, 384, 6, 4, 80)

    def test_the_good_header_parses(self):
        assert parse_whisper_header(self.header(*self.GOOD)).weight_type.name == "F16"

    @pytest.mark.parametrize(("change", "words"), [
        ({"magic": b"tjgg"}, "not a whisper.cpp model (magic b'tjgg')"),
        ({"hparams": (51865, 1500, -384, 6, 4, 448, 384, 6, 4, 80)}, "n_audio_state -384 is out of range"),
        ({"hparams": (51865, 1500, 384, 6, 4, 448, 384, 6, 1 << 30, 80)}, "n_text_layer 1073741824 is out of range"),
        ({"hparams": (50000, 1500, 384, 6, 4, 448, 384, 6, 4, 80)}, "n_vocab 50000 is below Whisper's 51864"),
        ({"hparams": (51865, 1500, 384, 7, 4, 448, 384, 6, 4, 80)}, "n_audio_state 384 is not a multiple of "
                                                                    "n_audio_head 7"),
        ({"hparams": (51865, 1500, 384, 6, 4, 448, 512, 8, 4, 80)}, "differs from n_text_state 512"),
        ({"ftype": 4}, "ftype 4 names no weight type"),
        ({"ftype": 2099}, "ftype 2099 names no weight type"),
        ({"ftype": -1}, "ftype -1 names no weight type"),
        ({"mel": (128, 201)}, "mel filters 128×201 do not fit n_mels 80"),
    ])
    def test_a_hostile_or_damaged_header_is_refused_naming_the_figure(self, change, words):
        data = self.header(*change.pop("hparams", self.GOOD), **change)
        with pytest.raises(ModelError, match=words.replace("(", r"\(").replace(")", r"\)").replace("×", "×")):
            parse_whisper_header(data)

    def test_a_file_cut_inside_its_header(self, tmp_path):
        path = tmp_path / "m.bin"
        path.write_bytes(self.header(*self.GOOD)[:30])
        with pytest.raises(ModelError, match=f"30 bytes, a header has {HEADER.size}"):
            read_whisper_header(str(path))

    def test_an_unreadable_file(self, tmp_path):
        with pytest.raises(ModelError, match="cannot read"):
            read_whisper_header(str(tmp_path))
