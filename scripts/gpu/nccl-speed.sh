#!/usr/bin/env bash
# nccl-speed.sh: the speed figures of the NCCL-compatible library and of
# one process per rank, on the GPU machine (one GPU, 4 ranks). Build here:
#   bash scripts/gpu-pack ./cmd/msccl-bench && scripts/build-nccl
# then there, from the repository root with .gpu/:
#   bash scripts/gpu/nccl-speed.sh
# It prints, into $OUT/nccl-speed.log:
#   1. ranks in one process: msccl-bench --ranks 4 for each ALGOS entry
#      (default: allreduce_allpairs_packet 1K-256K and allreduce_twoshot
#      1M-256M, f32 sum, -f 4), no MPS;
#   2. under one MPS server: the same rows with --procs 4 --device cuda
#      (one process per rank), then the ratio table procs / in-process;
#   3. torch.distributed.all_reduce of 1 KiB under torchrun with
#      LD_PRELOAD=libmsccl_nccl.so (python/tests/gpu/nccl_speed.py: through
#      ProcessGroupNCCL, ncclAllReduce directly by ctypes, and a torch op)
#      next to msccl-bench --procs 4 at 1 KiB with as many iterations
#      (ITERS); then one rank through the real NCCL and through ours
#      (ONE_RANK=0 skips it). SKIP_INPROC=1 skips part 1.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
out=${OUT:-/tmp}
log=$out/nccl-speed.log
bench=$root/.gpu/bin/msccl-bench
lib=$root/.gpu/lib/libmsccl_nccl.so
iters=${ITERS:-2000}
algos=${ALGOS:-"allreduce_allpairs_packet:1K:256K allreduce_twoshot:1M:256M"}
skip_inproc=${SKIP_INPROC:-}
[ -x "$bench" ] && [ -f "$lib" ] || { echo "nccl-speed.sh: build .gpu/bin/msccl-bench and .gpu/lib/libmsccl_nccl.so first (see the header)" >&2; exit 2; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$log"
rc=0
for a in $algos; do
  [ -n "$skip_inproc" ] && break
  IFS=: read -r name b e <<<"$a"
  echo "== in-process: msccl-bench --algo $name --ranks 4 -b $b -e $e -f 4 -c --json" | tee -a "$log"
  timeout 240 "$bench" --algo "$name" --ranks 4 -b "$b" -e "$e" -f 4 -n 500 -w 50 -c --json | tee "$out/inproc_$name.json" | tee -a "$log" || rc=1
done
mps=$(mktemp -d)
export CUDA_MPS_PIPE_DIRECTORY=$mps/pipe CUDA_MPS_LOG_DIRECTORY=$mps/log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
nvidia-cuda-mps-control -d || { echo "nccl-speed.sh: nvidia-cuda-mps-control -d failed" >&2; exit 2; }
trap 'echo quit | nvidia-cuda-mps-control; rm -rf "$mps"' EXIT
for a in $algos; do
  IFS=: read -r name b e <<<"$a"
  echo "== MPS, one process per rank: msccl-bench --algo $name --procs 4 --device cuda -b $b -e $e -f 4 -c --json" | tee -a "$log"
  timeout 300 "$bench" --algo "$name" --ranks 4 --procs 4 --device cuda -b "$b" -e "$e" -f 4 -n 500 -w 50 -c --json | tee "$out/procs_$name.json" | tee -a "$log" || rc=1
done
echo "== ratio: one process per rank (MPS) / ranks in one process" | tee -a "$log"
python3 - "$out" $algos <<'PY' | tee -a "$log"
import json, sys
out = sys.argv[1]
def rows(f):
    r = {}
    for line in open(f):
        line = line.strip()
        if line.startswith("{"):
            o = json.loads(line)
            if not o.get("skipped"):
                r[o["bytes"]] = o
    return r
print("| plan | bytes | in-process us | procs (MPS) us | ratio | #wrong |")
print("|---|---|---|---|---|---|")
for a in sys.argv[2:]:
    name = a.split(":")[0]
    try:
        i, p = rows("%s/inproc_%s.json" % (out, name)), rows("%s/procs_%s.json" % (out, name))
    except OSError as e:
        print("| %s | missing: %s |" % (name, e)); continue
    for b in sorted(i):
        if b in p:
            print("| %s | %d | %.2f | %.2f | %.3f | %d/%d |" % (name, b, i[b]["time_us"], p[b]["time_us"], p[b]["time_us"] / i[b]["time_us"], i[b]["wrong"], p[b]["wrong"]))
PY
small=${algos%% *}; small=${small%%:*}
echo "== msccl-bench --algo $small --procs 4 --device cuda -b 1K -e 1K -n $iters -w 100" | tee -a "$log"
timeout 200 "$bench" --algo "$small" --ranks 4 --procs 4 --device cuda -b 1K -e 1K -n "$iters" -w 100 -c 2>&1 | tee -a "$log" || rc=1
if command -v torchrun >/dev/null; then run=(torchrun); else run=(python3 -m torch.distributed.run); fi
echo "== LD_PRELOAD=$lib ${run[*]} --standalone --nproc_per_node 4 python/tests/gpu/nccl_speed.py --bytes 1024 --iters $iters" | tee -a "$log"
MSCCL_DEVICE=cuda MSCCL_CUDA_DEVICE=0 NCCL_NVLS_ENABLE=0 MSCCL_NCCL_FALLBACK=0 LD_PRELOAD=$lib timeout 200 \
  "${run[@]}" --standalone --nproc_per_node 4 python/tests/gpu/nccl_speed.py --bytes 1024 --iters "$iters" 2>&1 | tee -a "$log"
[ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
if [ "${ONE_RANK:-1}" != 0 ]; then  # ONE_RANK=0 skips this part
  # torch's own cost of a call: one rank, through the real NCCL (the one
  # torch ships) and through the library (a world of one copies locally).
  echo "== one rank: real NCCL, then LD_PRELOAD=$lib" | tee -a "$log"
  NCCL_NVLS_ENABLE=0 timeout 120 "${run[@]}" --standalone --nproc_per_node 1 python/tests/gpu/nccl_speed.py --bytes 1024 --iters "$iters" 2>&1 | grep -v Warning | tee -a "$log"
  MSCCL_DEVICE=cuda MSCCL_CUDA_DEVICE=0 LD_PRELOAD=$lib timeout 120 "${run[@]}" --standalone --nproc_per_node 1 python/tests/gpu/nccl_speed.py --bytes 1024 --iters "$iters" 2>&1 | grep -v Warning | tee -a "$log"
fi
echo "== exit $rc" | tee -a "$log"
exit $rc
