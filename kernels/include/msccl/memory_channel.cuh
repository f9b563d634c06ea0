// memory_channel.cuh: memory channels, over which a GPU's threads load and
// store a peer's memory directly (NVLink or PCIe peer access): the block
// copy every put, get and executor copy goes through, and
// msccl::MemoryChannel, the handle a user's kernel holds.
#pragma once
#include "packet.cuh"
#include "semaphore.cuh"

// COPY_DEPTH is how many 16-byte loads a thread has in flight before it
// stores them (executor/cuda/reference's ref_copy16 keeps four): one at a time
// leaves the latency of a peer's (or HBM's) memory uncovered and one
// block cannot fill it. Overridable for measurements
// (MSCCL_KERNEL_DEFINES, kernels.Tunables).
#ifndef COPY_DEPTH
#define COPY_DEPTH 4
#endif

// copy_bytes_t copies n bytes with the threads t of a group of nt: 16
// bytes per thread and trip where both ends and n allow, else 4, else 1.
DEV void copy_bytes_t(char* dst, const char* src, u32 n, u32 t, u32 nt) {
  if ((((u64)dst | (u64)src | n) & 15) == 0) {
    int4* d = (int4*)dst;
    const int4* s = (const int4*)src;
    u32 w = n / 16, i = t;
    for (; i + (COPY_DEPTH - 1) * nt < w; i += COPY_DEPTH * nt) {
      int4 v[COPY_DEPTH];
#pragma unroll
      for (int j = 0; j < COPY_DEPTH; j++) v[j] = s[i + j * nt];
#pragma unroll
      for (int j = 0; j < COPY_DEPTH; j++) d[i + j * nt] = v[j];
    }
    for (; i < w; i += nt) d[i] = s[i];
  } else if ((((u64)dst | (u64)src | n) & 3) == 0) {
    for (u32 i = t; i < n / 4; i += nt) ((u32*)dst)[i] = ((const u32*)src)[i];
  } else {
    for (u32 i = t; i < n; i += nt) dst[i] = src[i];
  }
}

// copy_bytes is copy_bytes_t by the whole block.
DEV void copy_bytes(char* dst, const char* src, u32 n) { copy_bytes_t(dst, src, n, threadIdx.x, blockDim.x); }

namespace msccl {

// COPY_PIECE bounds one copy_bytes_t call (its counts are 32-bit); a
// larger user copy is done piece by piece.
#define MSCCL_COPY_PIECE (1u << 30)

// copy_big is copy_bytes_t for 64-bit sizes; pieces are multiples of 16,
// so each keeps the alignment the whole range had.
DEV void copy_big(char* dst, const char* src, u64 n, u32 t, u32 nt) {
  for (u64 o = 0; o < n; o += MSCCL_COPY_PIECE) {
    u64 left = n - o;
    copy_bytes_t(dst + o, src + o, left < MSCCL_COPY_PIECE ? (u32)left : MSCCL_COPY_PIECE, t, nt);
  }
}

// MemoryChannel is one memory channel end as a user kernel sees it: the
// peer's registered buffer mapped here (dst), this rank's (src), the local
// buffer the peer's packets land in (packets), and the semaphore pair.
// Offsets are bytes. The data calls are thread-cooperative: the threads
// tid = 0..nthreads-1 of a group each call with the same arguments and
// share the work (the forms without them use the whole block); the
// signal and wait calls are made by one thread.
struct MemoryChannel {
  Semaphore sem;
  char* dst;
  char* src;
  char* packets;

  // put copies bytes from src+srcOff to the peer's dst+dstOff with
  // ordinary (weak) stores: the peer may read them only after a signal
  // (by a thread that observed them: __syncthreads first) and its wait.
  DEV_MEMBER void put(u64 dstOff, u64 srcOff, u64 bytes, u32 tid, u32 nthreads) const {
    copy_big(dst + dstOff, src + srcOff, bytes, tid, nthreads);
  }
  DEV_MEMBER void put(u64 dstOff, u64 srcOff, u64 bytes) const { put(dstOff, srcOff, bytes, threadIdx.x, blockDim.x); }
  // get copies bytes from the peer's dst+srcOff to src+dstOff: the peer
  // must have signalled that they are ready (and this end waited).
  DEV_MEMBER void get(u64 srcOff, u64 dstOff, u64 bytes, u32 tid, u32 nthreads) const {
    copy_big(src + dstOff, dst + srcOff, bytes, tid, nthreads);
  }
  DEV_MEMBER void get(u64 srcOff, u64 dstOff, u64 bytes) const { get(srcOff, dstOff, bytes, threadIdx.x, blockDim.x); }
  // putPackets sends bytes of src+srcOff as packets of type P (LL16Packet
  // or LL8Packet) tagged with flag to the peer's dst+dstOff, a packet
  // buffer (dstOff counts packet bytes: twice the payload). No signal is
  // needed: the peer's unpackPackets spins on each packet's flag. bytes
  // must be a multiple of P::Payload; the flag must differ from every
  // flag the buffer held before (e.g. a launch counter from 1).
  template <typename P>
  DEV_MEMBER void putPackets(u64 dstOff, u64 srcOff, u32 bytes, u32 tid, u32 nthreads, u32 flag) const {
    pack_packets<P::Size>(dst + dstOff, src + srcOff, bytes, flag, tid, nthreads);
  }
  // unpackPackets waits for the packets with flag at packets+pktOff and
  // stores their payload (bytes) at src+dstOff; false if the watchdog
  // ended a wait.
  template <typename P>
  DEV_MEMBER bool unpackPackets(u64 pktOff, u64 dstOff, u32 bytes, u32 tid, u32 nthreads, u32 flag) const {
    WaitScope s(sem.watch);
    MOVE_PACKETS(P::Size, src + dstOff, packets + pktOff, bytes, flag, false, &s.w, tid, nthreads);
    return !s.aborted;
  }
  // read and write access element i of the peer's buffer seen as T[]
  // (weak: order them with signal and wait as put and get).
  template <typename T>
  DEV_MEMBER T read(u64 i) const { return ((const T*)dst)[i]; }
  template <typename T>
  DEV_MEMBER void write(u64 i, const T& v) const { ((T*)dst)[i] = v; }

  DEV_MEMBER void signal() const { sem.signal(); }
  DEV_MEMBER void relaxedSignal() const { sem.relaxedSignal(); }
  DEV_MEMBER bool wait() const { return sem.wait(); }
  DEV_MEMBER bool relaxedWait() const { return sem.relaxedWait(); }
  DEV_MEMBER bool poll() const { return sem.poll(); }
};

}  // namespace msccl
