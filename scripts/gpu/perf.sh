#!/bin/bash
# perf.sh: the reference-kernel and GPU-timeline evidence of issue 17.
# Run on a GPU machine from the repo root after
#   bash scripts/gpu-pack ./executor/cuda ./kernels ./kernels/reference .
# It runs the GPU tests of the reference kernels and the trace, then
# msccl-bench with --reference (plan and hand-written kernel timed in one
# run, -c checks both) and with --trace. Logs and traces go to $OUT.
# Environment: SIZES_SMALL (default "-b 1K -e 64K"), SIZES_LARGE
# (default "-b 64M -e 256M"), RANKS (default 8).
OUT=${OUT:-/tmp}
root=$(pwd)
bench="$root/.gpu/bin/msccl-bench"
ranks=${RANKS:-8}
small=${SIZES_SMALL:-"-b 1K -e 64K"}
large=${SIZES_LARGE:-"-b 64M -e 256M"}
rc=0
step() { # name, command...
  local name=$1; shift
  echo "== $name: $*"
  timeout 580 "$@" >"$OUT/$name.log" 2>&1 || { echo "   exit $?"; rc=1; }
  grep -vE '^\s*$' "$OUT/$name.log" | tail -30 | cut -c1-200
}
step tests bash "$root/.gpu/run" -test.run 'Reference|Trace|CompilePTX'
# One run per plan: the plan's row, then the reference's line with plan/reference.
for g in "" "-G"; do
  tag=${g:+graph}; tag=${tag:-launch}
  step "ll_oneshot_$tag" "$bench" --algo allreduce_allpairs_packet --ranks "$ranks" $small -d f16 -c $g --reference allreduce_oneshot_ll
  step "twoshot_small_$tag" "$bench" --algo allreduce_twoshot --ranks "$ranks" $small -d f16 -c $g --reference allreduce_twoshot
  step "twoshot_large_$tag" "$bench" --algo allreduce_twoshot --ranks "$ranks" $large -d f16 -c $g -n 10 --reference allreduce_twoshot
  step "allgather_large_$tag" "$bench" --algo allgather_direct --ranks "$ranks" $large -d f16 -c $g -n 10 --reference allgather_direct
done
# The same with 4 instances (4x the blocks, so 4x the reference's grid too).
step twoshot_large_i4 "$bench" --algo allreduce_twoshot --ranks "$ranks" -D instances=4 $large -d f16 -G -n 10 --reference allreduce_twoshot
# Timelines: the traced kernel instance; each run writes NAME.json (GPU)
# and NAME.cpu.json (the CPU executor's simulation of the same plan). The
# rows of the traced runs against the untraced ones state the overhead.
step trace_ll "$bench" --algo allreduce_allpairs_packet --ranks "$ranks" -b 1K -e 64K -f 64 -d f16 -G --trace "$OUT/ll.json"
step notrace_ll "$bench" --algo allreduce_allpairs_packet --ranks "$ranks" -b 1K -e 64K -f 64 -d f16 -G
step trace_twoshot "$bench" --algo allreduce_twoshot --ranks "$ranks" -b 64M -e 64M -d f16 -G -n 10 --trace "$OUT/twoshot_64M.json"
step notrace_twoshot "$bench" --algo allreduce_twoshot --ranks "$ranks" -b 64M -e 64M -d f16 -G -n 10
step trace_ring "$bench" --algo allreduce_ring --ranks "$ranks" -b 1K -e 1K -d f16 -G --trace "$OUT/ring_1K.json"
step notrace_ring "$bench" --algo allreduce_ring --ranks "$ranks" -b 1K -e 1K -d f16 -G
ls -la "$OUT"
exit $rc
