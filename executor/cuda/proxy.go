package cudaexec

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/msccl-go/msccl-go/runtime/cuda"
)

// proxy serves the port channels of every rank through cuda.PortProxy
// (a C loop, so Go's scheduler cannot starve it) on a goroutine locked to
// its thread with the executor's context current.
type proxy struct {
	e       *Executor
	ranks   []*proxyRank
	pp      *cuda.PortProxy
	wg      sync.WaitGroup
	mu      sync.Mutex
	failure error
}

type proxyRank struct {
	head   cuda.DevicePtr // device: requests pushed so far
	fifo   []byte         // mapped: entries, tail, flushed
	size   uint64
	stream *cuda.Stream
}

func startProxy(e *Executor, remote [][]*uint64) (*proxy, error) {
	p := &proxy{e: e}
	var qs []cuda.ProxyQueue
	for r, rs := range e.ranks {
		if rs.fifo == nil {
			continue
		}
		s, err := cuda.NewStream(true)
		if err != nil {
			p.destroy()
			return nil, err
		}
		p.ranks = append(p.ranks, &proxyRank{head: rs.fifoHead, fifo: rs.fifo.Bytes, size: uint64(e.opt.FifoEntries), stream: s})
		qs = append(qs, cuda.ProxyQueue{FIFO: rs.fifo, Size: uint64(e.opt.FifoEntries), Stream: s, Remote: remote[r]})
	}
	pp, err := cuda.NewPortProxy(qs)
	if err != nil {
		p.destroy()
		return nil, err
	}
	p.pp = pp
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
	if err := p.pp.Run(); err != nil {
		p.fail(err)
	}
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
	p.pp.Stop()
	p.wg.Wait()
	p.pp.Free()
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
