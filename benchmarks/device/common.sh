# Sourced by the device scripts (gpu_server_bench.sh, gpu_real_model.sh) once they set OUT (what
# comes back) and W (their work folder): the shared settings, and build_libllama.
export PYTHONUNBUFFERED=1
CUDA_ARCH=${CUDA_ARCH-90}   # empty: a CPU build (a rehearsal off the GPU machine)
PY=${PY:-python3}
mkdir -p "$OUT" "$W"
export PYTHONPATH="$W/py:$W/src/llama.cpp/gguf-py:$PWD"
stamp() { echo "[$(date +%T)] $*"; }

# Build llama-server and libllama, with CUDA when CUDA_ARCH is set, from the llama.cpp source
# that prepare.sh packed, into $W/build, and put llama-cpp-python's Python package with those
# libraries in $W/py. $1: the folder holding llama-src.tar.xz and the wheels to install.
build_libllama() {
  local from=$1
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null \
    | tee "$OUT/gpu.txt"
  rm -rf "$W"/src "$W"/build "$W"/py && tar -xJf "$from"/llama-src.tar.xz -C "$W"
  stamp "building (CUDA ${CUDA_ARCH:-none})"
  $PY packaging/build_llama_server.py --source "$W/src/llama.cpp" --out "$W/build" --shared \
    --jobs "$(nproc)" ${CUDA_ARCH:+--cuda "$CUDA_ARCH"} > "$OUT/build.log" 2>&1 \
    || { tail -60 "$OUT/build.log"; exit 1; }
  stamp built
  mkdir -p "$W/py/llama_cpp/lib" && cp -r "$W"/src/llama_cpp/* "$W/py/llama_cpp/"
  find "$W/build" -name '*.so*' -exec cp -P {} "$W/py/llama_cpp/lib/" \;
  $PY -m pip install -q --no-index --no-deps --target "$W/py" "$from"/*.whl
  $PY -c "import llama_cpp; print(llama_cpp.llama_print_system_info().decode());
print('GPU offload:', llama_cpp.llama_supports_gpu_offload())"
}
