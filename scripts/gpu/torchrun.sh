#!/usr/bin/env bash
# torchrun.sh: the msccl Python package on CUDA tensors under torchrun, on
# the GPU machine (it has torch, torchrun and CUDA but no Go). Build the
# library here first; scripts/gpu-pack writes it into .gpu/lib:
#   bash scripts/gpu-pack ./runtime/cuda     # any package; the library always
# then there, from the repository root:
#   bash scripts/gpu/torchrun.sh                       # 4 ranks, the checks
#   NPROC=2 bash scripts/gpu/torchrun.sh examples/python/torchrun_allreduce.py --device cuda
# Arguments: the Python file (default python/tests/gpu/torchrun_check.py)
# and its arguments. Several ranks share one GPU (MSCCL_CUDA_DEVICE=
# round-robin unless set); the package is imported from python/ without
# installing (PYTHONPATH) and loads MSCCL_LIBRARY (default
# .gpu/lib/libmsccl.so); MPS=1 starts an MPS server for the run (below). Output goes to $OUT/torchrun.log too; exit status
# is torchrun's (non-zero when a rank failed a check). TIMEOUT (default
# 540 s) bounds the run: with four ranks taking turns on one GPU (no MPS)
# the collectives part alone took 40 s in run6, and a 110 s limit cut the
# graph part short with nothing printed; the check now prints each graph
# stage as it ends, and MSCCL_GRAPH_REPLAYS sets the replays (10 by
# default when ranks share a GPU).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
lib=${MSCCL_LIBRARY:-$root/.gpu/lib/libmsccl.so}
if [ ! -f "$lib" ]; then
  echo "torchrun.sh: $lib is missing: build it on a machine with Go (bash scripts/gpu-pack writes .gpu/lib/libmsccl.so) and carry .gpu/" >&2
  exit 2
fi
export MSCCL_LIBRARY=$lib PYTHONPATH=$root/python${PYTHONPATH:+:$PYTHONPATH}
export MSCCL_CUDA_DEVICE=${MSCCL_CUDA_DEVICE:-round-robin}
# NCCL (the reference where there is one GPU per rank) must not use NVLink
# multicast on shared machines.
export NCCL_NVLS_ENABLE=0
script=${1:-python/tests/gpu/torchrun_check.py}
[ $# -gt 0 ] && shift
if command -v torchrun >/dev/null; then run=(torchrun); else run=(python3 -m torch.distributed.run); fi
out=${OUT:-/tmp}
# MPS=1 runs the ranks as clients of an MPS server started here (pipe and
# logs private to this run, stopped at the end): their kernels then share
# the GPU at once instead of taking turns, about 48x faster a collective
# with 4 processes (docs/evidence/gpu_procs4_mps.log), which is what lets
# the graph part replay 100 times (MSCCL_GRAPH_REPLAYS) in the time limit.
if [ -n "${MPS:-}" ]; then
  mps=$(mktemp -d)
  export CUDA_MPS_PIPE_DIRECTORY=$mps/pipe CUDA_MPS_LOG_DIRECTORY=$out/mps-torchrun
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  nvidia-cuda-mps-control -d || { echo "torchrun.sh: nvidia-cuda-mps-control -d failed" >&2; exit 2; }
  trap 'echo quit | nvidia-cuda-mps-control; rm -rf "$mps"' EXIT
  echo "== MPS server for this run (pipe $CUDA_MPS_PIPE_DIRECTORY)" | tee -a "$out/torchrun.log"
fi
echo "== ${run[*]} --standalone --nproc_per_node ${NPROC:-4} $script $*" | tee -a "$out/torchrun.log"
timeout "${TIMEOUT:-540}" "${run[@]}" --standalone --nproc_per_node "${NPROC:-4}" "$script" "$@" 2>&1 | tee -a "$out/torchrun.log"
rc=${PIPESTATUS[0]}
echo "== exit $rc" | tee -a "$out/torchrun.log"
exit "$rc"
