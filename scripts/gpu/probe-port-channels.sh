#!/bin/bash
# probe-port-channels.sh: does a port-channel plan (the hierarchical
# algorithms, two "nodes" on one GPU) run back to back without hanging,
# eagerly and by CUDA-graph replay, under different
# CUDA_DEVICE_MAX_CONNECTIONS? Run on a GPU machine from the repo root
# after scripts/gpu-pack ./executor/cuda ./runtime/cuda ./cmd/msccl-bench.
# A hang shows as msccl-bench's watchdog error (2 s per wait).
# Environment: CONNS (default "32 8"), TESTS=1 also runs the oracle tests
# per launch mode (logs to $OUT).
B=.gpu/bin/msccl-bench
OUT=${OUT:-/tmp}
(cd runtime/cuda && ../../.gpu/runtime_cuda.test -test.run 'PortProxy' -test.v 2>&1 | grep -E "^(---|ok|FAIL)")
for conn in ${CONNS:-32 8}; do
  (cd runtime/cuda && CUDA_DEVICE_MAX_CONNECTIONS=$conn MSCCL_PROBE_QUEUES=1 ../../.gpu/runtime_cuda.test \
    -test.run 'HardwareQueueSharing' -test.v 2>&1 | grep -E "held up|^(---|ok|FAIL)")
done
for conn in ${CONNS:-32 8}; do
  for algo in allreduce_hierarchical allgather_hierarchical; do
    for n in 4 8; do
      for G in "" -G; do
        echo "== CUDA_DEVICE_MAX_CONNECTIONS=$conn $algo@$n ${G:-eager}"
        CUDA_DEVICE_MAX_CONNECTIONS=$conn timeout 60 $B --algo $algo -D nodes=2 -D gpus_per_node=$((n / 2)) \
          --ranks $n -b 1K -e 64M -f 16 -n 30 -w 5 --timeout 2s $G 2>&1 | grep -v '^#' | tail -n 6 | cut -c1-160
      done
    done
  done
done
[ -n "$TESTS" ] || exit 0
cd executor/cuda
for m in eager graph; do
  echo "== oracle tests, MSCCL_GPU_MODES=$m"
  GOMEMLIMIT=100GiB MSCCL_GPU_QUICK=1 MSCCL_GPU_MODES=$m timeout 150 ../../.gpu/executor_cuda.test -test.v \
    -test.run 'GPUAlgorithms/all(reduce|gather)_hierarchical@(4|8)$' -test.timeout 140s >"$OUT/test_$m.log" 2>&1
  grep -E "bit-identical|^(---|ok|FAIL|PASS)" "$OUT/test_$m.log" | cut -c1-200
done
