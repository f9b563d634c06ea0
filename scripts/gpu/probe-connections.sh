#!/bin/bash
# probe-connections.sh: which plans run under a low
# CUDA_DEVICE_MAX_CONNECTIONS (Megatron-LM sets 1)? Runs msccl-bench on a
# few library algorithms, with and without port channels, at 2 and 8 ranks
# on one GPU, per connection count. A hang shows as the watchdog's report
# (2 s per wait), or as nothing before `timeout`. Run on a GPU machine from
# the repo root after scripts/gpu-pack ./cmd/msccl-bench.
# Since executor/cuda refuses port-channel plans whose streams outnumber
# the queues (queues.go), those now end at once with that error; the
# hangs the guard is based on are in docs/evidence/probe_connections_before_guard.log.
# Environment: CONNS (default "1 2 4 8 12 16").
B=.gpu/bin/msccl-bench
for conn in ${CONNS:-1 2 4 8 12 16}; do
  for spec in allreduce_allpairs_packet:2 allreduce_twoshot:2 allreduce_hierarchical:2 allgather_hierarchical:2 \
    allreduce_allpairs_packet:8 allreduce_hierarchical:8; do
    algo=${spec%:*} n=${spec#*:} D=""
    case $algo in *hierarchical) D="-D nodes=2 -D gpus_per_node=$((n / 2))" ;; esac
    printf '== CUDA_DEVICE_MAX_CONNECTIONS=%s %s@%s: ' "$conn" "$algo" "$n"
    out=$(CUDA_DEVICE_MAX_CONNECTIONS=$conn timeout 25 $B --algo $algo $D --ranks $n -b 1K -e 32K -f 32 -n 5 -w 1 --timeout 2s 2>&1)
    rc=$?
    if [ $rc -eq 0 ]; then echo ok; elif [ $rc -eq 124 ]; then echo "no answer in 25 s"; else
      echo "rc=$rc"; echo "$out" | grep -v '^#' | head -n 5 | cut -c1-160; fi
  done
done
