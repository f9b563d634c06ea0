// proxy.c: see proxy.h and proxy.go.
#include <time.h>

#include "proxy.h"
#include "shim.h"

#define MC_NOT_SUPPORTED 801

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

// step handles at most one request of queue qi: 1 if it did, 0 if none
// was pending, -1 on failure (recorded in p).
static int step(mc_proxy *p, int qi) {
  mc_proxy_queue *q = &p->q[qi];
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
  int rc;
  switch (kind) {
  case 1:  // put
    rc = mc_cuMemcpyAsync(dst, src, (size_t)bytes, q->stream);
    return rc ? fail(p, qi, idx, "cuMemcpyAsync", rc) : 1;
  case 2: {  // signal: a stream-ordered store, so it lands after the puts
    if ((int)ch >= q->nchan) return fail(p, qi, idx, "signal", -2);
    uint64_t addr = q->remote[ch], v = ++q->tokens[ch];
    rc = mc_cuStreamWriteValue64(q->stream, addr, v);
    if ((rc == MC_MISSING || rc == MC_NOT_SUPPORTED) && p->wv) {
      void *args[2] = {&addr, &v};
      rc = mc_cuLaunchKernel(p->wv, 1, 1, 1, 1, 1, 1, 0, q->stream, args);
      return rc ? fail(p, qi, idx, "cuLaunchKernel", rc) : 1;
    }
    return rc ? fail(p, qi, idx, "cuStreamWriteValue64", rc) : 1;
  }
  case 3:  // flush
    rc = mc_cuStreamSynchronize(q->stream);
    if (rc) return fail(p, qi, idx, "cuStreamSynchronize", rc);
    __atomic_store_n(&q->fifo[4 * q->size + 1], idx + 1, __ATOMIC_RELEASE);
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
    }
    if (busy) {
      idle = 0;
      continue;
    }
    // Requests come in bursts: spin about a millisecond, then nap so an
    // idle executor does not hold a core.
    if (++idle < 20000) {
      cpu_relax();
    } else {
      struct timespec ts = {0, 20000};
      nanosleep(&ts, 0);
    }
  }
  return 0;
}

void mc_proxy_stop(mc_proxy *p) { __atomic_store_n(&p->quit, 1, __ATOMIC_RELEASE); }
