"""msccl: compile, prove and select collective schedules (msccl-go).

    import msccl
    plan = msccl.compile("algorithms/allreduce_ring.msccl", ranks=4)
    result = plan.verify()            # the CPU proof: every size, reduction, type
    assert result.ok, result
    plan.save("ring4.json")

Pure ctypes over libmsccl.so (the C ABI of msccl-go, built with Go when the
package is installed); torch is not needed to import it.
"""

from ._lib import ABI_VERSION
from .errors import (CompileError, Diagnostic, Error, Finding, InternalError, InvalidArgument, NotCorrect, PlanError,
                     RunError, SelectError)
from .comm import Communicator, unique_id
from .primitives import Buffer, Channels, Kernel, Registration, Watch, include_path
from .plan import COLLECTIVES, DTYPES, REDUCTIONS, Plan, SizeRule, VerifyResult, compile, load, loads, parse_size, select

__version__ = "0.1.0"

__all__ = [
    "ABI_VERSION", "COLLECTIVES", "Communicator", "unique_id", "DTYPES", "REDUCTIONS", "CompileError", "Diagnostic", "Error", "Finding",
    "InternalError", "InvalidArgument", "NotCorrect", "Plan", "PlanError", "RunError", "SelectError", "SizeRule",
    "VerifyResult", "compile", "Buffer", "Channels", "Kernel", "Registration", "Watch", "include_path", "library_version", "load", "loads", "parse_size", "select",
]


def library_version():
    """"libmsccl VERSION GOVERSION" of the loaded library."""
    import ctypes

    from . import _lib
    out = ctypes.c_void_p()
    _lib.call("msccl_version", ctypes.byref(out))
    return _lib.take(out).decode()
