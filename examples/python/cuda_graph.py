"""An msccl all_reduce captured in a CUDA graph and replayed.

    torchrun --nproc_per_node 4 examples/python/cuda_graph.py
    (one GPU for all ranks: MSCCL_CUDA_DEVICE=round-robin, as
    scripts/gpu/torchrun.sh sets it)

The collective runs on torch.cuda.current_stream() without a host wait, so
torch.cuda.graph records it with the kernels around it. Capture cannot
allocate: prepare the collective (or run it once) for the tensors the graph
will use, then capture; replay reruns it on whatever the tensors hold.
"""

import os

import torch
import torch.distributed as dist

import msccl


def main():
    ndev = torch.cuda.device_count()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")) % ndev)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    comm = msccl.Communicator.from_torch(device="cuda")
    x = torch.zeros(1 << 20, device="cuda")
    comm.prepare("all_reduce", x)  # buffers, op tables, kernel: before capture
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        x.mul_(2)                  # the model's work ...
        comm.all_reduce(x)         # ... and the collective, one graph
    for step in range(10):
        x.fill_(rank + step)
        g.replay()
        want = 2 * sum(r + step for r in range(world))
        assert torch.all(x == want).item(), "rank %d, replay %d: %s, want %s" % (rank, step, x[0].item(), want)
    if rank == 0:
        print("10 replays of (x*2, all_reduce) on %d ranks: right" % world)
    comm.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
