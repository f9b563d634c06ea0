#!/usr/bin/env bash
# stage.sh: the GPU checks of the kernel's staging of a communicator's
# caller buffers (MSCCL_STAGE=kernel, executor/cuda kstage.go), against
# the copy-engine staging in the same run. Build here:
#   bash scripts/gpu-pack . ./executor/cuda ./capi && go build -trimpath -o .gpu/bin/msccl-bench ./cmd/msccl-bench && scripts/build-nccl
# then there, from the repository root with .gpu/:
#   bash scripts/gpu/stage.sh
# 1. the oracle tests of the staged kernel (TestGPURankStaged: 4 ranks,
#    caller buffers poisoned, eager and graph against the CPU executor)
#    and of every collective on caller buffers through the C ABI
#    (TestCUDACommGPU), with MSCCL_STAGE=kernel;
# 2. PyTorch on libmsccl_nccl.so (scripts/gpu/nccl-torch.sh: 4 ranks, MPS,
#    56 checks a rank) with MSCCL_STAGE=kernel;
# 3. torch all_reduce of 1 KiB at 4 ranks (python/tests/gpu/nccl_speed.py)
#    with MSCCL_STAGE=kernel and =copy, one MPS server.
# Output: $OUT/stage.log; exit status non-zero when a check failed.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
out=${OUT:-/tmp}
log=$out/stage.log
lib=$root/.gpu/lib/libmsccl_nccl.so
F='^W12|OMP_NUM|\*\*\*\*|Warning|return func'
rc=0
export MSCCL_STAGE=kernel
echo "== MSCCL_STAGE=kernel bash .gpu/run -test.run 'TestGPURankStaged|TestCUDACommGPU'" | tee "$log"
timeout 200 bash .gpu/run -test.run 'TestGPURankStaged|TestCUDACommGPU' 2>&1 | grep -E -- '--- |^ok|^PASS|^FAIL|_test.go' | tee -a "$log"
[ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
echo "== MSCCL_STAGE=kernel PERF=0 bash scripts/gpu/nccl-torch.sh" | tee -a "$log"
PERF=0 TIMEOUT=150 bash scripts/gpu/nccl-torch.sh 2>&1 | grep -Ev "$F" | grep -v "  ok  " | tee -a "$log"
[ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
if command -v torchrun >/dev/null; then run=(torchrun); else run=(python3 -m torch.distributed.run); fi
mps=$(mktemp -d)
export CUDA_MPS_PIPE_DIRECTORY=$mps/pipe CUDA_MPS_LOG_DIRECTORY=$mps/log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
nvidia-cuda-mps-control -d || { echo "stage.sh: nvidia-cuda-mps-control -d failed" | tee -a "$log"; exit 2; }
trap 'echo quit | nvidia-cuda-mps-control; rm -rf "$mps"' EXIT
for mode in kernel copy; do
  echo "== MSCCL_STAGE=$mode: torch all_reduce 1 KiB, 4 ranks, MPS" | tee -a "$log"
  MSCCL_STAGE=$mode MSCCL_DEVICE=cuda MSCCL_CUDA_DEVICE=0 NCCL_NVLS_ENABLE=0 MSCCL_NCCL_FALLBACK=0 LD_PRELOAD=$lib timeout 100 \
    "${run[@]}" --standalone --nproc_per_node 4 python/tests/gpu/nccl_speed.py --bytes 1024 --iters 1000 2>&1 | grep -Ev "$F" | tee -a "$log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
done
echo "== exit $rc" | tee -a "$log"
exit $rc
