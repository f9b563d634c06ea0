#!/bin/bash
# procs.sh: the evidence of the CUDA device of the communicator (issue 15
# item 2): one process per rank, buffers and semaphores shared through
# CUDA IPC, every rank's result checked against the CPU executor (-c).
# Run on a GPU machine from the repo root after
#   bash scripts/gpu-pack ./runtime/cuda ./runtime/cudadev ./executor/cuda . ./cmd/msccl-bench
# Parts (default: tests matrix; give each its own device call when time is
# short, each stays well under the tool's 10 minutes):
#   tests   the GPU tests: VMM export/import, four processes exchanging
#           memory (legacy and vmm), msccl-bench --procs 4 --device cuda -c
#           on four plans in both modes, a rank killed or stopped
#           mid-collective
#   matrix  every library algorithm at RANKS processes (default "2 4 8")
#           sharing the machine's GPUs round-robin, -c, in the IPC modes of
#           IPC (default "vmm legacy"); about 16 runs a minute, so give
#           each RANKS/IPC pair its own call (RANKS=8 IPC=vmm ...)
#   mps     the matrix's rows at MPS_RANKS processes (default "2 3 4"; IPC
#           modes as above) under MPS (started and stopped here), to
#           compare times with time-slicing. run5 saw every 4-process run
#           lose one rank to "cuDevicePrimaryCtxRetain: out of memory"; the
#           daemon's and server's logs, the GPU's compute mode and memory,
#           and the server list now go to $OUT/mps/, and the rank counts
#           climb so the log shows at how many clients it starts
# $OUT gets procs-PART.log per part and gpu-tests.log from .gpu/run.
OUT=${OUT:-/tmp}
root=$(pwd)
bench="$root/.gpu/bin/msccl-bench"
ranks=${RANKS:-2 4 8}
ipcs=${IPC:-vmm legacy}
parts=${*:-tests matrix}
rc=0
tmp=$(mktemp -d)
step_log=procs step_timeout=240 step_tail=8
. "$(dirname "$0")/step.sh"
algos="allgather_direct allgather_hierarchical allgather_packet allgather_ring allreduce_allpairs allreduce_allpairs_packet allreduce_hierarchical allreduce_ring allreduce_twoshot alltoall_direct broadcast_direct gather_direct reduce_direct reducescatter_direct reducescatter_ring scatter_direct"
matrix() { # ipc modes, rank counts
  for ipc in $1; do
    for n in $2; do
      for a in $algos; do
        defs=""
        case $a in *hierarchical)
          [ $((n % 2)) -eq 1 ] && continue # two nodes of n/2 ranks
          defs="-D nodes=2 -D gpus_per_node=$((n / 2))" ;;
        esac
        MSCCL_CUDA_IPC=$ipc step "$a n=$n $ipc" "$bench" --procs "$n" --device cuda --algo "$a" --ranks "$n" $defs \
          -b 1K -e 1M -f 32 -c -n 5 -w 2 --timeout 5s
      done
    done
  done
}
for part in $parts; do
  case $part in
  tests)
    STEP_TIMEOUT=540 step tests bash "$root/.gpu/run" -test.run 'VMM|ExchangeProcesses|ImportRefuses|ProcsCUDA|RankDiesCUDA|RankHangsCUDA|OpenRank'
    ;;
  matrix)
    matrix "$ipcs" "$ranks"
    ;;
  mps)
    # The logs are kept ($OUT/mps): the server's says why a client's
    # context was refused. The pipe directory stays private to this run.
    mkdir -p "$OUT/mps" "$tmp/mps"
    export CUDA_MPS_PIPE_DIRECTORY=$tmp/mps CUDA_MPS_LOG_DIRECTORY=$OUT/mps
    nvidia-smi -q -d COMPUTE,MEMORY > "$OUT/mps/nvidia-smi.txt" 2>&1
    # MPS clients talk to the server through shared memory: a container's
    # small /dev/shm (64 MB by default) is one suspect for run5's refused
    # fourth context, so its size and use are logged before and after.
    { env | grep '^CUDA_MPS' ; df -h /dev/shm; } > "$OUT/mps/shm.txt" 2>&1
    nvidia-cuda-mps-control -d && step mps-start echo started
    for n in ${MPS_RANKS:-2 3 4}; do
      matrix "$ipcs" "$n"
      echo get_server_list | nvidia-cuda-mps-control >> "$OUT/mps/servers.txt" 2>&1
      { echo "after $n ranks:"; df -h /dev/shm; ls -la /dev/shm | tail -n +2 | wc -l; } >> "$OUT/mps/shm.txt" 2>&1
    done
    echo quit | nvidia-cuda-mps-control
    ;;
  *)
    echo "unknown part $part (want tests, matrix or mps)"; rc=2 ;;
  esac
done
rm -rf "$tmp"
exit $rc
