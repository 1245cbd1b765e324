"""The shape of `swapgen.yaml`: frozen classes every later stage reads, and the keyword tables
their values are checked against.

`settings.load` reads the file and `settings.structure` turns it into these classes; past that
edge there are no dicts. Each key is declared once, with its check and what it invalidates
(`settings.fields`); the llama options a profile, an override and the top level share are
declared once, in `LlamaOptions` and `ProfileOptions`.
"""

from __future__ import annotations

from typing import Any

from attrs import frozen

from autogen.settings.fields import (
    CONFIG,
    EVERY_FRAGMENT,
    FRACTION,
    NONBLANK,
    PER_MATCH,
    PER_MODEL,
    WALK,
    Check,
    int_range,
    number_range,
    one_of,
    setting,
)

#: llama-server b11434 `-ctk/-ctv` values (`llama-server --help`); `metadata.kvcost.KV_TYPE_BYTES`
#: holds their widths, and a test keeps the two in step.
LLAMA_KV_TYPES = ("f32", "f16", "bf16", "q8_0", "q5_1", "q5_0", "q4_1", "q4_0", "iq4_nl")
FLASH_ATTN_MODES = ("on", "off", "auto")
#: ik_llama.cpp `-mla` values (common/common.h `mla_attn`: 0 per-head K/V, 1 latent and V^T,
#: 2 the latent alone, 3 the latent with K and V decompressed for prompts).
IK_MLA_MODES = (0, 1, 2, 3)
#: `vllm_distributed:` values: a Ray cluster, or vLLM's multiprocessing executor over nodes.
VLLM_DISTRIBUTED = ("ray", "mp")
#: `mmproj:` keywords; any other non-empty string is a projector path.
MMPROJ_MODES = ("auto", "none", "cpu", "gpu")
#: The VRAM budget in GiB a model is sized to when neither the settings nor a card reading give one.
DEFAULT_BUDGET_GB = 8.0
#: `routing:` values besides null (`Settings.routing`).
ROUTING_MODES = ("auto",)

#: `target:` values: the router the output is written for.
LLAMA_SWAP, LLAMA_SERVER = "llama-swap", "llama-server"
TARGETS = (LLAMA_SWAP, LLAMA_SERVER)
#: `output` when the settings do not name it, per target.
DEFAULT_OUTPUT = {"llama-swap": "config.yaml", "llama-server": "models.ini"}
#: With `target: llama-server`, the `llama_swap:` keys that have a router counterpart: the
#: preloads (`load-on-startup`), the unload timeout (`stop-timeout`) and, per model, aliases.
PRESET_LLAMA_SWAP_KEYS = ("hooks", "unloadTimeout")
PRESET_MODEL_LLAMA_SWAP_KEYS = ("aliases", "unloadTimeout")
#: `polling:` values under `watch:` (`Watch.polling`).
POLLING_MODES = ("auto", "always", "never")
#: A `path_map` value that serves a folder under its host path.
KEEP_PATH = "keep"

# Numbers (docs/settings.md#numbers): every numeric key has a finite range, so no value can
# overflow what reads it: the engines parse counts as a C `int`, llama-swap's Go `int` is
# 64-bit, and the sizers turn GiB into bytes. Each bound says where it comes from.
#: A C `int`: what llama-server's numeric options parse (`std::stoi`, common/arg.cpp). As seconds
#: (68 years) it stays far below where llama-swap's `time.Duration(n) * time.Second` overflows.
INT32_MAX = (1 << 31) - 1
#: GiB of VRAM (a budget, a card, a host's cards): 64 TiB, above a 72-GPU rack's 13.5 TiB.
MAX_VRAM_GIB = 65536
#: Tokens per slot: 16 Mi, above the longest context any model is trained for (10 Mi).
MAX_CTX = 1 << 24
#: llama.cpp's `LLAMA_MAX_SEQ` (src/llama-cparams.h): the most slots one llama-server runs.
MAX_SLOTS = 256
#: ggml's `GGML_MAX_N_THREADS` (ggml/include/ggml.h): the most threads a ggml engine runs.
MAX_THREADS = 512
#: The highest GPU index (CUDA and HIP number a host's devices from 0).
MAX_GPU_INDEX = 1023
#: sd-server sampling steps, far above the 1–150 image models are tuned for.
MAX_STEPS = 10_000
MAX_CFG_SCALE = 100
#: Pixels on an image side (a 16384² image is 768 MiB of RGB).
MAX_IMAGE_SIDE = 16_384
#: Seconds for `watch:` waits: a day.
MAX_WAIT_SECONDS = 86_400

VRAM_BUDGET = number_range(0, MAX_VRAM_GIB, above=True)
VRAM_READING = number_range(0, MAX_VRAM_GIB)
CONTEXT = int_range(1, MAX_CTX)
SLOTS = int_range(1, MAX_SLOTS)
THREADS = int_range(1, MAX_THREADS)
#: A number above the model's layers means all of them, so any `int` llama-server parses.
GPU_LAYERS = int_range(0, INT32_MAX)
GPU_INDEX = int_range(0, MAX_GPU_INDEX)
#: GPUs in one tensor-parallel group: at most one per GPU index.
TENSOR_PARALLEL = int_range(1, MAX_GPU_INDEX + 1)

#: `output_mode:` values: the whole llama-swap file, or a `-config-dir` fragment of it.
OUTPUT_MODES = ("full", "fragment")
#: Override fields naming a diffusion component file; "none" (any case) drops the component
#: (mirrors `emit.sd.OVERRIDE_FIELD`).
SD_COMPONENT_FIELDS = ("vae", "clip_l", "clip_g", "t5xxl", "llm_text_encoder")


@frozen
class BackendRow:
    """One installed engine. `id` is what an override's `backend:` pins.

    Example: BackendRow(id="llama-cuda", kind="llama", path="/opt/llama/bin/llama-server",
    default=True, build="cuda").
    """

    id: str = setting(check=NONBLANK)
    #: How the settings spell the engine (`engines.EngineRow.kinds`), or `custom`.
    kind: str = setting(check="kind")
    path: str = setting(check=NONBLANK)
    name: str = ""
    #: The ★: this row is the automatic pick for its roles.
    default: bool = False
    #: Installed version, e.g. "0.11.0" (vLLM gates flags on it).
    version: str = ""
    #: Written by `swapgen backends detect` (never edit by hand; rewritten on detect).
    managed: bool = False
    component: str = ""
    #: Build flavour: "cuda", "rocm", "vulkan", "cpu", … (settings key `variant`, its spelling
    #: in every backends file; `build` below was taken).
    build: str = setting("", key="variant")
    #: A derived row for one installed build of a component (pin it by id); settings key `build`.
    derived: bool = setting(False, key="build")
    #: llama rows: the build's `llama-fit-params` when it is not beside `path`; "none" = never
    #: ask it (docs/maintainers/sizing.md#exact-numbers-for-your-machine). Example: "/opt/llama/bin/llama-fit-params".
    fit_params: str = ""
    #: vllm rows: its models sleep between requests instead of stopping, through llama-swap's
    #: `vllm-wrapper` (docs/vllm-sleep.md); an override's `vllm_sleep` wins.
    sleep: bool = False


@frozen
class LlamaOptions:
    """llama-server options of a GGUF chat model, declared once: the top level sets them for
    every model, an override for its models, a profile for its entry; the nearest one wins. A new
    option is one line here (`settings.fields`)."""

    kv_type: str | None = setting(None, check=one_of(LLAMA_KV_TYPES), outputs=(EVERY_FRAGMENT,),
                                  knobs=("cache_type_k", "cache_type_v"), kw_only=True)
    parallel: int | None = setting(None, check=SLOTS, outputs=(EVERY_FRAGMENT,), knobs=("parallel",),
                                   kw_only=True)
    flash_attn: str | None = setting(None, check=one_of(FLASH_ATTN_MODES, "expected on, off or auto"),
                                     outputs=(EVERY_FRAGMENT,), knobs=("flash_attn",), kw_only=True)
    threads: int | None = setting(None, check=THREADS, outputs=(EVERY_FRAGMENT,), knobs=("threads",),
                                  kw_only=True)
    # ik_llama.cpp's own options (docs/ik-llama.md); a llama.cpp row leaves them out with a note
    #: `-mla` of DeepSeek-style (MLA) models; None = ik_llama.cpp's default, 3.
    mla: int | None = setting(None, check=int_range(min(IK_MLA_MODES), max(IK_MLA_MODES)), outputs=(EVERY_FRAGMENT,),
                              knobs=("mla",), kw_only=True)
    #: False writes `-no-fmoe` (the fused MoE path is ik_llama.cpp's default).
    fused_moe: bool | None = setting(None, outputs=(EVERY_FRAGMENT,), knobs=("fused_moe",), kw_only=True)
    #: True writes `-rtr`: weights repacked for the CPU at load, read without mmap.
    run_time_repack: bool | None = setting(None, outputs=(EVERY_FRAGMENT,), knobs=("run_time_repack",),
                                           kw_only=True)


@frozen
class ProfileOptions(LlamaOptions):
    """What a profile and an override both set, declared once (a profile is the override with the
    fields it sets replaced: `emit.llama_profiles`)."""

    #: Per-slot context, e.g. 65536.
    ctx: int | None = setting(None, check=CONTEXT, knobs=("ctx",), kw_only=True)
    #: VRAM budget in GiB for this model (or profile).
    vram_budget_gb: float | None = setting(None, check=VRAM_BUDGET, kw_only=True)
    ngl: int | None = setting(None, check=GPU_LAYERS, knobs=("ngl",), kw_only=True)
    #: Experts of the first N layers on the CPU (`--n-cpu-moe N`; N ≥ the layer count = all of
    #: them); the rest of the placement is sized around it.
    n_cpu_moe: int | None = setting(None, check=GPU_LAYERS, knobs=("n_cpu_moe",), kw_only=True)
    #: "auto" | "none" | "cpu" | "gpu" | a projector path.
    mmproj: str | None = setting(None, check=Check(lambda v: v.strip() != "",
                                             "expected auto, none, cpu, gpu or a projector path"),
                                 knobs=("mmproj", "mmproj_offload"), kw_only=True)
    #: Appended verbatim; a flag here replaces our generated flag of the same meaning.
    extra_args: tuple[str, ...] = setting((), check="shell words", kw_only=True)
    unlisted: bool = setting(False, kw_only=True)


@frozen
class Profile(ProfileOptions):
    """A named llama profile of one model: `<id>-<slug(name)>` (docs/settings.md#profiles-profile;
    settings keys `profiles`, `default_profiles`)."""

    name: str = setting(check=NONBLANK)


@frozen
class Override(ProfileOptions):
    """Per-model knobs; the first row whose `match` glob fits the model's path wins."""

    #: Glob on the model's full path: case-insensitive, `*` crosses folders, `?` one char.
    match: str = setting(check=NONBLANK)
    quant: str | None = None
    skip: bool = False
    #: Registry id to pin; a stale id falls back to automatic resolution.
    backend: str | None = None
    vllm_gpu_util: float | None = setting(None, check=FRACTION)
    vllm_tensor_parallel: int | None = setting(None, check=TENSOR_PARALLEL)
    vllm_tokenizer: str | None = None
    #: "none" turns the tool-call parser off; anything else is used verbatim.
    vllm_tool_parser: str | None = None
    #: True: this vLLM model sleeps between requests (vLLM's sleep mode through llama-swap's
    #: `vllm-wrapper`); False: it stops; None = its backend row's `sleep`.
    vllm_sleep: bool | None = None
    #: Fleet hosts (names of the front's `hosts:`) whose GPUs run this vLLM model's workers,
    #: node ranks 1, 2, … in this order; this host is the head (rank 0). Example: ("gpu-b",).
    vllm_nodes: tuple[str, ...] = ()
    #: How the nodes of `vllm_nodes` connect: "ray" (a Ray cluster) or "mp" (vLLM's own
    #: `--nnodes`/`--headless` workers); None = ray.
    vllm_distributed: str | None = setting(None, check=one_of(VLLM_DISTRIBUTED))
    devices: tuple[int, ...] | None = setting(None, check=GPU_INDEX)
    #: The speculative-decoding draft of the `-draft` profile: a GGUF path, or "none" for no
    #: draft profile; None = the one discovery pairs (same vocabulary, smaller, same family).
    draft: str | None = setting(None, check=Check(lambda v: v.strip() != "",
                                                  "expected none or the path of a draft GGUF"))
    #: whisper.cpp: the Silero VAD model its server runs with (`--vad --vad-model`), or "none" for
    #: no VAD; None = the one discovery pairs from the model's folder.
    vad_model: str | None = setting(None, check=Check(lambda v: v.strip() != "",
                                                      "expected none or the path of a Silero VAD model"))
    #: Extra llama profiles of this model with a fixed per-slot context each, `<id>-64k`.
    ctx_profiles: tuple[int, ...] = setting((), check=CONTEXT, older="ctx_variants")
    #: Named llama profiles of this model (added before the settings' `default_profiles`).
    profiles: tuple[Profile, ...] = setting((), older="variants")
    # sd-server (image) knobs; component paths win over `encoders`, "none" drops the component
    #: VAE, e.g. "/models/flux/ae.safetensors".
    vae: str | None = setting(None, check=NONBLANK)
    #: CLIP-L / CLIP-G text encoders (Flux.1 needs CLIP-L), e.g. "/models/clip_l.safetensors".
    clip_l: str | None = setting(None, check=NONBLANK)
    clip_g: str | None = setting(None, check=NONBLANK)
    #: T5-XXL text encoder (Flux.1, Chroma), e.g. "/models/t5xxl_fp16.safetensors".
    t5xxl: str | None = setting(None, check=NONBLANK)
    #: LLM text encoder (`--llm`: Z-Image, Qwen-Image, Flux.2), e.g. "/models/Qwen3-4B-Q8_0.gguf".
    llm_text_encoder: str | None = setting(None, check=NONBLANK)
    #: LoRA folder for sd-server (default: the model's own folder).
    lora_dir: str | None = setting(None, check=NONBLANK)
    #: true/false pins sd-server's `--offload-to-cpu` (default: from the budget).
    offload_to_cpu: bool | None = None
    #: Keep the VAE / text encoders on the CPU (defaults: false / true).
    vae_on_cpu: bool | None = None
    te_on_cpu: bool | None = None
    #: sd-server savers `--diffusion-fa` / `--vae-tiling` (default: on).
    diffusion_fa: bool | None = None
    vae_tiling: bool | None = None
    #: sd-server generation defaults (`--steps`, `--cfg-scale`, `--sampling-method`, size).
    steps: int | None = setting(None, check=int_range(1, MAX_STEPS))
    cfg_scale: float | None = setting(None, check=number_range(0, MAX_CFG_SCALE, above=True))
    sampling_method: str | None = setting(None, check=NONBLANK)
    width: int | None = setting(None, check=int_range(1, MAX_IMAGE_SIDE))
    height: int | None = setting(None, check=int_range(1, MAX_IMAGE_SIDE))
    # llama-swap keys of this model's entries that swapgen does not own
    # (docs/llama-swap-settings.md#per-model-keys): plain YAML data, spelled as llama-swap spells it.
    #: e.g. {"aliases": ["coder"], "filters": {"stripParams": "top_k"}, "concurrencyLimit": 4}.
    llama_swap: dict[str, Any] = setting(check="llama-swap keys", factory=dict, hash=False)


@frozen
class Encoders:
    """Diffusion components shared by every image model that needs them
    (docs/maintainers/classes.md#components); a per-model override path wins.

    Example: Encoders(flux_vae="/models/flux/ae.safetensors", clip_l="/models/clip_l.safetensors",
    t5xxl="/models/t5xxl_fp16.safetensors").
    """

    #: Flux.1 AE (16-channel latents): Flux.1, Chroma, LongCat.
    flux_vae: str | None = setting(None, check=NONBLANK)
    #: Flux.2 VAE (32-channel latents): Flux.2 / Klein, ERNIE-Image.
    flux2_vae: str | None = setting(None, check=NONBLANK)
    #: Z-Image / Lumina VAE; default: `flux_vae` (Z-Image's AE is Flux.1's).
    zimage_vae: str | None = setting(None, check=NONBLANK)
    #: Qwen-Image VAE (a Wan-2.1-style 3-D VAE).
    qwen_image_vae: str | None = setting(None, check=NONBLANK)
    clip_l: str | None = setting(None, check=NONBLANK)
    clip_g: str | None = setting(None, check=NONBLANK)
    t5xxl: str | None = setting(None, check=NONBLANK)
    #: LLM text encoder for `--llm` (Z-Image: Qwen3-4B, Qwen-Image: Qwen2.5-VL-7B, …); pin per
    #: model with the override's `llm_text_encoder` when several families need different ones.
    llm_text_encoder: str | None = setting(None, check=NONBLANK)


@frozen
class Group:
    """A llama-swap group: models whose id matches one of `match` join the first such group."""

    name: str
    match: tuple[str, ...] = ()
    #: True: members stay loaded side by side (swap: false).
    coexist: bool = False


@frozen
class Gpu:
    index: int = setting(check=GPU_INDEX)
    vram_gb: float = setting(check=VRAM_READING)
    name: str = ""
    vendor: str = ""


@frozen
class Host:
    """One GPU host of a fleet, as the front's `hosts:` lists it.

    Example: Host(name="gpu-a", settings="/repo/hosts/gpu-a/swapgen.yaml",
    url="http://gpu-a.lan:8080", api_key_env="GPU_A_KEY").
    """

    #: The peer id in the front config, and the prefix of the host's tasks (`model:gpu-a/<id>`).
    name: str = setting(check="host name")
    #: That host's swapgen settings file (relative to the front's settings file).
    settings: str = setting(check=NONBLANK)
    #: How the front reaches the host's llama-swap (the peer's `proxy`).
    url: str = setting(check="url")
    #: Environment variable that holds the host's API key where the front runs; written as
    #: `${env.NAME}`, never as the key itself.
    api_key_env: str | None = setting(None, check="variable name")


@frozen
class PathMapping:
    """One `path_map` pair: a file under `host` is served (written into commands, env values and
    side files) under `served`, the folder where a container sees the same files.

    Example: PathMapping(host="/mnt/models", served="/models"); served None = `keep` (the
    container sees the path as the host does).
    """

    #: Absolute, normalised (no trailing slash, `~` expanded), relative to the settings file.
    host: str
    served: str | None


@frozen
class Watch:
    """How `swapgen watch` follows the roots.

    Example: Watch(settle_seconds=30.0, polling="auto", poll_interval_seconds=10.0).
    """

    #: A changed file must keep its size this long before a run starts (a download still
    #: growing triggers nothing).
    settle_seconds: float = setting(30.0, check=number_range(0, MAX_WAIT_SECONDS))
    #: "auto": poll the roots on network and FUSE mounts (no events arrive there), use the
    #: kernel's events elsewhere; "always"; "never".
    polling: str = setting("auto", check=one_of(POLLING_MODES))
    #: Seconds between two scans of a polled root.
    poll_interval_seconds: float = setting(10.0, check=number_range(0, MAX_WAIT_SECONDS, above=True))


_EVERY_FRAGMENT, _CONFIG, _PER_MODEL, _NOTHING = (EVERY_FRAGMENT,), (CONFIG,), (PER_MODEL,), ()


@frozen
class Settings(LlamaOptions):
    """The whole settings file, paths already absolute. Each key says what a change to it
    invalidates (`outputs`, `settings.fields`)."""

    roots: tuple[str, ...] = setting(outputs=(WALK,))
    output: str = setting("config.yaml", outputs=_CONFIG)
    cache_dir: str = setting("cache", outputs=_NOTHING)
    #: Per-model VRAM budget in GiB; None = the probed card total, else 8.
    vram_budget_gb: float | None = setting(None, check=VRAM_BUDGET, outputs=_PER_MODEL)
    #: Total VRAM of the eligible GPUs in GiB; None = probe once; 0 = "no reading".
    card_vram_gb: float | None = setting(None, check=VRAM_READING, outputs=_PER_MODEL)
    ttl: int = setting(600, check=int_range(-1, INT32_MAX), outputs=_EVERY_FRAGMENT)
    #: At least 15: llama-swap raises a lower value to 15 (internal/config/load.go).
    health_check_timeout: int = setting(300, check=int_range(15, INT32_MAX), outputs=_CONFIG)
    backends: tuple[BackendRow, ...] = setting((), outputs=_PER_MODEL)
    backends_file: str | None = setting(None, outputs=_PER_MODEL)
    # the legacy exes, when no backend row serves a role (`resolve.backends.legacy_exes`)
    server_exe: str | None = setting(None, outputs=_EVERY_FRAGMENT)
    sd_server_exe: str | None = setting(None, outputs=_EVERY_FRAGMENT)
    tts_server_exe: str | None = setting(None, outputs=_EVERY_FRAGMENT)
    asr_server_exe: str | None = setting(None, outputs=_EVERY_FRAGMENT)
    overrides: tuple[Override, ...] = setting((), outputs=(PER_MATCH,))
    groups: tuple[Group, ...] = setting((), outputs=_CONFIG)
    #: Architecture → vLLM tool-call parser; extends/replaces the built-in table.
    tool_parsers: dict[str, str] = setting(check="string map", outputs=_EVERY_FRAGMENT, factory=dict, hash=False)
    gpus: tuple[Gpu, ...] | None = setting(None, outputs=_PER_MODEL)
    devices: tuple[int, ...] | None = setting(None, check=GPU_INDEX, outputs=_PER_MODEL)
    #: Named llama profiles added to every GGUF chat model (older spelling `default_variants`).
    default_profiles: tuple[Profile, ...] = setting((), older="default_variants", outputs=_EVERY_FRAGMENT)
    #: Virtualenvs whose `bin/vllm` `swapgen backends detect` also checks (relative to this file).
    backend_venvs: tuple[str, ...] = setting((), outputs=_NOTHING)
    #: Declared diffusion components for image models (see `Encoders`).
    encoders: Encoders = setting(Encoders(), outputs=_EVERY_FRAGMENT)
    #: Let a run drop the models the live config serves from a root that now finds nothing or
    #: from a folder that cannot be listed (else that stops the run: an unmounted disk).
    allow_vanished_models: bool = setting(False, outputs=_NOTHING)
    #: "auto": write llama-swap's `matrix` router, the sets of models that fit together on the
    #: cards (`router.matrix_plan`); None: groups. Excludes `groups` (llama-swap takes one or the other).
    routing: str | None = setting(None, check=one_of(ROUTING_MODES, f"expected {' or '.join(ROUTING_MODES)} "
                                                                    "(or null for groups)"), outputs=_CONFIG)
    # llama-swap as users run it (docs/llama-swap-settings.md)
    #: Top-level llama-swap keys written as given, e.g. {"apiKeys": ["${env.LLAMA_SWAP_API_KEY}"]}.
    llama_swap: dict[str, Any] = setting(check="llama-swap keys", outputs=_CONFIG, factory=dict, hash=False)
    #: "full": the whole llama-swap file; "fragment": only swapgen's part, for `-config-dir`.
    output_mode: str = setting("full", check=one_of(OUTPUT_MODES, "expected full or fragment"), outputs=_CONFIG)
    #: A fleet front: the GPU hosts whose configs this run also generates, listed as peers.
    hosts: tuple[Host, ...] = setting((), outputs=(EVERY_FRAGMENT, CONFIG))
    #: What `output` is: "llama-swap" (its YAML config) or "llama-server" (a models preset for
    #: llama.cpp's own router, `llama-server --models-preset`).
    target: str = setting("llama-swap", check=one_of(TARGETS, f"expected {' or '.join(TARGETS)}"),
                          outputs=(EVERY_FRAGMENT, CONFIG))
    #: Host folder → the folder a container sees it as, first match wins (`emit.served_paths`).
    path_map: tuple[PathMapping, ...] = setting((), check="path map", outputs=_EVERY_FRAGMENT)
    watch: Watch = setting(Watch(), outputs=_NOTHING)
    #: llama-swap's `vllm-wrapper`, which runs a sleeping vLLM model (docs/vllm-sleep.md).
    vllm_wrapper: str = setting("vllm-wrapper", check=NONBLANK, outputs=_EVERY_FRAGMENT)
    #: The host's RAM in GiB, which holds sleeping vLLM models' weights; None = read it
    #: (/proc/meminfo); 0 = no reading (every model that asks sleeps).
    host_ram_gb: float | None = setting(None, check=number_range(0, MAX_VRAM_GIB), outputs=_PER_MODEL)
    #: The plan page every run (and every `swapgen watch` cycle) writes when it changes
    #: (`commands.plan_page`); None = only `swapgen report` writes one. Its task has its own key.
    report: str | None = setting(None, check=NONBLANK, outputs=_NOTHING)
    #: Where the settings were read from (not a key of the file).
    source: str = setting("", outputs=_CONFIG, kw_only=True)
