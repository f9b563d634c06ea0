// semaphore.cuh: the semaphores a channel signals and waits on, the
// counting semaphores shared by the blocks of one rank, and
// msccl::Semaphore, the handle a user's kernel holds. Every wait spins
// under the watchdog (WaitCtx, common.cuh). docs/primitives.md states
// each call's memory-ordering contract.
#pragma once
#include "common.cuh"

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

// chan_poll is chan_wait's one look: true (and the signal consumed) when
// the peer has signalled past what this end consumed, false otherwise.
DEV bool chan_poll(const MemChan& c, bool relaxed) {
  u64 want = *c.expected + 1;
  u64 seen = relaxed ? ld_relaxed_sys(c.inbound) : ld_acquire_sys(c.inbound);
  if (seen < want) return false;
  *c.expected = want;
  return true;
}

// ---- counting semaphores among the blocks of one rank ----

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

namespace msccl {

// Watch is where a user kernel's waits report a timeout: one WatchRecord
// per block in mapped host memory (block b writes records[b % nrecords]),
// read by the host's watchdog, which names the rank, block and channel
// instead of hanging. The executor keeps its own per-block WaitCtx.
struct Watch {
  WatchRecord* records;
  u64 timeoutNs;
  u32 rank, nrecords;
};

// WaitScope is a WaitCtx for one user call: the watchdog state lives in
// the calling thread, so a wait in one thread never cuts another's short.
struct WaitScope {
  WaitCtx w;
  u32 aborted;
  DEV_MEMBER WaitScope(const Watch& wt) {
    aborted = 0;
    w.deadline = 0;
    w.timeoutNs = wt.timeoutNs;
    w.rec = wt.records + blockIdx.x % (wt.nrecords ? wt.nrecords : 1);
    w.rank = wt.rank;
    w.block = blockIdx.x;
    w.op = WD_USER_OP;
    w.aborted = &aborted;
  }
};

// Semaphore is one channel end's semaphore pair as a user kernel sees it:
// signal increments the paired end's inbound word on the peer, wait
// consumes one increment of this end's. One thread calls it; a channel
// end belongs to one block at a time (its expected count is not atomic).
struct Semaphore {
  MemChan chan;
  Watch watch;

  // signal: release. Every write the calling thread has observed (its
  // block's, after a __syncthreads) is visible to the peer once its wait
  // returns.
  DEV_MEMBER void signal() const { mem_signal(chan, false); }
  // relaxedSignal orders execution only; it publishes no data.
  DEV_MEMBER void relaxedSignal() const { mem_signal(chan, true); }
  // wait: acquire. Returns once the peer's next signal has arrived; false
  // if the watchdog ended the wait (the host then reports it).
  DEV_MEMBER bool wait() const { return waitAs(false, CHAN_MEMORY); }
  DEV_MEMBER bool relaxedWait() const { return waitAs(true, CHAN_MEMORY); }
  // poll: wait's one look, acquire when it returns true.
  DEV_MEMBER bool poll() const { return chan_poll(chan, false); }

  DEV_MEMBER bool waitAs(bool relaxed, u32 chanType) const {
    WaitScope s(watch);
    chan_wait(chan, relaxed, chanType, &s.w);
    return !s.aborted;
  }
};

}  // namespace msccl
