"""How `swapgen backends detect` reads an installed engine's version and build: one probe per
kind of binary, named by its engine's row (`EngineRow.probe`).

Each probe gets `ask(flag)`, which runs the binary with one flag (killed with its process group
after the probe timeout; a failure leaves a note) and answers (exit 0, stdout+stderr).

Version: `<exe> --version`. llama.cpp prints `version: <build> (<commit>)` (`common/arg.cpp`),
or, since its builds carry a semantic version, `version: <version> (build <build>, commit
<commit>)` (`llama_print_build_info`, common/build-info.cpp.in); either is kept as `b<build>`, the
release-tag spelling. vLLM: the version in its venv's `vllm-<ver>.dist-info` name when there is
one (no seconds-long import), else `vllm --version`. Others: a bare version line, else a
`version` word followed by a number, else the first dotted number.

Build (`BackendRow.build`, settings key `variant`) of a GGML engine (llama.cpp, sd, tts, parakeet,
audio.cpp, sam):
1. its backend libraries beside the binary (same folder, `../lib`, `../lib64`):
   `libggml-cuda` → cuda, `libggml-hip` → rocm, `libggml-vulkan` → vulkan, `libggml-sycl` →
   sycl, `libggml-metal` → metal; a shared build with only `libggml-base` / `libggml-cpu*` → cpu;
2. llama-server only, when 1 found no library (a static build): `--list-devices`, which prints
   `Available devices:` then `  CUDA0: <name> (<total> MiB, <free> MiB free)` per non-CPU device
   (`common/arg.cpp`): the first device's backend; no device listed → cpu;
   whisper-server, which has no such flag: the GPU backend compiled into it (`compiled_build`);
3. otherwise unknown (""). vLLM: rocm when its torch has `libtorch_hip.so`, cpu when torch has
   neither that nor `libtorch_cuda.so`, else cuda.

A `llama-server` is ik_llama.cpp's (kind ik_llama) when its `--version` has the older form and
its `--help` lists `--mla-use` (`probe_ik_llama`); its version is `b<N>` as llama.cpp's.

A `tts-server` is TTS.cpp's (kind ttscpp) when its path names `tts.cpp` or its `--version`
answer is TTS.cpp's usage text (`--model-path`), else qwentts.cpp's (kind tts). whisper-server
is asked nothing: it has no version flag, and a static build's variant is the GPU backend
compiled into it (`probe_whisper`).
"""

from __future__ import annotations

import glob
import mmap
import os
import re
from collections.abc import Callable

from attrs import frozen

from autogen.engines import Engine

#: Runs the binary with one flag: (exit 0, stdout+stderr); `quiet`: a failing exit is expected,
#: not worth a note.
Ask = Callable[..., tuple[bool, str]]

#: GGML backend library stem → build, in the order a build with several is labelled
#: (ggml/src/ggml-<name>/: with GGML_BACKEND_DL or BUILD_SHARED_LIBS each is libggml-<name>.so).
GGML_LIBS: tuple[tuple[str, str], ...] = (
    ("cuda", "cuda"), ("hip", "rocm"), ("vulkan", "vulkan"), ("sycl", "sycl"), ("metal", "metal"))

#: Strings only a GGML GPU backend puts into a binary (ggml/src: ggml-cuda.cu logs "found %d " GGML_CUDA_NAME
#: " devices (Total VRAM", GGML_CUDA_NAME being "ROCm" in a HIP build; ggml-vulkan.cpp's "ggml_vulkan: "
#: messages; ggml-metal's `ggml_metal_*` names; ggml-sycl.cpp's `ggml_sycl_init`, named by
#: `__func__`) → build. A CPU build holds the backends' bare names ("cuda", "vulkan") for loading
#: them as libraries, never these.
COMPILED_MARKERS: tuple[tuple[bytes, str], ...] = (
    (b" CUDA devices (Total VRAM", "cuda"), (b" ROCm devices (Total VRAM", "rocm"), (b"ggml_vulkan: ", "vulkan"),
    (b"ggml_metal_", "metal"), (b"ggml_sycl_init", "sycl"))

#: `--list-devices` device name prefix (CUDA0, ROCm0, Vulkan0, MTL0 / Metal, SYCL0) → build.
DEVICE_PREFIXES: dict[str, str] = {
    "cuda": "cuda", "rocm": "rocm", "hip": "rocm", "vulkan": "vulkan", "mtl": "metal", "metal": "metal",
    "sycl": "sycl"}


@frozen
class Probed:
    """What a probe learnt of one binary.

    Example: Probed(version="b11434", build="cuda", answered=True).
    """

    version: str
    build: str
    #: `--version` was asked and exited 0 (an answer without a version is then worth a note).
    answered: bool
    #: The engine the binary turned out to be, when its name is shared ("ttscpp"); None = the
    #: engine its name was found for.
    engine: str | None = None


#: What only ik_llama.cpp's `--help` lists (its MLA option).
IK_MARK = "--mla-use"
#: llama.cpp's `--version` before its semantic versions, and ik_llama.cpp's: `version: N (commit)`.
_PLAIN_BUILD = re.compile(r"version:\s*\d+\s*\(")
_LLAMA_VERSION = re.compile(r"version:\s*(?:(\d+)\s*\(|\S+\s*\(build\s+(\d+))")
_PLAIN_VERSION = re.compile(r"^v?(\d+(?:\.\d+)+\S*)$")
_NAMED_VERSION = re.compile(r"version\b[\s:=]*v?(\d[\w.+-]*)", re.IGNORECASE)
_DOTTED_VERSION = re.compile(r"(?<![\w.])v?(\d+\.\d+(?:\.\d+)*[\w.+-]*)")


def parse_version(text: str) -> str:
    """The version in a `--version` answer, "" when none is recognisable."""
    for line in reversed(text.splitlines()):  # vLLM may log before the bare version line
        m = _PLAIN_VERSION.match(line.strip())
        if m:
            return m.group(1)
    m = _NAMED_VERSION.search(text) or _DOTTED_VERSION.search(text)
    return m.group(1).rstrip(".,") if m else ""


def llama_version(text: str) -> str:
    """llama.cpp's build number in its `--version` answer as `b<build>`, "" when none."""
    m = _LLAMA_VERSION.search(text)
    return f"b{m.group(1) or m.group(2)}" if m else ""


def parse_devices(text: str) -> str:
    """Build from `llama-server --list-devices`: first device's backend, "cpu" when none."""
    if "Available devices:" not in text:
        return ""
    for line in text.split("Available devices:", 1)[1].splitlines():
        m = re.match(r"\s+([A-Za-z]+)\d*:", line)
        if m and m.group(1).lower() in DEVICE_PREFIXES:
            return DEVICE_PREFIXES[m.group(1).lower()]
    return "cpu"


def _listdir(folder: str) -> list[str]:
    try:
        return os.listdir(folder)
    except OSError:  # missing or unreadable: nothing to learn there
        return []


def library_build(real: str) -> str:
    """Build from the GGML backend libraries beside a binary; "" when it has none."""
    here = os.path.dirname(real)
    folders = [here, os.path.join(here, "..", "lib"), os.path.join(here, "..", "lib64")]
    names = {n for f in folders for n in _listdir(f)}
    for stem, build in GGML_LIBS:
        if any(n.startswith(f"libggml-{stem}.") for n in names):
            return build
    return "cpu" if any(n.startswith(("libggml-base.", "libggml-cpu")) for n in names) else ""


def _site_packages(real: str) -> list[str]:
    venv = os.path.dirname(os.path.dirname(real))
    return sorted(glob.glob(os.path.join(venv, "lib", "python*", "*-packages")))  # site- or dist-


def vllm_dist_version(real: str) -> str:
    for site in _site_packages(real):
        for info in sorted(glob.glob(os.path.join(site, "vllm-*.dist-info"))):
            return os.path.basename(info)[len("vllm-"):-len(".dist-info")]
    return ""


def vllm_build(real: str) -> str:
    for site in _site_packages(real):
        names = _listdir(os.path.join(site, "torch", "lib"))
        if names:
            if any(n.startswith("libtorch_hip") for n in names):
                return "rocm"
            if not any(n.startswith("libtorch_cuda") for n in names):
                return "cpu"
    return "cuda"


def probe_ggml(ask: Ask, path: str, real: str) -> Probed:
    """A GGML engine: `--version`, and the backend libraries beside it."""
    ok, text = ask("--version")
    return Probed(version=parse_version(text) if ok else "", build=library_build(real), answered=ok)


def probe_llama(ask: Ask, path: str, real: str) -> Probed:
    """llama-server: its build number, and `--list-devices` when no library names its build; or
    ik_llama.cpp's, which has llama.cpp's name (`probe_ik_llama`)."""
    ok, text = ask("--version")
    if ok and IK_MARK not in text and _PLAIN_BUILD.search(text):
        ik = probe_ik_llama(ask, real, text)
        if ik is not None:
            return ik
    build = library_build(real)
    if not build:
        ok_devices, devices = ask("--list-devices")
        build = parse_devices(devices) if ok_devices else ""
    return Probed(version=llama_version(text) if ok else "", build=build, answered=ok)


def probe_ik_llama(ask: Ask, real: str, version: str) -> Probed | None:
    """A `llama-server` whose `--version` has the older form (`version: N (commit)`, as
    llama.cpp's before its semantic versions and ik_llama.cpp's) is ik_llama.cpp's when its
    `--help` (which exits 1 there) lists `--mla-use`; None otherwise. Its build is the GGML
    library beside it, else cpu when `--help` lacks the GPU options (common/common.cpp prints
    `-ngl` only with GPU offload), else unknown."""
    _, usage = ask("--help", quiet=True)
    if IK_MARK not in usage:
        return None
    build = library_build(real) or ("" if "--gpu-layers" in usage else "cpu")
    return Probed(version=llama_version(version), build=build, answered=True, engine=Engine.IK_LLAMA.value)


def probe_vllm(ask: Ask, path: str, real: str) -> Probed:
    """vLLM: its venv's package name and torch libraries; `--version` only without a package name."""
    version, ok = vllm_dist_version(real), False
    if not version:
        ok, text = ask("--version")
        version = parse_version(text) if ok else ""
    return Probed(version=version, build=vllm_build(real), answered=ok)


def compiled_build(real: str) -> str:
    """Build of a static GGML binary from the backend it has compiled in (`COMPILED_MARKERS`):
    "cpu" when it has none of them, "" when it cannot be read."""
    try:
        with open(real, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return next((build for marker, build in COMPILED_MARKERS if data.find(marker) >= 0), "cpu")
    except (OSError, ValueError):  # unreadable, or empty (mmap refuses a zero-length file)
        return ""


def probe_whisper(ask: Ask, path: str, real: str) -> Probed:
    """whisper-server: it has no `--version` (its parser prints the usage for any unknown
    argument and exits 0: examples/server/server.cpp), so it is not asked one; its build is the
    backend libraries beside it, else the backend compiled into a static binary."""
    return Probed(version="", build=library_build(real) or compiled_build(real), answered=False)


def probe_tts_server(ask: Ask, path: str, real: str) -> Probed:
    """A `tts-server`, which qwentts.cpp and TTS.cpp both build: which one it is (module docstring)."""
    ok, text = ask("--version")
    usage = "--model-path" in text  # TTS.cpp has no --version: it answers with its usage
    engine = Engine.TTSCPP if usage or "tts.cpp" in f"{path} {real}".lower() else Engine.TTS
    version = parse_version(text) if ok and not usage else ""
    return Probed(version=version, build=library_build(real), answered=ok, engine=engine.value)
