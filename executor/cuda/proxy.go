package cudaexec

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/msccl-go/msccl-go/runtime/cuda"
)

// proxy serves the port channels of every rank: it takes requests from
// each rank's FIFO strictly in order, issues copies on the rank's own proxy
// stream, publishes signals with a stream-ordered 64-bit write (so a signal
// lands after the copies before it) and completes flushes once the stream
// has drained.
type proxy struct {
	e       *Executor
	ranks   []*proxyRank
	quit    chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex
	failure error
}

type proxyRank struct {
	head   cuda.DevicePtr // device: requests pushed so far
	fifo   []byte         // mapped: entries, tail, flushed
	size   uint64
	tail   uint64
	stream *cuda.Stream
	remote []cuda.DevicePtr // per port channel: the peer's inbound token
	tokens []uint64         // signals sent per port channel
}

func startProxy(e *Executor, remote [][2][]cuda.DevicePtr) (*proxy, error) {
	p := &proxy{e: e, quit: make(chan struct{})}
	for r, rs := range e.ranks {
		if rs.fifo == nil {
			continue
		}
		s, err := cuda.NewStream(true)
		if err != nil {
			p.destroy()
			return nil, err
		}
		p.ranks = append(p.ranks, &proxyRank{head: rs.fifoHead, fifo: rs.fifo.Bytes, size: uint64(e.opt.FifoEntries), stream: s,
			remote: remote[r][1], tokens: make([]uint64, rs.nchan[1])})
	}
	p.wg.Add(1)
	go p.loop()
	return p, nil
}

func (p *proxy) fail(err error) {
	p.mu.Lock()
	if p.failure == nil {
		p.failure = err
	}
	p.mu.Unlock()
}

func (p *proxy) err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failure
}

func (p *proxy) loop() {
	defer p.wg.Done()
	// Driver calls need the context current on this thread.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := p.e.ctx.SetCurrent(); err != nil {
		p.fail(err)
		return
	}
	idle := 0
	for {
		select {
		case <-p.quit:
			return
		default:
		}
		busy := false
		for _, pr := range p.ranks {
			for n := 0; n < 64; n++ { // bounded, so one busy rank does not starve the others
				ok, err := pr.step()
				if err != nil {
					p.fail(err)
					return
				}
				if !ok {
					break
				}
				busy = true
			}
		}
		if busy {
			idle = 0
			continue
		}
		// Spin briefly (requests come in bursts), then back off so an idle
		// executor does not hold a core.
		idle++
		if idle > 2000 {
			time.Sleep(50 * time.Microsecond)
		} else {
			runtime.Gosched()
		}
	}
}

// step handles at most one request; ok reports whether there was one.
func (pr *proxyRank) step() (bool, error) {
	slot := int(pr.tail&(pr.size-1)) * 32
	tag := atomic.LoadUint64(u64At(pr.fifo, slot+24))
	if tag == 0 || tag&0xffffffffff != (pr.tail+1)&0xffffffffff {
		return false, nil
	}
	src := atomic.LoadUint64(u64At(pr.fifo, slot))
	dst := atomic.LoadUint64(u64At(pr.fifo, slot+8))
	size := atomic.LoadUint64(u64At(pr.fifo, slot+16))
	kind, ch := tag>>56, int(tag>>40&0xffff)
	atomic.StoreUint64(u64At(pr.fifo, slot+24), 0)
	idx := pr.tail
	pr.tail++
	atomic.StoreUint64(u64At(pr.fifo, int(pr.size)*32), pr.tail)
	switch kind {
	case 1: // put
		if err := cuda.MemcpyAsync(cuda.DevicePtr(dst), cuda.DevicePtr(src), int64(size), pr.stream); err != nil {
			return true, fmt.Errorf("proxy put of %d bytes: %w", size, err)
		}
	case 2: // signal
		if ch >= len(pr.remote) {
			return true, fmt.Errorf("proxy: signal on unknown port channel %d", ch)
		}
		pr.tokens[ch]++
		if err := pr.stream.WriteValue64(pr.remote[ch], pr.tokens[ch]); err != nil {
			return true, fmt.Errorf("proxy signal: %w", err)
		}
	case 3: // flush
		if err := pr.stream.Synchronize(); err != nil {
			return true, fmt.Errorf("proxy flush: %w", err)
		}
		atomic.StoreUint64(u64At(pr.fifo, int(pr.size)*32+8), idx+1)
	default:
		return true, fmt.Errorf("proxy: unknown request kind %d", kind)
	}
	return true, nil
}

// drain waits until the proxy has taken every request the kernels pushed
// (heads read from the device) and its copies are complete, so that
// buffers may be read or freed. Call it only after the ranks' kernels have
// finished.
func (p *proxy) drain(heads []uint64, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for i, pr := range p.ranks {
		for atomic.LoadUint64(u64At(pr.fifo, int(pr.size)*32)) < heads[i] {
			if err := p.err(); err != nil {
				return err
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("proxy: %d port-channel requests still pending after %v", heads[i]-atomic.LoadUint64(u64At(pr.fifo, int(pr.size)*32)), timeout)
			}
			time.Sleep(10 * time.Microsecond)
		}
		if err := pr.stream.Synchronize(); err != nil {
			return err
		}
	}
	return p.err()
}

func (p *proxy) destroy() {
	for _, pr := range p.ranks {
		pr.stream.Destroy()
	}
	p.ranks = nil
}

func (p *proxy) stop() error {
	close(p.quit)
	p.wg.Wait()
	var first error
	for _, pr := range p.ranks {
		if err := pr.stream.Synchronize(); err != nil && first == nil {
			first = err
		}
	}
	p.destroy()
	if first == nil {
		first = p.err()
	}
	return first
}
