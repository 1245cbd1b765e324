"""Which text architectures a projector type serves, where llama.cpp's converter decides it.

A projector is trained with one text model; the width alone does not tell it from another as
wide (Qwen2.5-7B-Instruct, arch qwen2, is 3584 wide, as Qwen2.5-VL-7B's qwen2vl model is). For
the projector types below, convert_hf_to_gguf.py (llama.cpp b11434) writes the text model of every
checkpoint it writes that projector for under the architectures listed: the `MmprojModel` that
writes the type (`set_gguf_parameters`) is registered for the same Hugging Face architectures as
the `TextModel` whose `model_arch` is listed (`ModelBase.register`). So a model of another
architecture is not that projector's text model.

- `qwen2vl_merger`: conversion/qwenvl.py `Qwen2VLVisionModel` (model_type qwen2_vl), text
  `Qwen2VLModel` (qwen2vl); conversion/sarashina2.py `Sarashina2VLVisionModel` writes it too
  (forces qwen2_vl), text `Sarashina2VLTextModel` (llama).
- `qwen2.5vl_merger`, `qwen2.5o`: conversion/qwenvl.py `Qwen2VLVisionModel` (qwen2_5_vl) and
  `Qwen25OmniModel`, text `Qwen2VLModel` (qwen2vl); EXAONE 4.5's subclass writes its own type.
- `qwen3vl_merger`: conversion/qwen3vl.py `Qwen3VLVisionModel` for Qwen3-VL (`Qwen3VLTextModel`,
  qwen3vl), Qwen3-VL-MoE (`Qwen3VLMoeTextModel`, qwen3vlmoe), Qwen3.5 and OpenJev
  (`Qwen3_5TextModel`, `OpenJevModel`: qwen35), Qwen3.5-MoE (`Qwen3_5MoeTextModel`, qwen35moe);
  `Qwen3OmniMmprojModel` (text `Qwen3OmniMoeTextModel`, qwen3vlmoe) and `Qwen3ASRMmprojModel`
  (`Qwen3ASRTextModel`, qwen3vl); conversion/clef.py `ClefVisionModel` (`ClefModel`, clef);
  conversion/qwen4exp.py `Qwen4ExpVisionModel` (`Qwen4ExpTextModel`, qwen4exp). GLM-4V and
  Ling 3 subclasses write their own types.
- `gemma3`: conversion/gemma.py `Gemma3VisionModel`, text `Gemma3Model` (gemma3), registered
  for Gemma3ForCausalLM too, so a text-only finetune of Gemma 3 is gemma3 as well.
- `gemma3nv`, `gemma3na`: conversion/gemma.py `Gemma3nVisionAudioModel`, text `Gemma3NModel`.
- `gemma4v`, `gemma4a`, `gemma4uv`, `gemma4ua`: conversion/gemma.py `Gemma4VisionAudioModel` and
  `Gemma4UnifiedVisionAudioModel`, text `Gemma4Model` and `Gemma4UnifiedModel` (gemma4).
- `llama4`: conversion/llama4.py `Llama4VisionModel`, text conversion/llama.py `Llama4Model`.
- `glm4v`: conversion/qwen3vl.py `Glm4VVisionModel` for GLM-4.1V, GLM-4.5V and GLM-OCR, text
  conversion/glm.py `Glm4Model`, `GlmOCRModel` (glm4) and `Glm4MoeModel` (glm4moe).
- `kimivl`: conversion/kimivl.py `KimiVLModel`, text conversion/deepseek.py `DeepseekV2Model`
  (deepseek2; deepseek2-ocr only for the DeepSeek-OCR checkpoints).

Every other type is left open: llava's `mlp` and `ldp`, `pixtral`, `idefics3`, `internvl` and
the rest serve text models of many architectures (`LlavaVisionModel` alone is registered for
Llava and Mistral 3). `lfm2` is too: the converter registers no text class for
Lfm2VlForConditionalGeneration, so its text model's architecture comes from the checkpoint's
`text_config.architectures` (conversion/base.py `get_model_architecture`), not from llama.cpp.
That lookup is also how a checkpoint could route its text model elsewhere; the families above
are converted through their own registration.
"""

from __future__ import annotations

from collections.abc import Mapping

#: Projector type (`clip.projector_type`, as `VisionTower.projector_type` reads it) → the text
#: architectures (`general.architecture`) llama.cpp converts its text model to.
TEXT_ARCHS: Mapping[str, frozenset[str]] = {
    "qwen2vl_merger": frozenset({"qwen2vl", "llama"}),
    "qwen2.5vl_merger": frozenset({"qwen2vl"}),
    "qwen2.5o": frozenset({"qwen2vl"}),
    "qwen3vl_merger": frozenset({"qwen3vl", "qwen3vlmoe", "qwen35", "qwen35moe", "clef", "qwen4exp"}),
    "gemma3": frozenset({"gemma3"}),
    "gemma3nv": frozenset({"gemma3n"}),
    "gemma3na": frozenset({"gemma3n"}),
    "gemma4v": frozenset({"gemma4"}),
    "gemma4a": frozenset({"gemma4"}),
    "gemma4uv": frozenset({"gemma4"}),
    "gemma4ua": frozenset({"gemma4"}),
    "llama4": frozenset({"llama4"}),
    "glm4v": frozenset({"glm4", "glm4moe"}),
    "kimivl": frozenset({"deepseek2"}),
}


def text_archs(projector_type: str) -> frozenset[str]:
    """The architectures a projector of this type serves; empty: any (a type not in the table)."""
    return TEXT_ARCHS.get(projector_type.lower(), frozenset())


def serves(projector_type: str, arch: str) -> bool:
    """Whether a projector of `projector_type` may feed a text model of `arch` ("" = not known:
    it may, as a width not known may)."""
    archs = text_archs(projector_type)
    return not archs or not arch or arch.lower() in archs
