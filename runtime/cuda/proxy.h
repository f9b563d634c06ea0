// proxy.h: the host side of port channels, as a C loop that Go calls once
// and that returns only when told to stop (see proxy.go for why it is C).
#ifndef MSCCL_CUDA_PROXY_H
#define MSCCL_CUDA_PROXY_H

#include <stdint.h>

// Request kinds (MC_FIFO_PUT, _SIGNAL, _FLUSH) and the tag layout of a
// FIFO entry, generated from kernels/abi.go.
#include "abi.h"

// A signal or flush taken from a FIFO whose puts are not yet known to be
// complete: kind 2 (signal on channel ch) or 3 (flush of request idx).
typedef struct {
  uint64_t idx;
  int kind, ch;
} mc_proxy_pending;

// One rank's request queue. fifo is mapped host memory: size entries of
// four words (src, dst, bytes, tag), then the tail word (entries taken)
// and the flushed word (requests whose copies are complete). The tag is
// kind<<56 | channel<<40 | (sequence number + 1) mod 2^40, written last.
typedef struct {
  uint64_t *fifo;
  uint64_t size;
  uint64_t tail;
  uintptr_t stream;   // the queue's copies, and nothing else
  uint64_t **remote;  // per port channel: the peer's inbound token (mapped host memory)
  uint64_t *tokens;   // per port channel: signals sent
  int nchan;
  // Signals and flushes waiting for the stream to drain, oldest first: a
  // ring of npend.
  mc_proxy_pending *pend;
  int npend, pend_head, pend_n;
  // Requests whose copies are known complete (a cuStreamQuery returned
  // done after they were issued): Wait reads it through mc_proxy_done
  // instead of synchronizing a stream of another context.
  uint64_t done;
  // For the watchdog's report (mc_proxy_state): the last cuStreamQuery
  // result and how many queries in a row found copies still running.
  int last_query;
  uint64_t not_ready;
} mc_proxy_queue;

typedef struct {
  mc_proxy_queue *q;
  int n;
  int quit;  // set by mc_proxy_stop
  // The context that owns the ranks' memory, when the proxy's streams
  // live in a context of their own: puts become cuMemcpyPeerAsync.
  uintptr_t data_ctx;
  // The first failure: call is a static name, code the driver's result
  // (or -2 unknown channel, -3 unknown request kind).
  int err_queue;
  uint64_t err_req;
  const char *err_call;
  int err_code;
} mc_proxy;

int mc_proxy_run(mc_proxy *p);
void mc_proxy_stop(mc_proxy *p);
uint64_t mc_proxy_done(mc_proxy *p, int qi);
// mc_proxy_state copies queue qi's progress into out: requests taken,
// requests complete, signals/flushes pending, the last cuStreamQuery
// result, consecutive not-ready queries, and the tag word of the entry at
// the tail (the next request the proxy waits for). Racy reads of words
// only the proxy thread writes: a diagnostic, not a synchronisation.
void mc_proxy_state(mc_proxy *p, int qi, uint64_t out[6]);

#endif
