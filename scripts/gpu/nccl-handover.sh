#!/usr/bin/env bash
# nccl-handover.sh: the calls libmsccl_nccl.so hands to the real NCCL
# (nccl/testdata/handover.c), on the GPU machine. Build the library here
# first:
#   scripts/build-nccl            # writes .gpu/lib/libmsccl_nccl.so
# then there, from the repository root (carrying .gpu/):
#   bash scripts/gpu/nccl-handover.sh
# MSCCL_NCCL_LIB is the real libnccl.so.2: as given, else PyTorch's
# (torch/../nvidia/nccl/lib), else ldconfig's. A world of one rank runs
# first (the real NCCL takes it on any GPU); then two ranks on GPU 0,
# which the real NCCL usually refuses ("Duplicate GPU detected"): that
# run is reported, not required. Output goes to $OUT/nccl-handover.log;
# the exit status is the one-rank run's.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
lib=${MSCCL_NCCL_LIBRARY:-$root/.gpu/lib/libmsccl_nccl.so}
libdir=$(dirname "$lib")
out=${OUT:-/tmp}
log=$out/nccl-handover.log
[ -f "$lib" ] || { echo "nccl-handover.sh: $lib is missing: run scripts/build-nccl on a machine with Go and carry .gpu/" >&2; exit 2; }
real=${MSCCL_NCCL_LIB:-}
if [ -z "$real" ]; then
  tdir=$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))' 2>/dev/null)
  for c in "$tdir/../nvidia/nccl/lib/libnccl.so.2" $(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2/ {print $NF}'); do
    if [ -f "$c" ]; then real=$(readlink -f "$c"); break; fi
  done
fi
[ -n "$real" ] || { echo "nccl-handover.sh: no libnccl.so.2 (set MSCCL_NCCL_LIB)" >&2; exit 2; }
export MSCCL_NCCL_LIB=$real MSCCL_DEVICE=cuda MSCCL_CUDA_DEVICE=${MSCCL_CUDA_DEVICE:-0} MSCCL_DEBUG=INFO NCCL_DEBUG=${NCCL_DEBUG:-WARN} NCCL_NVLS_ENABLE=0
{
  echo "== $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); MSCCL_NCCL_LIB=$real"
  echo "== nvcc -DWITH_CUDA handover.c"
} | tee "$log"
nvcc -DWITH_CUDA -O2 -Inccl -o "$out/handover" nccl/testdata/handover.c -L"$libdir" -lmsccl_nccl -Xlinker -rpath="$libdir" -lm 2>&1 | tee -a "$log"
[ -x "$out/handover" ] || exit 2
echo "== one rank: handover gpu 0 1" | tee -a "$log"
rm -f "$out/id1"
timeout "${TIMEOUT:-120}" "$out/handover" gpu 0 1 "$out/id1" 2>&1 | tee -a "$log"
rc=${PIPESTATUS[0]}
echo "== one rank: exit $rc" | tee -a "$log"
echo "== two ranks on GPU 0: handover gpu R 2" | tee -a "$log"
rm -f "$out/id2"
for r in 0 1; do timeout "${TIMEOUT2:-60}" "$out/handover" gpu $r 2 "$out/id2" > "$out/two.$r" 2>&1 & done
wait
for r in 0 1; do sed "s/^/[rank $r] /" "$out/two.$r" | tee -a "$log"; done
echo "== two ranks done" | tee -a "$log"
exit "$rc"
