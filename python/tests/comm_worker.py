"""One rank of test_comm's job: run every collective on the cpu device and
check the results against their definitions (integer values, exact in
every type). argv: unique id, rank, world, the algorithms directory."""

import os

import array
import sys

import msccl


def check(name, got, want):
    if list(got) != list(want):
        bad = next(i for i, (g, w) in enumerate(zip(got, want)) if g != w)
        raise SystemExit("%s: element %d is %r, want %r" % (name, bad, got[bad], want[bad]))


def main():
    uid, rank, world, algos = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    ring = os.path.join(algos, "allreduce_ring.msccl")
    with msccl.Communicator.from_unique_id(uid, rank, world) as comm:
        assert (comm.rank, comm.size, comm.device) == (rank, world, "cpu"), comm
        val = lambda r, i: (r + 1) * 1000 + i % 97  # noqa: E731
        for n in (1024, 256 * 1024 + 64):
            with_f = array.array("f", [val(rank, i) for i in range(n)])
            comm.all_reduce(with_f)
            check("all_reduce f32 n=%d" % n, with_f, [sum(val(r, i) for r in range(world)) for i in range(n)])
        t = array.array("i", [val(rank, i) for i in range(1024)])
        comm.all_reduce(t, op="max")
        check("all_reduce max", t, [val(world - 1, i) for i in range(1024)])
        # Twice with the same plan and buffers: the cached executor again.
        for _ in range(2):
            t = array.array("i", [val(rank, i) for i in range(1024)])
            comm.all_reduce(t, op="min", plan=msccl.compile(ring, ranks=world))
            check("all_reduce min, ring", t, [val(0, i) for i in range(1024)])
        n = 256
        inp = array.array("i", [val(rank, i) for i in range(n)])
        out = array.array("i", [0] * (n * world))
        comm.all_gather(out, inp)
        check("all_gather", out, [val(q, i) for q in range(world) for i in range(n)])
        inp = array.array("i", [val(rank, i) for i in range(n * world)])
        out = array.array("i", [0] * n)
        comm.reduce_scatter(out, inp)
        check("reduce_scatter", out, [sum(val(q, rank * n + i) for q in range(world)) for i in range(n)])
        inp = array.array("i", [rank * 100000 + i for i in range(n * world)])
        out = array.array("i", [0] * (n * world))
        comm.all_to_all(out, inp)
        check("all_to_all", out, [q * 100000 + rank * n + i for q in range(world) for i in range(n)])
        # Sizes outside a plan's rule run staged (pieces padded to the next
        # admitted size): 1001 elements per piece.
        plans = {c: msccl.compile(os.path.join(algos, a + ".msccl"), ranks=world) for c, a in [
            ("allreduce", "allreduce_ring"), ("allgather", "allgather_ring"), ("reducescatter", "reducescatter_ring"), ("alltoall", "alltoall_direct")]}
        n = 1001
        t = array.array("f", [val(rank, i) for i in range(n)])
        comm.all_reduce(t, plan=plans["allreduce"])
        check("all_reduce staged", t, [sum(val(r, i) for r in range(world)) for i in range(n)])
        inp = array.array("i", [val(rank, i) for i in range(n)])
        out = array.array("i", [0] * (n * world))
        comm.all_gather(out, inp, plan=plans["allgather"])
        check("all_gather staged", out, [val(q, i) for q in range(world) for i in range(n)])
        inp = array.array("i", [val(rank, i) for i in range(n * world)])
        out = array.array("i", [0] * n)
        comm.reduce_scatter(out, inp, plan=plans["reducescatter"])
        check("reduce_scatter staged", out, [sum(val(q, rank * n + i) for q in range(world)) for i in range(n)])
        inp = array.array("i", [rank * 100000 + i for i in range(n * world)])
        out = array.array("i", [0] * (n * world))
        comm.all_to_all(out, inp, plan=plans["alltoall"])
        check("all_to_all staged", out, [q * 100000 + rank * n + i for q in range(world) for i in range(n)])
        # The library's plans (no plan given) at sizes outside their
        # rules: chosen by size, run padded.
        for n in (1, 1001, 1000003):
            t = array.array("f", [val(rank, i) for i in range(n)])
            comm.prepare("all_reduce", t)
            comm.all_reduce(t)
            check("all_reduce selected n=%d" % n, t, [sum(val(r, i) for r in range(world)) for i in range(n)])
        for n in (1, 1001):
            inp = array.array("i", [val(rank, i) for i in range(n)])
            out = array.array("i", [0] * (n * world))
            comm.all_gather(out, inp)
            check("all_gather selected n=%d" % n, out, [val(q, i) for q in range(world) for i in range(n)])
            inp = array.array("i", [val(rank, i) for i in range(n * world)])
            out = array.array("i", [0] * n)
            comm.reduce_scatter(out, inp)
            check("reduce_scatter selected n=%d" % n, out, [sum(val(q, rank * n + i) for q in range(world)) for i in range(n)])
            inp = array.array("i", [rank * 100000 + i for i in range(n * world)])
            out = array.array("i", [0] * (n * world))
            comm.all_to_all(out, inp)
            check("all_to_all selected n=%d" % n, out, [q * 100000 + rank * n + i for q in range(world) for i in range(n)])
        # Argument errors are raised before anything runs, on every rank
        # alike, so the job stays in step.
        for call, exc in [
            (lambda: comm.all_reduce(array.array("i", [0] * 1024), plan=msccl.compile(ring, ranks=2)), ValueError),  # other ranks
            (lambda: comm.all_gather(array.array("i", [0] * 8), array.array("i", [0] * 4)), ValueError),  # sizes
            (lambda: comm.all_gather(array.array("f", [0] * 8 * world), array.array("i", [0] * 8)), TypeError),  # types
            (lambda: comm.all_reduce(array.array("d", [0] * 8)), TypeError),  # f64
            (lambda: comm.all_reduce(b"\0" * 64), ValueError),  # read only
            (lambda: comm.all_reduce(array.array("f", [0] * 1024), op="avg"), ValueError),
            (lambda: comm.all_reduce(array.array("f", [0] * 1024), op="prod"), ValueError),
            (lambda: comm.all_reduce("x"), TypeError),
        ]:
            try:
                call()
            except exc:
                pass
            else:
                raise SystemExit("no %s from %s" % (exc.__name__, call))
    print("rank %d ok" % rank)


if __name__ == "__main__":
    main()
