"""The little discovery needs from a model's header or config file, read through the metadata
cache: a no-op run answers these from the cache and opens no model file."""

from __future__ import annotations

import os
from collections.abc import Callable

from attrs import frozen

from autogen.errors import ModelError
from autogen.metadata.formats import config_format
from autogen.metadata.hf_config import hf_model_reason, hf_quant, meta_from_config_file, read_config_json
from autogen.metadata.model_meta import ModelMeta, meta_from_whisper
from autogen.metadata.safetensors_header import read_safetensors_size
from autogen.metadata.whisper_header import read_whisper_header

MODELOPT_CONFIG = "hf_quant_config.json"
#: PEFT's adapter config (peft `utils/constants.py` CONFIG_NAME).
ADAPTER_CONFIG = "adapter_config.json"


@frozen
class HeaderInfo:
    """What discovery needs from a GGUF or safetensors header (through the metadata cache)."""

    #: GGUF `general.architecture`; "" for safetensors.
    arch: str = ""
    #: Bytes the header says the file should have (0 = unknown).
    expected_size: int = 0
    #: The header could not be read: why.
    error: str | None = None
    #: Tensors the header declares; None = not known.
    tensor_count: int | None = None
    #: GGUF vision-tower and projector tensors (`v.*`, `mm.*`).
    vision_tensors: int = 0
    #: GGUF `general.type` ("model", "adapter", "imatrix", "mmproj"; "" when absent).
    general_type: str = ""
    #: GGUF adapters: "lora" or "control_vector" (`ModelMeta.adapter_type`).
    adapter_type: str = ""
    #: safetensors `__metadata__.format` ("pt", "mlx", …; "" when absent): who wrote the file.
    weights_format: str = ""
    #: The model's metadata (a GGUF header's, an HF folder's config.json), which discovery hands
    #: on so that nothing after it reads the file again; None = not read or not readable.
    meta: ModelMeta | None = None


#: Reads a weight file's header through the metadata cache: (path, size, mtime_ns) -> HeaderInfo.
HeaderProbe = Callable[[str, int, int], HeaderInfo]


def read_hf_meta(path: str) -> HeaderInfo:
    """An HF folder's metadata from its config.json (uncached), or why it cannot be read."""
    try:
        return HeaderInfo(meta=meta_from_config_file(path))
    except ModelError as exc:
        return HeaderInfo(error=str(exc))


def read_whisper_info(path: str) -> HeaderInfo:
    """A whisper.cpp model's shape as metadata (uncached) and the bytes its file has at least,
    or why it is no model whisper.cpp could load."""
    try:
        shape = read_whisper_header(path)
    except ModelError as exc:
        return HeaderInfo(error=str(exc))
    return HeaderInfo(arch="whisper", expected_size=shape.least_file_bytes, meta=meta_from_whisper(shape))


def read_safetensors_info(path: str) -> HeaderInfo:
    """A safetensors file's expected size (uncached), or why it is no safetensors file."""
    try:
        found = read_safetensors_size(path)
    except ModelError as exc:
        return HeaderInfo(error=str(exc))
    return HeaderInfo(expected_size=found.expected_size, tensor_count=found.tensor_count,
                      weights_format=found.weights_format)


@frozen
class ConfigInfo:
    """What discovery needs from an HF folder's `config.json`, or from the `hf_quant_config.json`
    beside it (through the metadata cache, so a no-op run opens neither)."""

    #: Not a servable model: why (BERT, T5, …); None for a causal LM.
    reason: str | None = None
    #: Quant label: the config's method or dtype; ModelOpt's `quant_algo` for hf_quant_config.json.
    quant: str = ""
    #: The file could not be read or parsed: why.
    error: str | None = None
    #: A weight format no configured engine loads (`metadata.formats`: "mlx", "exl2", …), and
    #: what in the config says so; "" for the formats vLLM loads.
    foreign: str = ""
    foreign_evidence: str = ""
    #: adapter_config.json: `base_model_name_or_path` and the LoRA rank `r`.
    adapter_base: str = ""
    adapter_rank: int = 0


#: Reads an HF config file through the metadata cache: (path, size, mtime_ns) -> ConfigInfo.
ConfigProbe = Callable[[str, int, int], ConfigInfo]


def read_config_info(path: str) -> ConfigInfo:
    """Read an HF config file (uncached): `config.json` → detection reason (docs/maintainers/discovery.md#hf-folders)
    and quant label (same section); `hf_quant_config.json` → ModelOpt's `quantization.quant_algo`
    ("FP8", "NVFP4"), "" when unreadable (config.json's own label then stands)."""
    if os.path.basename(path).lower() == ADAPTER_CONFIG:
        return _adapter_config(path)
    if os.path.basename(path).lower() == MODELOPT_CONFIG:
        try:
            algo = read_config_json(path).get("quantization", {}).get("quant_algo")
        except (ModelError, AttributeError):
            return ConfigInfo()
        return ConfigInfo(quant=algo.strip().upper() if isinstance(algo, str) else "")
    try:
        config = read_config_json(path)
    except ModelError as exc:
        return ConfigInfo(error=str(exc))
    foreign, evidence = config_format(config)
    return ConfigInfo(reason=hf_model_reason(config), quant=foreign.upper() if foreign else hf_quant(config),
                      foreign=foreign, foreign_evidence=evidence)


def _adapter_config(path: str) -> ConfigInfo:
    """A PEFT adapter's base model and rank (peft `LoraConfig`: `base_model_name_or_path`, `r`)."""
    try:
        config = read_config_json(path)
    except ModelError as exc:
        return ConfigInfo(error=str(exc))
    base, rank = config.get("base_model_name_or_path"), config.get("r")
    return ConfigInfo(reason=None, adapter_base=base.strip() if isinstance(base, str) else "",
                      adapter_rank=rank if type(rank) is int and rank > 0 else 0)
