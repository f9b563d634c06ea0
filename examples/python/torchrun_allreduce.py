"""A tensor-parallel style allreduce under torchrun, beside torch's own.

    pip install --no-build-isolation ./python
    torchrun --nproc_per_node 4 examples/python/torchrun_allreduce.py

Every rank joins an msccl Communicator through the torch.distributed group
(gloo here: the unique id travels over it), then all-reduces the same
tensors with msccl (a plan picked by size from the library's selection
table, proven on first use) and with torch.distributed.all_reduce, checks
that both give the exact sum (integer values), and rank 0 prints the
median time of each. The communicator runs on the cpu device (shared
memory between the processes); the CUDA device comes with the GPU runtime.
"""

import statistics
import time

import torch
import torch.distributed as dist

import msccl


def timed(fn, reps=20):
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    comm = msccl.Communicator.from_torch()
    if rank == 0:
        print("%d ranks; msccl on %s, torch on gloo" % (world, comm.device))
        print("%12s %14s %14s" % ("bytes", "msccl (us)", "torch (us)"))
    for n in (1024, 16 * 1024, 256 * 1024):
        x = torch.arange(n, dtype=torch.float32) % 97 + rank
        want = (torch.arange(n, dtype=torch.float32) % 97) * world + sum(range(world))
        a = x.clone()
        comm.all_reduce(a)
        b = x.clone()
        dist.all_reduce(b)
        assert torch.equal(a, want) and torch.equal(b, want), "rank %d: wrong sum at %d elements" % (rank, n)
        t_msccl = timed(lambda: comm.all_reduce(x.clone()))
        t_torch = timed(lambda: dist.all_reduce(x.clone()))
        if rank == 0:
            print("%12d %14.1f %14.1f" % (n * 4, t_msccl * 1e6, t_torch * 1e6))
    comm.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
