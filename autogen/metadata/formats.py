"""Weight formats no configured engine loads, and how a file or folder tells its format.

llama.cpp loads GGUF and vLLM loads Hugging Face safetensors (and GGUF through a plugin); the
formats below are neither, whatever their folder looks like. A model in one of them is
skipped with the format named and the kind of engine that serves it, never handed to an
engine that would fail to start; an override pinning a `custom` backend row may still claim
it (docs/model-files.md#what-is-never-served).
"""

from __future__ import annotations

from attrs import frozen

#: `config.json` `quantization_config.quant_method` values of formats only their own engines load.
FOREIGN_QUANT_METHODS = {"exl2": "exl2", "exl3": "exl3"}


@frozen
class ForeignFormat:
    """A weight format, who serves it, and what else to know.

    Example: ForeignFormat(name="EXL2", served_by="ExLlamaV2 (TabbyAPI)").
    """

    name: str
    served_by: str
    hint: str = ""


#: Format key (`ModelRow.foreign_format`) → what it is.
FOREIGN_FORMATS: dict[str, ForeignFormat] = {
    "mlx": ForeignFormat("MLX", "mlx-lm (mlx_lm.server) or LM Studio's MLX engine, on Apple silicon"),
    "exl2": ForeignFormat("EXL2", "ExLlamaV2 (TabbyAPI)"),
    "exl3": ForeignFormat("EXL3", "ExLlamaV3 (TabbyAPI)"),
    "onnx": ForeignFormat("ONNX", "ONNX Runtime (onnxruntime-genai) or Hugging Face Optimum"),
    "openvino": ForeignFormat("OpenVINO IR", "OpenVINO Model Server or optimum-intel"),
    "ggml": ForeignFormat("GGML (pre-GGUF)", "koboldcpp or a llama.cpp from before August 2023",
                          "llama.cpp's convert_llama_ggml_to_gguf.py converts it to GGUF"),
}


def foreign_reason(key: str, evidence: str) -> str:
    """"EXL2 weights (quant_method exl2): served by ExLlamaV2 (TabbyAPI), not by llama.cpp or
    vLLM; an override may pin a backend row of kind custom to serve them"."""
    fmt = FOREIGN_FORMATS[key]
    hint = f"; {fmt.hint}" if fmt.hint else ""
    return (f"{fmt.name} weights ({evidence}): served by {fmt.served_by}, not by llama.cpp or vLLM{hint}; "
            "an override may pin a backend row of kind custom to serve them")


def config_format(config: dict) -> tuple[str, str]:
    """(format key, evidence) an HF `config.json` declares, or ("", "") for a format vLLM loads.

    EXL2/EXL3: exllamav2/v3 write `quantization_config.quant_method` exl2/exl3. MLX: mlx-lm
    writes a `quantization` block ({"group_size": 64, "bits": 4}, also copied to
    `quantization_config`) without any `quant_method`, which every vLLM method has.
    """
    for key in ("quantization", "quantization_config"):
        block = config.get(key)
        if not isinstance(block, dict):
            continue
        method = block.get("quant_method")
        if isinstance(method, str):
            found = FOREIGN_QUANT_METHODS.get(method.strip().lower())
            if found:
                return found, f"quant_method {method.strip()}"
            continue
        if "bits" in block or "group_size" in block:
            return "mlx", f"{key} without quant_method, as mlx-lm writes it"
    return "", ""
