"""What a file in a model folder is: one ordered table of rules, walked once per file.

The file speaks first. For a GGUF, `general.type` and the architecture decide (gguf-py
`gguf/constants.py` `GGUFType`; llama.cpp's own checks: src/llama-adapter.cpp refuses a LoRA
whose `general.type` is not `adapter`, tools/imatrix writes `general.type = imatrix`,
convert_hf_to_gguf writes `mmproj` for a projector); a `.bin` says by its magic whether it is a
pre-GGUF GGML file. Name rules only break the ties the header leaves open: a file whose header
says "model" (or nothing) may still be an MTP draft, a TTS codec or a diffusion component by
its name. The first rule that matches decides (docs/maintainers/discovery.md#file-rules, which states each
rule in a sentence; `tests/test_discovery_rules.py` walks the table).
"""

from __future__ import annotations

import enum
import re
import struct
from collections.abc import Callable

from attrs import frozen

from autogen.metadata.gguf_keys import CONTROL_VECTOR_ARCH, PROJECTOR_ARCH, GGUFType
from autogen.metadata.probes import HeaderInfo


class Verdict(enum.StrEnum):
    """What discovery does with a file."""

    #: A model row.
    MODEL = "model"
    #: Shard 2..N of a split set: folded into the set shard 1 represents.
    SHARD = "shard"
    #: A vision/audio projector: `--mmproj` of every model of its folder.
    PROJECTOR = "projector"
    #: An MTP or DFlash draft head of the models of its folder.
    DRAFT = "draft"
    #: A TTS codec of the models of its folder (qwentts).
    CODEC = "codec"
    #: A LoRA adapter: offered as a profile of its base model (`discovery.pairing`).
    LORA = "lora"
    #: A SAM checkpoint (`.ggml`, no GGUF header): a segment row.
    SAM = "sam"
    #: A whisper.cpp model (GGML `.bin` with Whisper's hyperparameters): an asr row read by its
    #: header (`metadata.whisper_header`).
    WHISPER = "whisper"
    #: A Silero VAD model in whisper.cpp's format: `--vad-model` of the whisper models of its folder.
    VAD = "vad"
    #: A whisper.cpp encoder for Core ML or OpenVINO: named after the model it belongs to,
    #: never served (only a build with that framework loads it, by itself, from the model's path).
    ENCODER = "encoder"
    #: Weights in a format no configured engine loads: a row skipped with the format named,
    #: unless an override pins a `custom` backend (`metadata.formats`).
    FOREIGN = "foreign"
    #: Not a model: listed as ignored with the rule's reason.
    DROPPED = "dropped"
    #: Not a weight file at all (README, tokenizer, config): not listed.
    OTHER = "other"


@frozen
class FileFacts:
    """What the rules look at: the name, and, read at most once and only when a header rule
    asks, the GGUF header (`header`) or a `.bin`'s first bytes (`start`)."""

    name: str
    #: Reads the GGUF header through the metadata cache (never called for other files).
    read_header: Callable[[], HeaderInfo]
    #: Reads a `.bin` file's first `START_BYTES` bytes: a GGML magic and hyperparameters (b""
    #: when unreadable).
    read_start: Callable[[], bytes]

    @property
    def lower(self) -> str:
        return self.name.lower()

    @property
    def is_gguf(self) -> bool:
        return self.lower.endswith(".gguf")


@frozen
class Rule:
    """One row of the table: where its evidence comes from, the sentence docs/maintainers/discovery.md
    states, the test, the verdict, and what the file is (the start of its reason)."""

    source: str
    says: str
    test: Callable[[FileFacts, HeaderInfo | None], bool]
    verdict: Verdict
    what: str


# -- name patterns -------------------------------------------------------------------------------

SAM_NAME = re.compile(r"(?i)(sam2|sam3|edgetam|hiera)")
BIREFNET_NAME = re.compile(r"(?i)birefnet")
FAST_MTP_NAME = re.compile(r"(?i)(^|[-_.])fast[-_.]?mtp([-_.]|\.gguf$)")
MTP_DRAFT_NAME = re.compile(r"(?i)^mtp[-_.]")
DFLASH_DRAFT_NAME = re.compile(r"(?i)dflash")
CODEC_NAME = re.compile(r"(?i)tokenizer-?\d+hz|codec")
DIFFUSION_COMPONENT_NAME = re.compile(
    r"(?i)(^|[-_.])(t5xxl|t5[-_]?v1[-_.]?1|umt5|clip[-_]?[lg]|text[-_]?encoder|ae|vae|taesd[a-z0-9_]*)"
    r"([-_.]|\.gguf$)|[-_.](encoder|with[-_]?proj)([-_.]|\.gguf$)"
)
SHARD_NAME = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$")
#: optimum-intel's OpenVINO IR: `openvino_model.xml`, or one per part of a multimodal export
#: (`openvino_language_model.xml`, `openvino_vision_embeddings_model.xml`), weights in `.bin`.
OPENVINO_NAME = re.compile(r"(?i)^openvino_([a-z_]+_)?model\.xml$")
ONNX_SUFFIX = ".onnx"

#: Magic of the pre-GGUF formats, as the first 4 bytes of the file read them (llama.cpp's
#: convert_llama_ggml_to_gguf.py `GGMLFormat`: 'ggml', 'ggmf', 'ggjt'; 'ggla' for old LoRAs).
GGML_MAGICS = {b"lmgg": "ggml", b"fmgg": "ggmf", b"tjgg": "ggjt", b"algg": "ggla"}

#: What `FileFacts.read_start` reads: the magic and the first six hyperparameters.
START_BYTES = 28
#: whisper.cpp's GGML models (src/whisper.cpp `whisper_model_load`): the `ggml` magic, then
#: int32 hyperparameters n_vocab, n_audio_ctx, n_audio_state, n_audio_head, n_audio_layer,
#: n_text_ctx, …; every Whisper has an audio context of 1500 frames and a text context of 448.
WHISPER_CONTEXTS = (1500, 448)


#: whisper.cpp's Silero VAD models (src/whisper.cpp `whisper_vad_init_with_params`,
#: models/convert-silero-vad-to-ggml.py): the `ggml` magic, then the model type as an int32
#: length and its bytes ("silero-16k"), then its version.
VAD_TYPE = b"silero"
#: whisper.cpp's encoders for other frameworks, named after the model file
#: (`whisper_get_coreml_path_encoder`: the stem without a `-qX_Y` suffix + `-encoder.mlmodelc`, a
#: folder; `whisper_openvino_get_path_encoder`: the stem + `-encoder-openvino.xml` and its `.bin`,
#: compiled into `-encoder-openvino-cache`). Group 1: the model's stem; group 2: the framework part.
ENCODER_NAME = re.compile(r"(?i)^(.+)-encoder(\.mlmodelc|-openvino(?:\.xml|\.bin|-cache))$")
#: The framework of each encoder name ending.
ENCODER_FRAMEWORKS = {".mlmodelc": "Core ML", "-openvino.xml": "OpenVINO", "-openvino.bin": "OpenVINO",
                      "-openvino-cache": "OpenVINO"}


def ggml_magic(start: bytes) -> str:
    """The pre-GGUF format a file's first bytes name ("ggml", "ggjt", …), or ""."""
    return GGML_MAGICS.get(start[:4], "")


def is_whisper(start: bytes) -> bool:
    """A whisper.cpp model: the `ggml` magic and Whisper's two context lengths."""
    if len(start) < START_BYTES or ggml_magic(start) != "ggml":
        return False
    audio_ctx, text_ctx = struct.unpack_from("<i", start, 8)[0], struct.unpack_from("<i", start, 24)[0]
    return (audio_ctx, text_ctx) == WHISPER_CONTEXTS


def is_silero_vad(start: bytes) -> bool:
    """A Silero VAD model in whisper.cpp's format: the `ggml` magic and a model type "silero…"."""
    if ggml_magic(start) != "ggml" or len(start) < 8:
        return False
    length = struct.unpack_from("<i", start, 4)[0]
    return 0 < length <= len(start) - 8 and start[8:8 + length].startswith(VAD_TYPE)


def encoder_of(name: str) -> tuple[str, str] | None:
    """(the model stem an encoder file or folder belongs to, its framework), or None."""
    m = ENCODER_NAME.match(name)
    return (m.group(1), ENCODER_FRAMEWORKS[m.group(2).lower()]) if m else None


#: GGUF architectures of text encoders: never served, never paired.
ENCODER_ARCHS = frozenset({"t5encoder", "umt5", "t5"})

VOCAB_ONLY = ("vocabulary-only GGUF (llama.cpp --vocab-only output, no tensors), which llama-server refuses "
              "(tensor 'token_embd.weight' not found)")


def _type(h: HeaderInfo | None) -> str:
    return h.general_type if h is not None and h.error is None else ""


def _arch(h: HeaderInfo | None) -> str:
    return h.arch.lower() if h is not None and h.error is None else ""


def _no_tensors(f: FileFacts, h: HeaderInfo | None) -> bool:
    """No tensors, and not a shard of a set (`gguf-split --no-tensor-first-split` leaves shard 1
    without any; the set is checked as a whole)."""
    return h is not None and h.error is None and h.tensor_count == 0 and SHARD_NAME.search(f.name) is None


#: The rules, in the order they are tried. Header rules first: a GGUF's `general.type` and
#: architecture, a `.bin`'s magic. Then name rules, for what the header leaves open.
RULES: tuple[Rule, ...] = (
    Rule("header", "A GGUF whose general.type is adapter and adapter.type lora is a LoRA adapter.",
         lambda f, h: _type(h) == GGUFType.ADAPTER and h.adapter_type == "lora", Verdict.LORA, "LoRA adapter"),
    Rule("header", "A GGUF of architecture controlvector (llama.cpp's cvector-generator) is a control vector.",
         lambda f, h: _arch(h) == CONTROL_VECTOR_ARCH, Verdict.DROPPED,
         "control vector (llama-server applies one beside a model: --control-vector in its extra_args)"),
    Rule("header", "Any other adapter GGUF is an adapter llama-server loads only beside its model.",
         lambda f, h: _type(h) == GGUFType.ADAPTER, Verdict.DROPPED, "adapter whose adapter.type is not lora"),
    Rule("header", "A GGUF whose general.type is imatrix is an importance matrix.",
         lambda f, h: _type(h) == GGUFType.IMATRIX, Verdict.DROPPED,
         "importance matrix (llama-imatrix output, the input of llama-quantize --imatrix)"),
    Rule("header", "A GGUF whose general.type is mmproj, or whose architecture is clip, is a projector.",
         lambda f, h: _type(h) == GGUFType.MMPROJ or _arch(h) == PROJECTOR_ARCH, Verdict.PROJECTOR, "projector"),
    Rule("header", "A GGUF of architecture t5encoder, umt5 or t5 is a text encoder.",
         lambda f, h: _arch(h) in ENCODER_ARCHS, Verdict.DROPPED, "text encoder (arch {arch})"),
    Rule("header", "A GGUF without tensors that is not a shard of a set holds only a vocabulary.",
         _no_tensors, Verdict.DROPPED, VOCAB_ONLY),
    Rule("header", "A .bin file that starts with the ggml magic and Whisper's context lengths (audio 1500, text 448) "
                   "is a whisper.cpp model.",
         lambda f, h: f.lower.endswith(".bin") and is_whisper(f.read_start()), Verdict.WHISPER, "whisper.cpp model"),
    Rule("header", "A .bin file that starts with the ggml magic and a model type silero… is a Silero VAD model "
                   "for whisper.cpp.",
         lambda f, h: f.lower.endswith(".bin") and is_silero_vad(f.read_start()), Verdict.VAD, "Silero VAD model"),
    Rule("header", "A .bin file that starts with a GGML magic (ggml, ggmf, ggjt, ggla) is pre-GGUF GGML weights.",
         lambda f, h: f.lower.endswith(".bin") and ggml_magic(f.read_start()) != "", Verdict.FOREIGN, "ggml"),
    Rule("name", "A .ggml file named for SAM 2/3, EdgeTAM or Hiera is a SAM checkpoint.",
         lambda f, h: f.lower.endswith(".ggml") and SAM_NAME.search(f.name) is not None, Verdict.SAM, "SAM"),
    Rule("name", "A file named <model>-encoder-openvino.xml or .bin is whisper.cpp's OpenVINO encoder of that model.",
         lambda f, h: encoder_of(f.name) is not None, Verdict.ENCODER, "OpenVINO encoder"),
    Rule("name", "An .onnx file is an ONNX export.",
         lambda f, h: f.lower.endswith(ONNX_SUFFIX), Verdict.FOREIGN, "onnx"),
    Rule("name", "openvino_model.xml (or openvino_<part>_model.xml) is an OpenVINO IR export.",
         lambda f, h: OPENVINO_NAME.match(f.name) is not None, Verdict.FOREIGN, "openvino"),
    Rule("name", "Any other file that is not a .gguf is not a weight file.",
         lambda f, h: not f.is_gguf, Verdict.OTHER, "not a weight file"),
    Rule("name", "A GGUF whose header cannot be read and whose name starts with mmproj is a projector it cannot pair.",
         lambda f, h: h is not None and h.error is not None and f.lower.startswith("mmproj"), Verdict.DROPPED,
         "projector whose header cannot be read"),
    Rule("name", "A GGUF named for BiRefNet is TRELLIS's background remover.",
         lambda f, h: BIREFNET_NAME.search(f.name) is not None, Verdict.DROPPED,
         "BiRefNet background remover (TRELLIS's)"),
    Rule("name", "A GGUF named fast-mtp is a FastMTP head, neither a model nor a draft.",
         lambda f, h: FAST_MTP_NAME.search(f.name) is not None, Verdict.DROPPED,
         "FastMTP head (neither a model nor a draft llama-server loads)"),
    Rule("name", "A GGUF whose name starts with mtp-, mtp_ or mtp. is an MTP draft of its folder.",
         lambda f, h: MTP_DRAFT_NAME.search(f.name) is not None, Verdict.DRAFT, "MTP draft"),
    Rule("name", "A GGUF with dflash in its name is a DFlash draft of its folder.",
         lambda f, h: DFLASH_DRAFT_NAME.search(f.name) is not None, Verdict.DRAFT, "DFlash draft"),
    Rule("name", "A GGUF named tokenizer-<n>hz or codec is a TTS codec of its folder.",
         lambda f, h: CODEC_NAME.search(f.name) is not None, Verdict.CODEC, "TTS codec"),
    Rule("name", "A GGUF named for a diffusion component (t5xxl, umt5, clip_l, vae, ae, taesd, -encoder, "
                 "-with-proj) is part of an image pipeline.",
         lambda f, h: DIFFUSION_COMPONENT_NAME.search(f.name) is not None, Verdict.DROPPED,
         "diffusion component (encoder/VAE)"),
    Rule("name", "A GGUF named -NNNNN-of-TTTTT other than shard 00001 belongs to its split set.",
         lambda f, h: _later_shard(f.name), Verdict.SHARD, "shard of a split set"),
    Rule("name", "Any other GGUF is a model.", lambda f, h: True, Verdict.MODEL, "model"),
)


def _later_shard(name: str) -> bool:
    shard = SHARD_NAME.search(name)
    return shard is not None and int(shard.group(2)) > 1 and shard.group(1) != "00001"


def classify(facts: FileFacts) -> tuple[Rule, HeaderInfo | None]:
    """The first rule that matches, and the header it read (None when no rule needed it)."""
    header: HeaderInfo | None = None
    read = False
    for rule in RULES:
        if rule.source == "header" and facts.is_gguf and not read:
            header, read = facts.read_header(), True
        if rule.test(facts, header):
            return rule, header
    raise AssertionError("the last rule matches every file")
