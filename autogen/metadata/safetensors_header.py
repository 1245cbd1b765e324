"""How long a safetensors file must be, read from its header alone (never the tensor data).

A safetensors file is an 8-byte little-endian header length N, N bytes of JSON mapping each
tensor to its `data_offsets` [begin, end) within the data that follows, then the data
(huggingface/safetensors `safetensors/src/tensor.rs`, `Metadata::validate`). So a complete
file measures 8 + N + the largest `end`, and a shorter one was cut short: an interrupted
download, or a preallocated file still being filled. The same reading tells a file that is
not safetensors at all (a header length of 0, past the format's 100 MB limit, or not JSON).
"""

from __future__ import annotations

import json
import struct

from attrs import frozen

from autogen.errors import ModelError
from autogen.metadata.hf_config import read_json_object

#: The format's own cap on the header (safetensors `MAX_HEADER_SIZE`).
MAX_HEADER_BYTES = 100_000_000
LENGTH_BYTES = 8
METADATA_KEY = "__metadata__"


@frozen
class SafetensorsSize:
    """What a safetensors header says about its file's size.

    Example: SafetensorsSize(expected_size=4_976_698_672, tensor_count=291).
    """

    #: 8 + header length + the end of the furthest tensor: what a complete file measures. When
    #: the file ends inside its header, the header's own end (the least it must measure).
    expected_size: int
    tensor_count: int = 0
    #: `__metadata__.format`: who wrote the file ("pt" for transformers, "mlx" for MLX, whose
    #: weights only mlx-lm loads); "exl2" whatever it says when the tensors are exllamav2's
    #: (`EXL2_TENSOR_SUFFIX`); "" when absent.
    weights_format: str = ""


#: exllamav2's quantized layers store the inverse of their row permutation under this name
#: (exllamav2 `linear.py`: `q_invperm`, beside `q_weight`, `q_scale`, `q_groups`); no format vLLM
#: loads writes it. exllamav2's converter adds `quant_method: exl2` to config.json only with
#: `-cf`, so many EXL2 folders say what they are by their tensors alone.
EXL2_TENSOR_SUFFIX = ".q_invperm"


def read_safetensors_size(path: str) -> SafetensorsSize:
    """The expected size of the safetensors file at `path`. Raises ModelError naming the file
    when it is no safetensors file or cannot be read."""
    try:
        with open(path, "rb") as f:
            prefix = f.read(LENGTH_BYTES)
            if len(prefix) < LENGTH_BYTES:
                return SafetensorsSize(expected_size=LENGTH_BYTES)
            (length,) = struct.unpack("<Q", prefix)
            if length == 0 or length > MAX_HEADER_BYTES:
                raise ModelError(f"{path}: not a safetensors file (header length {length}; "
                                 "a file still empty or preallocated by a downloader reads as 0)")
            raw = f.read(length)
    except OSError as exc:
        raise ModelError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if len(raw) < length:
        return SafetensorsSize(expected_size=LENGTH_BYTES + length)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        raise ModelError(f"{path}: not a safetensors file (its {length}-byte header is not JSON)") from None
    if not isinstance(header, dict):
        raise ModelError(f"{path}: not a safetensors file (its header is not a JSON object)")
    end, count, weights_format, exl2 = 0, 0, "", False
    for name, info in header.items():
        if name == METADATA_KEY:
            found = info.get("format") if isinstance(info, dict) else None
            weights_format = found.strip().lower() if isinstance(found, str) else ""
            continue
        offsets = info.get("data_offsets") if isinstance(info, dict) else None
        if (not isinstance(offsets, list) or len(offsets) != 2
                or not all(type(o) is int and o >= 0 for o in offsets) or offsets[0] > offsets[1]):
            raise ModelError(f"{path}: not a safetensors file (tensor {name!r} has no valid data_offsets)")
        end, count = max(end, offsets[1]), count + 1
        exl2 = exl2 or name.endswith(EXL2_TENSOR_SUFFIX)
    return SafetensorsSize(expected_size=LENGTH_BYTES + length + end, tensor_count=count,
                           weights_format="exl2" if exl2 else weights_format)


#: The index vLLM reads (transformers `SAFE_WEIGHTS_INDEX_NAME`): with it, vLLM loads only the
#: files its `weight_map` names (`filter_duplicate_safetensors_files`,
#: vllm/model_executor/model_loader/weight_utils.py), so a consolidated copy beside the shards
#: is neither loaded nor counted.
INDEX_NAME = "model.safetensors.index.json"
#: A real index is a few MB even for DeepSeek-V3's 163 shards.
MAX_INDEX_BYTES = 64 * 1024 * 1024


@frozen
class WeightIndex:
    """What `model.safetensors.index.json` names.

    Example: WeightIndex(files=("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"),
    total_size=16_060_522_496).
    """

    #: Every weight file of the model, relative to its folder, sorted.
    files: tuple[str, ...]
    #: `metadata.total_size`: tensor bytes of the whole model (0 = not given).
    total_size: int = 0


def read_weight_index(path: str) -> WeightIndex:
    """The files an index names. Raises ModelError naming the file when it is unreadable, not
    JSON, has no `weight_map`, or names a file outside its folder."""
    data = read_json_object(path, MAX_INDEX_BYTES, "a weight index")
    weight_map = data.get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map:
        raise ModelError(f"{path}: no weight_map naming the weight files")
    files = set()
    for name in weight_map.values():
        parts = name.replace("\\", "/").split("/") if isinstance(name, str) else [""]
        if not name or name.startswith("/") or any(p in ("", ".", "..") for p in parts):
            raise ModelError(f"{path}: weight_map names {name!r}, not a file inside the model folder")
        files.add(name)
    metadata = data.get("metadata")
    total = metadata.get("total_size") if isinstance(metadata, dict) else None
    return WeightIndex(files=tuple(sorted(files)), total_size=total if type(total) is int and total > 0 else 0)
