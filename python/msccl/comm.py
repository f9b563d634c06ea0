"""Communicator: run plans on this process's rank of a multi-process job.

Each process of a job (torchrun, mpirun, srun, or processes started by
hand) makes one Communicator and calls the same collectives in the same
order. Tensors are torch tensors or any contiguous buffer (array.array,
numpy arrays, bytearray); every argument is checked here, in Python,
before anything reaches the library, and a wrong one raises TypeError or
ValueError naming it.

Devices: "cpu" (shared memory between the node's processes; plans run on
CPU threads of each rank, which makes the whole path testable without a
GPU) and "cuda" (this process's GPU; the node's ranks map each other's
buffers through CUDA IPC). On "cuda" the tensors are CUDA tensors of
the current device and every collective is queued on
torch.cuda.current_stream(): the library copies the tensors into the
rank's registered buffers, launches the collective and copies the result
back, all on that stream and without waiting on the host, so the call
orders with the caller's kernels and can be captured by torch.cuda.graph
once that (collective, plan, size, dtype, op) has been prepared: run it
once before capturing, or call prepare() with the same arguments.
"""

import ctypes
import json

from . import _lib
from . import plan as _plan
from . import primitives as _prim
from .errors import InvalidArgument, SelectError

# torch dtypes (by name, so torch is never imported here) and buffer
# formats (struct codes with their item sizes) to libmsccl's type names.
_TORCH_DTYPES = {
    "torch.float32": "f32", "torch.float16": "f16", "torch.bfloat16": "bf16", "torch.int32": "i32",
    "torch.uint8": "u8", "torch.float8_e4m3fn": "f8e4m3", "torch.float8_e5m2": "f8e5m2",
}
_FORMATS = {("f", 4): "f32", ("e", 2): "f16", ("i", 4): "i32", ("l", 4): "i32", ("I", 4): "u32", ("L", 4): "u32", ("B", 1): "u8"}


class _Buf:
    """Address, length and element type of one tensor argument."""

    def __init__(self, t, what, writable):
        self.keep = t
        if hasattr(t, "data_ptr") and hasattr(t, "is_contiguous") and type(t).__module__.startswith("torch"):
            if not t.is_contiguous():
                raise ValueError("%s must be contiguous (call .contiguous())" % what)
            self.dtype = _TORCH_DTYPES.get(str(t.dtype))
            if self.dtype is None:
                raise TypeError("%s: dtype %s is not supported (want one of %s)" % (what, t.dtype, ", ".join(sorted(_TORCH_DTYPES))))
            self.device = t.device.type
            self.index = t.device.index
            self.nbytes = t.numel() * t.element_size()
            self.addr = t.data_ptr()
            self.numel = t.numel()
            return
        try:
            m = memoryview(t)
        except TypeError:
            raise TypeError("%s must be a torch tensor or a contiguous buffer (array.array, numpy array), got %s" % (what, type(t).__name__))
        if not m.c_contiguous:
            raise ValueError("%s must be contiguous" % what)
        fmt = m.format.lstrip("@=<")
        self.dtype = _FORMATS.get((fmt, m.itemsize))
        if self.dtype is None:
            raise TypeError("%s: buffer format %r (%d-byte items) is not supported (want f32 'f', f16 'e', i32 'i', u32 'I' or u8 'B')" % (what, m.format, m.itemsize))
        if writable and m.readonly:
            raise ValueError("%s must be writable" % what)
        self.device, self.index = "cpu", None
        self.nbytes = m.nbytes
        self.numel = m.nbytes // m.itemsize
        if self.nbytes == 0:
            self.addr = None
        elif m.readonly:
            self.keep = ctypes.create_string_buffer(m.tobytes(), m.nbytes)
            self.addr = ctypes.addressof(self.keep)
        else:
            self.keep = (ctypes.c_char * m.nbytes).from_buffer(m)
            self.addr = ctypes.addressof(self.keep)


def unique_id():
    """A new rendezvous id whose rank 0 runs on this host; give it to every
    rank and call Communicator.from_unique_id (what from_torch does)."""
    out = ctypes.c_void_p()
    _lib.call("msccl_unique_id", ctypes.byref(out))
    return _lib.take(out).decode()


class Communicator(_prim._Released):
    """This process's rank of a job; make it with from_env, from_unique_id
    or from_torch, and close it (or use it as a context manager)."""

    def __init__(self, handle, _token=None):
        if _token is not _TOKEN:
            raise InvalidArgument("Communicator is made by from_env, from_unique_id or from_torch")
        self._handle = handle
        out = ctypes.c_void_p()
        _lib.call("msccl_comm_info", handle, ctypes.byref(out))
        info = _lib.decode_json(_lib.take(out))
        self.rank, self.size, self.device = info["rank"], info["size"], info["device"]
        self._plans = {}

    @classmethod
    def _init(cls, device, uid, rank, world):
        device = _device_arg(device)
        handle = ctypes.c_int64()
        _lib.call("msccl_comm_init", device.encode(), uid.encode() if uid else None, rank, world, ctypes.byref(handle))
        return cls(handle.value, _TOKEN)

    @classmethod
    def from_env(cls, device="cpu"):
        """Join the job the environment describes (torchrun's RANK,
        WORLD_SIZE, MASTER_ADDR, MASTER_PORT; Open MPI; Slurm; MSCCL_*).
        The job's secret is never derived from those public variables:
        under torchrun and Slurm set MSCCL_SECRET to the same fresh random
        value on every rank (or MSCCL_UNIQUE_ID / MSCCL_UNIQUE_ID_FILE),
        or use from_torch(), which hands a fresh id through the torch
        group; Open MPI's mpirun supplies a per-job key of its own.
        device: "cpu", "cuda" (torch's current device when torch is
        imported, else the local rank's GPU or MSCCL_CUDA_DEVICE), or
        "cuda:N"."""
        return cls._init(device, None, 0, 0)

    @classmethod
    def from_unique_id(cls, uid, rank, world, device="cpu"):
        """Join the rendezvous uid (from msccl.unique_id() on rank 0's host)
        as rank of world."""
        if not isinstance(uid, str) or not uid:
            raise TypeError("uid must be the str msccl.unique_id() returned, got %r" % (uid,))
        _plan._int_arg(world, "world", 1)
        _plan._int_arg(rank, "rank", 0)
        if rank >= world:
            raise ValueError("rank %d of world %d: want 0 <= rank < world" % (rank, world))
        return cls._init(device, uid, rank, world)

    @classmethod
    def from_torch(cls, group=None, device=None):
        """Join with the ranks of a torch.distributed process group (gloo or
        NCCL): rank 0 makes the unique id and the group broadcasts it.
        device defaults to "cuda" (torch's current device) for an NCCL
        group and "cpu" otherwise; a gloo group serves CUDA tensors with
        device="cuda"."""
        import torch.distributed as dist
        if device is None:
            backend = str(dist.get_backend(group)) if hasattr(dist, "get_backend") else "gloo"
            device = "cuda" if "nccl" in backend.lower() else "cpu"
        device = _device_arg(device)
        rank, world = dist.get_rank(group), dist.get_world_size(group)
        obj = [unique_id() if rank == 0 else None]
        src = dist.get_global_rank(group, 0) if group is not None else 0
        dist.broadcast_object_list(obj, src=src, group=group)
        return cls.from_unique_id(obj[0], rank, world, device)

    def close(self):
        """Free the plans' buffers and leave the job (every rank closes)."""
        _prim._Released.close(self)

    def __repr__(self):
        return "<msccl.Communicator rank %d of %d, %s>" % (self.rank, self.size, self.device)

    # The collectives. Each checks its arguments (types, devices,
    # contiguity, element counts) in Python before anything reaches the
    # library, so a wrong call raises on every rank alike and the job
    # stays in step.

    def all_reduce(self, tensor, op="sum", plan=None):
        """tensor (on every rank) becomes the reduction over ranks, in place."""
        self._run(*self._all_reduce(tensor, op, plan))

    def all_gather(self, output, input, plan=None):
        """output (size x input) receives every rank's input, rank by rank."""
        self._run(*self._all_gather(output, input, plan))

    def reduce_scatter(self, output, input, op="sum", plan=None):
        """output receives this rank's piece (input / size elements) of the
        reduction over ranks of input."""
        self._run(*self._reduce_scatter(output, input, op, plan))

    def all_to_all(self, output, input, plan=None):
        """Piece q of this rank's input goes to rank q, which stores it as
        its piece r of output (input and output the same size)."""
        self._run(*self._all_to_all(output, input, plan))

    def broadcast(self, output, input=None, root=0):
        """output (on every rank) receives root's input; off the root input
        may be None."""
        self._run(*self._rooted("broadcast", output, input, root, None))

    def reduce(self, output, input, op="sum", root=0):
        """root's output receives the reduction over ranks of input; off
        the root output may be None."""
        self._run(*self._rooted("reduce", output, input, root, op))

    def gather(self, output, input, root=0):
        """root's output (size x input) receives every rank's input, rank
        by rank; off the root output may be None."""
        self._run(*self._rooted("gather", output, input, root, None))

    def scatter(self, output, input=None, root=0):
        """output receives this rank's piece of root's input (size x
        output); off the root input may be None."""
        self._run(*self._rooted("scatter", output, input, root, None))

    def _rooted(self, collective, output, input, root, op):
        _plan._int_arg(root, "root", 0)
        if root >= self.size:
            raise ValueError("root %d is not a rank of %d" % (root, self.size))
        o = _Buf(output, "output", True) if output is not None else None
        i = _Buf(input, "input", False) if input is not None else None
        if i is None and o is None:
            raise ValueError("%s: give the input or the output" % collective)
        i, o = i or _Empty(o), o or _Empty(i)
        return collective, None, i, o, max(i.nbytes, o.nbytes), op, root

    def prepare(self, collective, *args, **kwargs):
        """Ready a collective for the arguments of a later call without
        running it: comm.prepare("all_reduce", t, op="sum") makes the
        buffers, op tables and kernel comm.all_reduce(t, op="sum") needs.
        CUDA graph capture cannot allocate, so every collective a capture
        records must be prepared (or run once) first. Collective: every
        rank prepares the same calls in the same order."""
        check = {"all_reduce": self._all_reduce, "all_gather": self._all_gather,
                 "reduce_scatter": self._reduce_scatter, "all_to_all": self._all_to_all}.get(collective)
        if check is None:
            raise ValueError("prepare: collective %r is not one of all_reduce, all_gather, reduce_scatter, all_to_all" % (collective,))
        self._run(*check(*args, **kwargs), prepare=True)

    def _all_reduce(self, tensor, op="sum", plan=None):
        t = _Buf(tensor, "tensor", True)
        return "allreduce", plan, t, t, t.nbytes, op

    def _all_gather(self, output, input, plan=None):
        i, o = self._pair(output, input)
        if o.numel != i.numel * self.size:
            raise ValueError("all_gather: output has %d elements, want %d (input's %d x %d ranks)" % (o.numel, i.numel * self.size, i.numel, self.size))
        return "allgather", plan, i, o, o.nbytes, None

    def _reduce_scatter(self, output, input, op="sum", plan=None):
        i, o = self._pair(output, input)
        if i.numel != o.numel * self.size:
            raise ValueError("reduce_scatter: input has %d elements, want %d (output's %d x %d ranks)" % (i.numel, o.numel * self.size, o.numel, self.size))
        return "reducescatter", plan, i, o, i.nbytes, op

    def _all_to_all(self, output, input, plan=None):
        i, o = self._pair(output, input)
        if i.numel != o.numel:
            raise ValueError("all_to_all: input has %d elements and output %d; want the same" % (i.numel, o.numel))
        if i.numel % self.size:
            raise ValueError("all_to_all: %d elements do not split into %d equal pieces" % (i.numel, self.size))
        return "alltoall", plan, i, o, i.nbytes, None

    def _pair(self, output, input):
        i = _Buf(input, "input", False)
        o = _Buf(output, "output", True)
        if i.dtype != o.dtype:
            raise TypeError("input is %s and output %s; want the same type" % (i.dtype, o.dtype))
        if (i.device, i.index) != (o.device, o.index):
            raise ValueError("input is on %s and output on %s; want the same device" % (_where(i), _where(o)))
        return i, o

    def plan_for(self, collective, size):
        """The plan used for collective at size bytes when none is given:
        the library's selection table for this communicator's size, where
        a size outside the chosen plan's rule runs padded to the next one
        it admits (proven once, then cached)."""
        key = (collective, size)
        p = self._plans.get(key)
        if p is None:
            _plan._choice(collective, _plan.COLLECTIVES, "collective")
            _plan._size_arg(size, "size")
            handle = ctypes.c_int64()
            _lib.call("msccl_comm_select", self._handle, collective.encode(), size, ctypes.byref(handle), input_error=SelectError)
            p = self._plans[key] = _plan.Plan(handle.value, "selection table")
        return p

    def _stream(self, b):
        """The stream the call is queued on: torch's current stream of the
        tensors' device (0, the legacy default stream, is a stream too);
        0 on the cpu device, which runs on the calling thread."""
        if self.device != "cuda":
            return 0
        import torch
        if b.index is not None and b.index != torch.cuda.current_device():
            raise ValueError("the tensors are on cuda:%d but the current device is cuda:%d; call torch.cuda.set_device(%d) (the communicator's GPU) first"
                             % (b.index, torch.cuda.current_device(), b.index))
        return torch.cuda.current_stream(b.index).cuda_stream

    def _run(self, collective, plan, i, o, size, op, root=0, prepare=False):
        if not self._handle:
            raise InvalidArgument("the communicator was closed")
        if i.device != self.device:
            raise ValueError("the tensors are on %s; this communicator's device is %s" % (i.device, self.device))
        stream = self._stream(i)
        if op is not None:
            _plan._choice(op, _plan.REDUCTIONS, "op")
            if op == "prod" and i.dtype not in ("i32", "u32", "u8"):
                raise ValueError("op prod is for integer types, not %s" % i.dtype)
        if size == 0:
            return
        if plan is None:
            # The communicator picks the proven plan (and copies on a
            # world of one rank).
            handle = 0
        elif not isinstance(plan, _plan.Plan):
            raise TypeError("plan must be an msccl.Plan, got %s" % type(plan).__name__)
        else:
            if plan.collective != collective:
                raise ValueError("plan %r is for %s; this call is %s" % (plan.name, plan.collective, collective))
            if plan.ranks != self.size:
                raise ValueError("plan %r is for %d ranks; this communicator has %d" % (plan.name, plan.ranks, self.size))
            if op is not None:
                plan.check_reduction(op)
            rule = plan.size_rule
            if rule is None or (rule.max is not None and size > rule.max):
                plan.check_size(size)  # raises, naming the rule
            handle = plan._live()
        # Other sizes outside the rule run staged at the next size it
        # admits (libmsccl); the library refuses pieces that are not whole
        # elements.
        _lib.call("msccl_comm_call", self._handle, collective.encode(), handle, i.addr, i.nbytes, o.addr, o.nbytes,
                  i.dtype.encode(), (op or "sum").encode(), root, stream, 1 if prepare else 0)


    # Channels in the caller's own kernels (msccl.primitives,
    # docs/primitives.md). Collective like the collectives: every rank
    # makes the same calls in the same order.

    def alloc_buffer(self, nbytes):
        """nbytes of zeroed memory the node's ranks can map (register):
        shared memory on the cpu device, device memory on cuda."""
        _plan._int_arg(nbytes, "nbytes", 1)
        handle, addr = ctypes.c_int64(), ctypes.c_uint64()
        _lib.call("msccl_comm_alloc_buffer", self._live("communicator"), nbytes, ctypes.byref(handle), ctypes.byref(addr))
        return _prim.Buffer(handle.value, addr.value, nbytes, self.device)

    def register(self, memory, nbytes=None):
        """Share memory (a Buffer from alloc_buffer, a tensor over one, or an
        address with nbytes) with the node's ranks. Anything but the whole
        of such a buffer is refused on every rank, with the reason."""
        addr, n = _address(memory, nbytes)
        handle = ctypes.c_int64()
        _lib.call("msccl_comm_register", self._live("communicator"), addr, n, ctypes.byref(handle))
        return _prim.Registration(handle.value, addr, n)

    def memory_channels(self, local, peers, remote=None):
        """One memory channel to each rank of peers (a peer may repeat; the
        k-th channel from A to B pairs with the k-th from B to A) as an
        msccl.Channels. local (puts read from it) and remote (puts write
        into the peer's; the peer's packets land in this rank's) are
        Registrations, or memory register takes, registered here;
        remote defaults to local."""
        return self._channels("memory", local, peers, remote)

    def port_channels(self, local, peers, remote=None):
        """As memory_channels, for port channels: a proxy of this process
        serves their requests (the default copy and signal; on cuda with
        the copy engines, from a stream of its own)."""
        return self._channels("port", local, peers, remote)

    def _channels(self, kind, local, peers, remote):
        peers = list(peers)
        # Only the types are checked here: the values (a peer outside the
        # job, lists that do not pair) are checked by every rank against
        # every rank's list, so a wrong one fails all ranks alike.
        for p in peers:
            if isinstance(p, bool) or not isinstance(p, int):
                raise TypeError("peers must be ints (ranks), got %r" % (p,))
        owned = []
        try:
            if not isinstance(local, _prim.Registration):
                local = self.register(local)
                owned.append(local)
            if remote is None:
                remote = local
            elif not isinstance(remote, _prim.Registration):
                remote = self.register(remote)
                owned.append(remote)
            handle, info = ctypes.c_int64(), ctypes.c_void_p()
            _lib.call("msccl_comm_channels", self._live("communicator"), kind.encode(), (ctypes.c_int64 * max(1, len(peers)))(*peers), len(peers),
                      local._handle, remote._handle, ctypes.byref(handle), ctypes.byref(info))
        except BaseException:
            for r in owned:
                r.close()
            raise
        return _prim.Channels(handle.value, _lib.decode_json(_lib.take(info)), owned)


def _address(memory, nbytes):
    """(address, bytes) of what register takes."""
    if isinstance(memory, _prim.Buffer):
        return memory.ptr, memory.nbytes if nbytes is None else nbytes
    if isinstance(memory, int):
        if nbytes is None:
            raise TypeError("register: an address needs nbytes")
        _plan._int_arg(nbytes, "nbytes", 0)
        return memory, nbytes
    b = _Buf(memory, "memory", True)
    return b.addr or 0, b.nbytes if nbytes is None else nbytes


class _Empty:
    """The argument a rooted collective ignores off the root: no memory,
    the type and device of the other buffer."""

    def __init__(self, other):
        self.dtype, self.device, self.index = other.dtype, other.device, other.index
        self.addr, self.nbytes, self.numel = None, 0, 0


def _where(b):
    return b.device if b.index is None else "%s:%d" % (b.device, b.index)


def _device_arg(device):
    """"cpu", "cuda" or "cuda:N" as the library takes it: "cuda" becomes
    torch's current device when torch has been imported (the device its
    current stream and tensors are on), so the communicator's GPU is the
    one the caller's tensors are on."""
    if not isinstance(device, str):
        raise TypeError("device must be a str, got %r" % (device,))
    if device == "cuda":
        import sys
        torch = sys.modules.get("torch")
        if torch is not None and hasattr(torch, "cuda") and torch.cuda.is_available():
            device = "cuda:%d" % torch.cuda.current_device()
    return device


_TOKEN = object()
