"""python -m msccl bench: msccl-bench's sweep from Python, one rank per process.

With --procs N it starts N processes of itself on this host (a unique id
passed on the command line) and prints rank 0's table; without it, it is
one rank of a job a launcher started (torchrun, mpirun, srun). Columns as
nccl-tests prints them: algbw = bytes / time; busbw = algbw x 2(n-1)/n for
allreduce, x (n-1)/n for allgather, reducescatter and alltoall. -c checks
every result against the collective's definition (integer values, exact
in every type) and counts the wrong elements.
"""

import array
import subprocess
import sys
import time

from . import comm as _comm
from . import plan as _plan

# Buffer formats per type (the types array.array can hold).
_FORMATS = {"f32": "f", "f16": "e", "i32": "i", "u32": "I", "u8": "B"}
_CALLS = {"allreduce": "all_reduce", "allgather": "all_gather", "reducescatter": "reduce_scatter", "alltoall": "all_to_all"}


def busbw_factor(collective, n):
    return 2.0 * (n - 1) / n if collective == "allreduce" else (n - 1) / n


def sizes(lo, hi, factor):
    out, s = [], lo
    while s <= hi:
        out.append(s)
        if factor <= 1:
            break
        s *= factor
    return out


def _val(rank, i, dtype):
    # Small integers: every sum of a few ranks is exact in every type (u8
    # included, with 4 ranks or fewer: at most 4 * 8 = 32).
    return (rank + 1) * (1 if dtype == "u8" else 8) + i % 7


def _buffers(collective, size, world, rank, dtype):
    """(input, output) for one message of size bytes on rank, or None when
    the size does not split into whole elements per rank."""
    fmt = _FORMATS[dtype]
    item = array.array(fmt).itemsize
    n = size // item
    if size % item:
        return None
    if collective == "allgather":
        if n % world:
            return None
        per = n // world
        return array.array(fmt, [_val(rank, i, dtype) for i in range(per)]), array.array(fmt, bytes(size))
    if collective == "reducescatter":
        if n % world:
            return None
        return array.array(fmt, [_val(rank, i, dtype) for i in range(n)]), array.array(fmt, bytes(size // world))
    if collective == "alltoall":
        if n % world:
            return None
        return array.array(fmt, [_val(rank, i, dtype) for i in range(n)]), array.array(fmt, bytes(size))
    buf = array.array(fmt, [_val(rank, i, dtype) for i in range(n)])
    return buf, buf


def _wrong(collective, out, world, rank, dtype, op):
    """Elements of out that differ from the collective's definition."""
    red = {"sum": sum, "min": min, "max": max}.get(op)
    if red is None:  # prod: product of the ranks' values
        def red(xs):
            r = 1
            for x in xs:
                r *= x
            return r
    n = len(out)
    if collective == "allreduce":
        want = (red([_val(q, i, dtype) for q in range(world)]) for i in range(n))
    elif collective == "allgather":
        per = n // world
        want = (_val(i // per, i % per, dtype) for i in range(n))
    elif collective == "reducescatter":
        want = (red([_val(q, rank * n + i, dtype) for q in range(world)]) for i in range(n))
    else:  # alltoall: piece q of out is piece rank of rank q's input
        per = n // world
        want = (_val(i // per, rank * per + i % per, dtype) for i in range(n))
    return sum(1 for g, w in zip(out, want) if g != w)


def run_rank(a, c):
    """The sweep on one rank; rank 0 prints."""
    world, rank = c.size, c.rank
    fixed = None
    if a.plan:
        fixed = _plan.compile(a.plan, ranks=world) if a.plan.endswith(_plan.SOURCE_SUFFIX) else _plan.load(a.plan)
    collective = fixed.collective if fixed else a.collective
    if collective not in _CALLS:
        raise ValueError("bench runs allreduce, allgather, reducescatter and alltoall, not %s" % collective)
    call = getattr(c, _CALLS[collective])
    if rank == 0:
        print("# python -m msccl bench: %s, %d ranks in %d processes on the %s device, %s %s, %d warm-up + %d timed iterations"
              % (fixed.name if fixed else collective + " (selection table)", world, world, c.device, a.dtype, a.op, a.warmup, a.iters))
        print("# %11s %12s %6s %6s %10s %8s %8s %7s" % ("size", "count", "type", "redop", "time", "algbw", "busbw", "#wrong"))
        print("# %11s %12s %6s %6s %10s %8s %8s %7s" % ("(B)", "(elements)", "", "", "(us)", "(GB/s)", "(GB/s)", ""))
    for size in sizes(a.b, a.e, a.f):
        bufs = _buffers(collective, size, world, rank, a.dtype)
        if bufs is None:
            if rank == 0:
                print("# %d bytes: not whole %s elements per rank; skipped" % (size, a.dtype))
            continue
        inp, out = bufs
        plan = fixed or c.plan_for(collective, size)
        if not plan.size_rule or not plan.size_rule.admits(size):
            if rank == 0:
                print("# %d bytes: outside plan %r's sizes (%s); skipped" % (size, plan.name, plan.size_rule))
            continue
        pristine = array.array(inp.typecode, inp)

        def once():
            if collective == "allreduce":
                inp[:] = pristine  # in place: restore the input
                call(inp, op=a.op, plan=plan)
            elif collective == "reducescatter":
                call(out, inp, op=a.op, plan=plan)
            else:
                call(out, inp, plan=plan)

        for _ in range(a.warmup):
            once()
        t0 = time.perf_counter()
        for _ in range(a.iters):
            once()
        dt = (time.perf_counter() - t0) / max(a.iters, 1)
        wrong = "-"
        if a.check:
            once()
            wrong = _wrong(collective, inp if collective == "allreduce" else out, world, rank, a.dtype, a.op)
        if rank == 0:
            algbw = size / dt / 1e9
            print("%13d %12d %6s %6s %10.2f %8.2f %8.2f %7s" % (size, size // array.array(inp.typecode).itemsize, a.dtype,
                                                               a.op, dt * 1e6, algbw, algbw * busbw_factor(collective, world), wrong))
        if a.check and wrong:
            raise SystemExit("rank %d: %d wrong elements at %d bytes" % (rank, wrong, size))
    return 0


def main(a):
    if a.dtype not in _FORMATS:
        raise ValueError("bench -d: %s is not a type array.array holds (want one of %s)" % (a.dtype, ", ".join(_FORMATS)))
    if a.procs:
        return spawn(a)
    if a.uid:
        c = _comm.Communicator.from_unique_id(a.uid, a.rank, a.world, device=a.device)
    else:
        c = _comm.Communicator.from_env(device=a.device)
    with c:
        return run_rank(a, c)


def spawn(a):
    """Start a.procs ranks of this command and wait for them all."""
    uid = _comm.unique_id()
    argv = [arg for arg in sys.argv[1:]]
    # Drop --procs N (both spellings) from the children's arguments.
    child = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg == "--procs":
            skip = True
            continue
        if arg.startswith("--procs="):
            continue
        child.append(arg)
    procs = [subprocess.Popen([sys.executable, "-m", "msccl"] + child + ["--uid", uid, "--rank", str(r), "--world", str(a.procs)],
                              stdout=None if r == 0 else subprocess.DEVNULL) for r in range(a.procs)]
    rc = 0
    for r, p in enumerate(procs):
        code = p.wait()
        if code and not rc:
            rc = code
            print("python -m msccl bench: rank %d exited with status %d" % (r, code), file=sys.stderr)
    return rc
