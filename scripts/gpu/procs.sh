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
#           (ALGOS narrows the algorithms, names separated by spaces)
#   mps     the matrix's rows at MPS_RANKS processes (default "2 3 4"; IPC
#           modes as above) under MPS (started and stopped here), to
#           compare times with time-slicing. run5 saw every 4-process run
#           lose one rank to "cuDevicePrimaryCtxRetain: out of memory"; the
#           daemon's and server's logs, the GPU's compute mode and memory,
#           and the server list now go to $OUT/mps/, and the rank counts
#           climb so the log shows at how many clients it starts
#   fixtures  every upstream fixture of testdata/peer-plans that the CPU
#           executor proves correct (its README's verdict column) at its
#           own rank count through msccl-bench --procs N --plan F -c, in
#           the IPC modes of IPC; fixtures declaring switch channels
#           (reduce_nvls*.json, allreduce_pipeline.json) and those with
#           another verdict (reduce_tbg.json's race) are skipped, each
#           with a line saying why. Sizes: the smallest of the plan's size
#           rule times 37^k up to 1 MiB (the smallest, then uneven chunk
#           splits); a size the rule refuses fails the step by name.
#           RANKS and FIXTURES (file names) narrow it; about a minute and
#           a half for both IPC modes
#   mps-fixtures  the fixtures part at the rank counts of MPS_RANKS
#           (default "2 4 8", climbing) under MPS, logged as mps is
# DEVICE=cpu runs the fixtures parts on the cpu device (no GPU, no IPC
# modes; the CI runs it so through cmd/msccl-bench's
# TestProcsFixturesScript) and BENCH names another msccl-bench.
# $OUT gets procs-PART.log per part and gpu-tests.log from .gpu/run.
OUT=${OUT:-/tmp}
root=$(pwd)
bench=${BENCH:-$root/.gpu/bin/msccl-bench}
device=${DEVICE:-cuda}
peer=$root/testdata/peer-plans
ranks=${RANKS:-2 4 8}
ipcs=${IPC:-vmm legacy}
parts=${*:-tests matrix}
rc=0
tmp=$(mktemp -d)
step_log=procs step_timeout=240 step_tail=8
. "$(dirname "$0")/step.sh"
algos="${ALGOS:-allgather_direct allgather_hierarchical allgather_packet allgather_ring allreduce_allpairs allreduce_allpairs_packet allreduce_hierarchical allreduce_ring allreduce_twoshot alltoall_direct broadcast_direct gather_direct reduce_direct reducescatter_direct reducescatter_ring scatter_direct}"
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
# fixture_list writes "NAME RANKS SMALLEST" to $tmp/fixtures for every
# fixture of testdata/peer-plans whose README row says the CPU executor
# proves it correct, and prints why each other one is skipped. The README
# is the record the tests hold to the fixtures (ir's TestPeerPlansReadme:
# rule, ranks; executor/cpu's TestPeerPlansReadmeVerdicts: the verdict),
# so the list cannot drift from what the proof says.
fixture_list() {
  local name n rule verdict small
  : > "$tmp/fixtures"
  awk -F'|' '/^\| `[^`]*\.json`/ {
    name = $2; gsub(/[ `]/, "", name); n = $4; gsub(/ /, "", n)
    v = $9; sub(/^ +/, "", v); sub(/ +$/, "", v); gsub(/\*/, "", v)
    print name "\t" n "\t" $6 "\t" v }' "$peer/README.md" > "$tmp/readme.tsv"
  for f in "$peer"/*.json; do
    cut -f1 "$tmp/readme.tsv" | grep -qxF "${f##*/}" ||
      { echo "FAIL ${f##*/}: no row in testdata/peer-plans/README.md, so no verdict to go by"; rc=1; }
  done
  for name in ${FIXTURES:-}; do
    cut -f1 "$tmp/readme.tsv" | grep -qxF "$name" ||
      { echo "FAIL FIXTURES names $name, which testdata/peer-plans/README.md has no row for"; rc=1; }
  done
  while IFS=$'\t' read -r name n rule verdict; do
    [ -z "${FIXTURES:-}" ] || [[ " $FIXTURES " == *" $name "* ]] || continue
    # The plan, not the README, says whether it declares a switch channel:
    # allreduce_pipeline.json declares one it never uses, and the cuda
    # executor refuses any (Options.AllowMulticast; the oracle skips it).
    if grep -q '"channel_type": *"switch"' "$peer/$name"; then
      echo "skip $name: declares switch channels (NVLink multicast), which the cuda executor refuses"; continue
    fi
    case $verdict in
    "correct at every size"*) ;;
    *)
      echo "skip $name: the CPU executor does not prove it correct: $verdict"; continue ;;
    esac
    small=$(sed -n 's/.*multiples of [0-9]* bytes from \([0-9]*\) bytes.*/\1/p' <<<"$rule")
    [ -n "$small" ] || { echo "FAIL $name: size rule \"$rule\" not understood"; rc=1; continue; }
    echo "$name $n $small" >> "$tmp/fixtures"
  done < "$tmp/readme.tsv"
}
# fixtures IPCS RANKS runs the listed fixtures of RANKS ranks. -f 37 from
# the rule's smallest size keeps every size a multiple of its granule
# (the smallest is one) and makes the later ones split unevenly.
fixtures() {
  local ipc n name fn small envs step_timeout=60 # the --timeout watchdog ends a hang in seconds
  for ipc in $1; do
    envs=()
    [ "$device" = cuda ] && envs=("MSCCL_CUDA_IPC=$ipc")
    for n in $2; do
      while read -r -u 3 name fn small; do
        [ "$fn" = "$n" ] || continue
        step "$name n=$n $ipc" env "${envs[@]}" "$bench" --procs "$n" --device "$device" --plan "$peer/$name" \
          -b "$small" -e 1M -f 37 -c -n 3 -w 1 --timeout 5s
      done 3< "$tmp/fixtures"
    done
  done
}
# not_run names the listed fixtures whose rank count is not in RANKS.
not_run() {
  local name n small
  while read -r name n small; do
    [[ " $1 " == *" $n "* ]] || echo "not run: $name ($n ranks, not in \"$1\")"
  done < "$tmp/fixtures"
}
# mps_start and mps_stop bracket a part under MPS.
mps_start() {
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
}
# mps_after N logs the server list and /dev/shm after N ranks' runs.
mps_after() {
  echo get_server_list | nvidia-cuda-mps-control >> "$OUT/mps/servers.txt" 2>&1
  { echo "after $1 ranks:"; df -h /dev/shm; ls -la /dev/shm | tail -n +2 | wc -l; } >> "$OUT/mps/shm.txt" 2>&1
}
mps_stop() { echo quit | nvidia-cuda-mps-control; }
[ "$device" = cpu ] && ipcs=memfd # the cpu device shares buffers one way
for part in $parts; do
  case $part in
  tests)
    STEP_TIMEOUT=540 step tests bash "$root/.gpu/run" -test.run 'VMM|ExchangeProcesses|ImportRefuses|ProcsCUDA|RankDiesCUDA|RankHangsCUDA|OpenRank'
    ;;
  matrix)
    matrix "$ipcs" "$ranks"
    ;;
  mps)
    mps_start
    for n in ${MPS_RANKS:-2 3 4}; do
      matrix "$ipcs" "$n"
      mps_after "$n"
    done
    mps_stop
    ;;
  fixtures)
    fixture_list
    steps=0 fails=0
    fixtures "$ipcs" "$ranks"
    not_run "$ranks"
    echo "fixtures: $steps runs, $fails failed"
    ;;
  mps-fixtures)
    fixture_list
    mps_start
    steps=0 fails=0
    for n in ${MPS_RANKS:-2 4 8}; do
      fixtures "$ipcs" "$n"
      mps_after "$n"
    done
    mps_stop
    not_run "${MPS_RANKS:-2 4 8}"
    echo "mps-fixtures: $steps runs, $fails failed"
    ;;
  *)
    echo "unknown part $part (want tests, matrix, mps, fixtures or mps-fixtures)"; rc=2 ;;
  esac
done
rm -rf "$tmp"
exit $rc
