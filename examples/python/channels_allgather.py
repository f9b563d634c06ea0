"""Your own allgather kernel over msccl's memory channels, and one fused
with an elementwise op, checked against torch (GPU only).

    pip install --no-build-isolation ./python
    torchrun --nproc_per_node 2 examples/python/channels_allgather.py [--elements 1048576] [--per-peer 32]

Ranks may share one GPU (start the MPS daemon first: nvidia-cuda-mps-control
-d) or have one each. Every rank joins an msccl Communicator over the torch
group (gloo), allocates a buffer of world slots that its peers map,
builds --per-peer memory channels to every peer and compiles the two
kernels of this directory with msccl.Kernel (NVRTC, the device headers on
the include path):

- allgather.cu: this rank's input is copied into its slot, then the
  kernel puts the slot into every peer's buffer and waits for theirs;
- fused_allgather.cu: computes y = alpha * x + beta and stores it
  straight into its slot of every buffer, in one kernel.

Both results are compared with torch's (dist.all_gather of the inputs, the
op applied by torch); a mismatch, or a wait the watchdog ended, exits
with status 1. Rank 0 prints the time of the allgather, of the unfused
way (torch's op, then the allgather kernel) and of the fused kernel.
"""

import argparse
import ctypes
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def _source(name):
    with open(os.path.join(HERE, name + ".cu")) as f:
        return f.read()


#: The kernels, by entry point (python/tests compiles them without a GPU).
KERNELS = {name: _source(name) for name in ("allgather", "fused_allgather")}

ALPHA, BETA = 2.0, 0.5  # exact in float32 for the inputs below


def inputs(torch, rank, n, device):
    """Rank's input: small integers, so that every result is exact."""
    return (torch.arange(n, dtype=torch.float32, device=device) % 1024) + 4096 * rank


def timed(torch, fn, reps):
    """Median time of fn in microseconds, by CUDA events on the current stream."""
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3)
    return sorted(times)[len(times) // 2]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--elements", type=int, default=1 << 20, help="floats per rank (a multiple of 4)")
    ap.add_argument("--per-peer", type=int, default=32, help="channels (blocks) per peer: the kernels have a block per channel, and a copy needs tens of blocks to reach the GPU's memory rate")
    ap.add_argument("--threads", type=int, default=512, help="threads per block")
    ap.add_argument("--reps", type=int, default=20, help="timed repetitions")
    args = ap.parse_args(argv)
    if args.elements <= 0 or args.elements % 4 or args.per_peer <= 0:
        ap.error("--elements must be a positive multiple of 4 and --per-peer positive")

    import torch
    import torch.distributed as dist

    import msccl

    if not torch.cuda.is_available():
        ap.error("this example runs on a GPU")
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    if world < 2:
        ap.error("run it with at least 2 ranks (torchrun --nproc_per_node 2)")
    comm = msccl.Communicator.from_torch(device="cuda")
    n, per = args.elements, args.per_peer
    slot = 4 * n
    buf = comm.alloc_buffer(world * slot)
    out = buf.tensor(torch.float32)
    peers = [p for p in range(world) if p != rank for _ in range(per)]
    ch = comm.memory_channels(buf, peers)
    allgather = msccl.Kernel(KERNELS["allgather"], "allgather")
    fused = msccl.Kernel(KERNELS["fused_allgather"], "fused_allgather")

    x = inputs(torch, rank, n, "cuda")
    y = torch.empty_like(x)
    mine = out[rank * n:(rank + 1) * n]
    grid, block = len(peers), args.threads
    ag_args = [ch, ctypes.c_int32(rank), ctypes.c_int32(per), ctypes.c_uint64(slot)]

    def run_allgather(src):
        mine.copy_(src)
        allgather.launch(grid, block, ag_args)

    def run_unfused():
        torch.add(torch.mul(x, ALPHA, out=y), BETA, out=y)
        run_allgather(y)

    def run_fused():
        fused.launch(grid + per, block, [ch, ctypes.c_int32(rank), ctypes.c_int32(per), x, ctypes.c_uint64(n),
                                   ctypes.c_float(ALPHA), ctypes.c_float(BETA), buf])

    # torch's answer: the inputs all-gathered by torch.distributed.
    parts = [torch.empty(n, dtype=torch.float32) for _ in range(world)]
    dist.all_gather(parts, x.cpu())
    want = torch.cat(parts)
    # Launches need no barrier between them: a kernel writes into a
    # peer's buffer only after the peer's kernel of the same turn has
    # started (the relaxed pair at the top of both kernels), which its
    # host launched after it had zeroed and read its buffer.
    failed = []
    for name, run, expect in (("allgather", lambda: run_allgather(x), want), ("fused", run_fused, want * ALPHA + BETA)):
        out.zero_()
        run()
        torch.cuda.synchronize()
        try:
            ch.check()
        except msccl.RunError as e:
            failed.append("%s: %s" % (name, e))
            continue
        got = out.cpu()
        if not torch.equal(got, expect):
            bad = (got != expect).nonzero()[0].item()
            failed.append("%s: element %d (slot %d) is %r, want %r" % (name, bad, bad // n, got[bad].item(), expect[bad].item()))
    # Every rank learns whether any failed, so that all exit together.
    bad_ranks = torch.tensor([1 if failed else 0])
    dist.all_reduce(bad_ranks)
    if failed:
        print("rank %d: wrong results:\n  %s" % (rank, "\n  ".join(failed)), file=sys.stderr)
    if bad_ranks.item():
        sys.exit(1)

    t = {}
    for name, run in (("allgather", lambda: run_allgather(x)), ("unfused", run_unfused), ("fused", run_fused)):
        run()  # warm-up: module load
        torch.cuda.synchronize()
        dist.barrier()
        t[name] = timed(torch, run, args.reps)
    torch.cuda.synchronize()
    ch.check()
    if rank == 0:
        print("%d ranks, %d floats (%d bytes) per rank, %d channels per peer, %d threads per block" % (world, n, slot, per, block))
        print("%-34s %10.1f us" % ("allgather (copy + kernel)", t["allgather"]))
        print("%-34s %10.1f us" % ("unfused (torch op, then allgather)", t["unfused"]))
        print("%-34s %10.1f us  (%.2fx)" % ("fused kernel", t["fused"], t["unfused"] / t["fused"]))
        print("results match torch's")
    dist.barrier()
    ch.close()
    buf.close()
    comm.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
