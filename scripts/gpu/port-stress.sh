#!/bin/bash
# port-stress.sh: the port-channel evidence of issue 13. The proxy's
# copies run in a CUDA context of their own (executor/cuda/proxy.go), so
# no stream of the ranks' context can hold them up, whatever
# CUDA_DEVICE_MAX_CONNECTIONS says. Run on a GPU machine from the repo
# root after `bash scripts/gpu-pack ./runtime/cuda ./executor/cuda`.
# Environment: DUR (stress time per plan, default 60s), CONNS (default
# "32 1": the executor's default and Megatron-LM's setting), QUICK=1 also
# runs the quick oracle matrix of the port-channel plans per setting,
# BENCH=1 runs msccl-bench -c on the 2x4 hierarchical allreduce per
# setting with MSCCL_DEBUG=1 (each step on stderr: under 1 connection it
# printed no row in 40 s once, with no watchdog report; the steps show
# which call never returned). MSCCL_PORT_COPY=proxy|sm (passed through)
# forces the executor's port copy mode; unset, it is SMs below 32
# connections and the proxy at 32 (executor/cuda/portcopy.go). The proxy
# probe TestProxyBehindQueuedLaunchProbe runs with MSCCL_GPU_PROBE=1.
# Logs go to $OUT.
OUT=${OUT:-/tmp}
root=$(pwd)
rc=0
for conn in ${CONNS:-32 1}; do
  echo "== CUDA_DEVICE_MAX_CONNECTIONS=$conn"
  (cd runtime/cuda && CUDA_DEVICE_MAX_CONNECTIONS=$conn MSCCL_GPU_PROBE=1 timeout 120 "$root/.gpu/runtime_cuda.test" -test.v \
    -test.run 'PortProxy|ProxyBesideSpinningKernel|ProxyBehindQueuedLaunchProbe' >"$OUT/proxy_conn$conn.log" 2>&1) || rc=1
  grep -E "^(---|ok|FAIL|PASS)|proxy_test.go:.*(CONNECTIONS|spins)" "$OUT/proxy_conn$conn.log" | cut -c1-220
  (cd executor/cuda && CUDA_DEVICE_MAX_CONNECTIONS=$conn MSCCL_GPU_STRESS=${DUR:-60s} timeout 400 \
    "$root/.gpu/executor_cuda.test" -test.v -test.run 'GPUPortStress' -test.timeout 390s >"$OUT/stress_conn$conn.log" 2>&1) || rc=1
  grep -E "^(---|ok|FAIL|PASS)|stress_test.go" "$OUT/stress_conn$conn.log" | cut -c1-220
  if [ -n "$QUICK" ]; then
    (cd executor/cuda && CUDA_DEVICE_MAX_CONNECTIONS=$conn MSCCL_GPU_QUICK=1 GOMEMLIMIT=100GiB timeout 400 \
      "$root/.gpu/executor_cuda.test" -test.v -test.timeout 390s \
      -test.run 'GPUAlgorithms/all(reduce|gather)_hierarchical@(4|8)$|GPUPeerPlans/(reducescatter_pkt_2x4|allgather_pkt_rppkt_4)|GPURppktFanOut' \
      >"$OUT/quick_port_conn$conn.log" 2>&1) || rc=1
    grep -E "bit-identical|^(--- FAIL|ok|FAIL|PASS)|watchdog" "$OUT/quick_port_conn$conn.log" | cut -c1-220
  fi
  if [ -n "$BENCH" ]; then
    CUDA_DEVICE_MAX_CONNECTIONS=$conn MSCCL_DEBUG=1 timeout 60 .gpu/bin/msccl-bench --algo allreduce_hierarchical \
      -D nodes=2 -D gpus_per_node=4 --ranks 8 -b 1K -e 1M -f 32 -n 20 -w 3 -c >"$OUT/bench_conn$conn.log" 2>&1 || rc=1
    tail -n 12 "$OUT/bench_conn$conn.log" | cut -c1-200
  fi
done
exit $rc
