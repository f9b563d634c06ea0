"""Time torch.distributed.all_reduce through the NCCL backend, under torchrun.

    bash scripts/gpu/nccl-speed.sh        # with LD_PRELOAD=libmsccl_nccl.so

(not a unittest module: it needs torch, CUDA and torchrun). Every rank
all_reduces a float32 tensor of --bytes bytes (sum) --iters times back to
back between two CUDA events, after --warmup calls, the way msccl-bench
times a plan (events around back-to-back launches, divided by the count),
and checks the last result. It also times the host side alone: the mean
wall time of one all_reduce call (queueing only, no synchronisation).
Rank 0 prints one line per size:

    torch all_reduce BYTES bytes: T us/call (events), H us/call host, ranks N

Two more loops split the time of a call between torch and the library:
a CUDA graph of 50
all_reduces captured through ProcessGroupNCCL and replayed times the GPU
side alone; "direct" calls ncclAllReduce through ctypes on a communicator of its own
(ncclGetUniqueId, ncclCommInitRank from the process's symbols, so the
LD_PRELOADed library's) on torch's current stream, without
ProcessGroupNCCL; "torch op" times x.add_(0) the same way, torch's own
dispatch and launch cost for a one-kernel op.
"""

import ctypes

import argparse
import os
import time

import torch
import torch.distributed as dist


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]


NCCL = ctypes.CDLL(None)  # the process's symbols: LD_PRELOAD's come first


def own_comm(rank, world):
    """A communicator of this script's own, its id sent by rank 0."""
    if not hasattr(NCCL, "ncclGetUniqueId"):
        return None  # NCCL's symbols are not global (no LD_PRELOAD)
    uid = UniqueId()
    if rank == 0 and NCCL.ncclGetUniqueId(ctypes.byref(uid)) != 0:
        raise SystemExit("ncclGetUniqueId failed")
    box = [bytes(uid.internal) if rank == 0 else None]
    dist.broadcast_object_list(box, src=0)
    uid = UniqueId()
    ctypes.memmove(ctypes.byref(uid), box[0], 128)
    comm = ctypes.c_void_p()
    rc = NCCL.ncclCommInitRank(ctypes.byref(comm), world, uid, rank)
    if rc != 0:
        raise SystemExit("ncclCommInitRank: %d" % rc)
    return comm


def timed(f, a):
    for _ in range(a.warmup):
        f()
    torch.cuda.synchronize()
    dist.barrier()
    ev0 = torch.cuda.Event(enable_timing=True)
    ev1 = torch.cuda.Event(enable_timing=True)
    ev0.record()
    t0 = time.perf_counter()
    for _ in range(a.iters):
        f()
    host = (time.perf_counter() - t0) / a.iters * 1e6
    ev1.record()
    torch.cuda.synchronize()
    return ev0.elapsed_time(ev1) / a.iters * 1e3, host


GRAPH_CALLS = 50


def graphed(x, a):
    """Per-call time of GRAPH_CALLS all_reduces captured in one CUDA graph
    (ProcessGroupNCCL under capture), replayed: no host cost per call."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        dist.all_reduce(x)  # outside the capture first, as NCCL wants
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(GRAPH_CALLS):
            dist.all_reduce(x)
    torch.cuda.synchronize()
    reps = max(a.iters // GRAPH_CALLS, 1)
    dev, _ = timed(g.replay, argparse.Namespace(iters=reps, warmup=2))
    return dev / GRAPH_CALLS


def direct(comm, x, a):
    f = NCCL.ncclAllReduce
    f.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
    ptr, n = x.data_ptr(), x.numel()
    stream = torch.cuda.current_stream().cuda_stream

    def call():
        rc = f(ptr, ptr, n, 7, 0, comm, stream)  # ncclFloat32, ncclSum
        if rc != 0:
            raise SystemExit("ncclAllReduce: %d" % rc)

    return timed(call, a)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bytes", type=int, nargs="+", default=[1024])
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--warmup", type=int, default=100)
    a = ap.parse_args()
    local = int(os.environ.get("LOCAL_RANK", "0"))
    ndev = torch.cuda.device_count()
    torch.cuda.set_device(local % ndev)
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    failed = 0
    comm = own_comm(rank, world)
    for nbytes in a.bytes:
        n = max(nbytes // 4, 1)
        x = torch.full((n,), float(rank + 1), device="cuda")
        for _ in range(a.warmup):
            dist.all_reduce(x)
        torch.cuda.synchronize()
        dist.barrier()
        ev0 = torch.cuda.Event(enable_timing=True)
        ev1 = torch.cuda.Event(enable_timing=True)
        x.fill_(float(rank + 1))
        ev0.record()
        t0 = time.perf_counter()
        for _ in range(a.iters):
            dist.all_reduce(x)
        host = (time.perf_counter() - t0) / a.iters * 1e6
        ev1.record()
        torch.cuda.synchronize()
        dev = ev0.elapsed_time(ev1) / a.iters * 1e3
        # x was summed iters times over (it overflows to inf, which costs
        # the same): check one all_reduce of a fresh tensor instead.
        y = torch.full((n,), float(rank + 1), device="cuda")
        dist.all_reduce(y)
        want = world * (world + 1) / 2
        if not torch.all(y == want).item():
            failed += 1
            print("rank %d: all_reduce of %d bytes: got %s, want %s" % (rank, nbytes, y[:4].tolist(), want), flush=True)
        d_dev, d_host = direct(comm, x, a) if comm else (0.0, 0.0)
        o_dev, o_host = timed(lambda: x.add_(0.0), a)
        g_dev = graphed(x, a)
        t = torch.tensor([dev, host, d_dev, d_host, o_dev, o_host, g_dev], device="cuda")
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        if rank == 0:
            print("torch all_reduce %d bytes: %.2f us/call (events), %.2f us/call host, ranks %d" % (nbytes, t[0].item(), t[1].item(), world), flush=True)
            print("direct ncclAllReduce %d bytes: %.2f us/call (events), %.2f us/call host" % (nbytes, t[2].item(), t[3].item()), flush=True)
            print("torch op x.add_(0) on %d bytes: %.2f us/call (events), %.2f us/call host" % (nbytes, t[4].item(), t[5].item()), flush=True)
            print("torch all_reduce %d bytes in a CUDA graph: %.2f us/call (events, %d calls a graph)" % (nbytes, t[6].item(), GRAPH_CALLS), flush=True)
    dist.destroy_process_group()
    if failed:
        raise SystemExit("rank %d: %d sizes failed" % (rank, failed))


if __name__ == "__main__":
    main()
