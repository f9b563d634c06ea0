"""A tensor-parallel style allreduce under torchrun, beside torch's own.

    pip install --no-build-isolation ./python     # or PYTHONPATH=python MSCCL_LIBRARY=...
    torchrun --nproc_per_node 4 examples/python/torchrun_allreduce.py [--device cuda]

Every rank joins an msccl Communicator through the torch.distributed group
(the unique id travels over it), then all-reduces the same tensors with
msccl (a plan picked by size from the library's selection table, proven on
first use) and with torch.distributed.all_reduce, checks that both give the
exact sum (integer values), and rank 0 prints the median time of each.

--device cpu (default): the communicator's cpu device (shared memory
between the processes) beside gloo. --device cuda: CUDA tensors on the
current stream beside NCCL (NCCL_NVLS_ENABLE=0) when every rank has a GPU
of its own, else beside gloo on host copies (NCCL refuses two ranks on one
GPU; MSCCL_CUDA_DEVICE=round-robin places several msccl ranks on one).
"""

import argparse
import os
import statistics
import time

import torch
import torch.distributed as dist

import msccl


def timed(fn, sync, reps=20):
    times = []
    for _ in range(reps):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    args = ap.parse_args()
    dev, backend, sync = "cpu", "gloo", lambda: None
    if args.device == "cuda":
        ndev = torch.cuda.device_count()
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local % ndev)
        dev, sync = torch.device("cuda", local % ndev), torch.cuda.synchronize
        if ndev >= int(os.environ.get("LOCAL_WORLD_SIZE", "1")):
            os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
            backend = "nccl"
    dist.init_process_group(backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    comm = msccl.Communicator.from_torch(device=args.device)
    ref_dev = dev if backend == "nccl" else "cpu"
    if rank == 0:
        print("%d ranks; msccl on %s, torch on %s" % (world, comm.device, backend))
        print("%12s %14s %14s" % ("bytes", "msccl (us)", "torch (us)"))
    for n in (1024, 16 * 1024, 256 * 1024, 4 * 1024 * 1024):
        x = (torch.arange(n, dtype=torch.float32) % 97 + rank).to(dev)
        want = (torch.arange(n, dtype=torch.float32) % 97) * world + sum(range(world))
        a = x.clone()
        comm.all_reduce(a)
        b = x.to(ref_dev)
        dist.all_reduce(b)
        assert torch.equal(a.cpu(), want) and torch.equal(b.cpu(), want), "rank %d: wrong sum at %d elements" % (rank, n)
        t_msccl = timed(lambda: comm.all_reduce(a), sync)
        t_torch = timed(lambda: dist.all_reduce(b), sync)
        if rank == 0:
            print("%12d %14.1f %14.1f" % (n * 4, t_msccl * 1e6, t_torch * 1e6))
    comm.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
