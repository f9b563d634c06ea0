package cuda

/*
#include <stdlib.h>
#include "proxy.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"
)

// PortProxy is the host side of port channels: it takes requests from
// rank FIFOs in mapped host memory strictly in order, issues each put as
// cuMemcpyAsync on the queue's stream, and delivers each signal (the next
// token, stored to the peer's inbound word in mapped host memory) and each
// flush (the flushed word) from the host once the stream has drained
// every copy taken before it. The stream carries nothing but copies: see
// proxy.c for the deadlock a stream-ordered signal ran into.
//
// The loop is C, entered once by Run, because kernels spin on what it
// publishes: written in Go, it yielded to the scheduler between polls, and
// on a loaded process (a CPU-bound goroutine per core, as the GPU tests
// run) nothing bounded how long it waited for a P. A thread inside a cgo
// call is outside Go's scheduler.
type PortProxy struct {
	p    *C.mc_proxy
	once sync.Once
}

// proxyPending bounds the signals and flushes of one queue awaiting their
// copies; beyond it the proxy stops taking that queue's requests until
// the stream drains.
const proxyPending = 256

// ProxyQueue describes one rank's FIFO.
type ProxyQueue struct {
	FIFO   *HostMem // Size entries of 4 words (src, dst, bytes, tag), then tail and flushed words
	Size   uint64   // entries, a power of two
	Stream *Stream  // the queue's copies go here
	// Remote: per port channel, the peer's inbound token, a word of mapped
	// host memory (HostMem.Word) that the peer's kernel polls.
	Remote []*uint64
}

// NewPortProxy prepares a proxy over qs; Run serves them. data, when not
// nil, is the context that owns the memory the puts copy, and the queues'
// streams belong to another context (Device.NewContext, current on the
// thread that calls Run): the copies are then cuMemcpyPeerAsync.
func NewPortProxy(qs []ProxyQueue, data *Context) (*PortProxy, error) {
	if len(qs) == 0 {
		return nil, errors.New("cuda: NewPortProxy: no queues")
	}
	for i, q := range qs {
		if q.Size == 0 || q.Size&(q.Size-1) != 0 {
			return nil, fmt.Errorf("cuda: NewPortProxy: queue %d size %d is not a power of two", i, q.Size)
		}
		if q.FIFO == nil || int64(len(q.FIFO.Bytes)) < int64(q.Size)*32+16 {
			return nil, fmt.Errorf("cuda: NewPortProxy: queue %d FIFO is smaller than %d entries and 2 words", i, q.Size)
		}
		for k, r := range q.Remote {
			if r == nil || uintptr(unsafe.Pointer(r))%8 != 0 {
				return nil, fmt.Errorf("cuda: NewPortProxy: queue %d channel %d: no aligned inbound token", i, k)
			}
		}
		if err := q.Stream.live("NewPortProxy"); err != nil {
			return nil, err
		}
	}
	// Everything the loop touches is C memory (the tokens are mapped host
	// memory from cuMemHostAlloc): cgo forbids C keeping Go pointers
	// across the long call.
	p := (*C.mc_proxy)(C.calloc(1, C.size_t(unsafe.Sizeof(C.mc_proxy{}))))
	p.n = C.int(len(qs))
	if data != nil {
		p.data_ctx = data.h
	}
	p.q = (*C.mc_proxy_queue)(C.calloc(C.size_t(len(qs)), C.size_t(unsafe.Sizeof(C.mc_proxy_queue{}))))
	cq := unsafe.Slice(p.q, len(qs))
	for i, q := range qs {
		n := max(1, len(q.Remote))
		remote := unsafe.Slice((**C.uint64_t)(C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(uintptr(0))))), n)
		for k, r := range q.Remote {
			remote[k] = (*C.uint64_t)(unsafe.Pointer(r))
		}
		cq[i] = C.mc_proxy_queue{
			fifo:   (*C.uint64_t)(q.FIFO.host),
			size:   C.uint64_t(q.Size),
			stream: q.Stream.h,
			remote: &remote[0],
			tokens: (*C.uint64_t)(C.calloc(C.size_t(n), 8)),
			nchan:  C.int(len(q.Remote)),
			pend:   (*C.mc_proxy_pending)(C.calloc(proxyPending, C.size_t(unsafe.Sizeof(C.mc_proxy_pending{})))),
			npend:  proxyPending,
		}
	}
	return &PortProxy{p: p}, nil
}

// Run serves the queues until Stop and returns the first failure, naming
// the queue and request. Call it on a goroutine locked to its OS thread
// with the queues' context current.
func (pp *PortProxy) Run() error {
	if C.mc_proxy_run(pp.p) == 0 {
		return nil
	}
	what := fmt.Sprintf("proxy queue %d request %d", int(pp.p.err_queue), uint64(pp.p.err_req))
	switch code := int(pp.p.err_code); code {
	case -2:
		return fmt.Errorf("cuda: %s: signal on an unknown port channel", what)
	case -3:
		return fmt.Errorf("cuda: %s: unknown request kind", what)
	default:
		return fmt.Errorf("%s: %w", what, check(C.GoString(pp.p.err_call), C.int(code)))
	}
}

// Done is the number of queue q's requests whose copies are known
// complete. Read it instead of synchronizing the queue's stream, which
// may belong to a context not current on the caller's thread.
func (pp *PortProxy) Done(q int) uint64 { return uint64(C.mc_proxy_done(pp.p, C.int(q))) }

// ProxyState is one queue's progress as the proxy thread last left it,
// for a hang report: whether requests never arrived (Taken behind what
// the kernels pushed, NextTag not the expected sequence), or arrived and
// their copies never completed (Done behind Taken, NotReady climbing).
type ProxyState struct {
	Taken, Done uint64 // requests taken from the FIFO; of those, copies known complete
	Pending     int    // signals and flushes waiting for copies
	LastQuery   int    // the last cuStreamQuery result (0 done, 600 not ready)
	NotReady    uint64 // consecutive queries that found copies still running
	NextTag     uint64 // the tag word of the entry at Taken (0: not written)
}

// State reads queue q's progress without stopping the proxy.
func (pp *PortProxy) State(q int) ProxyState {
	var out [6]C.uint64_t
	C.mc_proxy_state(pp.p, C.int(q), &out[0])
	return ProxyState{Taken: uint64(out[0]), Done: uint64(out[1]), Pending: int(out[2]),
		LastQuery: int(int64(out[3])), NotReady: uint64(out[4]), NextTag: uint64(out[5])}
}

// Stop makes Run return after the request it is handling.
func (pp *PortProxy) Stop() { C.mc_proxy_stop(pp.p) }

// Free releases the proxy's memory; call it after Run has returned.
func (pp *PortProxy) Free() {
	pp.once.Do(func() {
		for _, q := range unsafe.Slice(pp.p.q, int(pp.p.n)) {
			C.free(unsafe.Pointer(q.remote))
			C.free(unsafe.Pointer(q.tokens))
			C.free(unsafe.Pointer(q.pend))
		}
		C.free(unsafe.Pointer(pp.p.q))
		C.free(unsafe.Pointer(pp.p))
	})
}
