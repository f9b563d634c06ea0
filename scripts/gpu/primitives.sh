#!/bin/bash
# primitives.sh: examples/primitives as two processes (ranks) sharing one
# GPU under MPS: the ping-pong round trip over a memory channel, the
# bandwidth table (put, get, LL16 packets, a device copy and the fraction
# of it put and get reach, port-channel putWithSignal) and the overlap
# example, each rank checking its data; and, for comparison, the
# executor's ping-pong plan (testdata/perf/pingpong.msccl: hops of one
# put, signal and wait between two ranks) timed by msccl-bench with the
# same two processes under MPS (--procs 2 -c) and with both ranks in one
# process (graph replay, the command of perf.sh latency, run before MPS
# starts), so that the log holds both round trips. First, where gpu-pack
# packed them, the package's GPU tests.
# Build on a machine with Go, from the repo root:
#   bash scripts/gpu-pack ./examples/primitives && go build -trimpath -o .gpu/bin/primitives ./examples/primitives
# (gpu-pack also builds .gpu/bin/msccl-compile and msccl-bench), then on
# the GPU machine (no Go needed), from the repo root with .gpu/:
#   bash scripts/gpu/primitives.sh
# NO_MPS=1 runs the two processes time-sliced instead. TIMEOUT (default
# 240) bounds each rank and each msccl-bench run. Output:
# $OUT/primitives.log; exit status non-zero when a rank or a run failed.
OUT=${OUT:-/tmp}
root=$(pwd)
bin=${BIN:-$root/.gpu/bin/primitives}
bench=$root/.gpu/bin/msccl-bench
log=$OUT/primitives.log
for f in "$bin" "$bench" "$root/.gpu/bin/msccl-compile"; do
  [ -x "$f" ] || { echo "primitives.sh: $f is missing (build it as the header says)" >&2; exit 2; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rc=0
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$log"

# hops is the plan's count of put-signal-wait hops; a round trip is two.
hops=16
# executor LABEL ARGS...: msccl-bench on the ping-pong plan at 1 KiB, its
# output logged, and its time per run, per hop and per round trip.
executor() {
  local label=$1; shift
  echo "== executor ping-pong, $label: msccl-bench $*" >>"$log"
  timeout "${TIMEOUT:-240}" "$bench" "$@" --plan "$tmp/pingpong.json" --ranks 2 -b 1K -e 1K -d f32 -n 200 -w 20 >"$tmp/bench.out" 2>&1 || {
    echo "executor ping-pong, $label: msccl-bench exit $?" | tee -a "$log"; rc=1
    grep -v '^\s*$' "$tmp/bench.out" | tail -3 | cut -c1-300
  }
  cat "$tmp/bench.out" >>"$log"
  awk -v label="$label" -v hops=$hops '$1 == 1024 && $5 + 0 > 0 {
    printf "executor ping-pong (pingpong.msccl, %d hops), %s: %.2f us a run, %.2f us a hop, %.2f us a round trip\n", hops, label, $5, $5 / hops, 2 * $5 / hops
  }' "$tmp/bench.out" | tee -a "$log"
}
# The package's GPU tests (the receivers' check and the loop, the
# ping-pong with both ends in one launch, a wait the watchdog ends),
# where gpu-pack built them.
if [ -x "$root/.gpu/examples_primitives.test" ]; then
  echo "== go test ./examples/primitives (packed)" >>"$log"
  (cd "$root/examples/primitives" && timeout "${TIMEOUT:-240}" "$root/.gpu/examples_primitives.test" -test.v -test.count=1) >"$tmp/tests.out" 2>&1 || {
    echo "go test ./examples/primitives: exit $?" | tee -a "$log"; rc=1
  }
  cat "$tmp/tests.out" >>"$log"
else
  echo "go test ./examples/primitives: not packed (.gpu/examples_primitives.test), skipped" | tee -a "$log"
fi
"$root/.gpu/bin/msccl-compile" compile "$root/testdata/perf/pingpong.msccl" -D hops=$hops -o "$tmp/pingpong.json" >>"$log" 2>&1 || {
  echo "primitives.sh: msccl-compile of testdata/perf/pingpong.msccl failed (see $log)" | tee -a "$log"; exit 1
}
executor "both ranks in one process, graph replay" -G

if [ -z "${NO_MPS:-}" ]; then
  mps=$tmp/mps
  export CUDA_MPS_PIPE_DIRECTORY=$mps/pipe CUDA_MPS_LOG_DIRECTORY=$mps/log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  nvidia-cuda-mps-control -d || { echo "primitives.sh: nvidia-cuda-mps-control -d failed" >&2; exit 2; }
  trap 'echo quit | nvidia-cuda-mps-control; rm -rf "$tmp"' EXIT
fi

# The example's job: its variables in a subshell of its own, so that
# msccl-bench --procs below starts a job of its own rather than joining
# it. A fresh secret per job, in the environment only (never on a
# command line).
(
  MSCCL_SECRET=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
  export MSCCL_SECRET MSCCL_WORLD_SIZE=2 MSCCL_BOOTSTRAP_ADDR=127.0.0.1:$((20000 + RANDOM % 20000)) MSCCL_CUDA_DEVICE=0
  pids=()
  for r in 0 1; do
    MSCCL_RANK=$r timeout "${TIMEOUT:-240}" "$bin" >"$tmp/rank$r.out" 2>&1 &
    pids+=($!)
  done
  s=0
  for r in 0 1; do
    wait "${pids[$r]}"; e=$?
    echo "rank $r exit $e" | tee -a "$log"
    [ $e -eq 0 ] || s=1
  done
  exit $s
) || rc=1
for r in 0 1; do
  echo "== rank $r" >>"$log"
  cat "$tmp/rank$r.out" >>"$log"
done

sharing="under MPS"
[ -z "${NO_MPS:-}" ] || sharing=time-sliced
executor "2 processes $sharing" --procs 2 --device cuda -c

echo "== examples/primitives, rank 0 (both ranks' output: $log)"
grep -v '^\s*$' "$tmp/rank0.out" | head -40
sed -n 's/^primitives:/rank 1: &/p' "$tmp/rank1.out" | head -5
grep -E '^executor ping-pong|^--- ' "$log"
exit $rc
