"""python -m msccl: the msccl-compile commands for people who never leave Python.

    python -m msccl compile FILE.msccl [-D name=value ...] [-o plan.json] [--no-verify] [--verify-dtypes f32,bf16] [--require-consistent]
    python -m msccl verify PLAN.json|FILE.msccl [-D name=value ...] [--size 1MiB --dtype f16 --op sum --launches 4] [--json]
    python -m msccl select COLLECTIVE --ranks N --size BYTES [-o plan.json] [--table selection.yaml]
    python -m msccl bench [--procs N] [--plan P | --collective C] [-b 1K -e 1M -f 2 -d f32 -o sum -n 20 -w 5 -c]
    python -m msccl include
    python -m msccl version

compile is msccl-compile compile (the plan it writes is byte for byte the
same); verify is msccl-compile sim with --size, and the compile command's
proof without; bench is msccl-bench --device cpu (--procs N starts the
ranks); include prints the directory of the device headers
(msccl/msccl.cuh) for nvcc's -I or CuPy's RawKernel options. Exit status: 0 when the command worked and the plan is
correct, 1 when the input has problems or the verdict fails, 2 on usage
errors.
"""

import argparse
import json
import os
import sys

from . import plan as _plan
from .errors import CompileError, Error, InvalidArgument, PlanError, SelectError

EXIT_OK, EXIT_BAD, EXIT_USAGE = 0, 1, 2


def _define(s):
    name, sep, val = s.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError("want name=value, got %r" % s)
    try:
        return name, int(val)
    except ValueError:
        raise argparse.ArgumentTypeError("value of %s must be an integer, got %r" % (name, val))


def _size(s):
    """Bytes from "1048576" or "1MiB", read by the library as msccl-compile
    reads them; a bad one is a usage error."""
    try:
        return _plan.parse_size(s)
    except (InvalidArgument, TypeError) as e:
        raise argparse.ArgumentTypeError(str(e))


# --json: diagnostics as JSON lines (msccl-compile's --json).
_json_diags = False


def _print_diags(ds, stream):
    for d in ds:
        print(d.to_json() if _json_diags else d.message, file=stream)


def _open_plan(path, defines):
    """A plan from a program (.msccl, compiled with defines) or plan JSON."""
    if path.endswith(_plan.SOURCE_SUFFIX):
        return _plan.compile(path, **defines)
    if defines:
        raise InvalidArgument("-D applies to programs (.msccl), not to plan JSON %s" % path)
    return _plan.load(path)


def cmd_compile(a):
    p = _plan.compile(a.file, **dict(a.define))
    _print_diags(getattr(p, "diagnostics", []), sys.stderr)
    res = None
    if a.no_verify and a.require_consistent:
        raise InvalidArgument("--require-consistent asks the proof whether the plan is rank-consistent: drop --no-verify")
    if not a.no_verify:
        sizes = [_plan.parse_size(x) for x in a.verify_sizes.split(",")] if a.verify_sizes else None
        res = p.verify(dtype=a.verify_dtypes.split(","), sizes=sizes, require_consistent=a.require_consistent)
        _print_diags(res.findings, sys.stderr)
        if res.verdict == _plan.INCONSISTENT:
            print("%s: %s; no plan written (drop --require-consistent to write it anyway)" % (a.file, res.consistency_reason), file=sys.stderr)
            return EXIT_BAD
        if not res.ok:
            # Only runs that could not start: nothing is known wrong.
            what = "the proof could not run, so the compiled plan is not proven" if res.verdict == "error" else "the compiled plan is not correct"
            print("%s: %s (see above); no plan written. Use --no-verify to write it anyway." % (a.file, what), file=sys.stderr)
            return EXIT_BAD
    data = p.to_bytes()
    if a.o:
        try:
            with open(a.o, "wb") as f:
                f.write(data)
        except OSError:
            if os.path.exists(a.o):
                os.remove(a.o)  # no half-written plan left behind
            raise
    else:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    if res is not None:
        what = "every message size in its rule, %s," % p.size_rule if not a.verify_sizes else "%s bytes only (its size rule: %s)," % (",".join(map(str, sizes)), p.size_rule)
        print("%s: wrote %s (%d ranks); proven correct for %s every reduction and type (%s)"
              % (a.file, a.o or "the plan to stdout", p.ranks, what, "; ".join(res.runs)), file=sys.stderr)
        if res.consistency:
            print("%s: %s" % (a.file, res.consistency), file=sys.stderr)
    return EXIT_OK


def cmd_verify(a):
    p = _open_plan(a.plan, dict(a.define))
    if a.size is None:
        if a.op or a.launches or a.ll or a.symbolic:
            raise InvalidArgument("--op, --launches, --ll and --symbolic choose one run: give --size too")
        res = p.verify(dtype=a.dtype.split(",") if a.dtype else None)
    else:
        res = p.verify(a.size, dtype=a.dtype, op=a.op, launches=a.launches, ll=a.ll, symbolic=a.symbolic)
    if a.json:
        json.dump(res.raw, sys.stdout, indent=2)
        print()
    else:
        if res.mode == "proof":
            print("%s: %s (proof: %s)" % (a.plan, res.verdict, "; ".join(res.runs)))
        else:
            what = "symbolic (every reduction and type)" if res.dtype == "symbolic" else "%s, %s" % (res.dtype, res.op)
            print("%s: %s at %d bytes, %s, %d launches" % (a.plan, res.verdict, res.size, what, res.launches))
        _print_diags(res.findings, sys.stdout)
    return EXIT_OK if res.ok else EXIT_BAD


def cmd_select(a):
    p = _plan.select(a.collective, a.ranks, a.size, table=a.table)
    data = p.to_bytes()
    if a.o:
        with open(a.o, "wb") as f:
            f.write(data)
        print("%s: %s (%s, %d ranks)" % (a.o, p.name, p.collective, p.ranks), file=sys.stderr)
    else:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    return EXIT_OK


def cmd_bench(a):
    from . import bench
    return bench.main(a)


def cmd_include(a):
    from .primitives import include_path
    print(include_path())
    return EXIT_OK


def cmd_version(a):
    from . import __version__, library_version
    print("msccl %s (%s)" % (__version__, library_version()))
    return EXIT_OK


def parser():
    ap = argparse.ArgumentParser(prog="python -m msccl", description="Compile, prove and select collective schedules (msccl-go).")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    c = sub.add_parser("compile", help="compile a schedule program to a plan and prove it correct on the CPU")
    c.add_argument("file", metavar="FILE.msccl")
    c.add_argument("-D", dest="define", type=_define, action="append", default=[], metavar="name=value", help="override a parameter: -D ranks=16 (repeatable)")
    c.add_argument("-o", metavar="plan.json", help="write the plan here instead of stdout")
    c.add_argument("--no-verify", action="store_true", help="skip the CPU executor's proof of the compiled plan")
    c.add_argument("--verify-dtypes", default="f32,bf16", help="data types of the proof's byte-level runs")
    c.add_argument("--verify-sizes", help="message sizes the proof runs at (default: sizes that cover every size the plan's rule admits)")
    c.add_argument("--require-consistent", action="store_true", help="refuse a plan whose ranks may receive different bits for one result (reduced in different orders, or by the switch)")
    c.add_argument("--json", action="store_true", help="report diagnostics as JSON lines on stderr (severity, code, summary, detail, file, line, col, path)")
    c.set_defaults(run=cmd_compile)

    v = sub.add_parser("verify", help="prove a plan (or a program) on the CPU executor, or run it once with --size")
    v.add_argument("plan", metavar="PLAN.json|FILE.msccl")
    v.add_argument("-D", dest="define", type=_define, action="append", default=[], metavar="name=value", help="parameters of a program (repeatable)")
    v.add_argument("--size", type=_size, help="one run at this message size (bytes; 1MiB); without it, the proof over every size of the plan's rule")
    v.add_argument("--dtype", help="data type of the run (f32, f16, bf16, i32, u32, u8, f8e4m3, f8e5m2), or the proof's byte-level types (f32,bf16)")
    v.add_argument("--op", choices=_plan.REDUCTIONS, help="reduction of the run (default sum)")
    v.add_argument("--launches", type=int, help="back-to-back launches of the run (default 4)")
    v.add_argument("--ll", type=int, choices=(8, 16), help="LL packet width of the run")
    v.add_argument("--symbolic", action="store_true", help="run symbolically (every reduction and type at once)")
    v.add_argument("--json", action="store_true", help="print the verdict as JSON (and diagnostics as JSON lines on stderr)")
    v.set_defaults(run=cmd_verify)

    s = sub.add_parser("select", help="the library plan for a collective, rank count and message size")
    s.add_argument("collective", choices=_plan.COLLECTIVES)
    s.add_argument("--ranks", type=int, required=True)
    s.add_argument("--size", type=_size, required=True, help="message size in bytes (1MiB)")
    s.add_argument("--table", help="selection table (default: the library's, built in)")
    s.add_argument("-o", metavar="plan.json", help="write the plan here instead of stdout")
    s.set_defaults(run=cmd_select)

    b = sub.add_parser("bench", help="msccl-bench's sweep on this host's cpu device, one rank per process")
    b.add_argument("--procs", type=int, help="start N processes of this command, one rank each (else: one rank of a job torchrun, mpirun or srun started)")
    b.add_argument("--device", default="cpu", help="where the ranks run (cpu)")
    b.add_argument("--plan", help="plan JSON, or a program (.msccl, compiled for the job's ranks); default: the selection table's plan per size")
    b.add_argument("--collective", default="allreduce", choices=("allreduce", "allgather", "reducescatter", "alltoall"), help="without --plan")
    b.add_argument("-b", type=_size, default=1024, help="smallest message size (1K)")
    b.add_argument("-e", type=_size, default=1 << 20, help="largest message size (1M)")
    b.add_argument("-f", type=int, default=2, help="size multiplication factor")
    b.add_argument("-d", dest="dtype", default="f32", choices=("f32", "f16", "i32", "u32", "u8"), help="data type")
    b.add_argument("-o", dest="op", default="sum", choices=_plan.REDUCTIONS, help="reduction")
    b.add_argument("-n", dest="iters", type=int, default=20, help="timed iterations")
    b.add_argument("-w", dest="warmup", type=int, default=5, help="warm-up iterations")
    b.add_argument("-c", dest="check", action="store_true", help="check results against the collective's definition (#wrong)")
    b.add_argument("--stop-limit", type=float, default=10.0, metavar="SECONDS",
                   help="with --procs: a rank stopped (SIGSTOP) this long ends the job (default 10, the watchdog's timeout)")
    b.set_defaults(run=cmd_bench)

    inc = sub.add_parser("include", help="print the device headers' directory (-I for nvcc, CuPy's RawKernel options)")
    inc.set_defaults(run=cmd_include)

    ver = sub.add_parser("version", help="print the package's and the library's versions")
    ver.set_defaults(run=cmd_version)
    return ap


def main(argv=None):
    global _json_diags
    a = parser().parse_args(argv)
    _json_diags = getattr(a, "json", False)
    name = "python -m msccl " + a.command
    try:
        return a.run(a)
    except CompileError as e:
        _print_diags(e.diagnostics, sys.stderr)
        return EXIT_BAD
    except PlanError as e:
        _print_diags(e.diagnostics, sys.stderr)
        print("%s: %s" % (name, e.message), file=sys.stderr)
        return EXIT_BAD
    except (InvalidArgument, TypeError) as e:
        print("%s: %s" % (name, e), file=sys.stderr)
        return EXIT_USAGE
    except (Error, SelectError, OSError, ValueError) as e:
        print("%s: %s" % (name, e), file=sys.stderr)
        return EXIT_BAD


if __name__ == "__main__":
    sys.exit(main())
