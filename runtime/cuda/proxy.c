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

// complete delivers pending signals and flushes of queue qi once its
// stream has drained: 1 if it delivered any, 0 if none, -1 on failure.
//
// The queue's stream carries copies only. Signals and flushes are host
// stores to mapped memory, made after cuStreamQuery says every copy
// before them is done: a stream-ordered write (cuStreamWriteValue64, an
// event) rides a hardware queue that the driver may share with another
// stream, and when that stream waits for the ranks' kernels (a join, the
// next collective's fork) the signal those kernels spin on sits behind
// the wait: a deadlock. Copies can be held up the same way when their
// stream shares a queue (runtime/cuda/queue_test.go), so executor/cuda
// refuses plans whose streams outnumber the queues. Polling rather than waiting
// keeps one slow queue from holding up the rest.
static int complete(mc_proxy *p, int qi) {
  mc_proxy_queue *q = &p->q[qi];
  if (q->pend_n == 0) return 0;
  int rc = mc_cuStreamQuery(q->stream);
  if (rc == CU_NOT_READY) return 0;
  if (rc) return fail(p, qi, q->pend[q->pend_head].idx, "cuStreamQuery", rc);
  // Everything taken so far is copied: deliver in FIFO order.
  while (q->pend_n > 0) {
    mc_proxy_pending *e = &q->pend[q->pend_head];
    if (e->kind == 2) {
      __atomic_store_n(q->remote[e->ch], ++q->tokens[e->ch], __ATOMIC_RELEASE);
    } else {
      __atomic_store_n(&q->fifo[4 * q->size + 1], e->idx + 1, __ATOMIC_RELEASE);
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
  uint64_t *e = q->fifo + 4 * (q->tail & (q->size - 1));
  uint64_t tag = __atomic_load_n(&e[3], __ATOMIC_ACQUIRE);
  if (tag == 0 || (tag & 0xffffffffffULL) != ((q->tail + 1) & 0xffffffffffULL)) return 0;
  uint64_t src = __atomic_load_n(&e[0], __ATOMIC_RELAXED);
  uint64_t dst = __atomic_load_n(&e[1], __ATOMIC_RELAXED);
  uint64_t bytes = __atomic_load_n(&e[2], __ATOMIC_RELAXED);
  unsigned kind = (unsigned)(tag >> 56), ch = (unsigned)((tag >> 40) & 0xffff);
  __atomic_store_n(&e[3], 0, __ATOMIC_RELAXED);
  uint64_t idx = q->tail++;
  __atomic_store_n(&q->fifo[4 * q->size], q->tail, __ATOMIC_RELEASE);
  switch (kind) {
  case 1: {  // put
    int rc = mc_cuMemcpyAsync(dst, src, (size_t)bytes, q->stream);
    return rc ? fail(p, qi, idx, "cuMemcpyAsync", rc) : 1;
  }
  case 2:  // signal
  case 3:  // flush
    if (kind == 2 && (int)ch >= q->nchan) return fail(p, qi, idx, "signal", -2);
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
    // spinning: they are what the kernels wait for.
    int waiting = 0;
    for (int i = 0; i < p->n; i++) waiting |= p->q[i].pend_n > 0;
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
