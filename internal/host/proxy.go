package host

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/msccl-go/msccl-go/internal/socket"
)

// proxy serves one rank's port-channel requests strictly in order, as a
// GPU's host proxy serves its FIFO: a put's copy completes before the
// signal queued after it is raised, and flush waits for every request
// issued before it (docs/model.md).
type proxy struct {
	reqs   chan preq
	issued atomic.Uint64 // requests queued
	done   atomic.Uint64 // requests served (for the socket transport: sent)
	wg     sync.WaitGroup

	// Requests to peers on other nodes are served by sending them; they
	// are complete once the peer acknowledges them (socket.Conn.Acked).
	// sent is each connection's last ticket, err the first send failure.
	mu   sync.Mutex
	sent map[*socket.Conn]uint64
	err  error
}

// preq is one request: copy src to dst (bytes or packets), then add one
// to signal if set.
type preq struct {
	dst, src []byte
	pkts     []atomic.Uint64 // packet destination (src is the payload)
	flag     uint32
	signal   *atomic.Uint64

	// To a rank on another node: put src (when buf is set) at off of the
	// peer's buffer buf, then signal the peer's port channel ch when
	// netSignal.
	net       *socket.Conn
	space     uint32
	buf       uint16
	off       uint64
	hasBuf    bool
	netSignal bool
	ch        uint32
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
		if r.net != nil {
			p.send(r)
			p.done.Add(1)
			continue
		}
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

// send hands a request for another node to its connection.
func (p *proxy) send(r preq) {
	var t uint64
	var err error
	if r.hasBuf {
		t, err = r.net.Put(r.space, r.buf, r.off, r.src)
	}
	if err == nil && r.netSignal {
		t, err = r.net.Signal(r.space, r.ch)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		if p.err == nil {
			p.err = err
		}
		return
	}
	if p.sent == nil {
		p.sent = map[*socket.Conn]uint64{}
	}
	if t > p.sent[r.net] {
		p.sent[r.net] = t
	}
}

// netPending reports whether requests sent to other nodes are not yet
// all acknowledged, and the first failure.
func (p *proxy) netPending() (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return false, p.err
	}
	for c, t := range p.sent {
		if c.Acked() < t {
			if err := c.Err(); err != nil {
				return false, err
			}
			return true, nil
		}
	}
	return false, nil
}

func (p *proxy) stop() {
	close(p.reqs)
	p.wg.Wait()
}

// drain waits until every request queued so far is served: its copies
// may target buffers about to be unmapped (or, sent to another node,
// read from them). The proxy waits on nothing, so the first wait ends;
// acknowledgements from other nodes end or their connection fails.
func (p *proxy) drain() {
	t := p.issued.Load()
	for i := 0; p.done.Load() < t; i++ {
		if i < 64 {
			runtime.Gosched()
		} else {
			time.Sleep(20 * time.Microsecond)
		}
	}
	for {
		if pending, _ := p.netPending(); !pending {
			return
		}
		time.Sleep(20 * time.Microsecond)
	}
}
