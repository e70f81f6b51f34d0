#!/usr/bin/env bash
# Gather what benchmarks/device/gpu_server_bench.sh needs on the GPU machine, which reaches no
# network: llama.cpp's source (from llama-cpp-python's source distribution, without models,
# docs, tests and the back ends other than CPU and CUDA), llama-cpp-python's Python package,
# the diskcache wheel it imports, SmolLM2's tokenizer keys and a recorded suggestion workload.
# Everything goes to .device/ (ignored by git, carried by the device tool; under 64 MiB).
# Run from the repository root with the project's venv: bash benchmarks/device/prepare.sh
set -euo pipefail
PY=${PY:-.venv/bin/python}
OUTDIR=.device
mkdir -p "$OUTDIR"
EXCLUDE=$(git rev-parse --git-path info/exclude); mkdir -p "$(dirname "$EXCLUDE")"
grep -qsx "/.device/" "$EXCLUDE" || echo "/.device/" >> "$EXCLUDE"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
VERSION=$($PY -c "import importlib.metadata as m; print(m.version('llama-cpp-python'))")
$PY -m pip download -q --no-deps --no-binary :all: -d "$TMP" "llama-cpp-python==$VERSION"
tar -xzf "$TMP"/llama_cpp_python-*.tar.gz -C "$TMP"
SRC=$(ls -d "$TMP"/llama_cpp_python-*/ | head -1)
L=$SRC/vendor/llama.cpp
rm -rf "$L"/{models,docs,media,benches,tests,examples,conversion,.git*} "$L"/tools/ui/dist
find "$L"/scripts -type f ! -name '*.cmake' -delete   # CMake runs scripts/*.cmake
for backend in "$L"/ggml/src/ggml-*/; do
  case $(basename "$backend") in ggml-cpu|ggml-cuda) ;; *) rm -rf "$backend" ;; esac
done
mkdir -p "$L"/tests "$L"/examples   # CMake looks for the folders, builds nothing there
mkdir -p "$TMP"/pack/src
cp -r "$L" "$TMP"/pack/src/llama.cpp
cp -r "$SRC"/llama_cpp "$TMP"/pack/src/llama_cpp
rm -rf "$TMP"/pack/src/llama_cpp/server
tar -cJf "$OUTDIR"/llama-src.tar.xz -C "$TMP"/pack src
$PY -m pip download -q --no-deps --only-binary=:all: -d "$OUTDIR" diskcache==5.6.3
MODEL=$($PY packaging/fetch_small_model.py)
$PY benchmarks/shaped_model.py tokenizer "$MODEL" "$OUTDIR"/smollm2-tokenizer.json.gz
# WORKLOAD=0: not the server benchmark's workload (gpu_real_model.sh does not need it)
[ "${WORKLOAD:-1}" = 0 ] || [ -f "$OUTDIR"/workload.json ] \
  || $PY benchmarks/bench_llm_server.py --record "$OUTDIR"/workload.json
du -sh "$OUTDIR"/*
