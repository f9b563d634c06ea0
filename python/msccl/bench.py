"""python -m msccl bench: msccl-bench's sweep from Python, one rank per process.

With --procs N it starts N processes of itself on this host and prints
rank 0's table (launch() says how the job is run and ended); without it,
it is one rank of a job a launcher started (torchrun, mpirun, srun), or
of the job --procs started, which it finds in its environment. Columns as
nccl-tests prints them: algbw = bytes / time; busbw = algbw x 2(n-1)/n for
allreduce, x (n-1)/n for allgather, reducescatter and alltoall. -c checks
every result against the collective's definition (integer values, exact
in every type) and counts the wrong elements.
"""

import array
import ctypes
import os
import signal
import subprocess
import sys
import time

from . import comm as _comm
from . import plan as _plan
from .errors import InvalidArgument

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


def check(a):
    """Refuse, as msccl-bench does and before any process starts, a sweep
    that would run nothing (-b above -e) or never end (-f below 2)."""
    if a.b > a.e:
        raise InvalidArgument("-b %d is above -e %d: the sweep would be empty" % (a.b, a.e))
    if a.f < 2:
        raise InvalidArgument("-f must be at least 2, got %d" % a.f)
    if a.iters < 1:
        raise InvalidArgument("-n must be at least 1, got %d" % a.iters)
    if a.warmup < 0:
        raise InvalidArgument("-w must not be negative, got %d" % a.warmup)


def main(a):
    if a.dtype not in _FORMATS:
        raise ValueError("bench -d: %s is not a type array.array holds (want one of %s)" % (a.dtype, ", ".join(_FORMATS)))
    check(a)
    if a.procs:
        return launch(a.procs, _child_args(sys.argv[1:]), a.stop_limit)
    with _comm.Communicator.from_env(device=a.device) as c:
        return run_rank(a, c)


def _child_args(argv):
    """argv without --procs N / --procs=N: what each rank runs."""
    child, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--procs":
            skip = True
        elif not arg.startswith("--procs="):
            child.append(arg)
    return child


# After the first failure, the other ranks get LINGER seconds to exit on
# their own (reporting it in their words, naming the rank they lost); then
# SIGTERM, and SIGKILL GRACE seconds later.
LINGER, GRACE, POLL = 2.0, 1.0, 0.05

_PR_SET_PDEATHSIG = 1


def _child_setup(parent):
    """Runs in each child before exec: lead a process group of its own
    (the launcher signals the group, which reaches anything the rank
    starts), and die with the launcher (Linux PR_SET_PDEATHSIG: also when
    the launcher is killed outright)."""
    os.setpgid(0, 0)
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # the launcher died before prctl took hold
        os._exit(1)


def _stopped(pid):
    """Whether pid is stopped (SIGSTOP, SIGTSTP: state T; t under a
    tracer), from /proc; False where there is none."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            stat = f.read()
    except OSError:
        return False
    rest = stat[stat.rfind(")") + 2:]  # the command name may hold anything
    return rest[:1] in ("T", "t")


def _why(code):
    if code < 0:
        try:
            return "was killed by %s" % signal.Signals(-code).name
        except ValueError:
            return "was killed by signal %d" % -code
    return "exited with status %d" % code


def _signal_group(p, sig):
    try:
        os.killpg(p.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def launch(n, args, stop_limit=10.0):
    """Start n ranks of `python -m msccl ARGS` on this host and wait for
    them; return the launcher's exit status.

    The job's unique id, a credential, reaches the ranks in their
    environment (MSCCL_UNIQUE_ID with MSCCL_RANK and MSCCL_WORLD_SIZE),
    which only their user can read, never on a command line. The job ends
    when a rank fails or stays stopped for stop_limit seconds (it answers
    no one): the others get LINGER seconds to report it, then are killed;
    the launcher prints which rank failed first and why and exits non-zero.
    Children die with the launcher, also when it is killed; SIGINT and
    SIGTERM end the job."""
    uid = _comm.unique_id()
    base = dict(os.environ, MSCCL_UNIQUE_ID=uid, MSCCL_WORLD_SIZE=str(n), MSCCL_LOCAL_WORLD_SIZE=str(n))
    me = os.getpid()
    procs = []
    interrupted = []

    def on_signal(sig, frame):
        interrupted.append(sig)

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        for r in range(n):
            env = dict(base, MSCCL_RANK=str(r), MSCCL_LOCAL_RANK=str(r))
            procs.append(subprocess.Popen([sys.executable, "-m", "msccl"] + args, env=env, stdin=subprocess.DEVNULL,
                                          stdout=None if r == 0 else subprocess.DEVNULL, preexec_fn=lambda: _child_setup(me)))
        return _watch(procs, stop_limit, interrupted)
    finally:
        for p in procs:
            if p.poll() is None:
                _signal_group(p, signal.SIGKILL)
                p.wait()
        for s, h in old.items():
            signal.signal(s, h)


def _watch(procs, stop_limit, interrupted):
    """Wait for procs, ending the job at its first failure; the status."""
    first = None  # (rank, why, status)
    stopped_since = {}
    kill_at = term_at = None
    while True:
        now = time.monotonic()
        for r, p in enumerate(procs):
            code = p.poll()
            if code is not None:
                if code != 0 and first is None:
                    first = (r, _why(code), code if code > 0 else 1)
                continue
            if not _stopped(p.pid):
                stopped_since.pop(r, None)
                continue
            since = stopped_since.setdefault(r, now)
            if now - since >= stop_limit and first is None:
                first = (r, "was stopped (SIGSTOP or a debugger) and answered no one for %.1f s" % (now - since), 1)
        if interrupted and first is None:
            first = (None, "the launcher got %s" % signal.Signals(interrupted[0]).name, 128 + interrupted[0])
        if first is not None and kill_at is None:
            kill_at = now if first[0] is None else now + LINGER
        if kill_at is not None and term_at is None and now >= kill_at:
            term_at = now
            for p in procs:
                if p.poll() is None:
                    _signal_group(p, signal.SIGTERM)
        if term_at is not None and now >= term_at + GRACE:
            for p in procs:
                if p.poll() is None:
                    _signal_group(p, signal.SIGKILL)  # a stopped rank too
        if all(p.poll() is not None for p in procs):
            break
        time.sleep(POLL)
    if first is None:
        return 0
    r, why, status = first
    killed = [str(q) for q, p in enumerate(procs) if q != r and p.returncode is not None and p.returncode < 0 and term_at is not None]
    who = "rank %d (pid %d)" % (r, procs[r].pid) if r is not None else "the job"
    msg = "python -m msccl bench: %s %s" % (who, why)
    if killed:
        msg += "; killed: ranks %s" % ", ".join(killed)
    print(msg, file=sys.stderr)
    return status
