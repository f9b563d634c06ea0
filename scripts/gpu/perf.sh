#!/bin/bash
# perf.sh: the reference-kernel and GPU-timeline evidence of issue 17.
# Run on a GPU machine from the repo root after
#   bash scripts/gpu-pack ./executor/cuda ./runtime/cuda ./kernels ./executor/cuda/reference .
# Parts (each well under the device tool's 10 minutes; default: all three,
# so give them one call each when time is short):
#   tests  the GPU tests of the reference kernels and the timeline, and the
#          PTX builds of every kernel instance
#   ref    msccl-bench --reference: plan and hand-written kernel timed in
#          one run on the same streams, grid and buffers, -c checking both;
#          each plan row is followed by "reference NAME ... plan/reference R"
#   latency  the ring-step goal (ping-pong vs ring steps at 1 KiB; the
#          same with SIGNAL_FENCE=0, no fence before a signal's release;
#          per-hop and per-step slopes from two hop and step counts,
#          scripts/gpu/ring-slopes.sh; allreduce_ring -D per=7; GPU-scope
#          signals, SIGNAL_SCOPE_GPU=1) and
#          the host cost of a cached Run (BenchmarkHostCost beside
#          runtime/cuda's BenchmarkLaunch)
#   trace  msccl-bench --trace: NAME.json (GPU) beside NAME.cpu.json (the
#          CPU executor's simulation), each traced run next to the same run
#          untraced, so the rows state the tracing overhead
#   kernel the GPU tests of the Simple reduction and the tuned launch shapes
#          (TestGPUTunedShapes: more instances, fewer threads, FP8, bit for
#          bit against the CPU executor) and the ptxas spill check
#   large  64 and 256 MiB allreduce, plan beside the two-shot reference:
#          the default shape (the reference's grid of the issue's table),
#          the same with -D stagger=0 (every block pushing to one peer at
#          a time, the reference's order), -D split=1 (the two-shot's old
#          per-peer schedule)
#          and with kernel variants (MSCCL_KERNEL_DEFINES: per-thread
#          operand arrays, 6 sources per batch), then the shapes that fit
#          8 ranks on one H200 with more blocks
#   hbm    issue 17's HBM goal at 64 and 256 MiB (msccl-bench --hbm): a
#          1 GiB device-to-device copy timed first, then under each row
#          the bytes its plan loads and stores in one collective (every
#          rank's ops, all on this one GPU), their rate and its fraction
#          of the copy's; two-shot (default shape), all-pairs with 16
#          instances and allgather_direct, each beside its reference
#   tune   msccl-bench --tune over allreduce, 1K..256M: the fastest
#          algorithm × instances × threads per size, written as selection
#          rows to $OUT/tuned-allreduce-8r.yaml, and the built-in table
#          with its 8-rank allreduce rows handed to them to
#          $OUT/selection-tuned.yaml (a drop-in for
#          algorithms/selection.yaml); --tune-budget 300s starts no
#          candidate after 5 minutes, so both are written within the
#          step's 7. Check on the CPU machine with
#          MSCCL_SELECTION=$PWD/selection-tuned.yaml go test -run
#          TestSelectionClaimsProven ./compiler
#   sweep  every library algorithm at RANKS ranks (hierarchical ones as
#          2 nodes of RANKS/2), 1K..256M by 4, f16 sum, graph replay, its
#          default shape (no -D); the three with a hand-written twin
#          beside it (--reference). Time and bus bandwidth only: results
#          are the FULL matrix's business (full-matrix.sh). Plots, on
#          any machine: bash scripts/sweep-plots.sh perf-sweep.log
#          (docs/plots/sweep-COLLECTIVE-{busbw,time}.svg)
#   startup  msccl-compile's process times on this machine (issue 17's
#          CPU goals: start in under 1.5 ms, an 8-rank compile under
#          3 ms): 200 runs each of /bin/true (the exec floor),
#          --version and an 8-rank compile without the proof, 20 with
#          it; per-run time = real / runs
# scripts/plot-bench.py draws docs/ plots from perf-large.log and
# perf-tune.log.
# $OUT gets few files (the device tool returns at most 8): perf-PART.log
# per part (every step's full output), gpu-tests.log from .gpu/run, and
# traces.tar.gz with the trace files. Environment: RANKS (default 8).
OUT=${OUT:-/tmp}
root=$(pwd)
bench="$root/.gpu/bin/msccl-bench"
ranks=${RANKS:-8}
parts=${*:-tests ref trace}
rc=0
tmp=$(mktemp -d)
traces="$tmp/traces"
mkdir -p "$traces"
step_log=perf step_timeout=280 step_tail=24
. "$(dirname "$0")/step.sh"
for part in $parts; do
  case $part in
  tests)
    step tests bash "$root/.gpu/run" -test.run 'Reference|Trace|CompilePTX'
    ;;
  ref)
    small="-b 1K -e 64K -f 4"
    large="-b 64M -e 256M -f 4"
    step ll_oneshot "$bench" --algo allreduce_allpairs_packet --ranks "$ranks" $small -d f16 -c -G --reference allreduce_oneshot_ll
    step ll_oneshot_eager "$bench" --algo allreduce_allpairs_packet --ranks "$ranks" $small -d f16 --reference allreduce_oneshot_ll
    step twoshot_small "$bench" --algo allreduce_twoshot --ranks "$ranks" $small -d f16 -c -G --reference allreduce_twoshot
    step twoshot_large "$bench" --algo allreduce_twoshot --ranks "$ranks" $large -d f16 -c -G -n 10 --reference allreduce_twoshot
    step twoshot_large_i4 "$bench" --algo allreduce_twoshot --ranks "$ranks" -D instances=4 -D threads=512 $large -d f16 -G -n 10 --reference allreduce_twoshot
    step allgather_large "$bench" --algo allgather_direct --ranks "$ranks" $large -d f16 -c -G -n 10 --reference allgather_direct
    ;;
  trace)
    step trace_ll "$bench" --algo allreduce_allpairs_packet --ranks "$ranks" -b 1K -e 64K -f 64 -d f16 -G --trace "$traces/ll.json"
    step notrace_ll "$bench" --algo allreduce_allpairs_packet --ranks "$ranks" -b 1K -e 64K -f 64 -d f16 -G
    step trace_twoshot "$bench" --algo allreduce_twoshot --ranks "$ranks" -b 64M -e 64M -d f16 -G -n 10 --trace "$traces/twoshot_64M.json"
    step notrace_twoshot "$bench" --algo allreduce_twoshot --ranks "$ranks" -b 64M -e 64M -d f16 -G -n 10
    step trace_ring "$bench" --algo allreduce_ring --ranks "$ranks" -b 1K -e 1K -d f16 -G --trace "$traces/ring_1K.json"
    step notrace_ring "$bench" --algo allreduce_ring --ranks "$ranks" -b 1K -e 1K -d f16 -G
    ;;
  kernel)
    step kernel bash "$root/.gpu/run" -test.run 'TunedShapes|ReduceNoSpill'
    ;;
  large)
    large="-b 64M -e 256M -f 4 -d f16 -G -n 10"
    step twoshot_i1_t1024 "$bench" --algo allreduce_twoshot --ranks "$ranks" $large -c --reference allreduce_twoshot
    step twoshot_stagger0_i1_t1024 "$bench" --algo allreduce_twoshot --ranks "$ranks" -D stagger=0 $large --reference allreduce_twoshot
    step twoshot_split1_i1_t1024 "$bench" --algo allreduce_twoshot --ranks "$ranks" -D split=1 $large --reference allreduce_twoshot
    step twoshot_i1_t1024_localspans env MSCCL_KERNEL_DEFINES=RED_LOCAL_SPANS=1 "$bench" --algo allreduce_twoshot --ranks "$ranks" $large --reference allreduce_twoshot
    step twoshot_i1_t1024_batch6 env MSCCL_KERNEL_DEFINES=RED_BATCH=6 "$bench" --algo allreduce_twoshot --ranks "$ranks" $large --reference allreduce_twoshot
    step twoshot_i4_t512 "$bench" --algo allreduce_twoshot --ranks "$ranks" -D instances=4 -D threads=512 $large --reference allreduce_twoshot
    step twoshot_i8_t256 "$bench" --algo allreduce_twoshot --ranks "$ranks" -D instances=8 -D threads=256 $large --reference allreduce_twoshot
    step allpairs_i16_t1024 "$bench" --algo allreduce_allpairs --ranks "$ranks" -D instances=16 $large --reference allreduce_twoshot
    step allpairs_i32_t512 "$bench" --algo allreduce_allpairs --ranks "$ranks" -D instances=32 -D threads=512 $large --reference allreduce_twoshot
    ;;
  hbm)
    large="-b 64M -e 256M -f 4 -d f16 -G -n 10 --hbm"
    step hbm_twoshot "$bench" --algo allreduce_twoshot --ranks "$ranks" $large -c --reference allreduce_twoshot
    step hbm_allpairs_i16 "$bench" --algo allreduce_allpairs --ranks "$ranks" -D instances=16 $large --reference allreduce_twoshot
    step hbm_allgather_direct "$bench" --algo allgather_direct --ranks "$ranks" $large --reference allgather_direct
    ;;
  tune)
    STEP_TIMEOUT=420 step tune "$bench" --tune --collective allreduce --ranks "$ranks" -b 1K -e 256M -f 4 -d f16 -G -n 10 -w 3 \
      --tune-algos allreduce_allpairs_packet,allreduce_allpairs,allreduce_twoshot --tune-instances 1,2,4,8,16,32 \
      --tune-budget 300s --tune-out "$OUT/tuned-allreduce-${ranks}r.yaml" --tune-table "$OUT/selection-tuned.yaml"
    ;;
  sweep)
    for f in "$root"/algorithms/*.msccl; do
      a=$(basename "$f" .msccl)
      extra=""
      case $a in
        *hierarchical) extra="-D nodes=2 -D gpus_per_node=$((ranks / 2))" ;;
      esac
      case $a in
        allreduce_allpairs_packet) extra="--reference allreduce_oneshot_ll" ;;
        allreduce_twoshot) extra="--reference allreduce_twoshot" ;;
        allgather_direct) extra="--reference allgather_direct" ;;
      esac
      # shellcheck disable=SC2086 # extra is words on purpose
      step "$a" "$bench" --algo "$a" --ranks "$ranks" $extra -b 1K -e 256M -f 4 -d f16 -G -n 10 -w 3
    done
    ;;
  latency)
    # Issue 17's ring-step goal: time(ring at 8 ranks) / 7 steps against
    # time(pingpong) / 16 hops (testdata/perf/pingpong.msccl: each hop is
    # one put, signal and wait across a pair, what a ring step is made of).
    step compile_pingpong "$root/.gpu/bin/msccl-compile" compile "$root/testdata/perf/pingpong.msccl" -o "$tmp/pingpong.json"
    step pingpong16 "$bench" --plan "$tmp/pingpong.json" --ranks 2 -b 1K -e 1K -d f32 -G -n 200 -w 20
    step allgather_ring8 "$bench" --algo allgather_ring --ranks 8 -b 1K -e 1K -d f32 -G -n 200 -w 20
    step allreduce_ring8 "$bench" --algo allreduce_ring --ranks 8 -b 1K -e 1K -d f32 -G -n 200 -w 20
    # The same three without the fence before a signal's release
    # (kernels/channels.cuh SIGNAL_FENCE), to see what it costs a hop.
    nofence="env MSCCL_KERNEL_DEFINES=SIGNAL_FENCE=0 $bench"
    step pingpong16_nofence $nofence --plan "$tmp/pingpong.json" --ranks 2 -b 1K -e 1K -d f32 -G -n 200 -w 20
    step allgather_ring8_nofence $nofence --algo allgather_ring --ranks 8 -b 1K -e 1K -d f32 -G -n 200 -w 20
    step allreduce_ring8_nofence $nofence --algo allreduce_ring --ranks 8 -b 1K -e 1K -d f32 -G -n 200 -w 20
    # time / steps charges a launch of 8 kernels (their start, the
    # neighbours' handshake, the end) to 7 ring steps and one of 2 kernels
    # to 16 hops. Two step counts of one plan shape cancel that: 4 hops
    # beside 16, and testdata/perf/ringsteps.msccl (allgather_ring's
    # schedule continued round the ring; at 7 steps it is allgather_ring)
    # at 10 steps beside allgather_ring8 above; slopes at the end.
    step compile_pingpong4 "$root/.gpu/bin/msccl-compile" compile "$root/testdata/perf/pingpong.msccl" -D hops=4 -o "$tmp/pingpong4.json"
    step compile_ringsteps10 "$root/.gpu/bin/msccl-compile" compile "$root/testdata/perf/ringsteps.msccl" -D steps=10 -o "$tmp/ringsteps10.json"
    step pingpong4 "$bench" --plan "$tmp/pingpong4.json" --ranks 2 -b 1K -e 1K -d f32 -G -n 200 -w 20
    step ringsteps10 "$bench" --plan "$tmp/ringsteps10.json" --ranks 8 -b 1K -e 1K -d f32 -G -n 200 -w 20
    step pingpong16_again "$bench" --plan "$tmp/pingpong.json" --ranks 2 -b 1K -e 1K -d f32 -G -n 200 -w 20
    step allgather_ring8_again "$bench" --algo allgather_ring --ranks 8 -b 1K -e 1K -d f32 -G -n 200 -w 20
    # allreduce_ring spreads its 14 steps over 4 blocks a rank (-D per=4,
    # for 64 ops a block at any rank count), each change of block a
    # semaphore hop inside the rank; at 8 ranks per=7 needs 2 blocks.
    step allreduce_ring8_per7 "$bench" --algo allreduce_ring --ranks 8 -D per=7 -b 1K -e 1K -d f32 -G -n 200 -w 20
    # GPU-scope signals and waits on memory channels (kernels/channels.cuh
    # SIGNAL_SCOPE_GPU: right only with every rank on this one GPU).
    gpuscope="env MSCCL_KERNEL_DEFINES=SIGNAL_SCOPE_GPU=1 $bench"
    step pingpong16_gpuscope $gpuscope --plan "$tmp/pingpong.json" --ranks 2 -b 1K -e 1K -d f32 -G -n 200 -w 20
    step pingpong4_gpuscope $gpuscope --plan "$tmp/pingpong4.json" --ranks 2 -b 1K -e 1K -d f32 -G -n 200 -w 20
    step allgather_ring8_gpuscope $gpuscope --algo allgather_ring --ranks 8 -b 1K -e 1K -d f32 -G -n 200 -w 20
    step ringsteps10_gpuscope $gpuscope --plan "$tmp/ringsteps10.json" --ranks 8 -b 1K -e 1K -d f32 -G -n 200 -w 20
    step allreduce_ring8_gpuscope $gpuscope --algo allreduce_ring --ranks 8 -b 1K -e 1K -d f32 -G -n 200 -w 20
    bash "$(dirname "$0")/ring-slopes.sh" "$OUT/$step_log-$part.log" | tee -a "$OUT/$step_log-$part.log"
    step hostcost bash "$root/.gpu/run" -test.run 'GPURunAllocs' -test.bench 'HostCost|^BenchmarkLaunch$' -test.benchmem
    ;;
  startup)
    mc="$root/.gpu/bin/msccl-compile"
    ar="$root/algorithms/allreduce_allpairs_packet.msccl"
    for spec in "200 /bin/true" "200 $mc --version" "200 $mc compile $ar -D ranks=8 --no-verify -o /dev/null" "20 $mc compile $ar -D ranks=8 -o /dev/null"; do
      n=${spec%% *} c=${spec#* }
      step "${n}x $c" bash -c "time (for i in \$(seq $n); do $c >/dev/null 2>&1; done)"
    done
    ;;
  *)
    echo "perf.sh: unknown part $part (want tests, ref, trace, kernel, large, hbm, tune, latency, startup)"; exit 2
    ;;
  esac
done
if [ -n "$(ls "$traces")" ]; then
  tar -C "$tmp" -czf "$OUT/traces.tar.gz" traces
fi
rm -rf "$tmp"
ls -la "$OUT"
exit $rc
