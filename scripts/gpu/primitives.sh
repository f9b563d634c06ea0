#!/bin/bash
# primitives.sh: examples/primitives as two processes (ranks) sharing one
# GPU under MPS: the ping-pong round trip over a memory channel and the
# put / get / LL16 bandwidth table, each rank checking its data.
# Build on a machine with Go, from the repo root:
#   bash scripts/gpu-pack ./examples/primitives && go build -trimpath -o .gpu/bin/primitives ./examples/primitives
# then on the GPU machine (no Go needed), from the repo root with .gpu/:
#   bash scripts/gpu/primitives.sh
# NO_MPS=1 runs the two processes time-sliced instead. TIMEOUT (default
# 240) bounds each rank. Output: $OUT/primitives.log; exit status non-zero
# when a rank failed.
OUT=${OUT:-/tmp}
bin=${BIN:-$(pwd)/.gpu/bin/primitives}
log=$OUT/primitives.log
[ -x "$bin" ] || { echo "primitives.sh: $bin is missing (build it as the header says)" >&2; exit 2; }
if [ -z "${NO_MPS:-}" ]; then
  mps=$(mktemp -d)
  export CUDA_MPS_PIPE_DIRECTORY=$mps/pipe CUDA_MPS_LOG_DIRECTORY=$mps/log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  nvidia-cuda-mps-control -d || { echo "primitives.sh: nvidia-cuda-mps-control -d failed" >&2; exit 2; }
  trap 'echo quit | nvidia-cuda-mps-control; rm -rf "$mps"' EXIT
fi
# A fresh secret per job, in the environment only (never on a command line).
MSCCL_SECRET=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
port=$((20000 + RANDOM % 20000))
export MSCCL_SECRET MSCCL_WORLD_SIZE=2 MSCCL_BOOTSTRAP_ADDR=127.0.0.1:$port MSCCL_CUDA_DEVICE=0
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$log"
pids=()
for r in 0 1; do
  MSCCL_RANK=$r timeout "${TIMEOUT:-240}" "$bin" >"$OUT/primitives-rank$r.out" 2>&1 &
  pids+=($!)
done
rc=0
for r in 0 1; do
  wait "${pids[$r]}"; s=$?
  echo "rank $r exit $s" | tee -a "$log"
  [ $s -eq 0 ] || rc=1
done
for r in 0 1; do
  echo "== rank $r" >>"$log"
  cat "$OUT/primitives-rank$r.out" >>"$log"
  rm -f "$OUT/primitives-rank$r.out"
done
grep -v '^\s*$' "$log" | head -40
exit $rc
