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
"""

import argparse
import os
import time

import torch
import torch.distributed as dist


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
        t = torch.tensor([dev, host], device="cuda")
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        if rank == 0:
            print("torch all_reduce %d bytes: %.2f us/call (events), %.2f us/call host, ranks %d" % (nbytes, t[0].item(), t[1].item(), world), flush=True)
    dist.destroy_process_group()
    if failed:
        raise SystemExit("rank %d: %d sizes failed" % (rank, failed))


if __name__ == "__main__":
    main()
