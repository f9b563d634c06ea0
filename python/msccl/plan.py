"""Plans: compile, load, select, verify and save them."""

import ctypes
import errno
import json
import os
import weakref
from dataclasses import dataclass
from typing import Any, List, Optional

from . import _lib
from .errors import CompileError, Diagnostic, InvalidArgument, NotCorrect, PlanError, SelectError

#: DSL programs end in this suffix; a str with it is always a path.
SOURCE_SUFFIX = ".msccl"

DTYPES = ("f32", "f16", "bf16", "i32", "u32", "u8", "f8e4m3", "f8e5m2")
REDUCTIONS = ("sum", "min", "max", "prod")
#: The verdict of a proven plan refused by verify(require_consistent=True).
INCONSISTENT = "not rank-consistent"
COLLECTIVES = ("allreduce", "allgather", "reducescatter", "alltoall", "broadcast", "reduce", "gather", "scatter", "sendrecv")


@dataclass(frozen=True)
class SizeRule:
    """The message sizes (bytes, as nccl-tests counts them) a plan serves:
    multiples of granularity from min, up to max (None: unbounded)."""

    granularity: int
    min: int
    max: Optional[int]
    text: str
    why: str = ""

    def admits(self, size):
        return size >= self.min and (self.max is None or size <= self.max) and size % self.granularity == 0

    def __str__(self):
        return self.text


class VerifyResult:
    """What Plan.verify found.

    ok is True when the plan is correct (and clean); verdict is one of
    correct, deadlock, race, unbalanced, wrong result, error; findings are
    Diagnostics with a kind, at the DSL statements of plans compiled from
    source. mode is "proof" (every size class of the plan's rule, every
    reduction and type) or "run" (one CPU executor run); runs names the
    simulations made. A result is true in a boolean context when ok.

    A proof of a correct plan also says whether the plan is rank-consistent
    (docs/consistency.md): consistent is True when every rank receives
    the same bits for every value the collective defines and the
    reduction order is fixed whatever the timing, False when not, None
    when not checked (one run, a failed proof, or a plan above 128 ranks
    without require_consistent); consistency is the line msccl-compile
    compile prints about it, and consistency_reason why it is not (which
    two output bytes differ, or what may change the order from run to
    run). With verify(require_consistent=True) a plan
    that is not is refused: ok False, verdict "not rank-consistent".
    """

    def __init__(self, raw):
        self.raw = raw
        self.ok = bool(raw["ok"])
        self.verdict = raw["verdict"]
        self.mode = raw["mode"]
        self.runs = list(raw.get("runs") or [])
        self.findings: List[Diagnostic] = [Diagnostic.from_json(d) for d in raw.get("findings") or []]
        self.size = raw.get("size")
        self.dtype = raw.get("dtype")
        self.op = raw.get("op")
        self.launches = raw.get("launches")
        c = raw.get("consistency") or {}
        self.consistent: Optional[bool] = c.get("consistent")
        self.consistency: str = c.get("summary", "")
        self.consistency_reason: str = c.get("reason", "")

    def __bool__(self):
        return self.ok

    def kinds(self):
        """The kinds of the error findings, in order, without repeats."""
        out = []
        for f in self.findings:
            if f.is_error and f.kind not in out:
                out.append(f.kind)
        return out

    def check(self):
        """Return self when ok, else raise NotCorrect naming the findings."""
        if not self.ok and self.verdict == INCONSISTENT:
            raise NotCorrect(self.consistency_reason, self)
        if not self.ok:
            raise NotCorrect("plan is not correct (%s):\n%s" % (self.verdict, "\n".join(f.message for f in self.findings)), self)
        return self

    def __str__(self):
        lines = ["verdict: " + self.verdict]
        lines += [f.message for f in self.findings]
        if self.verdict == INCONSISTENT:
            lines.append(self.consistency_reason)
        elif self.consistency:
            lines.append(self.consistency)
        return "\n".join(lines)

    def __repr__(self):
        return "<VerifyResult %s %s, %d findings>" % (self.mode, self.verdict, len(self.findings))


def _release(handle):
    l = _lib._lib
    if l is not None:
        l.msccl_release(handle, None)


def _fact(key: str, doc: Optional[str] = None) -> Any:
    """A read-only Plan attribute: the plan's fact key (one property for
    every fact rather than a getter each; Any, so that the attribute's own
    annotation is the type checkers' word)."""
    return property(lambda self: self._info[key], doc=doc)


class Plan:
    """An execution plan (MSCCL++ v0.8+ JSON schema), held by libmsccl.

    Make one with msccl.compile, msccl.load, msccl.loads or msccl.select.
    """

    def __init__(self, handle, origin=""):
        if not isinstance(handle, int) or handle <= 0:
            raise InvalidArgument("Plan is made by msccl.compile, load, loads or select, not directly")
        self._handle = handle
        self._origin = origin
        self._finalizer = weakref.finalize(self, _release, handle)
        out = ctypes.c_void_p()
        _lib.call("msccl_plan_info", handle, ctypes.byref(out))
        self._info = _lib.decode_json(_lib.take(out))
        sr = self._info.get("size_rule")
        self.size_rule: Optional[SizeRule] = SizeRule(**sr) if sr else None

    # Plan facts (from the plan itself, read once by msccl_plan_info).
    name: str = _fact("name")
    collective: str = _fact("collective")
    protocol: str = _fact("protocol")
    ranks: int = _fact("ranks")
    inplace: bool = _fact("inplace")
    root: int = _fact("root")
    from_source: bool = _fact("from_source", """True when compiled here from a program: findings then name DSL
        positions, not only plan paths.""")
    reduction: str = _fact("reduction", """The one reduction the plan serves when its reduce_op fixes one
        (`reduce ... op max`, `option reduce = max`), "" when it serves every
        one: a proof covers that reduction only, and runs with another are
        refused.""")

    def check_reduction(self, op):
        """Raise ValueError unless the plan serves reduction op (sum, min,
        max, prod); return op."""
        op = _choice(op, REDUCTIONS, "op")
        if self._info.get("reduction_error"):
            raise ValueError("plan %r serves no reduction: %s" % (self.name, self._info["reduction_error"]))
        fixed = self._info.get("reduction") or ""
        if fixed and op != fixed:
            raise ValueError("plan %r serves reduction %s only (its reduce_op), not %s; pass op=%r" % (self.name, fixed, op, fixed))
        return op

    def _live(self):
        if not self._finalizer.alive:
            raise InvalidArgument("plan %r was closed" % self._info.get("name"))
        return self._handle

    def close(self):
        """Release the library's copy now (else when garbage collected)."""
        self._finalizer()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __reduce__(self):
        # Pickled as its JSON (for multiprocessing and torch.distributed's
        # object collectives); the source positions stay behind.
        return (loads, (self.to_bytes(), self._origin or "<pickle>"))

    def __repr__(self):
        return "<msccl.Plan %r %s, %d ranks, %s%s>" % (
            self.name, self.collective, self.ranks, self.protocol, ", from " + self._origin if self._origin else "")

    def to_json(self) -> str:
        """The plan as JSON, byte for byte what msccl-compile compile writes."""
        return self.to_bytes().decode("utf-8")

    def to_bytes(self) -> bytes:
        out, n = ctypes.c_void_p(), ctypes.c_size_t()
        _lib.call("msccl_plan_json", self._live(), ctypes.byref(out), ctypes.byref(n))
        return _lib.take(out, n.value)

    def save(self, path):
        """Write the plan's JSON to path."""
        data = self.to_bytes()
        with open(os.fspath(path), "wb") as f:
            f.write(data)

    def check_size(self, size):
        """Raise ValueError unless the plan serves messages of size bytes."""
        size = _size_arg(size, "size")
        if self.size_rule is None:
            raise ValueError("plan %r serves no message size: %s" % (self.name, self._info.get("size_rule_error", "")))
        if not self.size_rule.admits(size):
            raise ValueError("plan %r does not serve %d bytes: its sizes are %s" % (self.name, size, self.size_rule))
        return size

    def verify(self, size=None, *, dtype=None, op=None, launches=None, ll=None, symbolic=False, sizes=None,
               require_consistent=False) -> VerifyResult:
        """Prove the plan on the CPU executor, or run it once.

        Without size: the proof msccl-compile compile runs (every size class
        of the plan's rule, symbolic and byte level, 4 launches, every
        reduction and type, or the one reduction the plan's reduce_op
        fixes: .reduction); dtype may name the byte-level types (a name
        or a list; default f32 and bf16) and sizes may list the message
        sizes to prove at instead (the proof then holds at those sizes
        only, as with msccl-compile --verify-sizes). A proven plan's
        result says whether it is rank-consistent (.consistent); with
        require_consistent=True one that is not is refused (ok False,
        verdict "not rank-consistent"), as msccl-compile compile
        --require-consistent refuses it. With size (bytes, or a string
        such as "1MiB"): one run, as msccl-compile sim, in dtype (default
        f32) with op (sum, min, max, prod; default the plan's own, and
        one the plan does not serve raises ValueError), launches back to back (default
        4), LL packet width ll (8 or 16), symbolic or byte level.
        A wrong plan is a result with ok False, not an exception; use
        .check() to raise.
        """
        opts = {}
        if not isinstance(require_consistent, bool):
            raise TypeError("verify: require_consistent must be a bool, got %r" % (require_consistent,))
        if size is None:
            if require_consistent:
                opts["require_consistent"] = True
            for name, v in (("op", op), ("launches", launches), ("ll", ll)):
                if v is not None:
                    raise ValueError("verify: %s chooses one run; give its size too (the proof without a size covers every reduction and 4 launches)" % name)
            if symbolic:
                raise ValueError("verify: symbolic chooses one run; give its size too (the proof is symbolic already)")
            if dtype is not None:
                names = [dtype] if isinstance(dtype, str) else list(dtype) if isinstance(dtype, (list, tuple)) else None
                if not names or not all(isinstance(n, str) for n in names):
                    raise TypeError("verify: dtype must be a type name or a list of them, got %r" % (dtype,))
                for n in names:
                    _choice(n, DTYPES, "dtype")
                opts["dtype"] = names
            if sizes is not None:
                if isinstance(sizes, (str, int)) or not sizes:
                    raise TypeError("verify: sizes must be a non-empty list of sizes, got %r" % (sizes,))
                opts["sizes"] = [parse_size(n) for n in sizes]
        else:
            if sizes is not None:
                raise ValueError("verify: sizes picks the proof's sizes; size makes one run: give one of them")
            if require_consistent:
                raise ValueError("verify: require_consistent asks the proof; size makes one run: give one of them")
            opts["size"] = size if isinstance(size, str) else _size_arg(size, "size")
            if dtype is not None:
                if not isinstance(dtype, str):
                    raise TypeError("verify: one run takes one dtype name, got %r" % (dtype,))
                opts["dtype"] = _choice(dtype, DTYPES, "dtype")
            if op is not None:
                opts["op"] = self.check_reduction(op)
            if launches is not None:
                opts["launches"] = _int_arg(launches, "launches", 1)
            if ll is not None:
                if ll not in (8, 16) or isinstance(ll, bool):
                    raise ValueError("verify: ll must be 8 or 16, got %r" % (ll,))
                opts["ll"] = ll
            if not isinstance(symbolic, bool):
                raise TypeError("verify: symbolic must be a bool, got %r" % (symbolic,))
            opts["symbolic"] = symbolic
        out = ctypes.c_void_p()
        _lib.call("msccl_verify", self._live(), json.dumps(opts).encode(), ctypes.byref(out))
        return VerifyResult(_lib.decode_json(_lib.take(out)))


def parse_size(s) -> int:
    """Bytes from an int or a string such as "4096", "64K", "1MiB" (binary
    suffixes, as msccl-compile and msccl-bench read them)."""
    if isinstance(s, int) and not isinstance(s, bool):
        return _size_arg(s, "size")
    if not isinstance(s, str):
        raise TypeError("size must be an int or a string such as '64K', got %r" % (s,))
    n = ctypes.c_int64()
    _lib.call("msccl_parse_size", s.encode(), ctypes.byref(n))
    return n.value


def _choice(v, allowed, what):
    if not isinstance(v, str):
        raise TypeError("%s must be a string, got %r" % (what, v))
    if v not in allowed:
        raise ValueError("unknown %s %r (want one of %s)" % (what, v, ", ".join(allowed)))
    return v


def _int_arg(v, what, minimum=None):
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError("%s must be an int, got %r" % (what, v))
    if minimum is not None and v < minimum:
        raise ValueError("%s must be at least %d, got %d" % (what, minimum, v))
    return v


def _size_arg(v, what):
    return _int_arg(v, what, 1)


def _read_source(path_or_source, filename):
    """(filename, bytes) of a program given as a path or as source text."""
    if isinstance(path_or_source, os.PathLike):
        path = os.fspath(path_or_source)
        with open(path, "rb") as f:
            return (filename or path), f.read()
    if isinstance(path_or_source, bytes):
        return (filename or "<string>"), path_or_source
    if not isinstance(path_or_source, str):
        raise TypeError("compile: want a path or the program's source (str, bytes or os.PathLike), got %s" % type(path_or_source).__name__)
    s = path_or_source
    # A path is one line that ends in .msccl or names a file; anything
    # else (a program always has a newline or a collective header) is source.
    if "\n" not in s and (s.endswith(SOURCE_SUFFIX) or os.path.isfile(s)):
        with open(s, "rb") as f:
            return (filename or s), f.read()
    if s.strip() and len(s.split()) == 1:
        # One word is no program (its header alone is "collective NAME"),
        # so it was meant as a path: say so instead of a syntax error.
        hint = ""
        if os.path.isfile(s + SOURCE_SUFFIX):
            hint = "; did you mean %r?" % (s + SOURCE_SUFFIX)
        raise FileNotFoundError(errno.ENOENT, "compile: no such file (a program's text starts with a collective header)" + hint, s)
    return (filename or "<string>"), s.encode("utf-8")


def compile(path_or_source, *, filename=None, **params) -> Plan:
    """Compile a schedule program to a Plan.

    path_or_source is a path (str ending in .msccl or naming a file, or an
    os.PathLike) or the program's text (str or bytes; diagnostics call it
    filename, default "<string>"). params override the program's params
    (ranks=8): ints only. Errors raise CompileError with file, line, col
    and message of the first error and every diagnostic. The plan is not
    proven yet: call .verify().
    """
    if filename is not None and not isinstance(filename, str):
        raise TypeError("compile: filename must be a str, got %r" % (filename,))
    for k, v in params.items():
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError("compile: parameter %s must be an int, got %r" % (k, v))
    name, src = _read_source(path_or_source, filename)
    handle = ctypes.c_int64()
    diags, err = ctypes.c_void_p(), ctypes.c_void_p()
    status = _lib.lib().msccl_compile(name.encode(), src, len(src), json.dumps(params).encode(), ctypes.byref(handle), ctypes.byref(diags), ctypes.byref(err))
    msg = _lib.take(err).decode("utf-8", "replace")
    ds = [Diagnostic.from_json(d) for d in _lib.decode_json(_lib.take(diags)) or []]
    if status != _lib.OK:
        raise _lib.error_for(status, msg, ds, input_error=CompileError)
    plan = Plan(handle.value, name)
    plan.diagnostics = ds  # warnings
    return plan


def loads(data, filename="<string>") -> Plan:
    """A Plan from plan JSON (str or bytes); PlanError names JSON paths."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    if not isinstance(data, bytes):
        raise TypeError("loads: want plan JSON as str or bytes, got %s" % type(data).__name__)
    handle = ctypes.c_int64()
    diags, err = ctypes.c_void_p(), ctypes.c_void_p()
    status = _lib.lib().msccl_plan_load(filename.encode(), data, len(data), ctypes.byref(handle), ctypes.byref(diags), ctypes.byref(err))
    msg = _lib.take(err).decode("utf-8", "replace")
    ds = [Diagnostic.from_json(d) for d in _lib.decode_json(_lib.take(diags)) or []]
    if status != _lib.OK:
        raise _lib.error_for(status, msg, ds, input_error=PlanError)
    plan = Plan(handle.value, filename)
    plan.diagnostics = ds
    return plan


def load(path) -> Plan:
    """A Plan from a plan JSON file."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError("load: want a path, got %s" % type(path).__name__)
    path = os.fspath(path)
    with open(path, "rb") as f:
        data = f.read()
    return loads(data, filename=path)


def select(collective, ranks, size, *, table=None) -> Plan:
    """The proven library plan for collective on ranks GPUs at size bytes
    (as nccl-tests counts them), from algorithms/selection.yaml built into
    the library, or from the selection table at path table."""
    _choice(collective, COLLECTIVES, "collective")
    _int_arg(ranks, "ranks", 1)
    _size_arg(size, "size")
    if table is not None and not isinstance(table, (str, os.PathLike)):
        raise TypeError("select: table must be a path, got %r" % (table,))
    handle = ctypes.c_int64()
    _lib.call("msccl_select", collective.encode(), ranks, size, os.fspath(table).encode() if table is not None else None,
              ctypes.byref(handle), input_error=SelectError)
    return Plan(handle.value, "selection table")
