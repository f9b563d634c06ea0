package cudaexec

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"sync"
	"time"

	proxyapi "github.com/msccl-go/msccl-go/internal/proxy"
	"github.com/msccl-go/msccl-go/kernels"
	"github.com/msccl-go/msccl-go/runtime/cuda"
)

// proxy serves the port channels of every rank through cuda.PortProxy
// (a C loop, so Go's scheduler cannot starve it) on a goroutine locked to
// its thread. That thread owns a CUDA context of its own (made there,
// destroyed there) with the queues' copy streams: a context's streams
// share its CUDA_DEVICE_MAX_CONNECTIONS hardware queues, and a proxy copy
// on a queue shared with a stream that waits for the ranks' kernels (the
// caller's join, a fork for the next collective, a graph's internal
// streams) deadlocks with those kernels. Another context's queues are not
// shared with them, whatever CUDA_DEVICE_MAX_CONNECTIONS says.
type proxy struct {
	e       *Executor
	ranks   []*proxyRank
	pp      proxyServer
	handler *handlerProxy // pp when a ProxyHandler serves the queues
	wg      sync.WaitGroup
	mu      sync.Mutex
	failure error
}

type proxyRank struct {
	head cuda.DevicePtr // device: requests pushed so far
	fifo []byte         // mapped: entries, tail, flushed
	size uint64
}

func startProxy(e *Executor, remote [][]*uint64) (*proxy, error) {
	p := &proxy{e: e}
	ready := make(chan error, 1)
	p.wg.Add(1)
	go p.loop(remote, ready)
	if err := <-ready; err != nil {
		p.wg.Wait()
		return nil, err
	}
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

// loop makes the proxy's context and streams on its own locked thread,
// reports on ready, serves until stop, and tears them down on the same
// thread (a context's streams are destroyed where it is current).
func (p *proxy) loop(remote [][]*uint64, ready chan<- error) {
	defer p.wg.Done()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	pctx, err := p.e.ctx.Device().NewContext()
	if err != nil {
		ready <- fmt.Errorf("port proxy: a context of its own: %w", err)
		return
	}
	defer pctx.Destroy()
	var qs []cuda.ProxyQueue
	var qranks []int
	var qpeers [][]int
	var streams []*cuda.Stream
	defer func() {
		for _, s := range streams {
			if err := s.Synchronize(); err != nil {
				p.fail(err)
			}
			s.Destroy()
		}
	}()
	for r, rs := range p.e.ranks {
		if rs.fifo == nil {
			continue
		}
		s, err := cuda.NewStream(true)
		if err != nil {
			ready <- err
			return
		}
		streams = append(streams, s)
		p.ranks = append(p.ranks, &proxyRank{head: rs.fifoHead, fifo: rs.fifo.Bytes, size: uint64(p.e.opt.FifoEntries)})
		qs = append(qs, cuda.ProxyQueue{FIFO: rs.fifo, Size: uint64(p.e.opt.FifoEntries), Stream: s, Remote: remote[r]})
		qranks = append(qranks, r)
		qpeers = append(qpeers, rs.peers[1])
	}
	if h := p.e.opt.ProxyHandler; h != nil {
		hp, err := newHandlerProxy(qs, qranks, qpeers, p.e.ctx, h)
		if err != nil {
			ready <- err
			return
		}
		p.handler, p.pp = hp, hp
	} else {
		pp, err := cuda.NewPortProxy(qs, p.e.ctx)
		if err != nil {
			ready <- err
			return
		}
		p.pp = pp
	}
	pp := p.pp
	ready <- nil
	if err := pp.Run(); err != nil {
		p.fail(err)
	}
}

// drain waits until the proxy has taken every request the kernels pushed
// (heads read from the device) and their copies are complete (the proxy's
// Done count, learned from its stream on its own thread), so that buffers
// may be read or freed. Call it only after the ranks' kernels have
// finished.
func (p *proxy) drain(heads []uint64, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for i := range p.ranks {
		for p.pp.Done(i) < heads[i] {
			if err := p.err(); err != nil {
				return err
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("proxy: %d port-channel requests of queue %d not complete after %v", heads[i]-p.pp.Done(i), i, timeout)
			}
			time.Sleep(10 * time.Microsecond)
		}
	}
	return p.err()
}

// stop ends the loop, which finishes its copies and frees its streams and
// context, and returns the first failure.
func (p *proxy) stop() error {
	p.pp.Stop()
	if p.handler != nil {
		// A user's handler may block: give up on it after the watchdog's
		// time (its thread, context and streams leak with it) rather
		// than hang.
		if !proxyapi.WaitTimeout(&p.wg, p.e.opt.Timeout) {
			return fmt.Errorf("port proxy did not stop within %v: %s", p.e.opt.Timeout, p.handler.busy())
		}
	} else {
		p.wg.Wait()
	}
	p.pp.Free()
	p.ranks = nil
	return p.err()
}

// describe states each queue's progress for a hang report: requests the
// rank's kernels pushed (read from the device after the watchdog ended
// them), taken by the proxy, and complete; the signals and flushes held
// for copies; and the stream's last answer. Pushed > taken with the next
// entry's tag unwritten or out of sequence means the requests never
// reached the proxy; taken > complete with the stream not ready means
// their copies never ran.
func (p *proxy) describe() []string {
	var out []string
	for i, pr := range p.ranks {
		st := p.pp.State(i)
		pushed := "?"
		var w [8]byte
		if err := cuda.MemcpyDtoH(w[:], pr.head); err == nil {
			pushed = fmt.Sprint(binary.LittleEndian.Uint64(w[:]))
		}
		next := "unwritten"
		if st.NextTag != 0 {
			seq := st.NextTag & (1<<kernels.FifoSeqBits - 1)
			next = fmt.Sprintf("written, sequence %d (want %d)", seq, (st.Taken+1)&(1<<kernels.FifoSeqBits-1))
		}
		// The word a flush waits on, as the kernel would read it now.
		flushed := binary.LittleEndian.Uint64(pr.fifo[(4*pr.size+1)*8:])
		if p.handler != nil {
			if b := p.handler.busy(); b != "" {
				out = append(out, b)
			}
		}
		out = append(out, fmt.Sprintf("port proxy queue %d: pushed %s, taken %d, copies complete %d, %d signals/flushes held, flushed word %d; stream query %d, not ready %d times in a row; next entry %s",
			i, pushed, st.Taken, st.Done, st.Pending, flushed, st.LastQuery, st.NotReady, next))
	}
	return out
}
