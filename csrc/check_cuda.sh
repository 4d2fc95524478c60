#!/usr/bin/env bash
# Compile-check the CUDA path with nvcc on machines without CUDA torch (no GPU needed).
#  1. kvswap_cuda.cu (the kernels, torch-free): a full compile to an object for sm_80 and sm_90.
#  2. kvswap_cuda_ops.cu (the torch binding): a full host+device compile against the installed
#     torch's headers. The CPU wheel ships the c10/cuda headers but not the one CMake generates
#     (c10/cuda/impl/cuda_cmake_macros.h); a one-line stand-in is written under csrc/build/.
# Prints "skipped" and exits 0 when no nvcc is found; exits non-zero on any compile error.
# Cached: reruns only when a CUDA source changes.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-$(command -v python || command -v python3)}
NVCC=$(command -v nvcc || true)
for c in "${CUDA_HOME:-}/bin/nvcc" /usr/local/cuda/bin/nvcc; do
  [ -z "$NVCC" ] && [ -x "$c" ] && NVCC=$c
done
if [ -z "$NVCC" ]; then
  echo "[kvswap] nvcc not found: CUDA compile check skipped"
  exit 0
fi
OUT=csrc/build/cuda_check
mkdir -p $OUT
key=$( { cat csrc/kvswap_cuda*.cu csrc/*.h csrc/check_cuda.sh; "$NVCC" --version; } | sha256sum | cut -d' ' -f1)
if [ -f $OUT/.ok ] && [ "$(cat $OUT/.ok)" = "$key" ]; then
  echo "[kvswap] CUDA compile check up to date ($NVCC)"
  exit 0
fi
ARCH="-gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90"
echo "[kvswap] nvcc: compiling kvswap_cuda.cu (kernels) for sm_80, sm_90"
"$NVCC" -std=c++20 -O2 $ARCH -c csrc/kvswap_cuda.cu -o $OUT/kvswap_cuda.o

TORCH_INC=$("$PY" -c 'from torch.utils.cpp_extension import include_paths; print(" ".join("-I" + p for p in include_paths()))')
PY_INC=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
if "$PY" -c 'import torch, os, sys; sys.exit(not os.path.exists(os.path.join(os.path.dirname(torch.__file__), "include/c10/cuda/CUDAStream.h")))'; then
  echo "[kvswap] nvcc: compiling kvswap_cuda_ops.cu (torch binding) against torch headers"
  mkdir -p $OUT/include/c10/cuda/impl
  [ -n "$("$PY" -c 'import torch, os; p = os.path.join(os.path.dirname(torch.__file__), "include/c10/cuda/impl/cuda_cmake_macros.h"); print(p if os.path.exists(p) else "")')" ] ||
    echo '#define C10_CUDA_BUILD_SHARED_LIBS' > $OUT/include/c10/cuda/impl/cuda_cmake_macros.h
  # 20013/20015: torch's own BFloat16.h calls a constexpr host function from host-device code;
  # harmless for this check and not ours to fix.
  "$NVCC" -std=c++20 -O2 $ARCH -diag-suppress 20013,20015 -DTEOLA_WITH_CUDA=1 $TORCH_INC -I$OUT/include -I"$PY_INC" \
      -c csrc/kvswap_cuda_ops.cu -o $OUT/kvswap_cuda_ops.o
else
  echo "[kvswap] torch ships no c10/cuda headers: binding not compile-checked"
fi
echo "$key" > $OUT/.ok
echo "[kvswap] CUDA compile check passed"
