"""What a discovered model is for (its *role*) and which engine its format asks for first: the
one place that reads them from a model's format, header and name (the words: `engines`).
"""

from __future__ import annotations

import os
import re

from autogen.discovery.rows import ModelRow
from autogen.engines import ENGINES, Engine, Role
from autogen.metadata.model_meta import ModelMeta

#: GGUF architectures of encoder-only embedding models (pooling may be absent in old files).
EMBEDDING_ARCHS = frozenset({"bert", "nomic-bert", "nomic-bert-moe", "jina-bert-v2", "jina-bert-v3", "modern-bert",
                             "neo-bert", "t5encoder"})

#: Architectures sd-server serves, matched exactly or as a prefix (`flux.1`, `sd3.5`, `lumina2`);
#: docs/maintainers/classes.md#image-detection. `sd2` is deliberately absent, as upstream.
IMAGE_ARCHS = ("flux", "sd1", "sd3", "sdxl", "stable-diffusion", "qwen_image", "z_image", "lumina", "wan",
               "diffusion")
#: Diffusion architectures (ComfyUI-GGUF / sd.cpp converters) sd-server has no arm for: video DiTs
#: and DiTs sd.cpp does not load. Image models all the same, skipped with a reason rather than
#: handed to llama-server.
UNSERVED_DIFFUSION_ARCHS = ENGINES[Engine.SD].unserved_archs
#: The engine an HF (safetensors) folder asks for: the one whose row loads folders (vLLM).
FOLDER_ENGINE = next(engine for engine, row in ENGINES.items() if row.hf_folders)

# -- speech: qwentts.cpp, TTS.cpp, parakeet and audio.cpp (docs/maintainers/classes.md) --------------------

_QWENTTS_ARCHS = ("qwen3-tts", "qwentts")
#: TTS.cpp architectures (exact), and file-name tokens; bare "dia" is not a name token
#: ("Diamond-Coder" must stay an LLM).
TTSCPP_ARCHS = frozenset({"kokoro", "parler-tts", "parler_tts", "parler", "dia", "orpheus"})
_TTSCPP_NAME = re.compile(r"(?i)kokoro|parler[-_ ]?tts|orpheus")
_ASR_ARCHS = ("parakeet", "fastconformer", "conformer", "nemo-asr")
_ASR_NAME = re.compile(r"(?i)parakeet|nemotron[-_. 0-9]*(asr|speech)")


def _name(row: ModelRow) -> str:
    return os.path.basename(row.path)


def is_ttscpp_model(row: ModelRow, meta: ModelMeta | None) -> bool:
    arch = meta.arch if meta is not None else ""
    return arch in TTSCPP_ARCHS or _TTSCPP_NAME.search(_name(row)) is not None


def is_tts_model(row: ModelRow, meta: ModelMeta | None) -> bool:
    """Qwen3-TTS talkers (arch, or a bare-LM arch with `talker` in the name) and TTS.cpp models."""
    arch = meta.arch if meta is not None else ""
    return (arch.startswith(_QWENTTS_ARCHS) or "talker" in _name(row).lower()
            or is_ttscpp_model(row, meta))


def is_asr_model(row: ModelRow, meta: ModelMeta | None) -> bool:
    """Parakeet / FastConformer; a bare `nemotron` chat model stays an LLM."""
    arch = meta.arch if meta is not None else ""
    return arch.startswith(_ASR_ARCHS) or _ASR_NAME.search(_name(row)) is not None


def is_audiocpp_model(meta: ModelMeta | None) -> bool:
    """The header says so outright (arch `audiocpp` or a family key); no name heuristics."""
    return meta is not None and (meta.arch == "audiocpp" or bool(meta.audio_family))

#: Family → task ("tts", "asr", or "" = known but served by no role here). The Go original's
#: families (docs/maintainers/classes.md#audiocpp) plus audio.cpp's schema-2 samples (audio.cpp's `docs/integrators.md`:
#: kokoro_tts, chatterbox, qwen3_tts, cosyvoice3, fish_audio). Dual-task families choose tts.
AUDIOCPP_FAMILIES: dict[str, str] = {
    **dict.fromkeys(("moss_tts_nano", "qwen3_tts", "supertonic", "vibevoice", "chatterbox", "cosyvoice3",
                     "echo_tts", "f5_tts", "index_tts2", "kokoro_tts", "fish_audio", "firered_audio"), "tts"),
    **dict.fromkeys(("qwen3_asr", "nemotron_asr", "parakeet_tdt", "granite5asr", "vibevoice_asr",
                     "voxtral_realtime"), "asr"),
    **dict.fromkeys(("ace_step", "heartmula", "stable_audio", "htdemucs", "bs_roformer", "seed_vc", "rvc",
                     "miocodec", "mms_forced_aligner", "sortformer_diar", "personaplex", "minimax_h3",
                     "muscriptor"), ""),
}


def audiocpp_task(meta: ModelMeta | None) -> str:
    """"tts", "asr", or "" (unknown / unserved family); the model's role is asr or else tts."""
    family = meta.audio_family if meta is not None else ""
    return AUDIOCPP_FAMILIES.get(family, "")


# -- image -------------------------------------------------------------------------------------

def is_image_arch(arch: str) -> bool:
    arch = arch.strip().lower()
    return bool(arch) and arch.startswith(IMAGE_ARCHS)


def image_arch(meta: ModelMeta) -> str:
    """The declared arch when it is an image arch, else the UNet kind sniffed from tensor names
    (sd.cpp's converter strips metadata), else "diffusion" for `general.type: diffusion`."""
    if is_image_arch(meta.arch):
        return meta.arch
    if meta.diffusion_kind:
        return meta.diffusion_kind
    if meta.general_type == "diffusion":
        return "diffusion"
    return meta.arch


def is_image_model(meta: ModelMeta) -> bool:
    return is_image_arch(image_arch(meta))


def is_embedding_model(meta: ModelMeta | None) -> bool:
    """A pooling type in the header, or an encoder-only embedding architecture."""
    return meta is not None and (meta.pooling_type > 0 or meta.arch in EMBEDDING_ARCHS)


def model_role(row: ModelRow, meta: ModelMeta | None) -> Role:
    """First match wins: SAM and whisper.cpp models by their format, image before embedding,
    embedding before every audio role, audio.cpp (its header names the family: tts or asr by
    it, else tts) before the two legacy speech engines, TTS before LLM (a talker is a small qwen3)."""
    if row.format == "hf":
        return Role.LLM
    if row.format == "sam":
        return Role.SEGMENT
    if row.format == Engine.WHISPER:
        return Role.ASR
    if meta is None:
        return Role.LLM
    if meta.arch in UNSERVED_DIFFUSION_ARCHS or is_image_model(meta):
        return Role.IMAGE
    if is_embedding_model(meta):
        return Role.EMBEDDING
    if is_audiocpp_model(meta):
        return Role.ASR if audiocpp_task(meta) == "asr" else Role.TTS
    if is_tts_model(row, meta):
        return Role.TTS
    if is_asr_model(row, meta):
        return Role.ASR
    return Role.LLM


def preferred_engine(row: ModelRow, role: Role, meta: ModelMeta | None) -> Engine | None:
    """The engine the model's format asks for first (`resolve.backends.resolve_backend`'s
    `prefer`): vLLM for an HF folder (llama.cpp reads GGUF only), whisper.cpp for its GGML
    models, audio.cpp for its own GGUFs,
    TTS.cpp or qwentts.cpp for a TTS model by its format; None = the role's ★."""
    if row.format == "hf":
        return FOLDER_ENGINE
    if row.format == Engine.WHISPER:
        return Engine.WHISPER
    if role in (Role.TTS, Role.ASR) and is_audiocpp_model(meta):
        return Engine.AUDIOCPP
    if role == Role.TTS:
        return Engine.TTSCPP if is_ttscpp_model(row, meta) else Engine.TTS
    return None
