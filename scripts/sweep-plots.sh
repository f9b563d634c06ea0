#!/bin/bash
# sweep-plots.sh LOG [MACHINE]: the per-algorithm plots of docs/BENCHMARKS.md
# from the log of `bash scripts/gpu/perf.sh sweep` (perf-sweep.log), run
# here (no GPU needed): for each collective, bus bandwidth and time
# against size, every library algorithm of that collective in its default
# shape and the hand-written kernels run beside them (--reference).
# Writes docs/plots/sweep-COLLECTIVE-{busbw,time}.svg. MACHINE goes under
# the titles (default: the machine kind and today's date).
set -euo pipefail
log=${1:?usage: sweep-plots.sh perf-sweep.log [MACHINE]}
machine=${2:-"nvidia-h200, $(date -u +%F)"}
root=$(cd "$(dirname "$0")/.." && pwd)
for col in allreduce allgather reducescatter alltoall broadcast reduce gather scatter; do
  # Series are named by the step, which is the algorithm's name; a
  # reference series is "reference NAME @ STEP". "reduce_" would also
  # match reducescatter_*, hence the explicit end of the prefix.
  re="^(reference ${col}_\\S+ @ )?${col}_"
  grep -qE "^== ${col}_" "$log" || continue
  for metric in busbw time; do
    python3 "$root/scripts/plot-bench.py" --metric "$metric" --series "$re" \
      --title "$col, 8 ranks on one H200, f16, default shapes" --machine "$machine" \
      -o "$root/docs/plots/sweep-$col-$metric.svg" "$log"
  done
  echo "docs/plots/sweep-$col-{busbw,time}.svg"
done
