"""ctypes binding of libmsccl.so (the C ABI in capi/ of msccl-go).

Every export returns a status and, when it is not OK, a message the
library allocated; strings and buffers it returns are freed with
msccl_free right after they are copied into Python objects. ctypes
releases the GIL around each call, so threads run library calls in
parallel; the library is safe for that.
"""

import ctypes
import json
import os
import threading

from .errors import Error, InternalError, InvalidArgument, RunError

#: The ABI this package was written for (capi/api.go: abiVersion).
ABI_VERSION = 5

# Status codes (capi/status.go).
OK = 0
ERR_INVALID = 1
ERR_INPUT = 2
ERR_INTERNAL = 3
ERR_RUN = 4

_c_char_pp = ctypes.POINTER(ctypes.c_void_p)
_i64 = ctypes.c_int64
_i64p = ctypes.POINTER(ctypes.c_int64)

_u64 = ctypes.c_uint64
_u32x3 = ctypes.POINTER(ctypes.c_uint32)

_SIGNATURES = {
    "msccl_abi_version": (ctypes.c_int, []),
    "msccl_free": (None, [ctypes.c_void_p]),
    "msccl_version": (ctypes.c_int, [_c_char_pp, _c_char_pp]),
    "msccl_compile": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, _i64p, _c_char_pp, _c_char_pp]),
    "msccl_plan_load": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t, _i64p, _c_char_pp, _c_char_pp]),
    "msccl_plan_json": (ctypes.c_int, [_i64, _c_char_pp, ctypes.POINTER(ctypes.c_size_t), _c_char_pp]),
    "msccl_plan_info": (ctypes.c_int, [_i64, _c_char_pp, _c_char_pp]),
    "msccl_verify": (ctypes.c_int, [_i64, ctypes.c_char_p, _c_char_pp, _c_char_pp]),
    "msccl_select": (ctypes.c_int, [ctypes.c_char_p, _i64, _i64, ctypes.c_char_p, _i64p, _c_char_pp]),
    "msccl_release": (ctypes.c_int, [_i64, _c_char_pp]),
    "msccl_live_handles": (_i64, []),
    "msccl_selftest_panic": (ctypes.c_int, [_c_char_pp]),
    "msccl_parse_size": (ctypes.c_int, [ctypes.c_char_p, _i64p, _c_char_pp]),
    "msccl_unique_id": (ctypes.c_int, [_c_char_pp, _c_char_pp]),
    "msccl_comm_init": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_char_p, _i64, _i64, _i64p, _c_char_pp]),
    "msccl_comm_info": (ctypes.c_int, [_i64, _c_char_pp, _c_char_pp]),
    "msccl_comm_run": (ctypes.c_int, [_i64, _i64, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t,
                                      ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint64, _c_char_pp]),
    "msccl_comm_prepare": (ctypes.c_int, [_i64, _i64, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_char_p, _c_char_pp]),
    "msccl_comm_select": (ctypes.c_int, [_i64, ctypes.c_char_p, _i64, _i64p, _c_char_pp]),
    "msccl_comm_call": (ctypes.c_int, [_i64, ctypes.c_char_p, _i64, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t,
                                       ctypes.c_char_p, ctypes.c_char_p, _i64, ctypes.c_uint64, ctypes.c_int, _c_char_pp]),
    # Channels in the caller's own kernels (primitives.py).
    "msccl_include_path": (ctypes.c_int, [_c_char_pp, _c_char_pp]),
    "msccl_comm_alloc_buffer": (ctypes.c_int, [_i64, _i64, _i64p, ctypes.POINTER(_u64), _c_char_pp]),
    "msccl_comm_register": (ctypes.c_int, [_i64, ctypes.c_void_p, ctypes.c_size_t, _i64p, _c_char_pp]),
    "msccl_comm_channels": (ctypes.c_int, [_i64, ctypes.c_char_p, _i64p, _i64, _i64, _i64, _i64p, _c_char_pp, _c_char_pp]),
    "msccl_handles_check": (ctypes.c_int, [_i64, _c_char_pp]),
    "msccl_kernel_compile": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, _i64p, _c_char_pp]),
    "msccl_kernel_image": (ctypes.c_int, [_i64, _c_char_pp, ctypes.POINTER(ctypes.c_size_t), _c_char_pp]),
    "msccl_kernel_launch": (ctypes.c_int, [_i64, _i64, _u64, _u32x3, _u32x3, ctypes.c_char_p, ctypes.POINTER(_u64), _i64, _c_char_pp]),
}

_lock = threading.Lock()
_lib = None


def library_path():
    """Where the library is loaded from: $MSCCL_LIBRARY, else the copy the
    package was installed with."""
    return os.environ.get("MSCCL_LIBRARY") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "libmsccl.so")


def lib():
    """The loaded library (loaded once, on first use)."""
    global _lib
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is None:
            path = library_path()
            if not os.path.exists(path):
                raise ImportError(
                    "msccl: %s is missing; install the package with "
                    "'pip install --no-build-isolation ./python' from an msccl-go checkout "
                    "(it builds the library with the Go toolchain)" % path)
            l = ctypes.CDLL(path)
            for name, (res, args) in _SIGNATURES.items():
                f = getattr(l, name)
                f.restype, f.argtypes = res, args
            abi = l.msccl_abi_version()
            if abi != ABI_VERSION:
                raise ImportError("msccl: %s has ABI version %d, this package needs %d; rebuild the package" % (path, abi, ABI_VERSION))
            _lib = l
    return _lib


def take(p, n=None):
    """Copy a library-owned string (n bytes, or up to its NUL) and free it."""
    if not p.value:
        return b""
    try:
        return ctypes.string_at(p.value, n) if n is not None else ctypes.string_at(p.value)
    finally:
        lib().msccl_free(p.value)
        p.value = None


def error_for(status, message, diagnostics=None, input_error=Error):
    """The exception for a failed call: status picks the class."""
    if status == ERR_INVALID:
        return InvalidArgument(message, diagnostics)
    if status == ERR_INTERNAL:
        return InternalError(message, diagnostics)
    if status == ERR_RUN:
        return RunError(message, diagnostics)
    return input_error(message, diagnostics)


def call(name, *args, input_error=Error):
    """Call export name with args and a trailing errmsg; raise on failure."""
    err = ctypes.c_void_p()
    status = getattr(lib(), name)(*args, ctypes.byref(err))
    msg = take(err).decode("utf-8", "replace")
    if status != OK:
        raise error_for(status, msg, input_error=input_error)


def decode_json(raw):
    return json.loads(raw.decode("utf-8")) if raw else None
