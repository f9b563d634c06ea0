package host

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// proxy serves one rank's port-channel requests strictly in order, as a
// GPU's host proxy serves its FIFO: a put's copy completes before the
// signal queued after it is raised, and flush waits for every request
// issued before it (docs/model.md).
type proxy struct {
	reqs   chan preq
	issued atomic.Uint64 // requests queued
	done   atomic.Uint64 // requests served
	wg     sync.WaitGroup
}

// preq is one request: copy src to dst (bytes or packets), then add one
// to signal if set.
type preq struct {
	dst, src []byte
	pkts     []atomic.Uint64 // packet destination (src is the payload)
	flag     uint32
	signal   *atomic.Uint64
}

func startProxy() *proxy {
	p := &proxy{reqs: make(chan preq, 1024)}
	p.wg.Add(1)
	go p.serve()
	return p
}

func (p *proxy) serve() {
	defer p.wg.Done()
	for r := range p.reqs {
		switch {
		case r.pkts != nil:
			writePkts(r.pkts, r.src, r.flag)
		case r.dst != nil:
			copy(r.dst, r.src)
		}
		if r.signal != nil {
			r.signal.Add(1)
		}
		p.done.Add(1)
	}
}

// push queues a request; the returned ticket is done once done ≥ ticket.
func (p *proxy) push(r preq) uint64 {
	t := p.issued.Add(1)
	p.reqs <- r
	return t
}

func (p *proxy) stop() {
	close(p.reqs)
	p.wg.Wait()
}

// drain waits until every request queued so far is served: its copies
// may target buffers about to be unmapped. The proxy waits on nothing,
// so this ends.
func (p *proxy) drain() {
	t := p.issued.Load()
	for i := 0; p.done.Load() < t; i++ {
		if i < 64 {
			runtime.Gosched()
		} else {
			time.Sleep(20 * time.Microsecond)
		}
	}
}
