"""Channels in your own kernels from Python on CUDA, one rank per process.

    MPS=1 NPROC=2 bash scripts/gpu/torchrun.sh python/tests/gpu/primitives_check.py

(not a unittest module: it needs torch, CUDA and torchrun). Ranks that
share a GPU need MPS: their kernels spin on each other's signals, so they
must run at once. Every rank joins over a gloo group and checks:

  1. alloc_buffer: a CUDA tensor over it (__cuda_array_interface__);
  2. memory_channels to every peer: the handle array as a CUDA tensor,
     copied to the host and read at the layout of kernels/handles.go
     (peer, index, src and packets this rank's buffer, the watch);
  3. a kernel of its own (msccl.Kernel) that signals and waits on each
     channel and reads the peer's first word through it, launched on
     torch's stream and again in the communicator's context (comm=);
  4. the same kernel built by CuPy's RawKernel (NVRTC) with
     msccl.include_path() and the options msccl.Kernel uses, launched on
     torch's stream with the handle array's device pointer (skipped where
     CuPy is not installed);
  5. port_channels to every peer: a kernel puts this rank's words into
     each peer's buffer with a signal, waits for the peer's, flushes and
     reads what the peer put here.

Each rank prints "rank R: N checks, F failed" and every failure; the exit
status is non-zero when a check failed anywhere.
"""

import ctypes
import os
import struct
import sys

import torch
import torch.distributed as dist

import msccl

# msccl::MemoryChannel (kernels/handles.go): Semaphore {Chan {inbound,
# remoteInbound, expected; peer; index}, Watch {records, timeoutNs; rank,
# nrecords}}, dst, src, packets.
MEMORY = "<QQQiIQQIIQQQ"

PROBE = r"""
#include <msccl/msccl.cuh>
// Block b: signal and wait on channel b, then read the peer's first word.
extern "C" __global__ void probe(const msccl::MemoryChannel* ch, int* out) {
  if (threadIdx.x != 0) return;
  const msccl::MemoryChannel& c = ch[blockIdx.x];
  c.signal();
  out[blockIdx.x] = c.wait() ? c.read<int>(0) : -1;
}
"""

PORT_PROBE = r"""
#include <msccl/msccl.cuh>
// Block b: put this rank's 16 words (buf[0, 16)) into words [16*(1+rank),
// +16) of the peer of port channel b with a signal, wait for the peer's,
// flush, and read the first word the peer put here.
extern "C" __global__ void port_probe(const msccl::PortChannel* ch, int rank, int* out, const int* buf) {
  if (threadIdx.x != 0) return;
  const msccl::PortChannel& c = ch[blockIdx.x];
  c.putWithSignal(64 * (1 + rank), 0, 64);
  bool ok = c.wait();
  ok = c.flush() && ok;
  out[blockIdx.x] = ok ? ((const volatile int*)buf)[16 * (1 + c.sem.chan.peer)] : -1;
}
"""


def main():
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    comm = msccl.Communicator.from_torch(device="cuda")
    checks, failed = 0, []

    def check(ok, what):
        nonlocal checks
        checks += 1
        if not ok:
            failed.append(what)

    buf = comm.alloc_buffer(4096)
    words = buf.tensor(torch.int32)
    check(words.is_cuda and words.numel() == 1024 and words.data_ptr() == buf.ptr, "buffer tensor %r" % (words,))
    words.fill_(rank + 1)
    torch.cuda.synchronize()
    peers = [p for p in range(world) if p != rank]
    ch = comm.memory_channels(buf, peers)
    raw = bytes(ch.tensor().cpu().tolist())
    check(ch.handle_bytes == struct.calcsize(MEMORY) and len(raw) == ch.nbytes == len(peers) * ch.handle_bytes,
          "handle array: %d bytes each, %d in all" % (ch.handle_bytes, len(raw)))
    w = ch.watch_info
    for i, p in enumerate(peers):
        if len(raw) < (i + 1) * ch.handle_bytes:
            break
        h = struct.unpack_from(MEMORY, raw, i * ch.handle_bytes)
        check(h[3:5] == (p, i) and h[5:9] == (w["records"], w["timeout_ns"], rank, w["nrecords"]), "handle %d: %r" % (i, h))
        check(h[10] == buf.ptr and h[11] == buf.ptr and h[9] not in (0, buf.ptr), "handle %d: dst %#x src %#x packets %#x" % (i, h[9], h[10], h[11]))

    k = msccl.Kernel(PROBE, "probe")
    out = torch.zeros(len(peers), dtype=torch.int32, device="cuda")
    for how, kw in (("torch's stream", {}), ("the communicator's context", {"comm": comm, "stream": 0})):
        out.fill_(0)
        k.launch(len(peers), 32, [ch, out], **kw)
        torch.cuda.synchronize()
        try:
            ch.check()
        except msccl.RunError as e:
            check(False, "%s: %s" % (how, e))
        check(out.cpu().tolist() == [p + 1 for p in peers], "%s: read %r, want %r" % (how, out.cpu().tolist(), [p + 1 for p in peers]))
        dist.barrier()  # every rank's words are read before they change

    try:
        import cupy
    except ImportError:
        cupy = None
        print("rank %d: CuPy is not installed: its RawKernel step is skipped" % rank)
    if cupy is not None:
        # kernels.CompileOptions: C++14, no FMA contraction, device code
        # by default; the include path is the package's copy of the headers.
        opts = ("-I" + msccl.include_path(), "--std=c++14", "--fmad=false", "-default-device")
        rk = cupy.RawKernel(PROBE, "probe", options=opts, backend="nvrtc")
        out.fill_(0)
        with cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
            rk((len(peers),), (32,), (cupy.uint64(ch.ptr), cupy.uint64(out.data_ptr())))
        torch.cuda.synchronize()
        try:
            ch.check()
        except msccl.RunError as e:
            check(False, "CuPy RawKernel: %s" % e)
        check(out.cpu().tolist() == [p + 1 for p in peers], "CuPy RawKernel: read %r, want %r" % (out.cpu().tolist(), [p + 1 for p in peers]))
        dist.barrier()

    pbuf = comm.alloc_buffer(64 * (1 + world))
    pbuf.tensor(torch.int32).fill_(rank + 1)
    torch.cuda.synchronize()
    pch = comm.port_channels(pbuf, peers)
    kp = msccl.Kernel(PORT_PROBE, "port_probe")
    out.fill_(0)
    kp.launch(len(peers), 32, [pch, ctypes.c_int32(rank), out, pbuf])
    torch.cuda.synchronize()
    try:
        pch.check()
    except msccl.RunError as e:
        check(False, "port channels: %s" % e)
    check(out.cpu().tolist() == [p + 1 for p in peers], "port channels: read %r, want %r" % (out.cpu().tolist(), [p + 1 for p in peers]))
    dist.barrier()  # every rank's puts are done before the buffers go
    pch.close()
    pbuf.close()

    ch.close()
    buf.close()
    print("rank %d: %d checks, %d failed" % (rank, checks, len(failed)))
    for f in failed:
        print("rank %d: FAILED %s" % (rank, f))
    bad = torch.tensor([len(failed)])
    dist.all_reduce(bad)
    comm.close()
    dist.destroy_process_group()
    sys.exit(1 if bad.item() else 0)


if __name__ == "__main__":
    main()
