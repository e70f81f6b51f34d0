#!/usr/bin/env bash
# The shared-model-server benchmark on the lent GPU machine (docs/llm.md, "A shared server").
# Needs .device/ from benchmarks/device/prepare.sh. Two steps, so that each fits one call:
#   bash benchmarks/device/gpu_server_bench.sh build   # llama-server + libllama with CUDA, model
#   bash benchmarks/device/gpu_server_bench.sh bench   # bench_llm_server.py on the GPU
# A CPU rehearsal here: CUDA_ARCH= SHAPE=tiny bash benchmarks/device/gpu_server_bench.sh build
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/gpu-bench-out}
W=${WORK:-/tmp/gpu-bench}
CUDA_ARCH=${CUDA_ARCH-90}
SHAPE=${SHAPE:-8b}
PY=${PY:-python3}
mkdir -p "$OUT" "$W"
stamp() { echo "[$(date +%T)] $*"; }
export PYTHONPATH="$W/py:$W/src/llama.cpp/gguf-py:$PWD"

build() {
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null \
    | tee "$OUT/gpu.txt"
  rm -rf "$W"/src "$W"/build "$W"/py && tar -xJf .device/llama-src.tar.xz -C "$W"
  stamp "building (CUDA ${CUDA_ARCH:-none})"
  $PY packaging/build_llama_server.py --source "$W/src/llama.cpp" --out "$W/build" --shared \
    --jobs "$(nproc)" ${CUDA_ARCH:+--cuda "$CUDA_ARCH"} > "$OUT/build.log" 2>&1 \
    || { tail -60 "$OUT/build.log"; exit 1; }
  stamp built
  mkdir -p "$W/py/llama_cpp/lib" && cp -r "$W"/src/llama_cpp/* "$W/py/llama_cpp/"
  find "$W/build" -name '*.so*' -exec cp -P {} "$W/py/llama_cpp/lib/" \;
  $PY -m pip install -q --no-index --no-deps --target "$W/py" .device/diskcache-*.whl
  $PY -c "import llama_cpp; print(llama_cpp.llama_print_system_info().decode());
print('GPU offload:', llama_cpp.llama_supports_gpu_offload())"
  stamp "writing the $SHAPE model"
  $PY benchmarks/shaped_model.py write --tokenizer .device/smollm2-tokenizer.json.gz \
    --shape "$SHAPE" "$W/model.gguf"
  stamp ready
}

bench() {
  stamp bench
  $PY benchmarks/bench_llm_server.py --workload .device/workload.json --model "$W/model.gguf" \
    --server-binary "$W/build/bin/llama-server" ${CUDA_ARCH:+--gpu} \
    --clients "${CLIENTS:-1,4,16}" --per-client "${PER_CLIENT:-8,4,2}" \
    --max-tokens "${MAX_TOKENS:-128}" --flash-attn "${FLASH_ATTN:-off,on}" \
    --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.txt"
  stamp done
}

"${1:-build}"
