package host

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	proxyapi "github.com/msccl-go/msccl-go/internal/proxy"
	"github.com/msccl-go/msccl-go/internal/socket"
)

// proxy serves one rank's port-channel requests strictly in order, as a
// GPU's host proxy serves its FIFO: a put's copy completes before the
// signal queued after it is raised, and flush waits for every request
// issued before it (docs/model.md). With a handler (Options.ProxyHandler)
// every same-node request becomes a proxyapi.Trigger served by it; the
// built-in handling is then its Trigger.Default.
type proxy struct {
	reqs   chan preq
	issued atomic.Uint64 // requests queued
	done   atomic.Uint64 // requests served (for the socket transport: sent)
	wg     sync.WaitGroup

	rank    int
	handler proxyapi.Handler // nil: the built-in handling, inline
	serving proxyapi.Serving

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

	// end is the port channel the request is for (nil when it names
	// none): the trigger's peer and channel index.
	end *chanEnd
}

func startProxy(rank int, h proxyapi.Handler) *proxy {
	p := &proxy{reqs: make(chan preq, 1024), rank: rank, handler: h}
	p.wg.Add(1)
	go p.serve()
	return p
}

// perform is the built-in handling of a same-node request.
func (r *preq) perform() {
	switch {
	case r.pkts != nil:
		writePkts(r.pkts, r.src, r.flag)
	case r.dst != nil:
		copy(r.dst, r.src)
	}
	if r.signal != nil {
		r.signal.Add(1)
	}
}

// trigger is r as the handler sees it, the seq-th of the rank.
func (p *proxy) trigger(r *preq, seq uint64) proxyapi.Trigger {
	t := proxyapi.Trigger{Rank: p.rank, Peer: -1, Channel: -1, Seq: seq}
	if r.end != nil {
		t.Peer, t.Channel = r.end.peer, r.end.index
	}
	if r.pkts != nil || r.dst != nil {
		t.Kind |= proxyapi.Put
		t.Src, t.Bytes = r.src, uint64(len(r.src))
		t.Packets = r.pkts != nil
		if !t.Packets {
			t.Dst = r.dst
		}
	}
	var signal func()
	if r.signal != nil {
		t.Kind |= proxyapi.Signal
		signal = func() { r.signal.Add(1) }
	}
	return proxyapi.NewTrigger(t, r.perform, signal)
}

func (p *proxy) serve() {
	defer p.wg.Done()
	for r := range p.reqs {
		if r.net != nil {
			p.send(r)
			p.done.Add(1)
			continue
		}
		if p.handler == nil {
			r.perform()
		} else if res := p.serving.Serve(p.handler, p.trigger(&r, p.done.Load()+1)); res.Err != nil {
			p.fail(fmt.Errorf("host: rank %d's port proxy: %w", p.rank, res.Err))
		}
		p.done.Add(1)
	}
}

// fail records the proxy's first failure; flushes and drain report it.
func (p *proxy) fail(err error) {
	p.mu.Lock()
	if p.err == nil {
		p.err = err
	}
	p.mu.Unlock()
}

// failure is the proxy's first failure, nil while there is none.
func (p *proxy) failure() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// busy names a handler that has been serving one trigger for after or
// longer ("" when none): what a hang report adds about the proxy.
func (p *proxy) busy(after time.Duration) string { return p.serving.Busy(after) }

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

// stop ends the serving goroutine once it has served what is queued. A
// handler still blocked after timeout is left running (its goroutine
// leaks) and named in the error, rather than hanging Close.
func (p *proxy) stop(timeout time.Duration) error {
	close(p.reqs)
	if !proxyapi.WaitTimeout(&p.wg, timeout) {
		return fmt.Errorf("host: rank %d's port proxy did not stop within %v: %s", p.rank, timeout, p.busy(0))
	}
	return nil
}

// drain waits until every request queued so far is served: its copies
// may target buffers about to be unmapped (or, sent to another node,
// read from them). The built-in proxy waits on nothing, so the first wait
// ends; acknowledgements from other nodes end or their connection fails.
// A user's handler may block: past timeout drain gives up with an error
// that names it (the buffers then stay mapped: the handler may still
// write them).
func (p *proxy) drain(timeout time.Duration) error {
	t := p.issued.Load()
	start := time.Now()
	for i := 0; p.done.Load() < t; i++ {
		if time.Since(start) > timeout {
			what := p.busy(0)
			if what == "" {
				what = fmt.Sprintf("%d requests not served", t-p.done.Load())
			}
			return fmt.Errorf("host: rank %d's port proxy did not finish within %v: %s", p.rank, timeout, what)
		}
		if i < 64 {
			runtime.Gosched()
		} else {
			time.Sleep(20 * time.Microsecond)
		}
	}
	for {
		if pending, _ := p.netPending(); !pending {
			return p.failure()
		}
		time.Sleep(20 * time.Microsecond)
	}
}
