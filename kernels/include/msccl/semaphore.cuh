// channels.cuh: the device side of memory channels, port channels (a FIFO
// of requests in mapped host memory, served by the host proxy), LL
// packets, block-group barriers and counting semaphores. Every wait spins
// under the watchdog of WaitCtx.

// MemChan is one memory (or port) channel end: the semaphore this rank
// waits on, the peer's semaphore it signals, and how many signals this end
// has consumed so far (persisting across launches).
struct MemChan {
  u64* inbound;        // local; incremented by the peer's signal
  u64* remoteInbound;  // the paired channel's inbound on the peer
  u64* expected;       // local count of consumed signals
  i32 peer;
  u32 index;  // the channel's index in the rank's list of its type (port: FIFO channel id)
};

// SIGNAL_FENCE=0 (MSCCL_KERNEL_DEFINES, to measure) drops the fence before
// a signal's release increment. The PTX memory model makes the release
// alone publish every write the signalling thread has observed, its
// block's included through the bar.sync before it (cumulativity); the
// fence, kept by default until a device run has shown both, costs a
// second system-scope membar per signal on the path of every ring step.
#ifndef SIGNAL_FENCE
#define SIGNAL_FENCE 1
#endif

// SIGNAL_SCOPE_GPU=1 (MSCCL_KERNEL_DEFINES, to measure) gives memory
// channels' signals and waits GPU scope instead of system scope. That
// orders enough only while every peer's memory is on this GPU and no host
// takes part (msccl-bench's ranks sharing one device); across GPUs it
// orders nothing, so it is never for shipping. It asks what system scope
// costs a ring step: with 8 ranks on one H200 the fence before a release
// cost a ring step twice what it cost a ping-pong hop
// (docs/BENCHMARKS.md, "Why a ring step costs more than a ping-pong hop").
// Port channels keep system scope (a proxy on the host may be the peer).
#ifndef SIGNAL_SCOPE_GPU
#define SIGNAL_SCOPE_GPU 0
#endif

DEV void chan_signal(const MemChan& c, bool relaxed) {
  if (relaxed) {
    red_relaxed_sys_add(c.remoteInbound, 1);
  } else {
    if (SIGNAL_FENCE) fence_acq_rel_sys();
    red_release_sys_add(c.remoteInbound, 1);
  }
}

// mem_signal is chan_signal for a memory channel (SIGNAL_SCOPE_GPU).
DEV void mem_signal(const MemChan& c, bool relaxed) {
  if (!SIGNAL_SCOPE_GPU) {
    chan_signal(c, relaxed);
  } else if (relaxed) {
    red_relaxed_gpu_add(c.remoteInbound, 1);
  } else {
    if (SIGNAL_FENCE) fence_acq_rel_gpu();
    red_release_gpu_add(c.remoteInbound, 1);
  }
}

DEV void chan_wait(const MemChan& c, bool relaxed, u32 chanType, WaitCtx* w) {
  // Only this thread touches c.expected: a channel end belongs to one block
  // of a plan (as upstream assumes), and appears once per op.
  u64 want = *c.expected + 1;
  *c.expected = want;
  u32 spins = 0;
  const bool gpu = SIGNAL_SCOPE_GPU && chanType == CHAN_MEMORY;
  wd_arm(w);
  for (;;) {
    u64 seen = gpu ? (relaxed ? ld_relaxed_gpu64(c.inbound) : ld_acquire_gpu64(c.inbound))
                   : (relaxed ? ld_relaxed_sys(c.inbound) : ld_acquire_sys(c.inbound));
    if (seen >= want) return;
    if (wd_stop(w, &spins)) {
      wd_report(w, WD_SIGNAL, chanType, c.index, c.peer, want, seen);
      return;
    }
  }
}

// ---- port channels: FIFO requests to the host proxy ----

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

// ---- LL packets: each 4-byte datum travels with a 4-byte flag ----

// LL16: {data0, flag, data1, flag} written with one 16-byte store.
DEV void pkt16_write(void* p, u32 d0, u32 d1, u32 flag) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(d0), "r"(flag), "r"(d1), "r"(flag)
               : "memory");
}
DEV bool pkt16_read(const void* p, u32 flag, u32* d, WaitCtx* w) {
  u32 a, fa, b, fb, spins = 0;
  wd_arm(w);
  for (;;) {
    asm volatile("ld.volatile.global.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(a), "=r"(fa), "=r"(b), "=r"(fb)
                 : "l"(p)
                 : "memory");
    if (fa == flag && fb == flag) break;
    if (wd_stop(w, &spins)) {
      wd_report(w, WD_PACKET, CHAN_NONE, 0, -1, flag, fa != flag ? fa : fb);
      return false;
    }
  }
  d[0] = a;
  d[1] = b;
  return true;
}
// LL8: {data, flag} written with one 8-byte store.
DEV void pkt8_write(void* p, u32 d0, u32 flag) {
  asm volatile("st.volatile.global.v2.u32 [%0], {%1,%2};" ::"l"(p), "r"(d0), "r"(flag) : "memory");
}
DEV bool pkt8_read(const void* p, u32 flag, u32* d, WaitCtx* w) {
  u32 a, fa, spins = 0;
  wd_arm(w);
  for (;;) {
    asm volatile("ld.volatile.global.v2.u32 {%0,%1}, [%2];" : "=r"(a), "=r"(fa) : "l"(p) : "memory");
    if (fa == flag) break;
    if (wd_stop(w, &spins)) {
      wd_report(w, WD_PACKET, CHAN_NONE, 0, -1, flag, fa);
      return false;
    }
  }
  d[0] = a;
  return true;
}

// pkt_write and pkt_read move the NW = PK/8 data words of one packet of
// either width; the executor's packet ops and the reference kernels both
// go through them, so both use the same stores and watchdog.
template <int PK>
DEV void pkt_write(void* p, const u32* v, u32 flag) {
  if (PK == 16) {
    pkt16_write(p, v[0], v[1], flag);
  } else {
    pkt8_write(p, v[0], flag);
  }
}
template <int PK>
DEV bool pkt_read(const void* p, u32 flag, u32* v, WaitCtx* w) {
  if (PK == 16) return pkt16_read(p, flag, v, w);
  return pkt8_read(p, flag, v, w);
}

// ---- barriers among the blocks of one rank, and counting semaphores ----

struct BlockBarrier {
  u32 count;
  u32 gen;
};

DEV void block_barrier(BlockBarrier* b, u32 n, u32 id, WaitCtx* w) {
  __syncthreads();
  if (threadIdx.x == 0) {
    u32 gen = ld_acquire_gpu32(&b->gen);
    __threadfence();
    u32 arrived = atom_add_gpu32(&b->count, 1);
    if (arrived == n - 1) {
      b->count = 0;
      st_release_gpu32(&b->gen, gen + 1);
    } else {
      u32 spins = 0;
      wd_arm(w);
      while (ld_acquire_gpu32(&b->gen) == gen) {
        if (wd_stop(w, &spins)) {
          wd_report(w, WD_BARRIER, CHAN_NONE, id, -1, n, arrived + 1);
          break;
        }
      }
    }
  }
  __syncthreads();
}

DEV void sem_acquire(u32* s, u32 id, WaitCtx* w) {
  u32 spins = 0;
  wd_arm(w);
  for (;;) {
    u32 v = ld_acquire_gpu32(s);
    if (v > 0 && atom_cas_gpu32(s, v, v - 1) == v) return;
    if (wd_stop(w, &spins)) {
      wd_report(w, WD_SEMAPHORE, CHAN_NONE, id, -1, 1, v);
      return;
    }
  }
}

DEV void sem_release(u32* s) {
  __threadfence();
  atom_add_gpu32(s, 1);
}
