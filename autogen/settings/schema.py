"""The shape of `swapgen.yaml`: frozen classes every later stage reads, and the keyword tables
their values are checked against.

`settings.load` reads the file and `settings.structure` turns it into these classes; past that
edge there are no dicts.
"""

from __future__ import annotations

from typing import Any

from attrs import field, frozen


@frozen
class BackendRow:
    """One installed engine. `id` is what an override's `backend:` pins.

    Example: BackendRow(id="llama-cuda", kind="llama", path="/opt/llama/bin/llama-server",
    default=True, variant="cuda").
    """

    id: str
    kind: str
    path: str
    name: str = ""
    #: The ★: this row is the automatic pick for its roles.
    default: bool = False
    #: Installed version, e.g. "0.11.0" (vLLM gates flags on it).
    version: str = ""
    #: Written by `swapgen backends detect` (never edit by hand; rewritten on detect).
    managed: bool = False
    component: str = ""
    #: Build flavour: "cuda", "rocm", "vulkan", "cpu", …
    variant: str = ""
    #: A derived row for one installed build of a component (pin it by id).
    build: bool = False
    #: llama rows: the build's `llama-fit-params` when it is not beside `path`; "none" = never
    #: ask it (docs/maintainers/sizing.md#exact-numbers-for-your-machine). Example: "/opt/llama/bin/llama-fit-params".
    fit_params: str = ""


@frozen
class Variant:
    """A named llama profile of one model: `<id>-<slug(name)>` (docs/settings.md#variants-variant)."""

    name: str
    ctx: int | None = None
    kv_type: str | None = None
    vram_budget_gb: float | None = None
    parallel: int | None = None
    flash_attn: str | None = None
    threads: int | None = None
    ngl: int | None = None
    mmproj: str | None = None
    extra_args: tuple[str, ...] = ()
    unlisted: bool = False


@frozen
class Override:
    """Per-model knobs; the first row whose `match` glob fits the model's path wins."""

    #: Glob on the model's full path: case-insensitive, `*` crosses folders, `?` one char.
    match: str
    quant: str | None = None
    skip: bool = False
    unlisted: bool = False
    #: Registry id to pin; a stale id falls back to automatic resolution.
    backend: str | None = None
    ctx: int | None = None
    vram_budget_gb: float | None = None
    vllm_gpu_util: float | None = None
    vllm_tensor_parallel: int | None = None
    vllm_tokenizer: str | None = None
    #: "none" turns the tool-call parser off; anything else is used verbatim.
    vllm_tool_parser: str | None = None
    #: Fleet hosts (names of the front's `hosts:`) whose GPUs run this vLLM model's workers,
    #: node ranks 1, 2, … in this order; this host is the head (rank 0). Example: ("gpu-b",).
    vllm_nodes: tuple[str, ...] = ()
    #: How the nodes of `vllm_nodes` connect: "ray" (a Ray cluster) or "mp" (vLLM's own
    #: `--nnodes`/`--headless` workers); None = ray.
    vllm_distributed: str | None = None
    #: Appended verbatim; a flag here replaces our generated flag of the same meaning.
    extra_args: tuple[str, ...] = ()
    devices: tuple[int, ...] | None = None
    ctx_variants: tuple[int, ...] = ()
    variants: tuple[Variant, ...] = ()
    # llama-server knobs
    kv_type: str | None = None
    parallel: int | None = None
    flash_attn: str | None = None
    threads: int | None = None
    ngl: int | None = None
    #: "auto" | "none" | "cpu" | "gpu" | a projector path.
    mmproj: str | None = None
    #: The speculative-decoding draft of the `-draft` profile: a GGUF path, or "none" for no
    #: draft profile; None = the one discovery pairs (same vocabulary, smaller, same family).
    draft: str | None = None
    # sd-server (image) knobs; component paths win over `encoders`, "none" drops the component
    #: VAE, e.g. "/models/flux/ae.safetensors".
    vae: str | None = None
    #: CLIP-L / CLIP-G text encoders (Flux.1 needs CLIP-L), e.g. "/models/clip_l.safetensors".
    clip_l: str | None = None
    clip_g: str | None = None
    #: T5-XXL text encoder (Flux.1, Chroma), e.g. "/models/t5xxl_fp16.safetensors".
    t5xxl: str | None = None
    #: LLM text encoder (`--llm`: Z-Image, Qwen-Image, Flux.2), e.g. "/models/Qwen3-4B-Q8_0.gguf".
    llm_text_encoder: str | None = None
    #: LoRA folder for sd-server (default: the model's own folder).
    lora_dir: str | None = None
    #: true/false pins sd-server's `--offload-to-cpu` (default: from the budget).
    offload_to_cpu: bool | None = None
    #: Keep the VAE / text encoders on the CPU (defaults: false / true).
    vae_on_cpu: bool | None = None
    te_on_cpu: bool | None = None
    #: sd-server savers `--diffusion-fa` / `--vae-tiling` (default: on).
    diffusion_fa: bool | None = None
    vae_tiling: bool | None = None
    #: sd-server generation defaults (`--steps`, `--cfg-scale`, `--sampling-method`, size).
    steps: int | None = None
    cfg_scale: float | None = None
    sampling_method: str | None = None
    width: int | None = None
    height: int | None = None
    # llama-swap keys of this model's entries that swapgen does not own (docs/llama-swap-settings.md#per-model-keys):
    # plain YAML data, spelled as llama-swap spells it.
    #: e.g. {"aliases": ["coder"], "filters": {"stripParams": "top_k"}, "concurrencyLimit": 4}.
    llama_swap: dict[str, Any] = field(factory=dict, hash=False)


@frozen
class Encoders:
    """Diffusion components shared by every image model that needs them
    (docs/maintainers/classes.md#components); a per-model override path wins.

    Example: Encoders(flux_vae="/models/flux/ae.safetensors", clip_l="/models/clip_l.safetensors",
    t5xxl="/models/t5xxl_fp16.safetensors").
    """

    #: Flux.1 AE (16-channel latents): Flux.1, Chroma, LongCat.
    flux_vae: str | None = None
    #: Flux.2 VAE (32-channel latents): Flux.2 / Klein, ERNIE-Image.
    flux2_vae: str | None = None
    #: Z-Image / Lumina VAE; default: `flux_vae` (Z-Image's AE is Flux.1's).
    zimage_vae: str | None = None
    #: Qwen-Image VAE (a Wan-2.1-style 3-D VAE).
    qwen_image_vae: str | None = None
    clip_l: str | None = None
    clip_g: str | None = None
    t5xxl: str | None = None
    #: LLM text encoder for `--llm` (Z-Image: Qwen3-4B, Qwen-Image: Qwen2.5-VL-7B, …); pin per
    #: model with the override's `llm_text_encoder` when several families need different ones.
    llm_text_encoder: str | None = None


@frozen
class Group:
    """A llama-swap group: models whose id matches one of `match` join the first such group."""

    name: str
    match: tuple[str, ...] = ()
    #: True: members stay loaded side by side (swap: false).
    coexist: bool = False


@frozen
class Gpu:
    index: int
    vram_gb: float
    name: str = ""
    vendor: str = ""


@frozen
class Host:
    """One GPU host of a fleet, as the front's `hosts:` lists it.

    Example: Host(name="gpu-a", settings="/repo/hosts/gpu-a/swapgen.yaml",
    url="http://gpu-a.lan:8080", api_key_env="GPU_A_KEY").
    """

    #: The peer id in the front config, and the prefix of the host's tasks (`model:gpu-a/<id>`).
    name: str
    #: That host's swapgen settings file (relative to the front's settings file).
    settings: str
    #: How the front reaches the host's llama-swap (the peer's `proxy`).
    url: str
    #: Environment variable that holds the host's API key where the front runs; written as
    #: `${env.NAME}`, never as the key itself.
    api_key_env: str | None = None


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
    settle_seconds: float = 30.0
    #: "auto": poll the roots on network and FUSE mounts (no events arrive there), use the
    #: kernel's events elsewhere; "always"; "never".
    polling: str = "auto"
    #: Seconds between two scans of a polled root.
    poll_interval_seconds: float = 10.0


@frozen
class Settings:
    """The whole settings file, paths already absolute."""

    roots: tuple[str, ...]
    output: str = "config.yaml"
    cache_dir: str = "cache"
    #: Per-model VRAM budget in GiB; None = the probed card total, else 8.
    vram_budget_gb: float | None = None
    #: Total VRAM of the eligible GPUs in GiB; None = probe once; 0 = "no reading".
    card_vram_gb: float | None = None
    ttl: int = 600
    health_check_timeout: int = 300
    backends: tuple[BackendRow, ...] = ()
    backends_file: str | None = None
    server_exe: str | None = None
    sd_server_exe: str | None = None
    tts_server_exe: str | None = None
    asr_server_exe: str | None = None
    overrides: tuple[Override, ...] = ()
    groups: tuple[Group, ...] = ()
    #: Architecture → vLLM tool-call parser; extends/replaces the built-in table.
    tool_parsers: dict[str, str] = field(factory=dict, hash=False)
    gpus: tuple[Gpu, ...] | None = None
    devices: tuple[int, ...] | None = None
    default_variants: tuple[Variant, ...] = ()
    # llama-server defaults (an override wins)
    kv_type: str | None = None
    parallel: int | None = None
    flash_attn: str | None = None
    threads: int | None = None
    #: Virtualenvs whose `bin/vllm` `swapgen backends detect` also checks (relative to this file).
    backend_venvs: tuple[str, ...] = ()
    #: Declared diffusion components for image models (see `Encoders`).
    encoders: Encoders = Encoders()
    #: Let a run drop the models the live config serves from a root that now finds nothing or
    #: from a folder that cannot be listed (else that stops the run: an unmounted disk).
    allow_vanished_models: bool = False
    #: "auto": write llama-swap's `matrix` router, the sets of models that fit together on the
    #: cards (`router.matrix_plan`); None: groups. Excludes `groups` (llama-swap takes one or the other).
    routing: str | None = None
    # llama-swap as users run it (docs/llama-swap-settings.md)
    #: Top-level llama-swap keys written as given, e.g. {"apiKeys": ["${env.LLAMA_SWAP_API_KEY}"]}.
    llama_swap: dict[str, Any] = field(factory=dict, hash=False)
    #: "full": the whole llama-swap file; "fragment": only swapgen's part, for `-config-dir`.
    output_mode: str = "full"
    #: A fleet front: the GPU hosts whose configs this run also generates, listed as peers.
    hosts: tuple[Host, ...] = ()
    #: What `output` is: "llama-swap" (its YAML config) or "llama-server" (a models preset for
    #: llama.cpp's own router, `llama-server --models-preset`).
    target: str = "llama-swap"
    #: Host folder → the folder a container sees it as, first match wins (`emit.served_paths`).
    path_map: tuple[PathMapping, ...] = field(default=(), metadata={"yaml": "mapping"})
    watch: Watch = Watch()
    #: Where the settings were read from (not a key of the file).
    source: str = field(default="", kw_only=True)


#: llama-server b11434 `-ctk/-ctv` values (`llama-server --help`); `metadata.kvcost.KV_TYPE_BYTES`
#: holds their widths, and a test keeps the two in step.
LLAMA_KV_TYPES = ("f32", "f16", "bf16", "q8_0", "q5_1", "q5_0", "q4_1", "q4_0", "iq4_nl")
FLASH_ATTN_MODES = ("on", "off", "auto")
#: `vllm_distributed:` values: a Ray cluster, or vLLM's multiprocessing executor over nodes.
VLLM_DISTRIBUTED = ("ray", "mp")
#: `mmproj:` keywords; any other non-empty string is a projector path.
MMPROJ_MODES = ("auto", "none", "cpu", "gpu")
#: `routing:` values besides null (`Settings.routing`).
ROUTING_MODES = ("auto",)

#: `target:` values: the router the output is written for.
TARGETS = ("llama-swap", "llama-server")
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

#: `output_mode:` values: the whole llama-swap file, or a `-config-dir` fragment of it.
OUTPUT_MODES = ("full", "fragment")
#: Override fields naming a diffusion component file; "none" (any case) drops the component
#: (mirrors `emit.sd.OVERRIDE_FIELD`).
SD_COMPONENT_FIELDS = ("vae", "clip_l", "clip_g", "t5xxl", "llm_text_encoder")
