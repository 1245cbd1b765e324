"""whisper.cpp's files of one folder and how they pair (docs/maintainers/discovery.md#whispercpp):
each model file, the Silero VAD model its server runs with, and the encoders that belong to it.

- A Silero VAD model (`ggml-silero-v6.2.0.bin`, models/download-vad-model.sh) goes with every
  whisper model of its folder, as a projector does with its folder's models; of several, the
  newest by name (numbers compared as numbers) pairs, and the others say so.
- An encoder for another framework is named after its model (src/whisper.cpp): Core ML's
  folder `<stem>-encoder.mlmodelc`, where the stem drops a `-qX_Y` quantization suffix, so one
  folder serves `ggml-base.en.bin` and `ggml-base.en-q5_1.bin` (`whisper_get_coreml_path_encoder`);
  OpenVINO's `<stem>-encoder-openvino.xml`, its `.bin` and its compiled `-encoder-openvino-cache`
  folder, for that exact stem (`whisper_openvino_get_path_encoder`). A build with the framework
  loads it by itself from the model's path: it is never an argument, and never served alone.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from attrs import frozen

from autogen.discovery.rules import encoder_of

#: `whisper_get_coreml_path_encoder`'s quantization suffix: "-q" + digit + "_" + digit.
CORE_ML_QUANT = re.compile(r"-q\d_\d$")
_NUMBERS = re.compile(r"(\d+)")


@frozen
class Sidecar:
    """A VAD model or an encoder file or folder: the row that takes it names it (`what of <id>`),
    else `unpaired` says why it is not served. Example: Sidecar("/m/ggml-silero-v5.1.2.bin",
    "Silero VAD model", "Silero VAD model, not paired: ggml-silero-v6.2.0.bin of this folder is newer")."""

    path: str
    what: str
    unpaired: str


@frozen
class WhisperFolder:
    """What a folder's whisper.cpp files pair up as."""

    #: The VAD model every whisper model of the folder runs with; None = none.
    vad: str | None
    #: Model file name → the encoder files and folders that belong to it.
    encoders: dict[str, tuple[str, ...]]
    sidecars: tuple[Sidecar, ...]


def _natural(name: str) -> tuple:
    """`ggml-silero-v10.0.0` after `ggml-silero-v6.2.0`: numbers compare as numbers."""
    return tuple(int(p) if p.isdigit() else p for p in _NUMBERS.split(name.lower()))


def _belongs(encoder: str, model: str) -> bool:
    """Whether the encoder file or folder named `encoder` is the model file `model`'s."""
    found = encoder_of(encoder)
    if found is None:
        return False
    stem, framework = found
    own = model[: -len(".bin")] if model.lower().endswith(".bin") else model
    return stem == own or (framework == "Core ML" and stem == CORE_ML_QUANT.sub("", own))


def pair_folder(folder: str, models: Sequence[str], vads: Sequence[str], encoders: Sequence[str]) -> WhisperFolder:
    """The module docstring's pairing of one folder's whisper models, VAD models and encoders
    (names in the folder)."""
    ordered = sorted(vads, key=_natural)
    vad = ordered[-1] if ordered and models else None
    sidecars = []
    for name in ordered:
        why = (f"Silero VAD model, not paired: {vad} of this folder is newer" if vad and name != vad else
               "Silero VAD model with no whisper.cpp model beside it, not served")
        sidecars.append(Sidecar(os.path.join(folder, name), "Silero VAD model", why))
    taken: dict[str, tuple[str, ...]] = {}
    for model in models:
        own = tuple(os.path.join(folder, e) for e in sorted(encoders) if _belongs(e, model))
        if own:
            taken[model] = own
    for name in sorted(encoders):
        stem, framework = encoder_of(name) or ("", "")
        sidecars.append(Sidecar(os.path.join(folder, name), f"{framework} encoder",
                                f"{framework} encoder of {stem}.bin, which is not in this folder; not served"))
    return WhisperFolder(vad=os.path.join(folder, vad) if vad else None, encoders=taken, sidecars=tuple(sidecars))
