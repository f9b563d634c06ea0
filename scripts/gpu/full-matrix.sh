#!/bin/bash
# full-matrix.sh N: the FULL GPU oracle matrix of issue 13, N passes in a
# row (default 1), stopping at the first failing pass. Run on the GPU
# machine from the repo root after `bash scripts/gpu-pack ./executor/cuda`.
#
# Coverage of one pass (MSCCL_GPU_FULL=1, executor/cuda/oracle_test.go
# matrix(); unchanged by this script):
#   configurations: every peer fixture of testdata/peer-plans except the
#     NVLS ones (TestGPUPeerPlans), and every library algorithm of
#     algorithms/*.msccl at 2, 3, 4, 6 and 8 ranks where it compiles
#     (TestGPUAlgorithms; hierarchical ones as 2 "nodes" of n/2 ranks):
#     89 configurations
#   cases per configuration: {64 MiB, 1 MiB, 16·(n·1009+3) B (uneven),
#     1 KiB}, each moved to the next size the plan's rule admits, ×
#     {f32, f16, bf16, i32, f8e4m3, f8e5m2} × {sum, min, max where the
#     plan reduces, else sum} × 10 back-to-back launches, LL16; plus one
#     LL8 case (uneven size, bf16 sum, 4 launches): 4481 cases
#   every launch runs eagerly and by CUDA-graph replay, on separate
#     buffers fed the same inputs; both outputs of every rank must be
#     bit-identical to the CPU executor's (eager compared on the host,
#     graph compared with eager on the device), as must every
#     CPU-executor launch with the collective's definition. Inputs are
#     built on the device from the CPU executor's recipe and checked
#     against its bytes at launch 0 of every case (MSCCL_GPU_HOST_INPUTS=1
#     copies every launch's inputs from the host instead); the eager
#     outputs come back outside the GPU lock (MSCCL_GPU_COPY_LOCKED=1
#     keeps that copy under it).
# Environment: PASS_TIMEOUT (seconds per pass, default 1800),
# MSCCL_GPU_TEST_MEM (estimated host bytes of concurrent cases, default
# 72e9), MSCCL_GPU_CPU_POOL (CPU-run arrays kept between cases, default
# 16 GiB), MSCCL_GPU_STAGING_IDLE (idle pinned staging kept, default 8
# GiB), GOMEMLIMIT (default 96GiB: the machine has 128 GiB and pinned
# memory is outside Go's heap), RUN (the -test.run regexp, default
# 'GPUPeerPlans|GPUAlgorithms'), PART=k/2 or k/3 (part of the matrix, for
# device calls shorter than a pass; the parts together are the matrix).
# Of the 5217 GiB of rank·launch bytes the CPU oracle simulates, 1/2 (the
# fixtures, 2-4 ranks) holds about 2350 GiB and 2/2 (6 and 8 ranks) 2870;
# 1/3 (fixtures, 2 and 3 ranks) 1510, 2/3 (4 and 6 ranks) 2075, 3/3 (8
# ranks) 1635. Logs:
# $OUT/full-pass-K.log, one per pass; the summary (one line per pass with
# its time and the configurations' summed CPU-simulation, GPU and waiting
# seconds) on stdout and in $OUT/full-matrix.txt.
set -u
OUT=${OUT:-/tmp}
N=${1:-1}
root=$(pwd)
bin="$root/.gpu/executor_cuda.test"
[ -x "$bin" ] || { echo "full-matrix.sh: $bin missing: run bash scripts/gpu-pack ./executor/cuda first" >&2; exit 2; }
export MSCCL_GPU_FULL=1
export MSCCL_GPU_TEST_MEM=${MSCCL_GPU_TEST_MEM:-72000000000}
export GOMEMLIMIT=${GOMEMLIMIT:-96GiB}
case "${PART:-}" in
  "") run=${RUN:-'GPUPeerPlans|GPUAlgorithms'} ;;
  1/2) run='GPUPeerPlans|GPUAlgorithms/@[234]$' ;;
  2/2) run='GPUAlgorithms/@[68]$' ;;
  1/3) run='GPUPeerPlans|GPUAlgorithms/@[23]$' ;;
  2/3) run='GPUAlgorithms/@[46]$' ;;
  3/3) run='GPUAlgorithms/@8$' ;;
  *) echo "full-matrix.sh: PART is 1/2, 2/2, 1/3, 2/3 or 3/3, not $PART" >&2; exit 2 ;;
esac
sum="$OUT/full-matrix${PART:+-part${PART/\//of}}.txt"
: >"$sum"
rc=0
for k in $(seq 1 "$N"); do
  log="$OUT/full-pass-$k${PART:+-part${PART/\//of}}.log"
  st=$(date +%s)
  # The process's own user and system CPU seconds: the per-case sums
  # below are wall time of cases holding a core, which includes memory
  # stalls; system time is mostly page faults of fresh CPU-oracle arrays.
  TIMEFORMAT='%U %S'
  cpu=$( { time (cd executor/cuda && timeout "${PASS_TIMEOUT:-1800}" "$bin" -test.v -test.count=1 -test.timeout 0 \
    -test.run "$run" >"$log" 2>&1); } 2>&1 )
  rc=$?
  secs=$(( $(date +%s) - st ))
  configs=$(grep -c 'bit-identical to the CPU executor' "$log")
  fails=$(grep -c -- '--- FAIL' "$log")
  status=pass
  if [ "$rc" -eq 0 ] && { [ "$configs" -eq 0 ] || grep -q -- '^--- SKIP: TestGPU' "$log"; }; then
    rc=3 # the GPU tests skipped (no driver or device): nothing was shown
  fi
  [ "$rc" -ne 0 ] && status="FAIL (rc $rc)"
  [ "$rc" -eq 124 ] && status="TIMEOUT after ${PASS_TIMEOUT:-1800}s"
  sums=$(grep -o 'CPU [0-9.]*s, GPU [0-9.]*s, waiting [0-9.]*s' "$log" | tr -d 'CPUGwaitngs,' |
    awk '{c+=$1; g+=$2; w+=$3} END{printf "summed over cases: CPU %.0fs, GPU %.0fs, waiting %.0fs", c, g, w}')
  read -r usr sys <<<"$cpu"
  line="pass $k/$N: $status in ${secs}s; $configs configurations reported, $fails FAIL lines; $sums; process CPU: user ${usr}s, system ${sys}s ($log)"
  echo "$line" | tee -a "$sum"
  if [ "$rc" -ne 0 ]; then
    grep -E -- '--- (FAIL|SKIP)|differs|watchdog|panic' "$log" | head -20 | cut -c1-240 | tee -a "$sum"
    break
  fi
done
exit "$rc"
