#!/usr/bin/env bash
# Build the batched KV swap extension (engines/kvswap/_native/teola_kvswap*.so) in place.
# Idempotent: skips in well under a second when the sources and torch are unchanged.
# Where nvcc exists but torch has no CUDA, it also compile-checks the CUDA sources (check_cuda.sh).
# Env: PYTHON (default: python on PATH), MAX_JOBS (default 2), TEOLA_KVSWAP_CUDA=0 (no CUDA path).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-$(command -v python || command -v python3)}
OUT=engines/kvswap/_native
STAMP=csrc/build/.stamp
mkdir -p csrc/build

key=$( { cat csrc/*.h csrc/*.cpp csrc/*.cu csrc/*.py csrc/*.sh;
         "$PY" -c 'import sys, importlib.util as u; print(sys.version); print(open(u.find_spec("torch").submodule_search_locations[0] + "/version.py").read())';
         echo "${TEOLA_KVSWAP_CUDA:-auto}"; } | sha256sum | cut -d' ' -f1)
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$key" ] && ls $OUT/teola_kvswap*.so >/dev/null 2>&1; then
  echo "[kvswap] extension up to date"
  exit 0
fi

start=$(date +%s)
rm -f $OUT/teola_kvswap*.so
(cd csrc && MAX_JOBS=${MAX_JOBS:-2} "$PY" setup_ext.py)
"$PY" -c 'import torch, engines.kvswap._native.teola_kvswap as m; print("[kvswap] built; WITH_CUDA =", m.WITH_CUDA)'

cuda_torch=$("$PY" -c 'import torch; print(int(torch.version.cuda is not None))')
if [ "$cuda_torch" = 0 ]; then
  bash csrc/check_cuda.sh
fi
echo "$key" > "$STAMP"
echo "[kvswap] done in $(( $(date +%s) - start )) s"
