#!/usr/bin/env python3
"""NCCL baseline for issue 5, through torch.distributed (nccl-tests style).

One process per GPU, started by torchrun or mpirun (or plainly, as a
world of one):

    torchrun --standalone --nproc_per_node=8 scripts/multigpu/nccl_bench.py \
        --collectives allreduce,allgather --modes eager,graph \
        -b 1K -e 1G -f 2 -d f16 -o sum -n 20 -w 5 --jsonl nccl.jsonl
    mpirun -np 8 python3 scripts/multigpu/nccl_bench.py ...

NVLink multicast (NVLS) stays off: NCCL_NVLS_ENABLE=0 is set before torch
loads NCCL and asserted after the communicator is up; a caller that sets it
to anything else is refused, as are TORCH_SYMM_MEM_DISABLE_MULTICAST and
NVSHMEM_DISABLE_NVLS set to anything but 1. This script never creates
multicast objects itself.

Per collective, data type and mode it allocates the largest buffers once and
reuses views of them for every size (nccl-tests' convention), runs -w
warm-up and -n timed iterations between two CUDA events, and takes the
slowest rank's mean time. Sizes count as nccl-tests counts them: allreduce
the buffer, allgather the whole output (each rank sends size/n bytes).
algbw = bytes/time; busbw = algbw * 2(n-1)/n (allreduce), * (n-1)/n
(allgather). Allreduce is in place, allgather out of place.

Graph mode captures one collective into a CUDA graph per size and times
replays of it, as msccl-bench -G does; with -c the graph is also replayed
once on fresh inputs and checked, and a graph that NCCL left empty (a world
of one doing an in-place allreduce) is marked with a "note".

Output: a table on rank 0's stdout and, with --jsonl FILE, one JSON object
per row with the field names msccl-bench --json uses (bytes, count, type,
redop, ranks, time_us, algbw_gbps, busbw_gbps, wrong, graph) plus impl,
collective, plan, nccl_version, device, torch_version.
"""

import argparse
import json
import os
import sys
import time
import warnings

# --- multicast stays off: before torch (and NCCL) is imported -------------
_SAFE_ENV = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}
for _k, _v in _SAFE_ENV.items():
    _had = os.environ.get(_k)
    if _had is not None and _had != _v:
        sys.exit(f"nccl_bench: refusing to run with {_k}={_had}: NVLink multicast must stay off ({_k}={_v})")
    os.environ[_k] = _v

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16,
          "i32": torch.int32, "u8": torch.uint8}
REDOPS = {"sum": dist.ReduceOp.SUM, "min": dist.ReduceOp.MIN,
          "max": dist.ReduceOp.MAX, "prod": dist.ReduceOp.PRODUCT}


def parse_size(s):
    t = s.strip().upper()
    for suf in ("IB", "B"):
        if t.endswith(suf):
            t = t[: -len(suf)]
    mul = 1
    if t and t[-1] in "KMG":
        mul = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[t[-1]]
        t = t[:-1]
    n = int(t) * mul
    if n <= 0:
        raise argparse.ArgumentTypeError(f"bad size {s!r}")
    return n


def bus_factor(coll, n):
    f = (n - 1) / n
    return 2 * f if coll == "allreduce" else f


def assert_no_multicast():
    for k, v in _SAFE_ENV.items():
        assert os.environ.get(k) == v, f"{k} changed to {os.environ.get(k)!r}"


def world_from_env():
    """rank, world size, local rank from torchrun, Open MPI, MPICH/PMI or Slurm; else a world of one."""
    pairs = [("RANK", "WORLD_SIZE", "LOCAL_RANK"),
             ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"),
             ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"),
             ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID")]
    for r, w, l in pairs:
        if r in os.environ and w in os.environ:
            rank, world = int(os.environ[r]), int(os.environ[w])
            local = int(os.environ.get(l, rank % max(1, torch.cuda.device_count())))
            return rank, world, local
    return 0, 1, 0


def sizes(b, e, f):
    out, s = [], b
    while s <= e:
        out.append(s)
        s *= f
    return out


def fill(t, rank):
    # small integers: sums of up to a few hundred ranks stay exact in f16/bf16
    t.fill_(rank % 7 + 1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--collectives", default="allreduce,allgather")
    ap.add_argument("--modes", default="eager,graph", help="eager, graph or both")
    ap.add_argument("-b", type=parse_size, default=parse_size("1K"))
    ap.add_argument("-e", type=parse_size, default=parse_size("1G"))
    ap.add_argument("-f", type=int, default=2)
    ap.add_argument("-d", "--dtype", default="f16", help="comma list of " + ",".join(DTYPES))
    ap.add_argument("-o", "--op", default="sum", choices=list(REDOPS))
    ap.add_argument("-n", "--iters", type=int, default=20)
    ap.add_argument("-w", "--warmup", type=int, default=5)
    ap.add_argument("-c", "--check", action="store_true", help="check each size's result once (#wrong)")
    ap.add_argument("--jsonl", help="append one JSON object per row to this file (rank 0)")
    ap.add_argument("--port", default="29533", help="MASTER_PORT when no launcher set one")
    a = ap.parse_args()
    if a.f < 2 or a.iters < 1 or a.warmup < 0 or a.b > a.e:
        ap.error("-f >= 2, -n >= 1, -w >= 0, -b <= -e")

    rank, world, local = world_from_env()
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", a.port)
    os.environ["RANK"], os.environ["WORLD_SIZE"], os.environ["LOCAL_RANK"] = str(rank), str(world), str(local)
    if not torch.cuda.is_available():
        sys.exit("nccl_bench: no CUDA device")
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=dev)
    assert_no_multicast()
    nccl_ver = ".".join(str(x) for x in torch.cuda.nccl.version())
    devname = torch.cuda.get_device_name(dev)
    colls = [c.strip() for c in a.collectives.split(",") if c.strip()]
    modes = [m.strip() for m in a.modes.split(",") if m.strip()]
    dtypes = [d.strip() for d in a.dtype.split(",") if d.strip()]
    for c in colls:
        if c not in ("allreduce", "allgather"):
            sys.exit(f"nccl_bench: collective {c!r}: only allreduce and allgather")
    for m in modes:
        if m not in ("eager", "graph"):
            sys.exit(f"nccl_bench: mode {m!r}: eager or graph")
    for d in dtypes:
        if d not in DTYPES:
            sys.exit(f"nccl_bench: dtype {d!r}")
    jf = open(a.jsonl, "a") if (a.jsonl and rank == 0) else None
    if rank == 0:
        print(f"# nccl_bench: NCCL {nccl_ver}, torch {torch.__version__}, {world} rank(s), {devname}, "
              f"NCCL_NVLS_ENABLE={os.environ['NCCL_NVLS_ENABLE']}, {a.warmup} warm-up + {a.iters} timed iterations",
              flush=True)
    tmax = torch.zeros(1, dtype=torch.float64, device=dev)
    side = torch.cuda.Stream(device=dev)
    t_start = time.time()
    for coll in colls:
        for dname in dtypes:
            dt = DTYPES[dname]
            es = torch.empty(0, dtype=dt).element_size()
            # buffers of the largest size, allocated once and reused
            if coll == "allreduce":
                big = torch.empty(a.e // es, dtype=dt, device=dev)
            else:
                big_out = torch.empty(a.e // es, dtype=dt, device=dev)
                big_in = torch.empty(max(1, a.e // world // es), dtype=dt, device=dev)
            for mode in modes:
                if rank == 0:
                    print(f"# {coll} {dname} {a.op} {mode}", flush=True)
                    print(f"#{'size':>12} {'count':>12} {'type':>6} {'redop':>6} {'time':>10} {'algbw':>8} {'busbw':>8} {'#wrong':>7}")
                    print(f"#{'(B)':>12} {'(elements)':>12} {'':>6} {'':>6} {'(us)':>10} {'(GB/s)':>8} {'(GB/s)':>8} {'':>7}", flush=True)
                for size in sizes(a.b, a.e, a.f):
                    row = {"impl": "nccl", "plan": f"nccl-{nccl_ver}", "collective": coll, "ranks": world,
                           "bytes": size, "count": size // es, "type": dname,
                           "redop": a.op if coll == "allreduce" else "none",
                           "graph": mode == "graph", "wrong": -1, "nccl_version": nccl_ver,
                           "device": devname, "torch_version": torch.__version__}
                    skipped = None
                    if size % es or (coll == "allgather" and size % (world * es)):
                        skipped = f"size {size} is not a multiple of {es * (world if coll == 'allgather' else 1)} bytes"
                    if skipped:
                        row.update(time_us=0.0, algbw_gbps=0.0, busbw_gbps=0.0, skipped=skipped)
                        emit(rank, jf, row)
                        continue
                    if coll == "allreduce":
                        buf = big[: size // es]

                        def op(buf=buf):
                            dist.all_reduce(buf, op=REDOPS[a.op])
                    else:
                        out = big_out[: size // es]
                        inp = big_in[: size // world // es]

                        def op(out=out, inp=inp):
                            dist.all_gather_into_tensor(out, inp)
                    if a.check:
                        if coll == "allreduce":
                            fill(buf, rank)
                            op()
                            want = expected(a.op, world)
                            wrong = int((buf != want).sum().item())
                        else:
                            fill(inp, rank)
                            out.zero_()
                            op()
                            ref = torch.cat([torch.full_like(inp, r % 7 + 1) for r in range(world)])
                            wrong = int((out != ref).sum().item())
                        row["wrong"] = wrong
                    torch.cuda.synchronize(dev)
                    dist.barrier()
                    ev0 = torch.cuda.Event(enable_timing=True)
                    ev1 = torch.cuda.Event(enable_timing=True)
                    if mode == "eager":
                        for _ in range(a.warmup):
                            op()
                        ev0.record()
                        for _ in range(a.iters):
                            op()
                        ev1.record()
                    else:
                        # warm the communicator on the capture stream, then capture one op
                        side.wait_stream(torch.cuda.current_stream(dev))
                        with torch.cuda.stream(side):
                            op()
                        torch.cuda.current_stream(dev).wait_stream(side)
                        torch.cuda.synchronize(dev)
                        g = torch.cuda.CUDAGraph()
                        with warnings.catch_warnings(record=True) as caught:
                            warnings.simplefilter("always")
                            with torch.cuda.graph(g, stream=side):
                                op()
                        if any("graph is empty" in str(w.message).lower() for w in caught):
                            # NCCL enqueued no work (in-place allreduce of one rank does nothing)
                            row["note"] = "empty CUDA graph: NCCL captured no work"
                        if a.check:
                            # the graph itself must do the collective: refill inputs, replay once, check
                            row["wrong"] = max(row["wrong"], 0) + check_graph(g, coll, a.op, world, rank, buf if coll == "allreduce" else None,
                                                       inp if coll == "allgather" else None,
                                                       out if coll == "allgather" else None, dev)
                        for _ in range(a.warmup):
                            g.replay()
                        ev0.record()
                        for _ in range(a.iters):
                            g.replay()
                        ev1.record()
                    torch.cuda.synchronize(dev)
                    t_us = ev0.elapsed_time(ev1) * 1e3 / a.iters
                    if mode == "graph":
                        del g
                    tmax.fill_(t_us)
                    dist.all_reduce(tmax, op=dist.ReduceOp.MAX)  # the slowest rank's time
                    t_us = float(tmax.item())
                    algbw = size / (t_us * 1e-6) / 1e9
                    row.update(time_us=round(t_us, 3), algbw_gbps=round(algbw, 3),
                               busbw_gbps=round(algbw * bus_factor(coll, world), 3))
                    emit(rank, jf, row)
            if coll == "allreduce":
                del big
            else:
                del big_out, big_in
            torch.cuda.empty_cache()
    assert_no_multicast()
    if rank == 0:
        print(f"# done in {time.time() - t_start:.1f} s", flush=True)
    if jf:
        jf.close()
    dist.destroy_process_group()


def check_graph(g, coll, op, world, rank, buf, inp, out, dev):
    """Replays g once on fresh inputs; returns the number of wrong elements."""
    if coll == "allreduce":
        fill(buf, rank)
        g.replay()
        torch.cuda.synchronize(dev)
        return int((buf != expected(op, world)).sum().item())
    fill(inp, rank)
    out.zero_()
    g.replay()
    torch.cuda.synchronize(dev)
    ref = torch.cat([torch.full_like(inp, r % 7 + 1) for r in range(world)])
    return int((out != ref).sum().item())


def expected(op, world):
    vals = [r % 7 + 1 for r in range(world)]
    if op == "sum":
        return sum(vals)
    if op == "min":
        return min(vals)
    if op == "max":
        return max(vals)
    p = 1
    for v in vals:
        p *= v
    return p


def emit(rank, jf, row):
    if rank != 0:
        return
    if row.get("skipped"):
        print(f" {row['bytes']:12d} {row['count']:12d} {row['type']:>6} {row['redop']:>6}   skipped: {row['skipped']}", flush=True)
    else:
        w = "N/A" if row["wrong"] < 0 else str(row["wrong"])
        print(f" {row['bytes']:12d} {row['count']:12d} {row['type']:>6} {row['redop']:>6} {row['time_us']:10.2f} "
              f"{row['algbw_gbps']:8.2f} {row['busbw_gbps']:8.2f} {w:>7}"
              + (f"  ({row['note']})" if row.get("note") else ""), flush=True)
    if jf:
        jf.write(json.dumps(row) + "\n")
        jf.flush()


if __name__ == "__main__":
    main()
