// proxy.c: see proxy.h and proxy.go.
#include <time.h>

#include "proxy.h"
#include "shim.h"

#define CU_NOT_READY 600

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ volatile("yield");
#endif
}

static int fail(mc_proxy *p, int qi, uint64_t req, const char *call, int code) {
  p->err_queue = qi;
  p->err_req = req;
  p->err_call = call;
  p->err_code = code;
  return -1;
}

// complete learns which of queue qi's copies are done and delivers the
// pending signals and flushes once its stream has drained: 1 if it
// learned or delivered anything, 0 if not, -1 on failure.
//
// The queue's stream carries copies only. Signals and flushes are host
// stores to mapped memory, made after cuStreamQuery says every copy
// before them is done: a stream-ordered write (cuStreamWriteValue64, an
// event) could sit behind another stream's wait on a shared hardware
// queue. The stream itself lives in the proxy's own context (data_ctx set),
// whose hardware queues no stream of the ranks' context can share: a copy
// behind a wait for the ranks' kernels, which wait for the copy, was the
// port-channel deadlock (docs/rationale.md). Polling rather than waiting
// keeps one slow queue from holding up the rest.
static int complete(mc_proxy *p, int qi) {
  mc_proxy_queue *q = &p->q[qi];
  if (q->pend_n == 0 && q->done == q->tail) return 0;
  uint64_t upto = q->tail;  // everything taken so far was issued before the query
  int rc = mc_cuStreamQuery(q->stream);
  __atomic_store_n(&q->last_query, rc, __ATOMIC_RELAXED);
  if (rc == CU_NOT_READY) {
    __atomic_store_n(&q->not_ready, q->not_ready + 1, __ATOMIC_RELAXED);
    return 0;
  }
  __atomic_store_n(&q->not_ready, 0, __ATOMIC_RELAXED);
  if (rc) return fail(p, qi, q->pend_n ? q->pend[q->pend_head].idx : q->done, "cuStreamQuery", rc);
  __atomic_store_n(&q->done, upto, __ATOMIC_RELEASE);
  // Deliver in FIFO order.
  while (q->pend_n > 0) {
    mc_proxy_pending *e = &q->pend[q->pend_head];
    if (e->kind == MC_FIFO_SIGNAL) {
      __atomic_store_n(q->remote[e->ch], ++q->tokens[e->ch], __ATOMIC_RELEASE);
    } else {
      __atomic_store_n(&q->fifo[MC_FIFO_ENTRY_WORDS * q->size + 1], e->idx + 1, __ATOMIC_RELEASE);
    }
    q->pend_head = (q->pend_head + 1) % q->npend;
    q->pend_n--;
  }
  return 1;
}

// step handles at most one request of queue qi: 1 if it did, 0 if none
// was pending (or the pending ring is full), -1 on failure (recorded in p).
static int step(mc_proxy *p, int qi) {
  mc_proxy_queue *q = &p->q[qi];
  if (q->pend_n == q->npend) return 0;  // back-pressure until complete runs
  uint64_t *e = q->fifo + MC_FIFO_ENTRY_WORDS * (q->tail & (q->size - 1));
  uint64_t tag = __atomic_load_n(&e[3], __ATOMIC_ACQUIRE);
  if (tag == 0 || (tag & MC_FIFO_SEQ_MASK) != ((q->tail + 1) & MC_FIFO_SEQ_MASK)) return 0;
  uint64_t src = __atomic_load_n(&e[0], __ATOMIC_RELAXED);
  uint64_t dst = __atomic_load_n(&e[1], __ATOMIC_RELAXED);
  uint64_t bytes = __atomic_load_n(&e[2], __ATOMIC_RELAXED);
  unsigned kind = (unsigned)(tag >> MC_FIFO_KIND_SHIFT), ch = (unsigned)((tag >> MC_FIFO_CHAN_SHIFT) & MC_FIFO_CHAN_MASK);
  __atomic_store_n(&e[3], 0, __ATOMIC_RELAXED);
  uint64_t idx = q->tail++;
  __atomic_store_n(&q->fifo[MC_FIFO_ENTRY_WORDS * q->size], q->tail, __ATOMIC_RELEASE);
  switch (kind) {
  case MC_FIFO_PUT: {
    // The data lives in the ranks' context, the stream in the proxy's.
    int rc = p->data_ctx ? mc_cuMemcpyPeerAsync(dst, p->data_ctx, src, p->data_ctx, (size_t)bytes, q->stream)
                         : mc_cuMemcpyAsync(dst, src, (size_t)bytes, q->stream);
    return rc ? fail(p, qi, idx, p->data_ctx ? "cuMemcpyPeerAsync" : "cuMemcpyAsync", rc) : 1;
  }
  case MC_FIFO_SIGNAL:
  case MC_FIFO_FLUSH:
    if (kind == MC_FIFO_SIGNAL && (int)ch >= q->nchan) return fail(p, qi, idx, "signal", -2);
    mc_proxy_pending *pe = &q->pend[(q->pend_head + q->pend_n) % q->npend];
    pe->idx = idx;
    pe->kind = (int)kind;
    pe->ch = (int)ch;
    q->pend_n++;
    return 1;
  }
  return fail(p, qi, idx, "request", -3);
}

int mc_proxy_run(mc_proxy *p) {
  unsigned idle = 0;
  while (!__atomic_load_n(&p->quit, __ATOMIC_ACQUIRE)) {
    int busy = 0;
    for (int i = 0; i < p->n; i++) {
      for (int k = 0; k < 64; k++) {  // bounded: one busy queue cannot starve the rest
        int r = step(p, i);
        if (r < 0) return -1;
        if (r == 0) break;
        busy = 1;
      }
      int c = complete(p, i);
      if (c < 0) return -1;
      busy |= c;
    }
    if (busy) {
      idle = 0;
      continue;
    }
    // Requests come in bursts: spin about a millisecond, then nap so an
    // idle executor does not hold a core. Pending completions keep it
    // spinning (and copies not yet known done): they are what the kernels
    // and Wait wait for.
    int waiting = 0;
    for (int i = 0; i < p->n; i++) waiting |= p->q[i].pend_n > 0 || p->q[i].done != p->q[i].tail;
    if (waiting || ++idle < 20000) {
      cpu_relax();
    } else {
      struct timespec ts = {0, 20000};
      nanosleep(&ts, 0);
    }
  }
  return 0;
}

void mc_proxy_stop(mc_proxy *p) { __atomic_store_n(&p->quit, 1, __ATOMIC_RELEASE); }

uint64_t mc_proxy_done(mc_proxy *p, int qi) { return __atomic_load_n(&p->q[qi].done, __ATOMIC_ACQUIRE); }

void mc_proxy_state(mc_proxy *p, int qi, uint64_t out[6]) {
  mc_proxy_queue *q = &p->q[qi];
  uint64_t tail = __atomic_load_n(&q->tail, __ATOMIC_RELAXED);
  out[0] = tail;
  out[1] = __atomic_load_n(&q->done, __ATOMIC_ACQUIRE);
  out[2] = (uint64_t)__atomic_load_n(&q->pend_n, __ATOMIC_RELAXED);
  out[3] = (uint64_t)(int64_t)__atomic_load_n(&q->last_query, __ATOMIC_RELAXED);
  out[4] = __atomic_load_n(&q->not_ready, __ATOMIC_RELAXED);
  out[5] = __atomic_load_n(&q->fifo[MC_FIFO_ENTRY_WORDS * (tail & (q->size - 1)) + 3], __ATOMIC_ACQUIRE);
}
