// port_channel.cuh: port channels, whose copies a host proxy makes. The
// kernel pushes requests into a FIFO in mapped host memory; the proxy
// serves them strictly in order (executor/cuda's proxy, or the user's
// handler of msccl.ProxyHandler) and reports completed flushes back.
#pragma once
#include "semaphore.cuh"

// Fifo is one rank's request queue. Entries live in mapped host memory
// (FIFO_ENTRY_WORDS words: src, dst, size, tag); the tag word is written
// last and is non-zero while the entry is pending; the proxy clears it.
// Kinds and tag layout: abi.cuh (kernels/abi.go).
struct Fifo {
  u64* entries;        // mapped host memory, size*FIFO_ENTRY_WORDS words
  u64* head;           // device memory: next free slot (atomic)
  u64* tail;           // mapped: entries the proxy has taken
  u64* flushed;        // mapped: requests whose copies are complete
  u64 size;            // entries, a power of two
};

DEV u64 fifo_push(const Fifo& f, u64 kind, u32 chan, u64 src, u64 dst, u64 size, WaitCtx* w) {
  u64 idx = atom_add_gpu64(f.head, 1);
  u32 spins = 0;
  wd_arm(w);
  while (idx >= ld_relaxed_sys(f.tail) + f.size) {
    if (wd_stop(w, &spins)) {
      wd_report(w, WD_FIFO_FULL, CHAN_PORT, chan, -1, idx, ld_relaxed_sys(f.tail));
      return idx;
    }
  }
  u64* e = f.entries + FIFO_ENTRY_WORDS * (idx & (f.size - 1));
  st_relaxed_sys(e + 0, src);
  st_relaxed_sys(e + 1, dst);
  st_relaxed_sys(e + 2, size);
  // The tag carries the sequence number so that the proxy can tell a fresh
  // entry from one of the previous lap.
  u64 tag = (kind << FIFO_KIND_SHIFT) | (((u64)chan & FIFO_CHAN_MASK) << FIFO_CHAN_SHIFT) | ((idx + 1) & FIFO_SEQ_MASK);
  fence_sc_sys();
  st_relaxed_sys(e + 3, tag);
  return idx;
}

DEV void fifo_flush(const Fifo& f, u32 chan, WaitCtx* w) {
  u64 idx = fifo_push(f, FIFO_FLUSH, chan, 0, 0, 0, w);
  u32 spins = 0;
  wd_arm(w);
  for (;;) {
    u64 seen = ld_acquire_sys(f.flushed);
    if (seen > idx) return;
    if (wd_stop(w, &spins)) {
      wd_report(w, WD_FLUSH, CHAN_PORT, chan, -1, idx + 1, seen);
      return;
    }
  }
}

namespace msccl {

// PortChannel is one port channel end as a user kernel sees it. dst and
// src are the peer's and this rank's registered buffers as the proxy
// addresses them; offsets are bytes into them. Every call is made by one
// thread; the FIFO is shared, so several threads (and blocks) may push at
// once.
struct PortChannel {
  Semaphore sem;  // chan.index: the FIFO channel id the proxy knows
  Fifo fifo;
  u64 dst, src;

  // put asks the proxy to copy bytes from src+srcOff to the peer's
  // dst+dstOff; it returns at once. src may be overwritten only after a
  // flush (or putWithSignalAndFlush) returns.
  DEV_MEMBER void put(u64 dstOff, u64 srcOff, u64 bytes) const {
    WaitScope s(sem.watch);
    fifo_push(fifo, FIFO_PUT, sem.chan.index, src + srcOff, dst + dstOff, bytes, &s.w);
  }
  // signal: after every earlier request of this channel has been served
  // (the FIFO is in order), the proxy increments the peer's semaphore;
  // the peer's wait then sees the data of earlier puts.
  DEV_MEMBER void signal() const {
    WaitScope s(sem.watch);
    fifo_push(fifo, FIFO_SIGNAL, sem.chan.index, 0, 0, 0, &s.w);
  }
  DEV_MEMBER void putWithSignal(u64 dstOff, u64 srcOff, u64 bytes) const {
    put(dstOff, srcOff, bytes);
    signal();
  }
  DEV_MEMBER void putWithSignalAndFlush(u64 dstOff, u64 srcOff, u64 bytes) const {
    putWithSignal(dstOff, srcOff, bytes);
    flush();
  }
  // flush returns once every request pushed before it has completed.
  DEV_MEMBER bool flush() const {
    WaitScope s(sem.watch);
    fifo_flush(fifo, sem.chan.index, &s.w);
    return !s.aborted;
  }
  // wait and poll consume the peer's signals (acquire).
  DEV_MEMBER bool wait() const { return sem.waitAs(false, CHAN_PORT); }
  DEV_MEMBER bool poll() const { return sem.poll(); }
};

}  // namespace msccl
