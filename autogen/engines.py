"""What swapgen knows about each engine, one row per engine (`ENGINES`), and the two words every
stage uses: a model's *role* (what it is for) and the *engine* that serves it.

A backend row's `kind` is how the settings spell an engine (`llama.cpp`, `sd-server`, …);
`engine_of` reads it. Everything else about an engine is in its row: the roles its rows serve,
its emitter, the flags its command binds an address and sets slots with, the executable it runs
without a row, how it places and sizes, the formats it loads, how `swapgen backends detect`
probes its binary and how `swapgen calibrate` reads its log. Callers ask the row; only an
engine's own modules (its emitter, its sizer, llama.cpp's router preset) name it. Adding an
engine is one row here plus its emitter module (plus a probe where the GGML one does not fit,
and a log reader to be measured). Code a row names is a `module:function` reference under
`autogen` (`"emit.sd:emit_sd"`), imported on first use (`imported`), like vLLM's model and
tool-parser registries (vllm/model_executor/models/registry.py), so a run that plans nothing
imports no emitter, and a run that probes nothing no probe.

The device variables of a GPU pin (`CUDA_VISIBLE_DEVICES`, …) follow the build of the row, not
the engine: they are in `resolve.devices.VARIABLES`.
"""

from __future__ import annotations

import enum
import importlib
from typing import Any

from attrs import Factory, field, frozen


class Role(enum.StrEnum):
    """What a model is for (`resolve.roles.model_role`); `swapgen list` shows it as the model's
    class, and a backend row serves the roles of its engine."""

    LLM = "llm"
    EMBEDDING = "embedding"
    IMAGE = "image"
    TTS = "tts"
    ASR = "asr"
    SEGMENT = "segment"
    #: Registry-only roles: no model of these is discovered, no emitter serves them.
    UPSCALE = "upscale"
    THREE_D = "3d"

    def __repr__(self) -> str:  # part of doit keys: the value alone
        return repr(self.value)


class Engine(enum.StrEnum):
    """What serves a model; a kind outside every row's `kinds` is its own engine (a custom one)."""

    LLAMA = "llama"
    #: ik_llama.cpp's llama-server: a llama.cpp fork with flags of its own.
    IK_LLAMA = "ik_llama"
    VLLM = "vllm"
    SD = "sd"
    #: qwentts.cpp tts-server.
    TTS = "tts"
    #: TTS.cpp (Kokoro, Parler, Dia, Orpheus).
    TTSCPP = "ttscpp"
    #: parakeet.cpp parakeet-server.
    ASR = "asr"
    #: whisper.cpp whisper-server.
    WHISPER = "whisper"
    AUDIOCPP = "audiocpp"
    SAM = "sam"
    UPSCALE = "upscale"
    TRELLIS = "trellis"


@frozen
class EngineRow:
    """Everything about one engine. Example: the `Engine.SD` row of `ENGINES`."""

    #: Every `kind` spelling of its rows, lower case; any other kind is a settings error unless
    #: it is `custom`. Example: ("sd", "sd-server", "image").
    kinds: tuple[str, ...]
    #: The roles its rows serve; the ★ of a role is chosen among the rows serving it. Example:
    #: (Role.TTS, Role.ASR) for audio.cpp.
    roles: tuple[Role, ...]
    #: `module:function` under `autogen` (`imported`), an `EmitContext -> Plan`; None =
    #: registry-only (no model file, no command: a server shells out to it). Example:
    #: "emit.sd:emit_sd".
    emitter: str | None
    #: The executable its models run when no row gives a path. Example: "sd-server".
    exe: str
    #: The legacy slot (`resolve.backends.legacy_exes`) a model of its roles runs when no row
    #: serves them: its `exe` beside `server_exe`, or the settings key of that name, which its
    #: rows also fill. None: a model whose rows are all gone falls back to another engine's slot.
    legacy_slot: str | None = None
    #: The project a detected row's `component` names. Example: "stable-diffusion.cpp".
    component: str = ""
    #: The engine as an entry's `metadata.engine` and its footprint name it; its `component`
    #: unless set. Example: "sd-server".
    label: str = field(default=Factory(lambda row: row.component, takes_self=True))
    #: Executable names `swapgen backends detect` looks for. Example: ("sd-server",).
    binaries: tuple[str, ...] = ()
    #: How detect reads a found binary's version and build: `module:function` under `autogen`,
    #: an `(ask, path, real path) -> figures.probes.Probed`. Example: "figures.probes:probe_llama".
    probe: str = "figures.probes:probe_ggml"
    #: Detect names a found row `<engine>-<build>` ("llama-cuda"); False: the engine alone
    #: ("vllm", "vllm-2"), its build being its venv's torch.
    build_in_id: bool = True
    #: The flags its command binds an address with (llama-swap's `proxy` follows the last one).
    host_flags: tuple[str, ...] = ()
    #: The flags its command sets its slot count with (the entry's `concurrencyLimit`).
    slot_flags: tuple[str, ...] = ()
    #: A row of kind `custom` pinned by a model of its roles runs with this engine's emitter (the
    #: flags of its roles' forks are the same); False where the role's engines differ (llm).
    serves_custom_rows: bool = False
    #: Its rows serve only the models in its own format, which no other engine loads, and those
    #: models only its rows (audio.cpp); for its roles, the other models never see its rows.
    exclusive: bool = False
    #: Architectures of its roles it has no arm for, skipped with `unserved_reason`.
    unserved_archs: frozenset[str] = frozenset()
    #: The skip reason of such a model, formatted with its `arch`.
    unserved_reason: str = ""
    #: Chat entries get llama profiles (context tiers and named profiles).
    profiles: bool = False
    #: The comment line of an entry whose override asks for profiles it cannot have.
    no_profiles_note: str = ""
    #: A model on several GPUs splits its layers over them; one that loses nothing on its
    #: largest card alone runs there instead.
    splits_layers: bool = False
    #: Runs on one GPU whatever it is pinned to: of several cards, the largest is its placement.
    one_gpu: bool = False
    #: Runs on one GPU unless tensor-parallel, with a fraction of each card's memory: placed on
    #: the largest card(s) without a pin, sized against the card reading, and able to span hosts.
    per_card: bool = False
    #: How `swapgen calibrate` reads the memory its log reports: `module:name` under `autogen`, a
    #: `figures.logs.LogReader`; "" = its entries are not measured.
    log_reader: str = ""
    #: The binary beside its executable that estimates a command's memory without loading the
    #: weights (or a row's `fit_params`); "" = none. Example: "llama-fit-params".
    estimator: str = ""
    #: The server config its emitter writes beside a model's fragment (a missing one re-runs the
    #: model's task): `module:function` under `autogen`, `(cache_dir, model id) -> path`. Read
    #: for the models whose format asks for the engine, so only an exclusive engine has one.
    config_file: str = ""
    #: It serves a Hugging Face safetensors folder (`vllm serve DIR`); a folder resolved to an
    #: engine without it is skipped with the engine to add.
    hf_folders: bool = False
    #: The LoRA adapter formats its command loads (`Adapter.kind`): llama-server a GGUF
    #: (`--lora`), vLLM a PEFT folder (`--lora-modules`); discovery pairs a GGUF LoRA only with
    #: the models of an engine that loads one.
    lora_formats: tuple[str, ...] = ()
    #: A llama-server's command-line vocabulary (`flags.llama.LlamaFlags`): `module:name` under
    #: `autogen`; "" = not a llama-server. Example: "flags.ik_llama:IK".
    flags: str = ""
    #: What that llama-server allocates for a launch (`sizing.llama_memory.allocations` and
    #: its signature): `module:function` under `autogen`; "" = not a llama-server.
    memory: str = ""
    #: `swapgen backends detect` lets another engine of its roles found beside it take the ★:
    #: a fork users pin models to (ik_llama.cpp beside llama.cpp).
    star_second: bool = False

    @property
    def measured(self) -> bool:
        """`swapgen calibrate` starts its entries and reads the memory its log reports, and
        sizing follows those figures (`figures.plan`)."""
        return bool(self.log_reader)


#: One row per engine (docs/maintainers/backends.md#kinds-and-roles).
ENGINES: dict[Engine, EngineRow] = {
    Engine.LLAMA: EngineRow(
        kinds=("llama", "llama.cpp", "server"), roles=(Role.LLM, Role.EMBEDDING), emitter="emit.llama:emit_llama",
        exe="llama-server", legacy_slot="server_exe", component="llama.cpp", binaries=("llama-server",),
        probe="figures.probes:probe_llama", host_flags=("--host",), slot_flags=("-np", "--parallel"),
        profiles=True, splits_layers=True, log_reader="figures.logs:LLAMA_LOG", estimator="llama-fit-params",
        lora_formats=("gguf",), flags="flags.llama:MAINLINE", memory="sizing.llama_memory:allocations"),
    # The same emitter with its own vocabulary and allocations; no estimator in its tree, and its
    # binary has llama.cpp's name: the llama probe tells the two apart
    # (docs/maintainers/backends.md#ik_llamacpp-a-row-of-its-own).
    Engine.IK_LLAMA: EngineRow(
        kinds=("ik_llama", "ik_llama.cpp", "ik-llama", "ik-llama.cpp"), roles=(Role.LLM, Role.EMBEDDING),
        emitter="emit.llama:emit_llama", exe="llama-server", component="ik_llama.cpp",
        probe="figures.probes:probe_llama", host_flags=("--host",), slot_flags=("-np", "--parallel"),
        profiles=True, splits_layers=True, log_reader="figures.logs:IK_LLAMA_LOG", lora_formats=("gguf",),
        flags="flags.ik_llama:IK", memory="sizing.ik_llama_memory:ik_allocations", star_second=True),
    Engine.VLLM: EngineRow(
        kinds=("vllm",), roles=(Role.LLM,), emitter="emit.vllm:emit_vllm", exe="vllm", component="vllm",
        binaries=("vllm",), probe="figures.probes:probe_vllm", build_in_id=False, host_flags=("--host",),
        slot_flags=("--max-num-seqs",), no_profiles_note="vLLM entries have no profiles", per_card=True,
        log_reader="figures.logs:VLLM_LOG", hf_folders=True, lora_formats=("peft",)),
    Engine.SD: EngineRow(
        kinds=("sd", "sd-server", "image"), roles=(Role.IMAGE,), emitter="emit.sd:emit_sd", exe="sd-server",
        legacy_slot="sd_server_exe", component="stable-diffusion.cpp", label="sd-server", binaries=("sd-server",),
        host_flags=("-l", "--listen-ip"), serves_custom_rows=True,
        unserved_archs=frozenset({"ltxv", "hyvid", "cosmos", "mochi", "aura", "hidream"}),
        unserved_reason="diffusion model of arch {arch}: video and other DiTs have no sd-server arm here yet"),
    Engine.TTS: EngineRow(
        kinds=("tts", "tts-server", "speech"), roles=(Role.TTS,), emitter="emit.audio:emit_tts", exe="tts-server",
        legacy_slot="tts_server_exe", component="qwentts.cpp", binaries=("tts-server",),
        probe="figures.probes:probe_tts_server", host_flags=("--host",), serves_custom_rows=True),
    Engine.TTSCPP: EngineRow(
        kinds=("ttscpp", "tts.cpp", "kokoro"), roles=(Role.TTS,), emitter="emit.audio:emit_tts", exe="tts-server",
        component="tts.cpp", probe="figures.probes:probe_tts_server", host_flags=("--host",),
        serves_custom_rows=True),
    Engine.ASR: EngineRow(
        kinds=("asr", "parakeet", "parakeet-server", "transcribe"), roles=(Role.ASR,), emitter="emit.audio:emit_asr",
        exe="parakeet-server", legacy_slot="asr_server_exe", component="parakeet.cpp",
        binaries=("parakeet-server",), serves_custom_rows=True),
    Engine.WHISPER: EngineRow(
        kinds=("whisper", "whisper.cpp", "whisper-server"), roles=(Role.ASR,), emitter="emit.whisper:emit_whisper",
        exe="whisper-server", component="whisper.cpp", binaries=("whisper-server",),
        probe="figures.probes:probe_whisper", host_flags=("--host",), exclusive=True, one_gpu=True,
        log_reader="figures.logs:WHISPER_LOG"),
    Engine.AUDIOCPP: EngineRow(
        kinds=("audiocpp", "audio.cpp", "audiocpp-server"), roles=(Role.TTS, Role.ASR),
        emitter="emit.audio:emit_audiocpp", exe="audiocpp_server", component="audio.cpp",
        binaries=("audiocpp_server", "audiocpp-server"),
        host_flags=("--host",), serves_custom_rows=True, exclusive=True, config_file="emit.audio:audiocpp_config_path"),
    Engine.SAM: EngineRow(
        kinds=("sam", "sam3", "segment"), roles=(Role.SEGMENT,), emitter="emit.sam:emit_sam", exe="sam3_server",
        legacy_slot="sam_server_exe", component="sam3", label="sam3_server", binaries=("sam3_server",),
        host_flags=("--host",),
        serves_custom_rows=True),
    Engine.UPSCALE: EngineRow(
        kinds=("upscale", "realesrgan", "esrgan"), roles=(Role.UPSCALE,), emitter=None,
        exe="realesrgan-ncnn-vulkan", legacy_slot="upscale_exe"),
    Engine.TRELLIS: EngineRow(
        kinds=("trellis", "trellis2", "3d"), roles=(Role.THREE_D,), emitter=None, exe="trellis2-server",
        legacy_slot="trellis_server_exe"),
}

#: The kind of an engine swapgen does not know: never picked automatically, reachable by a pin.
CUSTOM_KIND = "custom"
#: What swapgen knows of an engine it does not know: nothing (no roles, no emitter, no flags).
CUSTOM = EngineRow(kinds=(CUSTOM_KIND,), roles=(), emitter=None, exe="")
#: Every kind spelling (lower case) → its engine.
ENGINE_OF_KIND: dict[str, Engine] = {kind: engine for engine, row in ENGINES.items() for kind in row.kinds}
#: A role whose models are served by the engines of another role's rows: an embedding model runs
#: on the ★ llm row's engine (llama-server `--embedding`), when that engine serves embeddings.
SERVED_AS: dict[Role, Role] = {Role.EMBEDDING: Role.LLM}


def imported(reference: str) -> Any:
    """What a row's `module:function` reference names under `autogen` ("emit.sd:emit_sd"), its
    module imported now, on first use (as vLLM's registries do): a run that needs none of an
    engine's code imports none of it."""
    module, name = reference.split(":")
    return getattr(importlib.import_module(f"autogen.{module}"), name)


def engine_of(kind: str) -> str:
    """The engine a kind names, matched case-insensitively after trimming ("llama.cpp" →
    "llama"); a custom kind is its own engine, normalised."""
    word = kind.strip().lower()
    engine = ENGINE_OF_KIND.get(word)
    return engine.value if engine is not None else word


def engine_row(engine: str) -> EngineRow:
    """The row of an engine (`Resolved.engine`, `Job.engine`); `CUSTOM` for one swapgen does not know."""
    return ENGINES.get(engine, CUSTOM)


def kind_roles(kind: str) -> tuple[Role, ...]:
    """Roles a kind's rows serve; () for a custom kind."""
    return engine_row(engine_of(kind)).roles


def role_label(roles: tuple[Role, ...]) -> str:
    """How messages name what a row serves: "tts/asr"; a role served as another is left out
    ("llm" for llama-server's llm and embedding)."""
    return "/".join(role for role in roles if role not in SERVED_AS)
