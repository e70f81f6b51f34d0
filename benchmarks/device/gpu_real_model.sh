#!/usr/bin/env bash
# SmolLM2-135M-Instruct through the program's own path on the lent GPU machine, against the same
# CUDA build on its CPU (benchmarks/device/gpu_real_model.py; results in docs/llm.md).
# The model file (98 MB) is larger than what one call may carry beside the working tree, so it
# travels in three parts, one per call, on a machine kept warm between the calls:
#   here:    bash benchmarks/device/gpu_real_model.sh prepare   # fills .devA .devB .devC
#   call 1:  bash benchmarks/device/gpu_real_model.sh build     # carry .devA: CUDA build, part 1
#   call 2:  bash benchmarks/device/gpu_real_model.sh stash     # carry .devB: part 2
#   call 3:  bash benchmarks/device/gpu_real_model.sh check     # carry .devC: part 3, the check
# A CPU rehearsal here: CUDA_ARCH= WORK=/tmp/rehearse bash ... build; ... stash; ... check
set -uo pipefail
OUT=${OUT:-/tmp/gpu-real-out}
W=${WORK:-/tmp/gpu-real}
# shellcheck source=benchmarks/device/common.sh
source benchmarks/device/common.sh

prepare() {
  local model exclude
  WORKLOAD=0 bash benchmarks/device/prepare.sh   # llama.cpp's source, diskcache
  model=$(.venv/bin/python packaging/fetch_small_model.py)
  exclude=$(git rev-parse --git-path info/exclude)
  rm -rf .devA .devB .devC && mkdir -p .devA .devB .devC
  for d in .devA .devB .devC; do grep -qsx "/$d/" "$exclude" || echo "/$d/" >> "$exclude"; done
  split -n 3 -d "$model" "$W/model.part"
  mv "$W/model.part00" .devA/ && mv "$W/model.part01" .devB/ && mv "$W/model.part02" .devC/
  sha256sum "$model" | cut -d' ' -f1 > .devC/model.sha256
  cp .device/llama-src.tar.xz .device/diskcache-*.whl .devA/
  .venv/bin/python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d .devA "sqlalchemy==$(.venv/bin/python -c \
    'import sqlalchemy; print(sqlalchemy.__version__)')"
  .venv/bin/python -c "from portalreview.demo import build_demo; build_demo('.devC/demo.prproj')"
  du -sh .devA .devB .devC
}

build() {
  cp .devA/model.part00 "$W/"
  build_libllama .devA
}

stash() { cp .devB/model.part01 "$W/" && ls -la "$W"/model.part*; }

check() {
  cp .devC/model.part02 "$W/"
  cat "$W"/model.part00 "$W"/model.part01 "$W"/model.part02 > "$W/smollm2.gguf"
  [ "$(sha256sum "$W/smollm2.gguf" | cut -d' ' -f1)" = "$(cat .devC/model.sha256)" ] \
    || { echo "the model's parts do not make the model (SHA-256 differs)"; exit 1; }
  stamp check
  timeout "${CHECK_TIMEOUT:-300}" $PY benchmarks/device/gpu_real_model.py \
    --model "$W/smollm2.gguf" --demo .devC/demo.prproj --out "$OUT" --limit "${LIMIT:-3}"
  rm -rf "$OUT"/*.prproj* "$OUT"/*.backups
  stamp done
}

"${1:-check}"
