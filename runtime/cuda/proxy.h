// proxy.h: the host side of port channels, as a C loop that Go calls once
// and that returns only when told to stop (see proxy.go for why it is C).
#ifndef MSCCL_CUDA_PROXY_H
#define MSCCL_CUDA_PROXY_H

#include <stdint.h>

// One rank's request queue. fifo is mapped host memory: size entries of
// four words (src, dst, bytes, tag), then the tail word (entries taken)
// and the flushed word (requests whose copies are complete). The tag is
// kind<<56 | channel<<40 | (sequence number + 1) mod 2^40, written last.
typedef struct {
  uint64_t *fifo;
  uint64_t size;
  uint64_t tail;
  uintptr_t stream;
  const uint64_t *remote;  // per port channel: the peer's inbound token
  uint64_t *tokens;        // per port channel: signals sent
  int nchan;
} mc_proxy_queue;

typedef struct {
  mc_proxy_queue *q;
  int n;
  int quit;            // set by mc_proxy_stop
  uintptr_t wv;        // fallback kernel for signals (0: none)
  // The first failure: call is a static name, code the driver's result
  // (or -2 unknown channel, -3 unknown request kind).
  int err_queue;
  uint64_t err_req;
  const char *err_call;
  int err_code;
} mc_proxy;

int mc_proxy_run(mc_proxy *p);
void mc_proxy_stop(mc_proxy *p);

#endif
