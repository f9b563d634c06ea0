"""PyTorch's own NCCL backend on libmsccl_nccl.so, under torchrun.

    bash scripts/gpu/nccl-torch.sh          # 4 ranks, MPS clients of GPU 0

(not a unittest module: it needs torch, CUDA and torchrun). Every rank
initialises torch.distributed with backend="nccl" while LD_PRELOAD puts
libmsccl_nccl.so first, so ProcessGroupNCCL's ncclCommInitRankConfig,
ncclAllReduce, ... are msccl-go's. It checks:

  1. all_reduce, all_gather_into_tensor, reduce_scatter_tensor, broadcast
     and all_to_all_single in f32, f16 and bf16 at 1, 1000 and 1000003
     elements per rank (per piece for the last three), each compared bit
     for bit with the result torch computes on the CPU from every rank's
     input (small integers: exact in every type and summation order);
  2. a CUDA graph captured through ProcessGroupNCCL (all_reduce, after one
     run outside the capture) replays right, on new inputs each time;
  3. that the process really runs msccl-go's NCCL: ncclGetVersion through
     the process's symbol table names the library (it prints the path of
     the object that defines ncclAllReduce).

Each rank prints "rank R: N checks, F failed" and every failure; the exit
status is non-zero when a check failed anywhere.
"""

import ctypes
import os
import sys
import time
import traceback

import torch
import torch.distributed as dist

failures = []
checks = 0


def check(ok, what):
    global checks
    checks += 1
    if not ok:
        failures.append(what)
        print("rank %d: FAIL %s" % (dist.get_rank(), what), flush=True)


def value(r, n, dtype):
    """Rank r's input of n elements: small integers, exact everywhere."""
    i = torch.arange(n, dtype=torch.int64)
    return ((i % 7 + 1) * (r + 1)).to(dtype)


def same(got, want, what):
    got = got.cpu()
    ok = got.dtype == want.dtype and got.shape == want.shape and torch.equal(got, want)
    if not ok and got.shape == want.shape:
        bad = (got != want).nonzero()
        i = int(bad[0][0]) if len(bad) else -1
        what += " (%d wrong, first at %d: %s, want %s)" % (len(bad), i, got.flatten()[i].item(), want.flatten()[i].item())
    check(ok, what)


def collectives(dev, rank, world):
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        for n in (1, 1000, 1000003):
            inputs = [value(q, n, dtype) for q in range(world)]
            name = "%s n=%d" % (str(dtype).replace("torch.", ""), n)
            t = inputs[rank].to(dev)
            dist.all_reduce(t)
            same(t, sum(x.to(torch.float64) for x in inputs).to(dtype), "all_reduce " + name)

            out = torch.empty(n * world, dtype=dtype, device=dev)
            dist.all_gather_into_tensor(out, inputs[rank].to(dev))
            same(out, torch.cat(inputs), "all_gather_into_tensor " + name)

            big = [value(q, n * world, dtype) for q in range(world)]
            out = torch.empty(n, dtype=dtype, device=dev)
            dist.reduce_scatter_tensor(out, big[rank].to(dev))
            total = sum(x.to(torch.float64) for x in big).to(dtype)
            same(out, total[rank * n:(rank + 1) * n], "reduce_scatter_tensor " + name)

            root = 1 % world
            t = inputs[rank].to(dev) if rank == root else torch.zeros(n, dtype=dtype, device=dev)
            dist.broadcast(t, src=root)
            same(t, inputs[root], "broadcast " + name)

            out = torch.empty(n * world, dtype=dtype, device=dev)
            dist.all_to_all_single(out, big[rank].to(dev))
            want = torch.cat([big[q][rank * n:(rank + 1) * n] for q in range(world)])
            same(out, want, "all_to_all_single " + name)
            torch.cuda.synchronize()


def graph(dev, rank, world, replays=10):
    n = 4096
    t = value(rank, n, torch.float32).to(dev)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        dist.all_reduce(t)  # outside the capture: prepares (plan, size, type, op)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        dist.all_reduce(t)
    for k in range(replays):
        inputs = [value(q, n, torch.float32) * (k + 2) for q in range(world)]
        t.copy_(inputs[rank].to(dev))
        g.replay()
        torch.cuda.synchronize()
        same(t, sum(inputs), "graph replay %d" % k)


def which_nccl():
    """The file that defines ncclAllReduce in this process."""
    lib = ctypes.CDLL(None)
    addr = ctypes.cast(lib.ncclAllReduce, ctypes.c_void_p).value

    class DlInfo(ctypes.Structure):
        _fields_ = [("fname", ctypes.c_char_p), ("fbase", ctypes.c_void_p), ("sname", ctypes.c_char_p), ("saddr", ctypes.c_void_p)]

    d = DlInfo()
    ctypes.CDLL("libdl.so.2").dladdr(ctypes.c_void_p(addr), ctypes.byref(d))
    return (d.fname or b"?").decode()


def main():
    local = int(os.environ.get("LOCAL_RANK", "0"))
    ndev = torch.cuda.device_count()
    torch.cuda.set_device(local % ndev)
    dev = torch.device("cuda", local % ndev)
    dist.init_process_group("nccl", device_id=dev)
    rank, world = dist.get_rank(), dist.get_world_size()
    where = which_nccl()
    if rank == 0:
        print("ncclAllReduce comes from %s; torch %s, NCCL version %s" % (where, torch.__version__, torch.cuda.nccl.version()), flush=True)
    check("msccl_nccl" in where, "ncclAllReduce is defined by %s, not libmsccl_nccl.so" % where)
    t0 = time.time()
    for part, f in (("collectives", collectives), ("graph", graph)):
        try:
            f(dev, rank, world)
        except Exception:
            check(False, part + ": " + traceback.format_exc())
        if rank == 0:
            print("rank 0: %s done at %.1f s" % (part, time.time() - t0), flush=True)
    print("rank %d: %d checks, %d failed" % (rank, checks, len(failures)), flush=True)
    dist.barrier()
    dist.destroy_process_group()
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
