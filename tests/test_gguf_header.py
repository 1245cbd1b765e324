"""The streaming GGUF header reader: real files from GGUFWriter, and hostile headers by hand."""

from __future__ import annotations

import os
import struct
from typing import ClassVar

import attrs
import gguf
import pytest
import xxhash
from gguf_fixtures import (
    Q,
    llama_tensors,
    minimal_header,
    pack_header,
    pack_kv_array_header,
    pack_kv_string,
    pack_kv_u32,
    pack_string,
    pack_tensor_info,
    tensor_nbytes,
    write_gguf,
    write_split_set,
)

from autogen.errors import ModelError
from autogen.metadata import gguf_header, gguf_keys
from autogen.metadata.gguf_header import MAX_KEPT_STRING, GGUFError, GGUFHeader, read_gguf_header

GIB = 1 << 30
I64_LIMIT = 1 << 63


def _walk_keys(ours: type, theirs: type, prefix: str = "Keys"):
    for name, value in vars(ours).items():
        if name.startswith("_"):
            continue
        if isinstance(value, type):
            yield from _walk_keys(value, getattr(theirs, name), f"{prefix}.{name}")
        else:
            yield f"{prefix}.{name}", value, getattr(theirs, name)


class TestTablesMirrorGguf:
    def test_every_key_template_equals_the_gguf_constant(self):
        pairs = list(_walk_keys(gguf_keys.Keys, gguf.Keys))
        assert len(pairs) >= 25
        for where, ours, theirs in pairs:
            assert ours == theirs, where

    def test_value_type_ids_equal_gguf(self):
        assert {t.name: t.value for t in gguf_keys.ValueType} == {
            t.name: t.value for t in gguf.GGUFValueType}

    def test_every_scalar_format_has_the_size_of_its_type(self):
        sizes = {"UINT8": 1, "INT8": 1, "BOOL": 1, "UINT16": 2, "INT16": 2, "UINT32": 4,
                 "INT32": 4, "FLOAT32": 4, "UINT64": 8, "INT64": 8, "FLOAT64": 8}
        assert {t.name: struct.calcsize("<" + code)
                for t, code in gguf_keys.SCALAR_FORMATS.items()} == sizes

    def test_ggml_types_equal_gguf_quantization_types(self):
        assert {t.name: t.value for t in gguf_keys.GGMLType} == {
            t.name: t.value for t in gguf.GGMLQuantizationType}

    def test_type_sizes_equal_gguf_for_every_type_it_knows(self):
        """Q8_1 is the one known gap: ggml's struct is 36 bytes, gguf-py still says 40."""
        known_gaps = {"Q8_1": ((32, 36), (32, 40))}
        for qtype, theirs in gguf.GGML_QUANT_SIZES.items():
            ours = gguf_keys.GGML_TYPE_SIZES[gguf_keys.GGMLType(qtype.value)]
            if qtype.name in known_gaps:
                assert (ours, theirs) == known_gaps[qtype.name]  # fails once gguf-py is fixed
            else:
                assert ours == theirs, qtype.name
        assert len(gguf_keys.GGML_TYPE_SIZES) == len(gguf.GGML_QUANT_SIZES)


class TestReadsWriterFiles:
    def test_scalars_strings_and_counts_round_trip(self, tmp_path):
        path = write_gguf(tmp_path / "m.gguf", "qwen3", kv={
            "general.name": "Qwen3 8B", "{arch}.block_count": 36, "{arch}.context_length": 40960,
            "{arch}.rope.freq_base": 1e6, "{arch}.use_parallel_residual": True},
            tensors=[("token_embd.weight", (64, 100), Q.F16)])
        h = read_gguf_header(path)
        assert isinstance(h, GGUFHeader)
        assert (h.version, h.tensor_count, h.kv_count) == (3, 1, 6)
        assert h.kv["general.architecture"] == "qwen3"
        assert h.kv["general.name"] == "Qwen3 8B"
        assert h.kv["qwen3.block_count"] == 36
        assert h.kv["qwen3.rope.freq_base"] == 1e6
        assert h.kv["qwen3.use_parallel_residual"] is True

    def test_small_numeric_arrays_are_decoded_as_tuples(self, tmp_path):
        per_layer = [0, 8, 0, 8]
        path = write_gguf(tmp_path / "m.gguf", "jamba", kv={
            "{arch}.attention.head_count_kv": per_layer,
            "{arch}.attention.sliding_window_pattern": [True, False, True, False]})
        h = read_gguf_header(path)
        assert h.kv["jamba.attention.head_count_kv"] == (0, 8, 0, 8)
        assert h.kv["jamba.attention.sliding_window_pattern"] == (True, False, True, False)
        assert h.array_lengths["jamba.attention.head_count_kv"] == 4

    def test_vocabulary_arrays_are_counted_not_kept(self, tmp_path):
        path = write_gguf(tmp_path / "m.gguf", "qwen3", vocab=1000)
        h = read_gguf_header(path)
        assert h.array_lengths["tokenizer.ggml.tokens"] == 1000
        assert h.array_lengths["tokenizer.ggml.token_type"] == 1000
        assert h.array_lengths["tokenizer.ggml.merges"] == 999
        assert [k for k in h.kv if k.startswith("tokenizer.")] == ["tokenizer.ggml.model"]

    def test_150k_vocabulary_header_is_walked_not_decoded(self, tmp_path):
        path = write_gguf(tmp_path / "m.gguf", "qwen3", vocab=151_936,
                          kv={"{arch}.block_count": 2},
                          tensors=[("token_embd.weight", (64, 151_936), Q.Q8_0)])
        h = read_gguf_header(path)
        assert h.array_lengths["tokenizer.ggml.tokens"] == 151_936
        assert h.kv["qwen3.block_count"] == 2
        assert h.tensor_count == 1
        # the numeric token_type array (600 KB) is jumped over, never read
        assert h.bytes_read < h.data_offset
        assert h.token_embd_dims == (64, 151_936)

    def test_chat_template_is_recorded_by_presence_and_length(self, tmp_path):
        template = "{% for m in messages %}{{ m.content }}{% endfor %}" * 3000
        h = read_gguf_header(write_gguf(tmp_path / "t.gguf", chat_template=template))
        assert h.has_chat_template
        assert h.chat_template_bytes == len(template.encode())
        assert "tokenizer.chat_template" not in h.kv

    def test_no_chat_template_means_absent(self, tmp_path):
        h = read_gguf_header(write_gguf(tmp_path / "t.gguf"))
        assert (h.has_chat_template, h.chat_template_bytes) == (False, 0)
        assert h.chat_template_markers is None

    def test_chat_template_markers_are_kept_not_the_text(self, tmp_path):
        """Mistral-Nemo-Instruct-2407's tool lines (llama.cpp models/templates), trimmed."""
        template = ('{%- if not tools is defined %}{%- set tools = none %}{%- endif %}'
                    '{{- "[AVAILABLE_TOOLS][" }}{%- for tool in tools %}{%- endfor %}{{- "[TOOL_CALLS][" }}')
        h = read_gguf_header(write_gguf(tmp_path / "t.gguf", chat_template=template, vocab=10))
        assert h.chat_template_markers == ("tool_calls_token", "tools_var")
        assert not any(isinstance(v, str) and "TOOL_CALLS" in v for v in h.kv.values())
        assert h.array_lengths["tokenizer.ggml.tokens"] == 10  # reading goes on after it

    def test_a_template_without_tools_is_scanned_and_shows_nothing(self, tmp_path):
        h = read_gguf_header(write_gguf(tmp_path / "t.gguf", chat_template="{{ bos_token }}[INST]"))
        assert h.chat_template_markers == ()

    def test_template_scan_is_bounded(self, tmp_path):
        """Up to MAX_SCANNED_TEMPLATE bytes are scanned; a longer template is skipped unscanned."""
        limit = gguf_header.MAX_SCANNED_TEMPLATE
        tail = "{% if tools %}<tool_call>"
        at_limit = "x" * (limit - len(tail)) + tail
        h = read_gguf_header(write_gguf(tmp_path / "a.gguf", chat_template=at_limit))
        assert h.chat_template_markers == ("tool_call_xml", "tools_var")
        h = read_gguf_header(write_gguf(tmp_path / "b.gguf", chat_template="x" + at_limit,
                                        kv={"{arch}.block_count": 3}))
        assert h.chat_template_markers is None
        assert (h.has_chat_template, h.chat_template_bytes) == (True, limit + 1)
        assert h.kv["llama.block_count"] == 3

    def test_template_with_invalid_utf8_is_still_scanned(self, tmp_path):
        data = pack_header(0, 1) + pack_string("tokenizer.chat_template") + struct.pack("<I", 8) + \
            pack_string(b"\xff\xfe{% if tools %}\xc3[TOOL_CALLS]\xe2\x82")
        assert read_gguf_header(_write(tmp_path, data)).chat_template_markers == ("tool_calls_token", "tools_var")

    def test_the_last_template_wins(self, tmp_path):
        data = pack_header(0, 2) + pack_kv_string("tokenizer.chat_template", "{{ tools }}<tool_call>") + \
            pack_kv_string("tokenizer.chat_template", "{{ messages }}")
        h = read_gguf_header(_write(tmp_path, data))
        assert (h.chat_template_markers, h.chat_template_bytes) == ((), len("{{ messages }}"))

    def test_long_string_values_are_skipped_and_reading_goes_on(self, tmp_path):
        path = write_gguf(tmp_path / "m.gguf", kv={
            "general.description": "x" * (MAX_KEPT_STRING + 1), "{arch}.block_count": 7})
        h = read_gguf_header(path)
        assert "general.description" not in h.kv
        assert h.kv["llama.block_count"] == 7

    def test_sparse_multi_gb_file_costs_only_header_bytes(self, tmp_path):
        tensors = llama_tensors(blocks=40, embd=5120, vocab=152_064, ffn=25_600)
        path = write_gguf(tmp_path / "big.gguf", "qwen2", tensors=tensors)
        h = read_gguf_header(path)
        declared = sum(tensor_nbytes(d, t) for _, d, t in tensors)
        assert h.tensor_bytes == declared > 10 * GIB
        assert h.file_size == h.expected_file_size == os.path.getsize(path)
        assert h.bytes_read < 1 << 20
        assert h.tensor_count == len(tensors)
        assert h.bytes_by_type[0][0] == gguf_keys.GGMLType.Q4_K

    def test_aggregates_match_gguf_reader(self, tmp_path):
        tensors = [("token_embd.weight", (256, 1000), Q.Q4_K),
                   ("blk.0.ffn_up_exps.weight", (256, 512, 8), Q.Q8_0),
                   ("blk.0.attn_norm.weight", (256,), Q.F32),
                   ("output.weight", (256, 1000), Q.BF16)]
        path = write_gguf(tmp_path / "m.gguf", "qwen3moe", tensors=tensors, kv={
            "general.alignment": 64})
        h = read_gguf_header(path)
        reader = gguf.GGUFReader(path)
        assert h.tensor_bytes == sum(int(t.n_bytes) for t in reader.tensors)
        assert h.expert_tensor_bytes == int(reader.tensors[1].n_bytes)
        assert h.data_offset == reader.data_offset
        assert h.alignment == 64
        assert h.data_offset % 64 == 0

    def test_interrupted_download_reports_the_size_expected(self, tmp_path):
        tensors = [(f"blk.{i}.ffn_up.weight", (8192, 65536), Q.Q4_K) for i in range(10)]
        path = write_gguf(tmp_path / "m.gguf", tensors=tensors, sparse_size=int(1.5 * GIB))
        h = read_gguf_header(path)
        assert h.file_size == int(1.5 * GIB) and round(h.expected_file_size / GIB, 2) == 2.81

    def test_header_only_file_still_parses(self, tmp_path):
        """GGUFReader fails here (docs/maintainers/discovery.md#why-a-streaming-reader); a header alone is all we need."""
        path = write_gguf(tmp_path / "m.gguf", tensors=[("a.weight", (4096, 4096), Q.F16)])
        os.truncate(path, read_gguf_header(path).data_offset)
        h = read_gguf_header(path)
        assert h.tensor_bytes == 4096 * 4096 * 2
        assert h.file_size == h.data_offset < h.expected_file_size

    def test_unet_markers_and_embedding_dims_are_kept(self, tmp_path):
        path = write_gguf(tmp_path / "sdxl.gguf", "sdxl", tensors=[
            ("model.diffusion_model.input_blocks.0.0.weight", (3, 3, 4, 320), Q.F16),
            ("model.diffusion_model.label_emb.0.0.weight", (2816, 1280), Q.F16)])
        h = read_gguf_header(path)
        assert (h.has_unet_blocks, h.has_label_emb) == (True, True)
        assert not h.has_baked_encoders
        assert h.token_embd_dims == ()

    @pytest.mark.parametrize(("name", "baked"), [
        ("cond_stage_model.transformer.text_model.embeddings.token_embedding.weight", True),  # SD 1.x
        ("cond_stage_model.1.transformer.text_model.final_layer_norm.weight", True),  # sd.cpp's SDXL names
        ("conditioner.embedders.0.transformer.text_model.embeddings.token_embedding.weight", True),  # SDXL
        ("conditioner.embedders.1.model.ln_final.weight", True),
        ("first_stage_model.decoder.conv_in.weight", False),  # a baked VAE is not a text encoder
        ("text_encoders.clip_l.transformer.text_model.final_layer_norm.weight", False),
        ("model.cond_stage_model.x.weight", False),  # under, not anywhere
    ])
    def test_baked_text_encoders_are_noted(self, tmp_path, name, baked):
        path = write_gguf(tmp_path / "sd.gguf", "sd1", tensors=[
            ("model.diffusion_model.input_blocks.0.0.weight", (3, 3, 4, 320), Q.F16), (name, (768, 8), Q.F16)])
        h = read_gguf_header(path)
        assert (h.has_unet_blocks, h.has_baked_encoders) == (True, baked)

    def test_unknown_ggml_type_is_counted_not_sized(self, tmp_path):
        path = tmp_path / "m.gguf"
        path.write_bytes(minimal_header(tensors=[("token_embd.weight", (64, 100), 0),
                                                 ("new.weight", (64, 64), 99)]) + bytes(64))
        h = read_gguf_header(path)
        assert h.untyped_tensors == 1
        assert h.tensor_bytes == 64 * 100 * 4

    def test_version_2_is_read_like_version_3(self, tmp_path):
        data = bytearray(minimal_header())
        data[4:8] = struct.pack("<I", 2)
        (tmp_path / "v2.gguf").write_bytes(bytes(data))
        assert read_gguf_header(tmp_path / "v2.gguf").version == 2


def _vocab_file(path, tokens, *, block_count=2):
    return write_gguf(path, "qwen3", kv={"{arch}.block_count": block_count, "tokenizer.ggml.tokens": tokens,
                                         "tokenizer.ggml.merges": [t[:2] + " " + t[2:] for t in tokens]},
                      tensors=[("token_embd.weight", (64, len(tokens)), Q.Q8_0)])


def _exact(path) -> GGUFHeader:
    """The same read with an empty vocabulary memo (a fresh process)."""
    gguf_header._WALKED.clear()
    return read_gguf_header(path)


class TestSameVocabularyIsWalkedOnce:
    TOKENS: ClassVar[list[str]] = [f"Ġtok{i:05d}" for i in range(3000)]

    def test_files_sharing_a_vocabulary_read_exactly_like_a_fresh_read(self, tmp_path):
        paths = [_vocab_file(tmp_path / f"m{i}.gguf", self.TOKENS, block_count=i + 1) for i in range(4)]
        gguf_header._WALKED.clear()
        memo = [read_gguf_header(p) for p in paths]
        assert len(gguf_header._WALKED) == 2  # tokens and merges, once each
        for p, h in zip(paths, memo, strict=False):
            fresh = _exact(p)
            assert attrs.evolve(h, bytes_read=0) == attrs.evolve(fresh, bytes_read=0)
        assert [h.kv["qwen3.block_count"] for h in memo] == [1, 2, 3, 4]

    def test_same_start_and_count_but_other_strings_is_walked_again(self, tmp_path):
        """The memo is keyed by the first 4 KiB; the full-length hash catches a later change."""
        other = [*self.TOKENS[:-1], "Ġa-much-longer-last-token-than-before"]
        a = _vocab_file(tmp_path / "a.gguf", self.TOKENS)
        b = _vocab_file(tmp_path / "b.gguf", self.TOKENS)
        c = _vocab_file(tmp_path / "c.gguf", other, block_count=7)
        gguf_header._WALKED.clear()
        read_gguf_header(a), read_gguf_header(b)
        h = read_gguf_header(c)
        assert h.kv["qwen3.block_count"] == 7
        assert h.array_lengths["tokenizer.ggml.merges"] == 3000
        assert h.expected_file_size == h.file_size == os.path.getsize(c)

    def test_a_truncated_copy_of_a_remembered_vocabulary_still_gets_the_exact_reason(self, tmp_path):
        a = _vocab_file(tmp_path / "a.gguf", self.TOKENS)
        b = _vocab_file(tmp_path / "b.gguf", self.TOKENS)
        cut = tmp_path / "cut.gguf"
        cut.write_bytes(a.read_bytes()[:30_000])
        gguf_header._WALKED.clear()
        read_gguf_header(a), read_gguf_header(b)
        with pytest.raises(GGUFError) as remembered:
            read_gguf_header(cut)
        with pytest.raises(GGUFError) as fresh:
            _exact(cut)
        assert str(remembered.value) == str(fresh.value)
        assert str(fresh.value).startswith("truncated header: ")


class TestSplitSets:
    def test_shard_one_has_model_keys_and_later_shards_only_split_keys(self, tmp_path):
        tensors = [(f"blk.{i}.ffn_up.weight", (4096, 11008), Q.Q4_K) for i in range(6)]
        paths = write_split_set(tmp_path, "Model-Q4_K_M", "llama", shards=3,
                                kv={"{arch}.block_count": 6}, tensors=tensors)
        assert [p.name for p in paths] == [f"Model-Q4_K_M-0000{i}-of-00003.gguf" for i in (1, 2, 3)]
        first, second = read_gguf_header(paths[0]), read_gguf_header(paths[1])
        assert (first.split_no, first.split_count, first.split_tensors_count) == (0, 3, 6)
        assert first.kv["llama.block_count"] == 6
        assert set(second.kv) == {"split.no", "split.count", "split.tensors.count"}
        assert (second.split_no, second.split_count) == (1, 3)
        assert sum(read_gguf_header(p).tensor_bytes for p in paths) == 6 * tensor_nbytes(
            (4096, 11008), Q.Q4_K)

    def test_single_file_has_no_split_keys(self, tmp_path):
        h = read_gguf_header(write_gguf(tmp_path / "m.gguf"))
        assert (h.split_no, h.split_count, h.split_tensors_count) == (0, 0, 0)


def _write(tmp_path, data: bytes):
    path = tmp_path / "hostile.gguf"
    path.write_bytes(data)
    return path


def _reason(tmp_path, data: bytes) -> str:
    with pytest.raises(GGUFError) as info:
        read_gguf_header(_write(tmp_path, data))
    return str(info.value)


class TestHostileHeaders:
    """Each attack is built byte by byte and must end in one precise GGUFError."""

    def test_bad_magic(self, tmp_path):
        assert _reason(tmp_path, b"GGML" + bytes(20)) == "not a GGUF file (magic b'GGML')"

    def test_version_1_is_refused(self, tmp_path):
        data = pack_header(0, 0, version=1)
        assert _reason(tmp_path, data) == "unsupported GGUF version 1 (expected 2 or 3)"

    def test_big_endian_file_is_named(self, tmp_path):
        data = b"GGUF" + struct.pack(">IQQ", 3, 0, 0)
        assert _reason(tmp_path, data) == "big-endian GGUF files are not supported"

    @pytest.mark.parametrize("cut", range(len(minimal_header())))
    def test_truncation_anywhere_in_the_header_is_refused(self, tmp_path, cut):
        reason = _reason(tmp_path, minimal_header()[:cut])
        assert reason.startswith(("truncated header: ", "header claims ")), reason

    def test_truncation_exact_reasons(self, tmp_path):
        header = minimal_header()
        assert _reason(tmp_path, header[:2]) == (
            "truncated header: magic at offset 0 needs 4 bytes, file has 2")
        assert _reason(tmp_path, header[:6]) == (
            "truncated header: version at offset 4 needs 4 bytes, file has 6")
        assert _reason(tmp_path, header[:20]) == (
            "truncated header: key/value count at offset 16 needs 8 bytes, file has 20")
        # cut inside the tensor name: its length claims more than is left
        assert _reason(tmp_path, header[:-33]) == (
            f"truncated header: tensor name at offset {len(header) - 57} claims 17 bytes, "
            f"file has {len(header) - 33}")

    def test_complete_minimal_header_still_parses(self, tmp_path):
        h = read_gguf_header(_write(tmp_path, minimal_header()))
        assert h.kv["llama.block_count"] == 2
        assert h.tensor_bytes == 64 * 100 * 4

    def test_key_length_2_pow_63(self, tmp_path):
        data = pack_header(0, 1) + pack_string(b"general.name", claimed_len=1 << 63)
        assert _reason(tmp_path, data) == (
            f"truncated header: key at offset 24 claims {1 << 63} bytes, file has {len(data)}")

    def test_string_value_length_2_pow_63(self, tmp_path):
        data = pack_header(0, 1) + pack_string("general.name") + struct.pack("<I", 8) + \
            pack_string(b"x", claimed_len=1 << 63)
        assert _reason(tmp_path, data) == (
            f"truncated header: string 'general.name' at offset 48 claims {1 << 63} bytes, "
            f"file has {len(data)}")

    def test_key_longer_than_the_limit(self, tmp_path):
        data = pack_header(0, 1) + pack_string("k" * 70_000) + struct.pack("<IB", 0, 1)
        assert _reason(tmp_path, data) == "key at offset 24 is 70000 bytes long (limit 65535)"

    def test_key_at_the_limit_still_parses(self, tmp_path):
        data = pack_header(0, 1) + pack_string("k" * 65_535) + struct.pack("<IB", 0, 1)
        assert read_gguf_header(_write(tmp_path, data)).kv["k" * 65_535] == 1

    def test_array_count_larger_than_the_file(self, tmp_path):
        data = pack_header(0, 1) + pack_kv_array_header("tokenizer.ggml.tokens", 8, 1 << 40)
        assert _reason(tmp_path, data) == (
            f"truncated header: array 'tokenizer.ggml.tokens' at offset 57 claims {1 << 40} "
            f"strings (at least {8 << 40} bytes), file has {len(data)}")

    def test_numeric_array_count_larger_than_the_file(self, tmp_path):
        data = pack_header(0, 1) + pack_kv_array_header("llama.head_count", 4, 1000) + bytes(16)
        assert _reason(tmp_path, data) == (
            f"truncated header: array 'llama.head_count' at offset 52 claims 1000 uint32 "
            f"(at least 4000 bytes), file has {len(data)}")

    def test_array_that_fits_exactly_still_parses(self, tmp_path):
        data = (pack_header(0, 1) + pack_kv_array_header("llama.head_count", 4, 4)
                + struct.pack("<4I", 1, 2, 3, 4))
        assert read_gguf_header(_write(tmp_path, data)).kv["llama.head_count"] == (1, 2, 3, 4)

    def test_string_inside_an_array_claiming_2_pow_63(self, tmp_path):
        data = (pack_header(0, 1) + pack_kv_array_header("tokenizer.ggml.tokens", 8, 3)
                + pack_string("a") + pack_string(b"b", claimed_len=1 << 63) + pack_string("c"))
        assert _reason(tmp_path, data) == (
            f"truncated header: string 1 of array 'tokenizer.ggml.tokens' at offset 78 claims "
            f"{1 << 63} bytes, file has {len(data)}")

    def test_string_array_still_parses(self, tmp_path):
        data = (pack_header(0, 1) + pack_kv_array_header("tokenizer.ggml.tokens", 8, 3)
                + pack_string("a") + pack_string("bb") + pack_string("c"))
        h = read_gguf_header(_write(tmp_path, data))
        assert h.array_lengths["tokenizer.ggml.tokens"] == 3

    def test_nested_arrays(self, tmp_path):
        data = pack_header(0, 1) + pack_kv_array_header("x.nested", 9, 2) + bytes(64)
        assert _reason(tmp_path, data) == "nested array in key 'x.nested' at offset 44"

    def test_unknown_value_type(self, tmp_path):
        data = pack_header(0, 1) + pack_string("x.odd") + struct.pack("<I", 13) + bytes(8)
        assert _reason(tmp_path, data) == "unknown value type 13 for key 'x.odd' at offset 37"

    def test_control_characters_in_a_key_are_escaped_in_the_reason(self, tmp_path):
        data = pack_header(0, 1) + pack_string("a\nb") + struct.pack("<I", 13) + bytes(8)
        assert _reason(tmp_path, data) == "unknown value type 13 for key 'a\\nb' at offset 35"

    def test_unknown_array_element_type(self, tmp_path):
        data = pack_header(0, 1) + pack_kv_array_header("x.odd", 77, 1) + bytes(8)
        assert _reason(tmp_path, data) == (
            "unknown array element type 77 for key 'x.odd' at offset 41")

    def test_tensor_count_larger_than_the_bytes(self, tmp_path):
        data = pack_header(1 << 40, 0) + bytes(100)
        assert _reason(tmp_path, data) == (
            f"header claims {1 << 40} tensors (at least {24 << 40} bytes), file has 124")

    def test_kv_count_larger_than_the_bytes(self, tmp_path):
        data = pack_header(0, 1 << 62) + bytes(100)
        assert _reason(tmp_path, data) == (
            f"header claims {1 << 62} key/values (at least {13 << 62} bytes), file has 124")

    def test_tensor_count_beyond_what_follows_the_kvs(self, tmp_path):
        data = pack_header(3, 1) + pack_kv_u32("llama.block_count", 2) + bytes(60)
        assert _reason(tmp_path, data) == (
            "header claims 3 tensors (at least 72 bytes from offset 57), file has 117")

    def test_absurd_n_dims(self, tmp_path):
        data = pack_header(1, 0) + pack_tensor_info("a", (), 0, 0, n_dims=1000) + bytes(64)
        assert _reason(tmp_path, data) == "tensor at offset 24 has 1000 dims (max 4)"

    def test_four_dims_still_parse(self, tmp_path):
        data = pack_header(1, 0) + pack_tensor_info("a", (2, 3, 4, 5), 0, 0)
        assert read_gguf_header(_write(tmp_path, data)).tensor_bytes == 2 * 3 * 4 * 5 * 4

    def test_dims_whose_product_overflows(self, tmp_path):
        data = pack_header(1, 0) + pack_tensor_info("a", (1 << 40, 1 << 40), 0, 0)
        assert _reason(tmp_path, data) == (
            f"tensor at offset 24 has absurd dims [{1 << 40}, {1 << 40}]")

    def test_absurd_tensor_data_offset(self, tmp_path):
        data = pack_header(1, 0) + pack_tensor_info("a", (4,), 0, (1 << 64) - 1)
        assert _reason(tmp_path, data) == (
            f"tensor at offset 24 has absurd data offset {(1 << 64) - 1}")

    def test_alignment_not_a_power_of_two(self, tmp_path):
        data = pack_header(0, 1) + pack_kv_u32("general.alignment", 48)
        assert _reason(tmp_path, data) == "general.alignment must be a power of two (got 48)"

    def test_missing_file_and_directory_are_reasons(self, tmp_path):
        with pytest.raises(GGUFError, match=r"^cannot read: No such file or directory$"):
            read_gguf_header(tmp_path / "absent.gguf")
        with pytest.raises(GGUFError, match=r"^cannot read: Is a directory$"):
            read_gguf_header(tmp_path)

    def test_gguf_error_is_a_model_error(self):
        assert issubclass(GGUFError, ModelError)

    def test_kv_string_helper_round_trips(self, tmp_path):
        data = pack_header(0, 1) + pack_kv_string("general.name", "ünï")
        assert read_gguf_header(_write(tmp_path, data)).kv["general.name"] == "ünï"


def _raw_tokens(tokens) -> bytes:
    """The token array's element bytes as GGUF stores them: u64 length + bytes, per token."""
    return b"".join(struct.pack("<Q", len(t.encode())) + t.encode() for t in tokens)


class TestVocabularyDigest:
    """The token list's identity, hashed while the reader streams past it, never decoded."""

    TOKENS: ClassVar[list[str]] = [f"Ġtok{i:05d}" for i in range(3000)]

    def test_the_digest_is_the_xxh3_of_the_stored_token_bytes(self, tmp_path):
        path = _vocab_file(tmp_path / "m.gguf", self.TOKENS)
        assert _exact(path).vocab_digest == xxhash.xxh3_128_hexdigest(_raw_tokens(self.TOKENS))

    def test_files_sharing_a_vocabulary_get_the_same_digest_from_the_memo(self, tmp_path):
        paths = [_vocab_file(tmp_path / f"m{i}.gguf", self.TOKENS, block_count=i + 1) for i in range(3)]
        gguf_header._WALKED.clear()
        digests = {read_gguf_header(p).vocab_digest for p in paths}
        assert digests == {xxhash.xxh3_128_hexdigest(_raw_tokens(self.TOKENS))}

    def test_tokens_longer_than_the_read_window_are_hashed_whole(self, tmp_path):
        tokens = ["a", "b" * (gguf_header._CHUNK + 123), "c", "d" * (3 * gguf_header._CHUNK), "e"]
        path = _vocab_file(tmp_path / "long.gguf", tokens)
        h = _exact(path)
        assert h.vocab_digest == xxhash.xxh3_128_hexdigest(_raw_tokens(tokens))
        assert h.array_lengths["tokenizer.ggml.tokens"] == 5 and h.kv["qwen3.block_count"] == 2

    def test_one_other_token_changes_the_digest_and_merges_never_count(self, tmp_path):
        a = _vocab_file(tmp_path / "a.gguf", self.TOKENS)
        b = _vocab_file(tmp_path / "b.gguf", [*self.TOKENS[:-1], "Ġother"])
        assert _exact(a).vocab_digest != _exact(b).vocab_digest
        no_tokens = write_gguf(tmp_path / "none.gguf", "llama", kv={"tokenizer.ggml.merges": ["a b"]})
        assert _exact(no_tokens).vocab_digest == ""


def test_gguf_types_mirror_gguf_py():
    assert {k: v for k, v in vars(gguf_keys.GGUFType).items() if not k.startswith("_")} == {
        k: v for k, v in vars(gguf.GGUFType).items() if not k.startswith("_")}
