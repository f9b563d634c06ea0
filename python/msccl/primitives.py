"""Channels in your own kernels (docs/primitives.md), from Python.

    buf = comm.alloc_buffer(1 << 20)        # memory the node's ranks can map
    ch = comm.memory_channels(buf, peers)   # registers buf, one channel per peer
    k = msccl.Kernel(source, "my_kernel")   # NVRTC, our headers on the include path
    k.launch((8,), (512,), [ch, buf, ctypes.c_int32(n)], comm=comm)
    ch.check()                              # a wait the watchdog ended, named

The handle array is a raw device pointer (ch.ptr) on cuda, also a CUDA
tensor (ch.tensor(), through __cuda_array_interface__) when torch is
importable, so CuPy's RawKernel takes it with options=("-I" +
msccl.include_path(),). On the cpu device everything is host memory: the
same calls build the same handles, which is how they are tested without
a GPU.
"""

import ctypes
import json
import struct

from . import _lib
from .errors import CompileError, InvalidArgument


def include_path():
    """The directory of the device headers (msccl/msccl.cuh) this library
    carries, written out on first use: "-I" + it for nvcc or CuPy."""
    out = ctypes.c_void_p()
    _lib.call("msccl_include_path", ctypes.byref(out))
    return _lib.take(out).decode()


class _Released:
    """A library handle freed by close() or on exit from a with block."""

    _handle = 0

    def close(self):
        if self._handle:
            h, self._handle = self._handle, 0
            _lib.call("msccl_release", h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _live(self, what):
        if not self._handle:
            raise InvalidArgument("the %s was closed" % what)
        return self._handle


def _host_view(ptr, nbytes):
    """nbytes of this process's memory at ptr, as a writable memoryview."""
    return memoryview((ctypes.c_char * nbytes).from_address(ptr)).cast("B")


class _DeviceArray:
    """ptr/nbytes/device memory that torch and CuPy can take: a CUDA array
    interface on cuda, a host buffer on the cpu device."""

    @property
    def __cuda_array_interface__(self):
        if self.device != "cuda":
            raise AttributeError("__cuda_array_interface__: %s memory is on the %s device" % (type(self).__name__, self.device))
        return {"shape": (self.nbytes,), "typestr": "|u1", "data": (self.ptr, False), "version": 2, "strides": None}

    def tensor(self, dtype=None):
        """The memory as a torch tensor (uint8, or viewed as dtype) sharing
        it: a CUDA tensor on cuda, a CPU tensor on the cpu device."""
        import torch
        if self.device == "cuda":
            t = torch.as_tensor(self, device="cuda")
        else:
            t = torch.frombuffer(_host_view(self.ptr, self.nbytes), dtype=torch.uint8)
        return t if dtype is None else t.view(dtype)

    def host(self):
        """The memory as a writable memoryview of bytes (cpu device only:
        device memory is not addressable from the host)."""
        if self.device != "cpu":
            raise InvalidArgument("%s memory is on the %s device; use tensor()" % (type(self).__name__, self.device))
        return _host_view(self.ptr, self.nbytes)


class Buffer(_Released, _DeviceArray):
    """Memory of this rank that the node's ranks can map (Communicator.
    alloc_buffer): shared memory on the cpu device, device memory on cuda."""

    def __init__(self, handle, ptr, nbytes, device):
        self._handle, self.ptr, self.nbytes, self.device = handle, ptr, nbytes, device

    def __repr__(self):
        return "<msccl.Buffer %d bytes at %#x on %s>" % (self.nbytes, self.ptr, self.device)


class Registration(_Released):
    """A buffer shared with the node's ranks, theirs mapped here
    (Communicator.register)."""

    def __init__(self, handle, ptr, nbytes):
        self._handle, self.ptr, self.nbytes = handle, ptr, nbytes


class Channels(_Released, _DeviceArray):
    """An array of channel handles (msccl::MemoryChannel or
    msccl::PortChannel, kernels/handles.go) ready for a kernel: ptr is its
    device address on cuda, a host copy on the cpu device. It owns the
    channels' semaphores and watchdog records; close it after the kernels
    that use it have finished."""

    def __init__(self, handle, info, owned):
        self._handle = handle
        self.kind, self.ptr, self.count = info["kind"], info["ptr"], info["count"]
        self.handle_bytes, self.nbytes, self.device = info["handle_bytes"], info["nbytes"], info["device"]
        self.watch_info = info["watch"]
        self._owned = owned  # registrations made for this array, closed with it

    @property
    def watch(self):
        """The handles' msccl::Watch, as a Kernel.launch argument (pass it by
        value to a grid barrier)."""
        return Watch(self)

    def check(self):
        """Raise RunError naming each wait a kernel's watchdog ended (rank,
        block, channel, peer, counts) and a failed port proxy.

        Call it once the kernel has ended. For port channels it also names
        each channel whose last puts no flush on that channel followed
        ("rank R channel C (peer rank P): N puts (B bytes) with no flush
        after them: flush() before reusing a put's source or ending the
        kernel"): their copies may still be running. A flush on the
        channel, in this launch or a later one, clears it."""
        _lib.call("msccl_handles_check", self._live("handle array"))

    def close(self):
        _Released.close(self)
        for r in self._owned:
            r.close()
        self._owned = []

    def __repr__(self):
        return "<msccl.Channels %d %s channels at %#x on %s>" % (self.count, self.kind, self.ptr, self.device)


class Watch:
    """The msccl::Watch of a Channels, as a kernel argument."""

    def __init__(self, channels):
        self.channels = channels


class Kernel(_Released):
    """A CUDA kernel compiled with NVRTC, the device headers on its include
    path. name is its extern "C" entry point; arch "sm_90" (a cubin) or
    "compute_90" (PTX); None asks the driver for device 0's, or
    compute_90 without one. options are further NVRTC options."""

    def __init__(self, source, name, arch=None, options=()):
        if not isinstance(source, str) or not isinstance(name, str) or not name:
            raise TypeError("Kernel(source, name): want two str, the second not empty")
        opts = list(options)
        if not all(isinstance(o, str) for o in opts):
            raise TypeError("options must be str, got %r" % (opts,))
        handle = ctypes.c_int64()
        _lib.call("msccl_kernel_compile", source.encode(), name.encode(), arch.encode() if arch else None,
                  json.dumps(opts).encode(), ctypes.byref(handle), input_error=CompileError)
        self._handle, self.name = handle.value, name

    @property
    def image(self):
        """What NVRTC produced: PTX text (bytes) or a cubin."""
        out, n = ctypes.c_void_p(), ctypes.c_size_t()
        _lib.call("msccl_kernel_image", self._live("kernel"), ctypes.byref(out), ctypes.byref(n))
        return _lib.take(out, n.value)

    def launch(self, grid, block, args=(), stream=None, comm=None):
        """Queue the kernel. grid and block: an int or up to 3 ints. stream:
        a CUstream (an int), a torch or CuPy stream, or None for torch's
        current stream when torch is imported, else 0. comm: a cuda
        Communicator to launch in its rank's context; None uses the
        calling thread's current one (torch's). Arguments, by value in
        the kernel's order: ctypes.c_int32/c_uint32/c_int64/c_uint64/
        c_float/c_double/c_bool, an int (64 bits: a pointer or an integer
        the kernel reads the low bytes of), a Buffer, Channels or torch
        tensor (its address), a Watch."""
        kinds, words = _launch_args(self.name, args)
        g, b = _dims(grid, "grid"), _dims(block, "block")
        arr = (ctypes.c_uint64 * max(1, len(words)))(*words)
        _lib.call("msccl_kernel_launch", self._live("kernel"), comm._live("communicator") if comm is not None else 0, _stream(stream),
                  (ctypes.c_uint32 * 3)(*g), (ctypes.c_uint32 * 3)(*b), kinds.encode(), arr, len(words))

    def __repr__(self):
        return "<msccl.Kernel %s>" % self.name


_CTYPES = [(ctypes.c_bool, "b"), (ctypes.c_int32, "i"), (ctypes.c_uint32, "I"), (ctypes.c_int64, "l"), (ctypes.c_uint64, "L"),
           (ctypes.c_float, "f"), (ctypes.c_double, "d"), (ctypes.c_void_p, "p")]


def _launch_args(name, args):
    kinds, words = [], []
    for i, a in enumerate(args):
        kind = next((k for t, k in _CTYPES if type(a) is t), None)
        if kind == "f":
            w = struct.unpack("<I", struct.pack("<f", a.value))[0]
        elif kind == "d":
            w = struct.unpack("<Q", struct.pack("<d", a.value))[0]
        elif kind is not None:
            w = (a.value or 0) & 0xFFFFFFFFFFFFFFFF
        elif isinstance(a, bool):
            kind, w = "b", int(a)
        elif isinstance(a, int):
            kind, w = "L", a & 0xFFFFFFFFFFFFFFFF
        elif isinstance(a, Watch):
            kind, w = "w", a.channels._live("handle array")
        elif isinstance(a, (Buffer, Channels)):
            a._live(type(a).__name__)
            kind, w = "p", a.ptr
        elif hasattr(a, "data_ptr"):
            kind, w = "p", a.data_ptr()
        elif isinstance(a, float):
            raise TypeError("kernel %s: argument %d is a float; say its width: ctypes.c_float(x) or ctypes.c_double(x)" % (name, i))
        else:
            raise TypeError("kernel %s: argument %d has type %s; want a ctypes number, int, Buffer, Channels, Watch or tensor"
                            % (name, i, type(a).__name__))
        kinds.append(kind)
        words.append(w)
    return "".join(kinds), words


def _dims(d, what):
    if isinstance(d, int):
        d = (d,)
    d = tuple(d)
    if not 1 <= len(d) <= 3 or not all(isinstance(x, int) and x >= 1 for x in d):
        raise ValueError("%s must be 1 to 3 positive ints, got %r" % (what, d))
    return d + (1,) * (3 - len(d))


def _stream(s):
    if s is None:
        import sys
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_available():
            return torch.cuda.current_stream().cuda_stream
        return 0
    if isinstance(s, int):
        return s
    for attr in ("cuda_stream", "ptr"):  # torch.cuda.Stream, cupy.cuda.Stream
        if hasattr(s, attr):
            return int(getattr(s, attr))
    raise TypeError("stream must be an int (a CUstream), a torch or CuPy stream, or None; got %s" % type(s).__name__)
