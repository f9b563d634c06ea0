#!/usr/bin/env bash
# nccl-torch.sh: PyTorch's NCCL backend on libmsccl_nccl.so (LD_PRELOAD),
# on the GPU machine. Build the library here first:
#   scripts/build-nccl            # writes .gpu/lib/libmsccl_nccl.so
# then there, from the repository root (carrying .gpu/):
#   bash scripts/gpu/nccl-torch.sh    # 4 ranks as MPS clients of GPU 0
# It lists the nccl* symbols libtorch_cuda.so imports that the library
# does not export (each would reach the real NCCL with one of our
# communicators), then runs python/tests/gpu/nccl_preload_check.py under
# torchrun. Output goes to $OUT/nccl-torch.log; the exit status is
# torchrun's, or 3 when a symbol is missing.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
lib=${MSCCL_NCCL_LIBRARY:-$root/.gpu/lib/libmsccl_nccl.so}
out=${OUT:-/tmp}
log=$out/nccl-torch.log
[ -f "$lib" ] || { echo "nccl-torch.sh: $lib is missing: run scripts/build-nccl on a machine with Go and carry .gpu/" >&2; exit 2; }
torchlib=$(python3 -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cuda.so"))')
{
  echo "== nccl symbols $torchlib imports, and whether $lib exports them"
  missing=0
  for s in $(nm -D --undefined-only "$torchlib" | awk '{print $NF}' | grep '^nccl' | sed 's/@.*//' | sort -u); do
    if nm -D --defined-only "$lib" | awk '{print $NF}' | grep -qx "$s"; then echo "  ok      $s"; else echo "  MISSING $s"; missing=1; fi
  done
} 2>&1 | tee -a "$log"
missing=$(grep -c "MISSING" "$log" || true)
export MSCCL_CUDA_DEVICE=${MSCCL_CUDA_DEVICE:-0} MSCCL_DEVICE=cuda NCCL_NVLS_ENABLE=0
export MSCCL_NCCL_FALLBACK=${MSCCL_NCCL_FALLBACK:-0} MSCCL_DEBUG=${MSCCL_DEBUG:-INFO}
if [ -z "${NO_MPS:-}" ]; then
  mps=$(mktemp -d)
  export CUDA_MPS_PIPE_DIRECTORY=$mps/pipe CUDA_MPS_LOG_DIRECTORY=$out/mps-nccl-torch
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  nvidia-cuda-mps-control -d || { echo "nccl-torch.sh: nvidia-cuda-mps-control -d failed" >&2; exit 2; }
  trap 'echo quit | nvidia-cuda-mps-control; rm -rf "$mps"' EXIT
  echo "== MPS server for this run" | tee -a "$log"
fi
# The nccl-tests-style table: nvcc against nccl/nccl.h, ranks of one
# process on GPU 0 (PERF=0 skips it).
if [ "${PERF:-1}" != 0 ]; then
  libdir=$(dirname "$lib")
  echo "== nvcc ncclperf; ./ncclperf ${NPROC:-4}" | tee -a "$log"
  if nvcc -O2 -Inccl -o "$out/ncclperf" nccl/testdata/ncclperf.cu -L"$libdir" -lmsccl_nccl -Xlinker -rpath="$libdir" 2>&1 | tee -a "$log"; then
    timeout "${PERF_TIMEOUT:-120}" "$out/ncclperf" "${NPROC:-4}" 2>&1 | tee -a "$log"
    echo "== ncclperf exit ${PIPESTATUS[0]}" | tee -a "$log"
  fi
fi
if command -v torchrun >/dev/null; then run=(torchrun); else run=(python3 -m torch.distributed.run); fi
script=${1:-python/tests/gpu/nccl_preload_check.py}
echo "== LD_PRELOAD=$lib ${run[*]} --standalone --nproc_per_node ${NPROC:-4} $script" | tee -a "$log"
LD_PRELOAD=$lib timeout "${TIMEOUT:-200}" "${run[@]}" --standalone --nproc_per_node "${NPROC:-4}" "$script" 2>&1 | tee -a "$log"
rc=${PIPESTATUS[0]}
echo "== exit $rc (missing symbols: $missing)" | tee -a "$log"
[ "$rc" -eq 0 ] && [ "$missing" -ne 0 ] && rc=3
exit "$rc"
