#!/usr/bin/env bash
# The shared-model-server benchmark on the lent GPU machine (docs/llm.md, "A shared server").
# Needs .device/ from benchmarks/device/prepare.sh. Two steps, so that each fits one call:
#   bash benchmarks/device/gpu_server_bench.sh build   # llama-server + libllama with CUDA, model
#   bash benchmarks/device/gpu_server_bench.sh bench   # bench_llm_server.py on the GPU
# A CPU rehearsal here: CUDA_ARCH= SHAPE=tiny bash benchmarks/device/gpu_server_bench.sh build
set -uo pipefail
OUT=${OUT:-/tmp/gpu-bench-out}
W=${WORK:-/tmp/gpu-bench}
SHAPE=${SHAPE:-8b}
# shellcheck source=benchmarks/device/common.sh
source benchmarks/device/common.sh

build() {
  build_libllama .device
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
