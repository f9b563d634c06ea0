"""The msccl package on CUDA tensors, one rank per process, under torchrun.

    bash scripts/gpu/torchrun.sh            # NPROC=4 ranks on the machine's GPUs

(not a unittest module: it needs torch, CUDA and torchrun, which CI lacks).
Every rank joins through a torch.distributed group (NCCL when every rank has
a GPU of its own, else gloo: NCCL refuses two ranks on one GPU) and runs:

  1. all_reduce, all_gather, reduce_scatter and all_to_all on f32, f16, bf16
     and i32 at 1, 1000 and 1000003 elements per rank's piece (sizes outside
     every plan's rule: padded staging), plan chosen by size, each compared
     bit for bit with the result computed by torch from every rank's input
     (small integers: exact in every type and every summation order), and
     all_reduce and all_gather also against torch.distributed's own;
     f8e4m3 and f8e5m2 where torch has them (values small enough to be
     exact); i32 max;
  2. CUDA graphs: an unprepared collective under capture is refused with
     msccl.InvalidArgument before anything is queued (that capture records
     nothing, so torch's "The CUDA Graph is empty" warning is expected
     there and silenced); then all four collectives captured in one graph
     after prepare and replayed MSCCL_GRAPH_REPLAYS times (default 100, 10
     when ranks share a GPU: without MPS their kernels take turns on it,
     and run6 spent 40 s on part 1 alone), each replay on new inputs and
     checked; rank 0 prints each stage's time as it ends, so a run that
     stops names the stage;
  3. the README's example (compile, prove, save) on rank 0.

Each rank prints "rank R: N checks, F failed" and every failure; the exit
status is non-zero when a check failed anywhere. --device cpu runs parts 1
and 3 on CPU tensors and the cpu device (gloo), which checks this script
itself where torch exists without a GPU.
"""

import argparse
import os
import sys
import tempfile
import time
import traceback
import warnings

import torch
import torch.distributed as dist

import msccl

SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SIZES = (1, 1000, 1000003)
# Integer views for bit-for-bit comparison (torch.equal has no fp8 kernel).
BITS = {torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16, torch.int32: torch.int32}
for _name in ("float8_e4m3fn", "float8_e5m2"):
    if hasattr(torch, _name):
        BITS[getattr(torch, _name)] = torch.uint8


class Checks:
    def __init__(self, rank):
        self.rank, self.n, self.failed = rank, 0, []

    def same(self, what, got, want):
        """got (CUDA) equals want bit for bit; records the first difference."""
        self.n += 1
        got = got.detach().cpu()
        want = want.to(got.dtype).cpu()
        if got.shape != want.shape:
            self.failed.append("%s: shape %s, want %s" % (what, tuple(got.shape), tuple(want.shape)))
            return False
        g, w = got.view(BITS[got.dtype]), want.view(BITS[want.dtype])
        if torch.equal(g, w):
            return True
        bad = int((g != w).nonzero()[0][0])
        self.failed.append("%s: element %d of %d is %s, want %s" % (what, bad, got.numel(), got[bad].float().item(), want[bad].float().item()))
        return False

    def fail(self, what, exc):
        self.n += 1
        self.failed.append("%s: %s: %s" % (what, type(exc).__name__, exc))


def small(dtype):
    """Values whose sums over the ranks are exact in dtype."""
    return 2 if dtype in BITS and BITS[dtype] == torch.uint8 else 7


def make(rank, n, dtype, k=0):
    """Rank rank's input of n elements (k varies it between graph replays)."""
    m = small(dtype)
    v = (torch.arange(n, dtype=torch.float32) % m) + (rank % m) + (k % 3)
    return v.to(dtype)


def expected(coll, rank, world, n, dtype, k=0):
    """The collective's result on rank, from every rank's input (f32 sums
    of small integers: exact)."""
    if coll == "all_reduce":
        return sum(make(q, n, dtype, k).float() for q in range(world))
    if coll == "all_gather":
        return torch.cat([make(q, n, dtype, k).float() for q in range(world)])
    if coll == "reduce_scatter":
        return sum(make(q, n * world, dtype, k).float()[rank * n:(rank + 1) * n] for q in range(world))
    if coll == "all_to_all":
        return torch.cat([make(q, n * world, dtype, k).float()[rank * n:(rank + 1) * n] for q in range(world)])
    raise ValueError(coll)


def tensors(coll, rank, world, n, dtype, dev, k=0):
    """(output, input) of coll on this rank; all_reduce works in place."""
    if coll == "all_reduce":
        t = make(rank, n, dtype, k).to(dev)
        return t, t
    if coll == "all_gather":
        return torch.empty(n * world, dtype=dtype, device=dev), make(rank, n, dtype, k).to(dev)
    if coll == "reduce_scatter":
        return torch.empty(n, dtype=dtype, device=dev), make(rank, n * world, dtype, k).to(dev)
    return torch.empty(n * world, dtype=dtype, device=dev), make(rank, n * world, dtype, k).to(dev)


def call(comm, coll, out, inp, prepare=False):
    args = (inp,) if coll == "all_reduce" else (out, inp)
    if prepare:
        comm.prepare(coll, *args)
    else:
        getattr(comm, coll)(*args)


def collectives(comm, chk, rank, world, dev):
    dtypes = [torch.float32, torch.float16, torch.bfloat16, torch.int32]
    dtypes += [d for d in BITS if BITS[d] == torch.uint8]
    for dtype in dtypes:
        sizes = SIZES if BITS[dtype] != torch.uint8 else (1, 1000)
        for n in sizes:
            for coll in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all"):
                what = "%s %s n=%d" % (coll, str(dtype).replace("torch.", ""), n)
                try:
                    out, inp = tensors(coll, rank, world, n, dtype, dev)
                    call(comm, coll, out, inp)
                    chk.same(what, out, expected(coll, rank, world, n, dtype))
                except Exception as e:  # noqa: BLE001 - every failure is reported, the job goes on
                    chk.fail(what, e)
    # torch.distributed's own results (the group's backend) on the same
    # inputs, beside msccl's.
    for n in SIZES:
        for dtype in (torch.float32, torch.int32):
            what = "all_reduce %s n=%d vs torch.distributed" % (str(dtype).replace("torch.", ""), n)
            try:
                ref_dev = dev if dist.get_backend() == "nccl" else "cpu"
                a = make(rank, n, dtype).to(dev)
                b = make(rank, n, dtype).to(ref_dev)
                comm.all_reduce(a)
                dist.all_reduce(b)
                chk.same(what, a, b)
                what = "all_gather %s n=%d vs torch.distributed" % (str(dtype).replace("torch.", ""), n)
                out = torch.empty(n * world, dtype=dtype, device=dev)
                comm.all_gather(out, make(rank, n, dtype).to(dev))
                parts = [torch.empty(n, dtype=dtype, device=ref_dev) for _ in range(world)]
                dist.all_gather(parts, make(rank, n, dtype).to(ref_dev))
                chk.same(what, out, torch.cat([p.cpu() for p in parts]))
            except Exception as e:  # noqa: BLE001
                chk.fail(what, e)
    what = "all_reduce int32 max n=1000"
    try:
        t = make(rank, 1000, torch.int32).to(dev)
        comm.all_reduce(t, op="max")
        chk.same(what, t, torch.stack([make(q, 1000, torch.int32) for q in range(world)]).max(0).values)
    except Exception as e:  # noqa: BLE001
        chk.fail(what, e)


def graphs(comm, chk, rank, world, dev, replays):
    """Capture: refused unprepared; then four collectives in one graph."""
    # An unprepared size (4099 elements is used nowhere else) under
    # capture: refused by the library before anything is queued.
    what = "capture of an unprepared collective is refused"
    t = make(rank, 4099, torch.float32).to(dev)
    g = torch.cuda.CUDAGraph()
    try:
        # Refused before anything is queued: the graph is empty, which
        # torch warns of at capture_end; that is this check's point.
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="The CUDA Graph is empty")
            with torch.cuda.graph(g):
                comm.all_reduce(t)
        chk.failed.append(what + ": it was not")
        chk.n += 1
    except msccl.InvalidArgument as e:
        chk.n += 1
        if "not prepared" not in str(e):
            chk.failed.append("%s: the message does not say so: %s" % (what, e))
    except Exception as e:  # noqa: BLE001
        chk.fail(what, e)
    del g
    torch.cuda.synchronize()

    n, dtype = 1000003, torch.float32
    colls = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
    static = {c: tensors(c, rank, world, n, dtype, dev) for c in colls}
    what = "graph of four collectives"
    t_stage = [time.perf_counter()]

    def stage(name):
        """Rank 0 prints each stage as it ends (a stopped run names it)."""
        torch.cuda.synchronize()
        now = time.perf_counter()
        if rank == 0:
            print("graph: %s (%.1f s)" % (name, now - t_stage[0]), flush=True)
        t_stage[0] = now

    try:
        for c in colls:
            call(comm, c, *static[c], prepare=True)
        stage("prepared")
        # Warm up on a side stream, as torch recommends before capture.
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for c in colls:
                call(comm, c, *static[c])
        torch.cuda.current_stream().wait_stream(side)
        stage("warm-up on a side stream")
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for c in colls:
                call(comm, c, *static[c])
        stage("captured")
        t0 = time.perf_counter()
        ok = 0
        for k in range(1, replays + 1):
            for c in colls:
                _, inp = static[c]
                inp.copy_(make(rank, inp.numel(), dtype, k))
            g.replay()
            good = True
            for c in colls:
                good &= chk.same("%s, replay %d" % (what, k), static[c][0], expected(c, rank, world, n, dtype, k))
            ok += good
            if not good:
                break
            if k % 10 == 0:
                stage("%d replays checked" % k)
        torch.cuda.synchronize()
        checked = time.perf_counter() - t0
        # Replays alone: 20 back to back, one wait.
        t0 = time.perf_counter()
        for _ in range(20):
            g.replay()
        torch.cuda.synchronize()
        if rank == 0:
            print("graph: %d of %d replays of 4 collectives at %d f32 right (%.1f s with the checks); %.0f us a replay unchecked"
                  % (ok, replays, n, checked, (time.perf_counter() - t0) / 20 * 1e6), flush=True)
    except Exception as e:  # noqa: BLE001
        chk.fail(what, e)
        traceback.print_exc()


def readme_example(chk):
    """The README's Python example, as written there."""
    what = "README example"
    try:
        plan = msccl.compile(os.path.join(SOURCE, "algorithms", "allreduce_ring.msccl"), ranks=4)
        result = plan.verify()
        chk.n += 1
        if not result.ok:
            chk.failed.append("%s: %s" % (what, result.verdict))
        with tempfile.TemporaryDirectory() as d:
            plan.save(os.path.join(d, "ring4.json"))
        print("README example: %s, %d findings" % (result.verdict, len(result.findings)), flush=True)
    except Exception as e:  # noqa: BLE001
        chk.fail(what, e)


def sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def timing(comm, rank, world, dev):
    """Median time of a 4 MB all_reduce, msccl beside torch.distributed."""
    n = 1 << 20
    a = make(rank, n, torch.float32).to(dev)
    ref = a if dist.get_backend() == "nccl" else a.cpu()
    out = []
    for name, fn in (("msccl", lambda: comm.all_reduce(a)), ("torch %s" % dist.get_backend(), lambda: dist.all_reduce(ref))):
        times = []
        for _ in range(10):
            sync()
            t0 = time.perf_counter()
            fn()
            sync()
            times.append(time.perf_counter() - t0)
        times.sort()
        out.append("%s %.1f us" % (name, times[len(times) // 2] * 1e6))
    if rank == 0:
        print("all_reduce of %d f32 on %d ranks: %s" % (n, world, ", ".join(out)), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = ap.parse_args()
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if args.device == "cuda":
        local = int(os.environ.get("LOCAL_RANK", "0"))
        ndev = torch.cuda.device_count()
        torch.cuda.set_device(local % ndev)
        dev = torch.device("cuda", local % ndev)
        backend = "nccl" if ndev >= int(os.environ.get("LOCAL_WORLD_SIZE", world)) else "gloo"
    else:
        ndev, dev, backend = 0, torch.device("cpu"), "gloo"
    dist.init_process_group(backend)
    rank = dist.get_rank()
    chk = Checks(rank)
    comm = msccl.Communicator.from_torch(device=args.device)
    if rank == 0:
        print("%d ranks on %d GPU(s), torch %s, group %s, msccl %s on %s" % (world, ndev, torch.__version__, backend, msccl.library_version(), comm.device), flush=True)
    t0 = time.perf_counter()
    collectives(comm, chk, rank, world, dev)
    sync()
    if rank == 0:
        print("collectives: %.1f s" % (time.perf_counter() - t0), flush=True)
    if args.device == "cuda":
        shared = ndev < int(os.environ.get("LOCAL_WORLD_SIZE", world))
        graphs(comm, chk, rank, world, dev, int(os.environ.get("MSCCL_GRAPH_REPLAYS", "10" if shared else "100")))
    timing(comm, rank, world, dev)
    if rank == 0:
        readme_example(chk)
    dist.barrier()
    comm.close()
    print("rank %d: %d checks, %d failed" % (rank, chk.n, len(chk.failed)), flush=True)
    for f in chk.failed[:40]:
        print("rank %d: FAIL %s" % (rank, f), flush=True)
    dist.destroy_process_group()
    sys.exit(1 if chk.failed else 0)


if __name__ == "__main__":
    main()
