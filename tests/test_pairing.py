"""Pairing once headers are read: LoRA adapters on their bases (GGUF profiles, PEFT modules of a
vLLM entry), drafts only on the very same vocabulary; what pairs nothing is listed, saying why."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from autogen.cmdline import split_command
from autogen.commands import cli, listing, tasks
from autogen.discovery.ledger import load_ledger
from autogen.discovery.pairing import adapter_name, family, lineage, pair_adapters, pair_drafts
from autogen.discovery.projector_archs import serves
from autogen.discovery.walk import walk_roots
from autogen.metadata.cache import MetaCache
from tests.clip_projectors import gemma3, llava15, qwen25vl, write_projector
from tests.gguf_fixtures import Q, write_gguf, write_lora, write_split_set
from tests.hf_fixtures import LLAMA_CONFIG, write_config, write_safetensors
from tests.runs import generate
from tests.shared import TOOLS, VLLM_VENV

QWEN_TOKENS = [f"Ġq{i:04d}" for i in range(512)]
LLAMA_TOKENS = [f"Ġl{i:04d}" for i in range(512)]
QWEN = ("gpt2", "qwen2")


def chat(path, *, blocks=8, embd=256, tokens=QWEN_TOKENS, tokenizer=QWEN, arch="qwen3", name="", special=None,
         **kw):
    """A chat GGUF with a real attention layout and tokenizer; `special`: its BOS/EOS keys."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    kv = {"{arch}.block_count": blocks, "{arch}.context_length": 8192, "{arch}.embedding_length": embd,
          "{arch}.attention.head_count": 4, "{arch}.attention.head_count_kv": 2, "{arch}.feed_forward_length": 4 * embd,
          **(special or {})}
    if name:
        kv["general.name"] = name
    tensors = [("token_embd.weight", (embd, len(tokens)), Q.Q8_0)]
    tensors += [(f"blk.{i}.attn_q.weight", (embd, embd), Q.Q8_0) for i in range(blocks)]
    return write_gguf(path, arch, kv=kv, tensors=tensors, tokens=tokens, tokenizer=tokenizer,
                      chat_template="{% for m in messages %}{{ m.content }}{% endfor %}{% if tools %}{% endif %}", **kw)


def paired(tmp_path, previous=None):
    """Discovery and pairing as a run does them; `previous`: the last run's ledger (`found.ledger`)."""
    cache = MetaCache(str(tmp_path / "cache"))
    walked = walk_roots((str(tmp_path / "models"),), cache.gguf, cache.config, safetensors=cache.safetensors,
                        previous=previous, hf_meta=cache.hf_meta)
    found = walked.discovery
    metas = {r.id: cache.meta(r.path, hf=r.format == "hf") for r in found.models if r.id not in found.row_errors}
    found = pair_drafts(pair_adapters(found, metas, cache.meta, previous=previous), walked.facts)
    return found, {r.id: r for r in found.models}


def listed(found) -> dict[str, tuple[str, bool]]:
    return {Path(i.path).name: (i.reason, i.attached) for i in found.ignored}


class TestNames:
    @pytest.mark.parametrize("fam, words", [("qwen_qwen3", {"qwen"}), ("meta-llama-3.1", {"meta", "llama"}),
                                            ("meta-llama_llama-3.2", {"llama"}), ("", set())])
    def test_a_familys_lineage_is_its_words_past_a_publisher_prefix(self, fam, words):
        assert lineage(fam) == words

    @pytest.mark.parametrize("model_id, fam", [("qwen3-32b-q4_k_m", "qwen3"), ("qwen2.5-coder-0.5b-instruct-q8_0",
                                                                                "qwen2.5-coder"),
                                               ("smollm2-135m-instruct-q8_0", "smollm2"), ("phi-4-q4_k_m", "")])
    def test_family_is_the_name_before_the_size(self, model_id, fam):
        assert family(model_id) == fam

    def test_adapter_name_drops_extension_and_quant(self):
        assert adapter_name("/l/Qwen3-8B-sql-LoRA-F16.gguf") == "qwen3-8b-sql-lora"
        assert adapter_name("/l/sql-lora/") == "sql-lora"


def projector(path, width, *, mmproj_type=True, kind="gemma3"):
    """A projector as convert_hf_to_gguf writes one: arch clip, `general.type = mmproj`, its
    `clip.projector_type` (`kind`), and the text model's width as `clip.vision.projection_dim`;
    `mmproj_type=False` is the older image-encoder converter's file, whose projection_dim is
    CLIP's own (768)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    kv = {"clip.has_vision_encoder": True, "clip.projector_type": kind,
          "clip.vision.projection_dim": width if mmproj_type else 768}
    if mmproj_type:
        kv["general.type"] = "mmproj"
    return write_gguf(path, "clip", kv=kv, tensors=[("v.patch_embd.weight", (14, 14, 3, 64), Q.F16),
                                                   ("mm.input_projection.weight", (64, width), Q.F16)])


class TestProjectors:
    """A projector goes to the models of its folder it fits: llama-server refuses a projector of
    another width ("mismatch between text model (n_embd = …) and mmproj")."""

    def test_a_flat_folder_gives_each_vision_model_its_own_projector(self, tmp_path):
        m = tmp_path / "models"
        chat(m / "gemma-3-4b-it-Q4_K_M.gguf", arch="gemma3", embd=256)
        chat(m / "gemma-3-12b-it-Q4_K_M.gguf", arch="gemma3", embd=384)
        chat(m / "Qwen3-8B-Q4_K_M.gguf", embd=512)
        small, big = projector(m / "mmproj-gemma-3-4b-it-F16.gguf", 256), projector(m / "mmproj-gemma-3-12b-it-F16.gguf", 384)
        found, rows = paired(tmp_path)
        assert rows["gemma-3-4b-it-q4_k_m"].mmproj == str(small) and str(small) in rows["gemma-3-4b-it-q4_k_m"].inputs
        assert rows["gemma-3-12b-it-q4_k_m"].mmproj == str(big) and str(small) not in rows["gemma-3-12b-it-q4_k_m"].inputs
        assert rows["qwen3-8b-q4_k_m"].mmproj is None  # a text model no projector fits
        assert listed(found) == {"mmproj-gemma-3-4b-it-F16.gguf": ("projector of gemma-3-4b-it-q4_k_m", True),
                                 "mmproj-gemma-3-12b-it-F16.gguf": ("projector of gemma-3-12b-it-q4_k_m", True)}

    def test_of_projectors_that_fit_the_name_closest_to_the_models_wins(self, tmp_path):
        """llama.cpp's own download cache keeps every repo's files side by side, prefixed."""
        m = tmp_path / "models"
        chat(m / "unsloth_Qwen2.5-VL-7B-Instruct-GGUF_Qwen2.5-VL-7B-Instruct-Q4_K_M.gguf", arch="qwen2vl")
        chat(m / "ggml-org_Qwen2.5-VL-72B-Instruct-GGUF_Qwen2.5-VL-72B-Instruct-Q4_K_M.gguf", arch="qwen2vl")
        seven = projector(m / "unsloth_Qwen2.5-VL-7B-Instruct-GGUF_mmproj-F16.gguf", 256, kind="qwen2.5vl_merger")
        seventy = projector(m / "ggml-org_Qwen2.5-VL-72B-Instruct-GGUF_mmproj-Qwen2.5-VL-72B-Instruct-f16.gguf", 256,
                            kind="qwen2.5vl_merger")
        _, rows = paired(tmp_path)
        by_name = {Path(r.path).name.split("_")[0]: r.mmproj for r in rows.values()}
        assert by_name == {"unsloth": str(seven), "ggml-org": str(seventy)}

    def test_several_quants_of_one_projector_pair_the_last_in_name_order(self, tmp_path):
        m = tmp_path / "models/unsloth/gemma-3-4b-it-GGUF"
        chat(m / "gemma-3-4b-it-Q4_K_M.gguf", arch="gemma3", embd=256)
        projector(m / "mmproj-BF16.gguf", 256)
        last = projector(m / "mmproj-F32.gguf", 256)
        found, rows = paired(tmp_path)
        assert rows["gemma-3-4b-it-q4_k_m"].mmproj == str(last)
        assert listed(found)["mmproj-BF16.gguf"] == (
            "projector not paired: each model beside it takes another projector (the name closest to its own, else the "
            "last in name order)", False)

    def test_a_projector_of_another_width_is_listed_saying_so(self, tmp_path):
        m = tmp_path / "models/acme/Vision-GGUF"
        chat(m / "Vision-7B-Q4_K_M.gguf", arch="gemma3", embd=256)
        projector(m / "mmproj-Vision-27B-F16.gguf", 512)
        found, rows = paired(tmp_path)
        assert rows["vision-7b-q4_k_m"].mmproj is None
        assert listed(found) == {"mmproj-Vision-27B-F16.gguf": (
            "projector for a text model 512 wide (its projection_dim), and no model beside it has that embedding "
            "length (256), not served", False)}

    def test_an_older_projector_whose_width_is_clips_pairs_as_before(self, tmp_path):
        """The old image-encoder converter wrote CLIP's projection_dim and no general.type: not a width to check."""
        m = tmp_path / "models/cjpais/llava-GGUF"
        chat(m / "llava-v1.6-mistral-7b.Q4_K_M.gguf", arch="llama", embd=256)
        old = projector(m / "mmproj-model-f16.gguf", 256, mmproj_type=False, kind="mlp")
        _, rows = paired(tmp_path)
        assert rows["llava-v1.6-mistral-7b-q4_k_m"].mmproj == str(old)


class TestProjectorArchitectures:
    """A projector whose type llama.cpp converts only with text models of certain architectures
    (`projector_archs`) feeds only those: the width alone pairs a text model as wide."""

    def test_a_text_model_as_wide_as_a_vision_models_projector_does_not_get_it(self, tmp_path):
        m = tmp_path / "models"
        chat(m / "Qwen2.5-7B-Instruct-Q4_K_M.gguf", arch="qwen2", embd=3584)
        chat(m / "Qwen2.5-VL-7B-Instruct-Q4_K_M.gguf", arch="qwen2vl", embd=3584)
        proj = write_projector(qwen25vl(), m / "mmproj-Qwen2.5-VL-7B-Instruct-f16.gguf")
        found, rows = paired(tmp_path)
        assert rows["qwen2.5-vl-7b-instruct-q4_k_m"].mmproj == str(proj)
        assert rows["qwen2.5-7b-instruct-q4_k_m"].mmproj is None
        assert str(proj) not in rows["qwen2.5-7b-instruct-q4_k_m"].inputs
        assert listed(found) == {proj.name: ("projector of qwen2.5-vl-7b-instruct-q4_k_m", True)}

    def test_the_text_model_wins_no_projector_even_when_its_name_is_closer(self, tmp_path):
        """The name rule ranks only the projectors a model may take."""
        m = tmp_path / "models"
        chat(m / "Qwen2.5-7B-Instruct-Q4_K_M.gguf", arch="qwen2", embd=3584)
        proj = projector(m / "mmproj-Qwen2.5-7B-Instruct-f16.gguf", 3584, kind="qwen2.5vl_merger")
        found, rows = paired(tmp_path)
        assert rows["qwen2.5-7b-instruct-q4_k_m"].mmproj is None
        assert listed(found) == {proj.name: (
            "projector of a qwen2vl model (qwen2.5vl merger); no model of that architecture beside it (qwen2), "
            "not served", False)}

    def test_a_projector_serving_several_architectures_names_them_all(self, tmp_path):
        m = tmp_path / "models"
        chat(m / "Qwen3-8B-Q4_K_M.gguf", arch="qwen3", embd=256)
        proj = projector(m / "mmproj-F16.gguf", 256, kind="glm4v")
        found, _ = paired(tmp_path)
        assert listed(found)[proj.name] == (
            "projector of a glm4 or glm4moe model (glm4v); no model of that architecture beside it (qwen3), "
            "not served", False)

    def test_a_gemma_3_finetune_still_gets_its_projector(self, tmp_path):
        """A finetune keeps its base's architecture, whatever its name: gemma3."""
        m = tmp_path / "models/someone/Fallen-Gemma3-4B-v1-GGUF"
        chat(m / "Fallen-Gemma3-4B-v1-Q4_K_M.gguf", arch="gemma3", embd=2560)
        proj = write_projector(gemma3(2560, "4b"), m / "mmproj-F16.gguf")
        found, rows = paired(tmp_path)
        assert rows["fallen-gemma3-4b-v1-q4_k_m"].mmproj == str(proj)
        assert listed(found) == {"mmproj-F16.gguf": ("projector of fallen-gemma3-4b-v1-q4_k_m", True)}

    def test_a_llava_projector_serves_any_architecture_as_wide(self, tmp_path):
        """llava's `mlp` projector feeds Vicuna (llama) and Mistral text models alike: not constrained."""
        m = tmp_path / "models"
        chat(m / "llava-v1.5-7b-Q4_K_M.gguf", arch="llama", embd=4096)
        chat(m / "Qwen2.5-VL-7B-Instruct-Q4_K_M.gguf", arch="qwen2vl", embd=3584)
        proj = write_projector(llava15(4096, "7b"), m / "mmproj-llava-v1.5-7b-f16.gguf")
        qwen = write_projector(qwen25vl(), m / "mmproj-Qwen2.5-VL-7B-Instruct-f16.gguf")
        _, rows = paired(tmp_path)
        assert rows["llava-v1.5-7b-q4_k_m"].mmproj == str(proj)
        assert rows["qwen2.5-vl-7b-instruct-q4_k_m"].mmproj == str(qwen)

    @pytest.mark.parametrize("arch", ["mistral3", "qwen2", "gemma3"])
    def test_an_unconstrained_projector_pairs_by_width_as_before(self, tmp_path, arch):
        m = tmp_path / "models"
        chat(m / "Some-Vision-Q4_K_M.gguf", arch=arch, embd=256)
        proj = projector(m / "mmproj-F16.gguf", 256, kind="pixtral")
        _, rows = paired(tmp_path)
        assert rows["some-vision-q4_k_m"].mmproj == str(proj)

    @pytest.mark.parametrize("kind, arch, fits", [("QWEN2.5VL_MERGER", "Qwen2VL", True), ("qwen2vl_merger", "llama", True),
                                                  ("qwen3vl_merger", "qwen35moe", True), ("gemma4v", "gemma3", False),
                                                  ("kimivl", "deepseek2", True), ("llama4", "llama", False),
                                                  ("lfm2", "llama", True), ("", "qwen2", True), ("gemma3", "", True)])
    def test_which_architectures_a_projector_type_serves(self, kind, arch, fits):
        assert serves(kind, arch) is fits


class TestLora:
    def test_a_lora_goes_to_the_base_its_header_names_with_its_shape(self, tmp_path):
        chat(tmp_path / "models/bartowski/Qwen3-8B-GGUF/Qwen3-8B-Q4_K_M.gguf", name="Qwen3 8B")
        chat(tmp_path / "models/bartowski/Qwen3-8B-GGUF/Qwen3-8B-Q8_0.gguf", name="Qwen3 8B")
        chat(tmp_path / "models/other/Other-8B-GGUF/Other-8B-Q4_K_M.gguf", name="Other 8B")  # same shape, other model
        lora = write_lora(tmp_path / "models/loras/Qwen3-8B-sql-LoRA-F16.gguf", "qwen3", blocks=8, embd=256, rank=16,
                          alpha=32, base=("Qwen3 8B", "Qwen", "https://huggingface.co/Qwen/Qwen3-8B"))
        found, rows = paired(tmp_path)
        for model_id in ("qwen3-8b-q4_k_m", "qwen3-8b-q8_0"):
            (adapter,) = rows[model_id].loras
            assert (adapter.name, adapter.rank, adapter.alpha, adapter.kind) == ("qwen3-8b-sql-lora", 16, 32.0, "gguf")
            assert str(lora) in rows[model_id].inputs
        assert rows["other-8b-q4_k_m"].loras == ()
        reason, attached = listed(found)["Qwen3-8B-sql-LoRA-F16.gguf"]
        assert attached and reason == ("LoRA adapter (rank 16, alpha 32) for qwen3-8b-q4_k_m, qwen3-8b-q8_0: offered as "
                                       "qwen3-8b-q4_k_m+qwen3-8b-sql-lora, qwen3-8b-q8_0+qwen3-8b-sql-lora")

    @pytest.mark.parametrize("shape", [dict(arch="llama"), dict(embd=128), dict(blocks=12)])
    def test_a_lora_of_another_architecture_width_or_depth_pairs_nothing(self, tmp_path, shape):
        chat(tmp_path / "models/q/Qwen3-8B-Q4_K_M.gguf", name="Qwen3 8B")
        args = {"arch": "qwen3", "embd": 256, "blocks": 8, **shape}
        write_lora(tmp_path / "models/q/Qwen3-8B-LoRA.gguf", args.pop("arch"), **args,
                   base=("Qwen3 8B", "Qwen", "https://huggingface.co/Qwen/Qwen3-8B"))
        found, rows = paired(tmp_path)
        assert rows["qwen3-8b-q4_k_m"].loras == ()
        reason, attached = listed(found)["Qwen3-8B-LoRA.gguf"]
        assert not attached and "its base Qwen3 8B" in reason and "is not in the library" in reason

    def test_a_lora_that_names_no_base_goes_to_the_models_beside_it(self, tmp_path):
        chat(tmp_path / "models/q/Qwen3-8B-Q4_K_M.gguf")
        chat(tmp_path / "models/elsewhere/Qwen3-8B-Q8_0.gguf")
        write_lora(tmp_path / "models/q/my-lora.gguf", "qwen3", blocks=8, embd=256)
        _, rows = paired(tmp_path)
        assert [a.name for a in rows["qwen3-8b-q4_k_m"].loras] == ["my-lora"] and rows["qwen3-8b-q8_0"].loras == ()

    def test_loras_of_one_base_that_share_a_file_name_are_each_offered_and_keep_their_ids(self, tmp_path):
        """convert_lora_to_gguf names its output after the model card (`Qwen3-8B-F16-LoRA.gguf`), so
        two adapters of one base share a name in their own folders: each gets a profile, and one
        that arrives later, sorting first, moves neither."""
        chat(tmp_path / "models/q/Qwen3-8B-Q4_K_M.gguf", name="Qwen3 8B")
        base = ("Qwen3 8B", "Qwen", "https://huggingface.co/Qwen/Qwen3-8B")
        sql = write_lora(tmp_path / "models/loras/sql/Qwen3-8B-F16-LoRA.gguf", "qwen3", blocks=8, embd=256, base=base)
        poet = write_lora(tmp_path / "models/loras/poet/Qwen3-8B-F16-LoRA.gguf", "qwen3", blocks=8, embd=256,
                          base=base)
        found, rows = paired(tmp_path)
        names = {a.path: a.name for a in rows["qwen3-8b-q4_k_m"].loras}
        assert names == {str(poet): "qwen3-8b-f16-lora", str(sql): "qwen3-8b-f16-lora-sql"}
        assert listed(found)["Qwen3-8B-F16-LoRA.gguf"][1]  # both attached, each saying its own profile
        assert {i.reason.rsplit(" ", 1)[1] for i in found.ignored} == {"qwen3-8b-q4_k_m+qwen3-8b-f16-lora",
                                                                      "qwen3-8b-q4_k_m+qwen3-8b-f16-lora-sql"}
        early = write_lora(tmp_path / "models/loras/art/Qwen3-8B-F16-LoRA.gguf", "qwen3", blocks=8, embd=256, base=base)
        _, rows = paired(tmp_path, previous=found.ledger)
        assert {a.path: a.name for a in rows["qwen3-8b-q4_k_m"].loras} == {**names, str(early): "qwen3-8b-f16-lora-art"}

    def test_a_lora_alone_is_listed_as_ignored_saying_why(self, tmp_path):
        write_lora(tmp_path / "models/loras/orphan-LoRA.gguf", "qwen3", blocks=8, embd=256)
        found, _ = paired(tmp_path)
        reason, attached = listed(found)["orphan-LoRA.gguf"]
        assert not attached and reason == (
            "LoRA adapter (rank 8, alpha 16): it names no base model, and no model of its shape (arch qwen3, "
            "width 256) sits beside it; llama-server and vLLM load an adapter only with its base model")


def peft(folder, base, rank=16):
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "adapter_config.json").write_text(json.dumps({
        "base_model_name_or_path": base, "peft_type": "LORA", "r": rank, "lora_alpha": 32,
        "target_modules": ["q_proj", "v_proj"], "task_type": "CAUSAL_LM"}))
    write_safetensors(folder / "adapter_model.safetensors", 1 << 20)
    return folder


def hf_base(tmp_path, size=1 << 20) -> Path:
    base = tmp_path / "models/meta-llama/Llama-3.1-8B-Instruct"
    write_config(base, LLAMA_CONFIG)
    write_safetensors(base / "model.safetensors", size)
    return base


class TestPeft:
    def test_a_peft_folder_joins_its_hf_base(self, tmp_path):
        hf_base(tmp_path)
        folder = peft(tmp_path / "models/loras/sql-lora", "meta-llama/Llama-3.1-8B-Instruct", rank=24)
        found, rows = paired(tmp_path)
        (adapter,) = rows["llama-3.1-8b-instruct-bf16"].loras
        assert (adapter.path, adapter.name, adapter.kind, adapter.rank) == (str(folder), "sql-lora", "peft", 24)
        assert str(folder / "adapter_config.json") in rows["llama-3.1-8b-instruct-bf16"].inputs
        assert listed(found)["sql-lora"] == (
            "PEFT LoRA adapter (rank 24) for llama-3.1-8b-instruct-bf16: served as LoRA module sql-lora of "
            "llama-3.1-8b-instruct-bf16", True)

    def test_a_module_name_names_one_adapter_and_stays_with_it(self, tmp_path):
        """llama-swap routes a module by alias, library-wide: the first `sql-lora` keeps the name,
        the next take `<base>+sql-lora`, then the folder's name; one arriving later moves none."""
        hf_base(tmp_path)
        other = tmp_path / "models/Qwen/Qwen3-8B"
        write_config(other, {**LLAMA_CONFIG, "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3"})
        write_safetensors(other / "model.safetensors", 1 << 20)
        peft(tmp_path / "models/loras/a/sql-lora", "meta-llama/Llama-3.1-8B-Instruct")
        peft(tmp_path / "models/loras/b/sql-lora", "Qwen/Qwen3-8B")
        peft(tmp_path / "models/loras/c/sql-lora", "Qwen/Qwen3-8B")
        found, rows = paired(tmp_path)
        assert [a.name for a in rows["llama-3.1-8b-instruct-bf16"].loras] == ["sql-lora"]
        assert [a.name for a in rows["qwen3-8b-bf16"].loras] == ["qwen3-8b-bf16+sql-lora", "sql-lora-c"]
        reasons = {Path(i.path).parent.name: (i.reason, i.attached) for i in found.ignored}
        assert reasons["c"] == ("PEFT LoRA adapter (rank 16) for qwen3-8b-bf16: served as LoRA module sql-lora-c of "
                                "qwen3-8b-bf16", True)
        peft(tmp_path / "models/loras/0/sql-lora", "meta-llama/Llama-3.1-8B-Instruct")  # sorts first
        _, rows = paired(tmp_path, previous=found.ledger)
        assert [a.name for a in rows["llama-3.1-8b-instruct-bf16"].loras] == ["llama-3.1-8b-instruct-bf16+sql-lora",
                                                                               "sql-lora"]
        assert {a.path.split("/")[-2]: a.name for a in rows["llama-3.1-8b-instruct-bf16"].loras}["a"] == "sql-lora"

    def test_a_peft_folder_without_its_base_is_listed(self, tmp_path):
        peft(tmp_path / "models/loras/sql-lora", "meta-llama/Llama-3.1-70B-Instruct")
        found, _ = paired(tmp_path)
        reason, attached = listed(found)["sql-lora"]
        assert not attached and "its base meta-llama/Llama-3.1-70B-Instruct is not in the library" in reason


class TestDrafts:
    def test_a_small_model_with_the_same_vocabulary_in_the_family_is_the_draft(self, tmp_path):
        chat(tmp_path / "models/bartowski/Qwen3-32B-GGUF/Qwen3-32B-Q4_K_M.gguf", blocks=16, embd=512)
        small = chat(tmp_path / "models/bartowski/Qwen3-0.6B-GGUF/Qwen3-0.6B-Q8_0.gguf", blocks=4, embd=64)
        chat(tmp_path / "models/bartowski/Qwen3-0.6B-GGUF/Qwen3-0.6B-Q4_0.gguf", blocks=4, embd=64,
             sparse_size=1 << 16)  # the same model, a smaller file: the Q8_0 wins
        _, rows = paired(tmp_path)
        draft = rows["qwen3-32b-q4_k_m"].spec_draft
        assert (draft.path, draft.model_id) == (str(small), "qwen3-0.6b-q8_0")
        assert draft.why == "same vocabulary (gpt2/qwen2, 512 tokens, identical token list), family qwen3"
        assert str(small) in rows["qwen3-32b-q4_k_m"].inputs
        assert rows["qwen3-0.6b-q8_0"].spec_draft is None  # nothing is a quarter of it

    @pytest.mark.parametrize("other", [
        dict(tokens=[*QWEN_TOKENS[:-1], "Ġdifferent"]),  # same count, one token differs
        dict(tokenizer=("gpt2", "llama-bpe")),  # same tokens, another pre-tokenizer
        dict(tokens=QWEN_TOKENS[:-1]),  # one token fewer
        dict(tokens=LLAMA_TOKENS, tokenizer=("gpt2", "llama-bpe"), arch="llama"),
        # the same tokens, another BOS added: llama-server refuses the pair ("draft model bos tokens must match")
        dict(special={"tokenizer.ggml.add_bos_token": True, "tokenizer.ggml.bos_token_id": 7}),
    ])
    def test_never_a_draft_with_another_vocabulary(self, tmp_path, other):
        chat(tmp_path / "models/q/Qwen3-32B-Q4_K_M.gguf", blocks=16, embd=512)
        chat(tmp_path / "models/q/Qwen3-0.6B-Q8_0.gguf", blocks=4, embd=64, **other)
        _, rows = paired(tmp_path)
        assert rows["qwen3-32b-q4_k_m"].spec_draft is None

    def test_the_same_bos_and_eos_draft_and_the_reason_says_them(self, tmp_path):
        special = {"tokenizer.ggml.add_bos_token": True, "tokenizer.ggml.bos_token_id": 1,
                   "tokenizer.ggml.add_eos_token": False, "tokenizer.ggml.eos_token_id": 2}
        chat(tmp_path / "models/q/Qwen3-32B-Q4_K_M.gguf", blocks=16, embd=512, special=special)
        chat(tmp_path / "models/q/Qwen3-0.6B-Q8_0.gguf", blocks=4, embd=64,
             special={**special, "tokenizer.ggml.eos_token_id": 3})  # an EOS never added is not compared
        _, rows = paired(tmp_path)
        assert rows["qwen3-32b-q4_k_m"].spec_draft.why == (
            "same vocabulary (gpt2/qwen2, 512 tokens, adds BOS 1, adds no EOS, identical token list), same folder")

    def test_a_model_too_close_in_size_is_no_draft(self, tmp_path):
        chat(tmp_path / "models/q/Qwen3-8B-Q4_K_M.gguf", blocks=8, embd=256)
        chat(tmp_path / "models/q/Qwen3-4B-Q4_K_M.gguf", blocks=8, embd=192)  # 56% of its parameters
        _, rows = paired(tmp_path)
        assert rows["qwen3-8b-q4_k_m"].spec_draft is None

    def test_a_related_family_drafts_elsewhere_the_same_family_first(self, tmp_path):
        """Llama 3.2 1B is the usual draft of Llama 3.1 8B; bartowski spells Qwen's models `Qwen_Qwen3-…`."""
        m = tmp_path / "models"
        llama = {"tokens": LLAMA_TOKENS, "tokenizer": ("gpt2", "llama-bpe"), "arch": "llama"}
        chat(m / "bartowski/Meta-Llama-3.1-8B-Instruct-GGUF/Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf", **llama)
        small = chat(m / "bartowski/Llama-3.2-1B-Instruct-GGUF/Llama-3.2-1B-Instruct-Q8_0.gguf", blocks=4, embd=64,
                     **llama)
        chat(m / "Qwen/Qwen3-4B-GGUF/Qwen3-4B-Q4_K_M.gguf")
        tiny = chat(m / "bartowski/Qwen_Qwen3-0.6B-GGUF/Qwen_Qwen3-0.6B-Q8_0.gguf", blocks=4, embd=64)
        same = chat(m / "unsloth/Qwen3-1.7B-GGUF/Qwen3-1.7B-Q8_0.gguf", blocks=4, embd=96)
        _, rows = paired(tmp_path)
        draft = rows["meta-llama-3.1-8b-instruct-q4_k_m"].spec_draft
        assert draft.path == str(small) and draft.why.endswith(", related family llama-3.2")
        assert rows["qwen3-4b-q4_k_m"].spec_draft.path == str(same)  # its own family before a related one
        same.unlink()
        _, rows = paired(tmp_path)
        assert rows["qwen3-4b-q4_k_m"].spec_draft.path == str(tiny)

    def test_a_split_set_takes_a_draft_and_is_none(self, tmp_path):
        folder = tmp_path / "models/unsloth/Qwen3-235B-A22B-GGUF/Q4_K_M"
        folder.mkdir(parents=True)
        kv = {"{arch}.block_count": 8, "{arch}.context_length": 8192, "{arch}.embedding_length": 512,
              "{arch}.attention.head_count": 4, "{arch}.attention.head_count_kv": 2,
              "tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "qwen2", "tokenizer.ggml.tokens": QWEN_TOKENS}
        tensors = [("token_embd.weight", (512, len(QWEN_TOKENS)), Q.Q8_0)]
        tensors += [(f"blk.{i}.attn_q.weight", (512, 512), Q.Q8_0) for i in range(8)]
        write_split_set(folder, "Qwen3-235B-A22B-Q4_K_M", "qwen3", shards=2, kv=kv, tensors=tensors)
        small = chat(tmp_path / "models/unsloth/Qwen3-0.6B-GGUF/Qwen3-0.6B-Q8_0.gguf", blocks=4, embd=64)
        _, rows = paired(tmp_path)
        assert rows["qwen3-235b-a22b-q4_k_m"].spec_draft.path == str(small)
        chat(tmp_path / "models/Qwen3-1000B-Q4_K_M.gguf", blocks=64, embd=1024)  # the set is never a draft itself
        _, rows = paired(tmp_path)
        assert rows["qwen3-1000b-q4_k_m"].spec_draft.path == str(small)

    def test_a_same_vocabulary_model_of_another_family_elsewhere_is_no_draft(self, tmp_path):
        chat(tmp_path / "models/a/Qwen3-32B-Q4_K_M.gguf", blocks=16, embd=512)
        chat(tmp_path / "models/b/Tiny-0.5B-Q8_0.gguf", blocks=4, embd=64)
        _, rows = paired(tmp_path)
        assert rows["qwen3-32b-q4_k_m"].spec_draft is None


SETTINGS = """roots: [models]
vram_budget_gb: 8
card_vram_gb: 0
backends:
  - {id: llama, kind: llama, path: /opt/llama/llama-server, default: true}
  - {id: vllm, kind: vllm, path: /opt/vllm/bin/vllm, version: "0.33.0"}
"""


def config_of(tmp_path, settings=SETTINGS):
    (tmp_path / "swapgen.yaml").write_text(settings)
    assert generate(tmp_path / "swapgen.yaml")[0] == 0
    return YAML(typ="safe").load((tmp_path / "config.yaml").read_text()), (tmp_path / "config.yaml").read_text()


def argv(entry) -> list[str]:
    return entry["cmd"].split()


class TestEmitted:
    @pytest.mark.parametrize("name, value", [
        ("Qwen3-32B-sql,v2-LoRA-F16.gguf", '"{folder}/Qwen3-32B-sql,v2-LoRA-F16.gguf"'),
        ("Qwen3-32B-sql-v2-LoRA-F16.gguf", "{folder}/Qwen3-32B-sql-v2-LoRA-F16.gguf"),
    ])
    def test_a_lora_file_name_with_a_comma_is_one_quoted_field(self, tmp_path, name, value):
        """llama-server reads `--lora` as comma-separated fields (quoted ones kept whole)."""
        chat(tmp_path / "models/q/Qwen3-32B-Q4_K_M.gguf", blocks=16, embd=512, name="Qwen3 32B")
        write_lora(tmp_path / "models/q" / name, "qwen3", blocks=16, embd=512, rank=16,
                   base=("Qwen3 32B", "Qwen", "https://huggingface.co/Qwen/Qwen3-32B"))
        config, _ = config_of(tmp_path)
        (entry,) = (m for mid, m in config["models"].items() if "+" in mid)
        cmd = split_command(entry["cmd"])
        assert cmd[cmd.index("--lora") + 1] == value.format(folder=tmp_path / "models" / "q")

    def test_lora_and_draft_profiles_run_what_they_say(self, tmp_path):
        chat(tmp_path / "models/q/Qwen3-32B-Q4_K_M.gguf", blocks=16, embd=512, name="Qwen3 32B")
        draft = chat(tmp_path / "models/q/Qwen3-0.6B-Q8_0.gguf", blocks=4, embd=64)
        lora = write_lora(tmp_path / "models/q/Qwen3-32B-sql-LoRA-F16.gguf", "qwen3", blocks=16, embd=512, rank=16,
                          base=("Qwen3 32B", "Qwen", "https://huggingface.co/Qwen/Qwen3-32B"))
        config, _ = config_of(tmp_path)
        models = config["models"]
        base, with_lora, drafted = (models[k] for k in ("qwen3-32b-q4_k_m", "qwen3-32b-q4_k_m+qwen3-32b-sql-lora",
                                                        "qwen3-32b-q4_k_m-draft"))
        assert "--lora" not in argv(base) and "-md" not in argv(base)
        cmd = argv(with_lora)
        assert cmd[cmd.index("--lora") + 1] == str(lora)
        assert with_lora["metadata"]["size_gb"] > base["metadata"]["size_gb"]
        cmd = argv(drafted)
        assert cmd[cmd.index("-md") + 1] == str(draft) and cmd[cmd.index("-ngld") + 1] == "5"
        assert cmd[cmd.index("--spec-type") + 1] == "draft-simple"
        assert (cmd[cmd.index("--spec-draft-n-max") + 1], cmd[cmd.index("--spec-draft-n-min") + 1]) == ("3", "0")
        assert drafted["metadata"]["est_vram_gb"] > base["metadata"]["est_vram_gb"]

    def test_show_finds_a_lora_profile_by_its_id(self, tmp_path, capsys):
        chat(tmp_path / "models/q/Qwen3-8B-Q4_K_M.gguf", name="Qwen3 8B")
        write_lora(tmp_path / "models/q/Qwen3-8B-sql-LoRA-F16.gguf", "qwen3", blocks=8, embd=256)
        config_of(tmp_path)
        capsys.readouterr()
        assert cli.main(["--settings", str(tmp_path / "swapgen.yaml"), "show", "qwen3-8b-q4_k_m+qwen3-8b-sql-lora"]) == 0
        out = capsys.readouterr().out
        assert out.startswith("qwen3-8b-q4_k_m  (llm)") and "argv of qwen3-8b-q4_k_m+qwen3-8b-sql-lora" in out

    def test_a_profile_id_stays_with_its_lora_and_a_renamed_one_is_said(self, tmp_path, capfd):
        chat(tmp_path / "models/q/Qwen3-8B-Q4_K_M.gguf", name="Qwen3 8B")
        base = ("Qwen3 8B", "Qwen", "https://huggingface.co/Qwen/Qwen3-8B")
        first = write_lora(tmp_path / "models/loras/zz/Qwen3-8B-F16-LoRA.gguf", "qwen3", blocks=8, embd=256, base=base)
        config_of(tmp_path)
        write_lora(tmp_path / "models/loras/aa/Qwen3-8B-F16-LoRA.gguf", "qwen3", blocks=8, embd=256, base=base)
        config, _ = config_of(tmp_path)
        cmd = argv(config["models"]["qwen3-8b-q4_k_m+qwen3-8b-f16-lora"])
        assert cmd[cmd.index("--lora") + 1] == str(first)
        assert "qwen3-8b-q4_k_m+qwen3-8b-f16-lora-aa" in config["models"]
        capfd.readouterr()
        first.rename(first.with_name("Qwen3-8B-sql-F16-LoRA.gguf"))
        config, _ = config_of(tmp_path)
        assert "qwen3-8b-q4_k_m+qwen3-8b-sql-f16-lora" in config["models"]
        assert (f"swapgen: warning: id 'qwen3-8b-f16-lora' is now 'qwen3-8b-sql-f16-lora': {first} was renamed to "
                f"{first.with_name('Qwen3-8B-sql-F16-LoRA.gguf')}; clients that use the old id must change"
                in capfd.readouterr().err)

    def test_an_override_turns_the_draft_off_or_pins_one_and_a_mismatch_is_refused(self, tmp_path):
        chat(tmp_path / "models/q/Qwen3-32B-Q4_K_M.gguf", blocks=16, embd=512)
        chat(tmp_path / "models/q/Qwen3-0.6B-Q8_0.gguf", blocks=4, embd=64)
        chat(tmp_path / "elsewhere/Llama-3.2-1B-Q8_0.gguf", blocks=4, embd=64, tokens=LLAMA_TOKENS,
                     tokenizer=("gpt2", "llama-bpe"), arch="llama")
        off = SETTINGS + 'overrides:\n  - {match: "*Qwen3-32B*", draft: none}\n'
        config, _ = config_of(tmp_path, off)
        assert "qwen3-32b-q4_k_m-draft" not in config["models"]
        pinned = SETTINGS + 'overrides:\n  - {match: "*Qwen3-32B*", draft: elsewhere/Llama-3.2-1B-Q8_0.gguf}\n'  # the settings' folder
        config, text = config_of(tmp_path, pinned)
        assert "qwen3-32b-q4_k_m-draft" not in config["models"]
        assert ('# SKIPPED "qwen3-32b-q4_k_m-draft": draft Llama-3.2-1B-Q8_0.gguf has another vocabulary '
                "(gpt2/llama-bpe, 512 tokens) than the model (gpt2/qwen2, 512 tokens)") in text

    def test_a_gguf_lora_on_a_base_vllm_serves_is_listed_not_offered(self, tmp_path):
        """vLLM loads PEFT folders only: a GGUF LoRA of a base pinned to vLLM makes no profile, and its line says why."""
        chat(tmp_path / "models/q/Qwen3-32B-Q4_K_M.gguf", blocks=16, embd=512, name="Qwen3 32B")
        write_lora(tmp_path / "models/q/Qwen3-32B-sql-LoRA-F16.gguf", "qwen3", blocks=16, embd=512,
                   base=("Qwen3 32B", "Qwen", "https://huggingface.co/Qwen/Qwen3-32B"))
        config, _ = config_of(tmp_path, SETTINGS + 'overrides:\n  - {match: "*Qwen3-32B-Q4*", backend: vllm}\n')
        assert [k for k in config["models"] if "+" in k] == []
        graph = tasks.load(str(tmp_path / "swapgen.yaml"))
        try:
            lines = {Path(r.path).name: (r.kind, r.skipped) for r in listing.rows(graph) if not r.task}
        finally:
            graph.close()
        assert lines["Qwen3-32B-sql-LoRA-F16.gguf"] == (
            "ignored", "LoRA adapter (rank 8, alpha 16): its base qwen3-32b-q4_k_m (vllm) is not served by "
            "llama-server, the one engine that loads a GGUF LoRA (vLLM takes PEFT adapter folders); llama-server "
            "and vLLM load an adapter only with its base model")

    def test_a_peft_adapter_is_a_lora_module_and_an_alias_of_its_vllm_base(self, tmp_path):
        hf_base(tmp_path, 1 << 30)
        folder = peft(tmp_path / "models/loras/sql-lora", "meta-llama/Llama-3.1-8B-Instruct", rank=24)
        config, _ = config_of(tmp_path)
        entry = config["models"]["llama-3.1-8b-instruct-bf16"]
        cmd = argv(entry)
        assert cmd[cmd.index("--enable-lora") + 1:cmd.index("--enable-lora") + 5] == [
            "--lora-modules", f"sql-lora={folder}", "--max-lora-rank", "32"]
        assert entry["aliases"] == ["sql-lora"]

    def test_a_second_run_re_emits_nothing(self, tmp_path):
        chat(tmp_path / "models/q/Qwen3-32B-Q4_K_M.gguf", blocks=16, embd=512, name="Qwen3 32B")
        chat(tmp_path / "models/q/Qwen3-0.6B-Q8_0.gguf", blocks=4, embd=64)
        write_lora(tmp_path / "models/q/Qwen3-32B-sql-LoRA-F16.gguf", "qwen3", blocks=16, embd=512)
        peft(tmp_path / "models/loras/sql-lora", "meta-llama/Llama-3.1-8B-Instruct")
        config_of(tmp_path)
        graph = tasks.load(str(tmp_path / "swapgen.yaml"))
        assert tasks.run_doit(graph, []) == 0 and graph.stats["emitted"] == 0
        assert load_ledger(str(tmp_path / "cache")).ids


ARGCHECK = TOOLS / "vllm-argcheck" / "vllm_argcheck.py"


@pytest.mark.slow
@pytest.mark.skipif(not (VLLM_VENV / "bin" / "python").exists() or not ARGCHECK.exists(),
                    reason=f"no vLLM CPU venv at {VLLM_VENV} (build it with vllm-argcheck/vllm_cpu_env.sh)")
def test_vllms_own_parser_reads_the_lora_modules(tmp_path):
    """vLLM 0.33.0's `vllm serve` parser takes `--enable-lora --lora-modules name=path
    --max-lora-rank r` as written, one module per adapter."""
    hf_base(tmp_path, 1 << 30)
    sql = peft(tmp_path / "models/loras/sql-lora", "meta-llama/Llama-3.1-8B-Instruct", rank=24)
    chat_lora = peft(tmp_path / "models/loras/chat,lora", "meta-llama/Llama-3.1-8B-Instruct", rank=8)
    config, _ = config_of(tmp_path)
    entry = config["models"]["llama-3.1-8b-instruct-bf16"]
    argv = split_command(entry["cmd"])
    assert argv[argv.index("--lora-modules") + 1:argv.index("--max-lora-rank") + 2] == [
        json.dumps({"name": "chat-lora", "path": str(chat_lora)}), f"sql-lora={sql}", "--max-lora-rank", "32"]
    refused = [*argv[:argv.index("--max-lora-rank") + 1], "24", *argv[argv.index("--max-lora-rank") + 2:]]
    lines = "".join(shlex.join(a) + "\n" for a in (argv, refused))
    proc = subprocess.run([str(VLLM_VENV / "bin" / "python"), str(ARGCHECK), "--json"], input=lines,
                          capture_output=True, text=True, timeout=600)
    results = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert [r["ok"] for r in results] == [True, False], proc.stdout + proc.stderr  # 24 is no rank vLLM accepts


def test_a_lora_module_named_like_another_model_is_no_alias(tmp_path):
    hf_base(tmp_path)
    peft(tmp_path / "models/loras/Qwen3-0.6B", "meta-llama/Llama-3.1-8B-Instruct")
    chat(tmp_path / "models/q/Qwen3-0.6B.gguf", blocks=4, embd=64)
    config, text = config_of(tmp_path)
    entry = config["models"]["llama-3.1-8b-instruct-bf16"]
    assert "aliases" not in entry and "qwen3-0.6b=" in entry["cmd"]
    assert "# alias qwen3-0.6b left out: another model has that id" in text
