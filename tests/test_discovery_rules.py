"""The file rules: the header speaks first, names only break ties, every file that is not a
model is listed with what it is; foreign formats are skipped with the format named."""

from __future__ import annotations

import json
import os
import re
import struct
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from autogen.commands import cli
from autogen.discovery.rules import RULES, Verdict
from autogen.metadata.formats import foreign_reason
from tests.gguf_fixtures import Q, write_gguf, write_lora
from tests.hf_fixtures import LLAMA_CONFIG, write_config, write_safetensors
from tests.runs import generate
from tests.test_library_layouts import run
from tests.whisper_fixtures import write_whisper

ROOT = Path(__file__).resolve().parent.parent
LLAMA_KV = {"{arch}.block_count": 2, "{arch}.context_length": 4096, "{arch}.embedding_length": 64,
            "{arch}.attention.head_count": 4}
TENSORS = [("token_embd.weight", (64, 256), Q.F16), ("blk.0.attn_q.weight", (64, 64), Q.F16)]


def model(path, arch="llama", **kw):
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    return write_gguf(path, arch, kv=kw.pop("kv", LLAMA_KV), tensors=kw.pop("tensors", TENSORS), **kw)


def reasons(found) -> dict[str, str]:
    return {os.path.basename(i.path.rstrip("/")): i.reason for i in found.ignored}


class TestTheTable:
    def test_docs_state_every_rule_in_order(self):
        """docs/maintainers/discovery.md#file-rules lists each rule's sentence, in the table's order."""
        text = (ROOT / "docs/maintainers/discovery.md").read_text()
        listed = re.findall(r"^\d+\. (.+)$", text.split("## File rules", 1)[1].split("\n## ", 1)[0], re.MULTILINE)
        assert listed == [rule.says for rule in RULES]

    def test_header_rules_come_before_name_rules_and_the_last_takes_every_file(self):
        sources = [rule.source for rule in RULES]
        assert sources == sorted(sources)  # "header" < "name"
        assert RULES[-1].verdict is Verdict.MODEL and RULES[-1].test(None, None)

    def test_every_verdict_is_reached_by_a_rule(self):
        assert {rule.verdict for rule in RULES} == set(Verdict)


class TestHeaderFirst:
    def test_a_projector_named_like_an_encoder_is_still_a_projector(self, tmp_path):
        """`vision-encoder-f16.gguf` matches the `-encoder` name rule; its header says mmproj."""
        m = model(tmp_path / "models/acme/Vision-7B-GGUF/Vision-7B-Q4_K_M.gguf")
        proj = model(tmp_path / "models/acme/Vision-7B-GGUF/vision-encoder-f16.gguf", "clip",
                     kv={"general.type": "mmproj", "clip.has_vision_encoder": True, "clip.projector_type": "mlp"})
        found = run(tmp_path)
        (row,) = found.models
        assert row.path == str(m) and row.mmproj == str(proj)
        assert reasons(found) == {"vision-encoder-f16.gguf": "projector of vision-7b-q4_k_m"}
        assert found.ignored[0].attached

    def test_a_lora_adapter_is_never_a_model(self, tmp_path):
        """convert_lora_to_gguf's shape: arch, no block_count, general.type adapter."""
        lora = write_lora(tmp_path / "models/loras/Llama-3-sql-LoRA-F16.gguf")
        found = run(tmp_path)
        assert found.models == () and found.row_errors == {}
        assert [(a.path, a.kind) for a in found.adapters] == [(str(lora), "gguf")]

    def test_a_lora_that_carries_the_base_hyperparameters_is_still_an_adapter(self, tmp_path):
        """Older converters copied the base's keys: the header's type decides, not what it carries."""
        model(tmp_path / "models/loras/old-lora.gguf", kv={**LLAMA_KV, "general.type": "adapter",
                                                             "adapter.type": "lora"})
        found = run(tmp_path)
        assert found.models == () and len(found.adapters) == 1

    def test_an_importance_matrix_is_listed_as_what_it_is(self, tmp_path):
        """llama-imatrix writes general.type imatrix and no architecture at all."""
        (tmp_path / "models/q").mkdir(parents=True)
        write_gguf(tmp_path / "models/q/imatrix.gguf", None, kv={"general.type": "imatrix", "imatrix.chunk_count": 125,
                                                                 "imatrix.chunk_size": 512},
                   tensors=[("blk.0.attn_q.weight.in_sum2", (64, 1), Q.F32), ("blk.0.attn_q.weight.counts", (1, 1), Q.F32)])
        found = run(tmp_path)
        assert found.models == ()
        assert reasons(found)["imatrix.gguf"].startswith("importance matrix (llama-imatrix output")

    def test_a_control_vector_is_listed_as_what_it_is(self, tmp_path):
        (tmp_path / "models/cv").mkdir(parents=True)
        write_gguf(tmp_path / "models/cv/happy.gguf", "controlvector",
                   kv={"controlvector.model_hint": "llama", "controlvector.layer_count": 2},
                   tensors=[("direction.1", (64,), Q.F32), ("direction.2", (64,), Q.F32)])
        found = run(tmp_path)
        assert found.models == () and reasons(found)["happy.gguf"].startswith("control vector")

    def test_a_model_whose_name_says_encoder_keeps_the_name_rule_when_the_header_is_silent(self, tmp_path):
        model(tmp_path / "models/flux/ae.gguf", arch=None, kv={})
        found = run(tmp_path)
        assert found.models == () and reasons(found)["ae.gguf"].startswith("diffusion component")

    def test_a_projector_whose_header_cannot_be_read_is_listed_not_paired(self, tmp_path):
        m = model(tmp_path / "models/g/gemma-3-4b-it-Q4_K_M.gguf")
        bad = m.with_name("mmproj-F16.gguf")
        bad.write_bytes(b"GGUF" + b"\xff" * 40)
        found = run(tmp_path)
        (row,) = found.models
        assert row.mmproj is None
        assert reasons(found) == {"mmproj-F16.gguf": "projector whose header cannot be read, not a model"}

    def test_a_broken_header_falls_through_to_the_name_rules_and_becomes_a_skipped_row(self, tmp_path):
        bad = tmp_path / "models/x/Broken-Q4_0.gguf"
        bad.parent.mkdir(parents=True)
        bad.write_bytes(b"GGUF" + b"\xff" * 40)
        found = run(tmp_path)
        assert [r.id for r in found.models] == ["broken-q4_0"] and "broken-q4_0" in found.row_errors


class TestForeignFormats:
    """Formats no configured engine loads: a row with the format named, never an entry."""

    @pytest.mark.parametrize("quant, words", [
        ({"quantization": {"group_size": 64, "bits": 4}}, "MLX weights (quantization without quant_method, as mlx-lm writes it)"),
        ({"quantization_config": {"quant_method": "exl2", "bits": 4.0}}, "EXL2 weights (quant_method exl2)"),
        ({"quantization_config": {"quant_method": "exl3", "bits": 4.0}}, "EXL3 weights (quant_method exl3)"),
    ])
    def test_hf_folders_in_foreign_formats(self, tmp_path, quant, words):
        folder = tmp_path / "models/pub/Qwen3-8B-x"
        write_config(folder, {**LLAMA_CONFIG, **quant})
        write_safetensors(folder / "model.safetensors", 4096)
        (row,) = run(tmp_path).models
        assert row.foreign_format in ("mlx", "exl2", "exl3") and row.format == "hf"
        assert foreign_reason(row.foreign_format, row.foreign_evidence).startswith(words)

    def test_mlx_safetensors_metadata_marks_an_unquantized_mlx_folder(self, tmp_path):
        folder = tmp_path / "models/mlx-community/Qwen3-0.6B-bf16"
        write_config(folder)
        header = json.dumps({"__metadata__": {"format": "mlx"},
                             "w": {"dtype": "BF16", "shape": [8], "data_offsets": [0, 16]}}).encode()
        (folder / "model.safetensors").write_bytes(len(header).to_bytes(8, "little") + header + b"\0" * 16)
        (row,) = run(tmp_path).models
        assert (row.id, row.foreign_format) == ("qwen3-0.6b-bf16-mlx", "mlx")
        assert "__metadata__ format mlx" in row.foreign_evidence

    def test_an_exl2_folder_without_quant_method_is_told_by_its_tensors(self, tmp_path):
        """exllamav2 writes quant_method into config.json only when it compiles a full folder (-cf)."""
        folder = tmp_path / "models/someone/Llama-3.1-8B-Instruct-4.65bpw-h6-exl2"
        write_config(folder)  # the source model's config.json, copied by hand
        header = json.dumps({"__metadata__": {"format": "pt"},
                             **{f"model.layers.0.self_attn.q_proj.{t}": {"dtype": "I32", "shape": [2],
                                                                         "data_offsets": [8 * i, 8 * i + 8]}
                                for i, t in enumerate(("q_weight", "q_invperm", "q_scale"))}}).encode()
        (folder / "output.safetensors").write_bytes(len(header).to_bytes(8, "little") + header + b"\0" * 24)
        (row,) = run(tmp_path).models
        assert (row.id, row.foreign_format, row.quant) == ("llama-3.1-8b-instruct-4.65bpw-h6-exl2", "exl2", "EXL2")
        assert foreign_reason(row.foreign_format, row.foreign_evidence).startswith(
            "EXL2 weights (tensors named *.q_invperm, as exllamav2 writes them): served by ExLlamaV2 (TabbyAPI)")

    def test_onnx_and_openvino_exports_are_one_row_per_folder(self, tmp_path):
        onnx = tmp_path / "models/onnx-community/Qwen3-0.6B-ONNX/onnx"
        onnx.mkdir(parents=True)
        for name in ("model.onnx", "model_q4.onnx", "model_fp16.onnx"):
            (onnx / name).write_bytes(b"\x08\x07")
        ov = tmp_path / "models/OpenVINO/Qwen3-8B-int4-ov"
        ov.mkdir(parents=True)
        (ov / "openvino_model.xml").write_text("<net/>")
        (ov / "openvino_model.bin").write_bytes(b"\0" * 64)
        rows = {r.id: r for r in run(tmp_path).models}
        assert set(rows) == {"qwen3-0.6b-onnx", "qwen3-8b-int4-ov-openvino"}
        assert rows["qwen3-0.6b-onnx"].foreign_evidence == "model.onnx, model_fp16.onnx, model_q4.onnx"

    def test_a_ggml_era_bin_is_a_row_and_any_other_bin_is_no_weight_file(self, tmp_path):
        folder = tmp_path / "models/TheBloke/Llama-2-7B-GGML"
        folder.mkdir(parents=True)
        (folder / "llama-2-7b.ggmlv3.q4_0.bin").write_bytes(b"tjgg" + b"\3\0\0\0" + b"\0" * 64)
        (folder / "pytorch_model.bin").write_bytes(b"PK\3\4" + b"\0" * 64)
        (row,) = run(tmp_path).models
        assert (row.id, row.foreign_format, row.foreign_evidence) == ("llama-2-7b.ggmlv3-q4_0", "ggml", "magic ggjt")

    def test_a_whisper_cpp_model_is_named_as_one_not_as_pre_gguf_llama_weights(self, tmp_path):
        """whisper.cpp's models still use the ggml magic; their hyperparameters tell them apart:
        a whisper row read by its header, while llama's pre-GGUF file stays skipped."""
        folder = tmp_path / "models/ggerganov/whisper.cpp"
        write_whisper(folder / "ggml-base.en.bin", "base", 6, 6, english=True)
        old_llama = struct.pack("<7i", 32000, 4096, 256, 32, 32, 128, 2)  # the unversioned ggml llama file
        (folder / "ggml-model-q4_0.bin").write_bytes(b"lmgg" + old_llama + b"\0" * 64)
        rows = {r.id: r for r in run(tmp_path).models}
        whisper, llama = rows["whisper-base.en"], rows["whisper.cpp-q4_0"]
        assert (whisper.format, whisper.foreign_format, whisper.quant) == ("whisper", "", "F16")
        assert llama.foreign_format == "ggml"
        assert foreign_reason(llama.foreign_format, llama.foreign_evidence).startswith(
            "GGML (pre-GGUF) weights (magic ggml): served by koboldcpp")


FOREIGN_SETTINGS = """roots: [models]
vram_budget_gb: 8
card_vram_gb: 0
backends:
  - {id: llama, kind: llama, path: /opt/llama/llama-server, default: true}
  - {id: vllm, kind: vllm, path: /opt/vllm/bin/vllm, version: "0.33.0"}
  - {id: tabby, kind: custom, path: /opt/tabby/start.sh}
"""


class TestACustomBackendClaimsAForeignFormat:
    def exl2(self, tmp_path):
        folder = tmp_path / "models/turboderp/Llama-3.1-8B-Instruct-exl2"
        write_config(folder, {**LLAMA_CONFIG, "quantization_config": {"quant_method": "exl2", "bits": 4.0}})
        write_safetensors(folder / "output.safetensors", 4096)
        return folder

    def config(self, tmp_path, extra=""):
        (tmp_path / "swapgen.yaml").write_text(FOREIGN_SETTINGS + extra)
        assert generate(tmp_path / "swapgen.yaml")[0] == 0
        return (tmp_path / "config.yaml").read_text()

    def test_unclaimed_it_is_skipped_with_the_format_and_its_engine_named(self, tmp_path):
        self.exl2(tmp_path)
        text = self.config(tmp_path)
        assert ('# SKIPPED "llama-3.1-8b-instruct-exl2": EXL2 weights (quant_method exl2): served by ExLlamaV2 '
                "(TabbyAPI), not by llama.cpp or vLLM; an override may pin a backend row of kind custom") in text

    def test_the_list_names_no_engine_for_it_until_a_custom_row_claims_it(self, tmp_path, capsys):
        self.exl2(tmp_path)
        self.config(tmp_path)
        capsys.readouterr()
        assert cli.main(["--settings", str(tmp_path / "swapgen.yaml"), "list", "--json"]) == 0
        (row,) = [r for r in json.loads(capsys.readouterr().out) if r["id"]]
        assert (row["engine"], row["backend"]) == (None, None) and row["skipped"].startswith("EXL2 weights")
        self.config(tmp_path, 'overrides:\n  - {match: "*exl2*", backend: tabby, extra_args: [--port, "${PORT}"]}\n')
        capsys.readouterr()
        assert cli.main(["--settings", str(tmp_path / "swapgen.yaml"), "list", "--json"]) == 0
        (row,) = [r for r in json.loads(capsys.readouterr().out) if r["id"]]
        assert row["backend"] == "tabby" and row["skipped"] is None

    def test_a_custom_pin_serves_it_with_the_users_command(self, tmp_path):
        folder = self.exl2(tmp_path)
        text = self.config(tmp_path, 'overrides:\n  - {match: "*exl2*", backend: tabby, '
                                     'extra_args: [--port, "${PORT}"]}\n')
        entry = YAML(typ="safe").load(text)["models"]["llama-3.1-8b-instruct-exl2"]
        assert entry["cmd"].split() == ["/opt/tabby/start.sh", str(folder), "--port", "${PORT}"]
        assert entry["metadata"]["format"] == "EXL2"

    def test_a_custom_pin_without_a_port_says_where_to_put_it(self, tmp_path):
        self.exl2(tmp_path)
        text = self.config(tmp_path, 'overrides:\n  - {match: "*exl2*", backend: tabby}\n')
        assert '# SKIPPED "llama-3.1-8b-instruct-exl2": backend tabby is of kind custom: its port flag' in text
