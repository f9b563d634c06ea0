package cudaexec

import (
	"fmt"
	"sync/atomic"
	"time"

	proxyapi "github.com/msccl-go/msccl-go/internal/proxy"
	"github.com/msccl-go/msccl-go/kernels"
	"github.com/msccl-go/msccl-go/runtime/cuda"
)

// proxyServer is what serves the ranks' FIFOs: cuda.PortProxy (the C
// loop, the built-in handling) or handlerProxy (a user's
// Options.ProxyHandler, called from Go).
type proxyServer interface {
	Run() error
	Done(q int) uint64
	State(q int) cuda.ProxyState
	Stop()
	Free()
}

// handlerProxy serves the FIFOs with a proxyapi.Handler: it pops each
// request as proxy.c does (tag, then the tail word), hands it to the
// handler as a Trigger and, for a flush, publishes the flushed word once
// every earlier trigger has been handled. The default handling copies
// with cuMemcpyPeerAsync on the queue's stream (the proxy's own context)
// and waits for it, so a signal raised after it publishes the data: one
// request at a time, slower than the C loop, which is why it runs only
// when a handler is given.
type handlerProxy struct {
	qs    []cuda.ProxyQueue
	fifos []*kernels.FIFO
	ranks []int   // the rank of each queue
	peers [][]int // each queue's port channels' peers
	data  *cuda.Context
	h     proxyapi.Handler

	quit    atomic.Bool
	taken   []atomic.Uint64
	done    []atomic.Uint64
	serving proxyapi.Serving
}

func newHandlerProxy(qs []cuda.ProxyQueue, ranks []int, peers [][]int, data *cuda.Context, h proxyapi.Handler) (*handlerProxy, error) {
	hp := &handlerProxy{qs: qs, ranks: ranks, peers: peers, data: data, h: h,
		taken: make([]atomic.Uint64, len(qs)), done: make([]atomic.Uint64, len(qs))}
	for _, q := range qs {
		f, err := kernels.NewFIFO(q.FIFO.Bytes, q.Size)
		if err != nil {
			return nil, err
		}
		hp.fifos = append(hp.fifos, f)
	}
	return hp, nil
}

// Run serves until Stop, on the calling (locked) thread; the first
// failure, a handler's included, ends it.
func (hp *handlerProxy) Run() error {
	for !hp.quit.Load() {
		busy := false
		for q := range hp.qs {
			ok, err := hp.step(q)
			if err != nil {
				return err
			}
			busy = busy || ok
		}
		if !busy {
			time.Sleep(5 * time.Microsecond)
		}
	}
	return nil
}

// step serves at most one request of queue q.
func (hp *handlerProxy) step(q int) (bool, error) {
	f := hp.fifos[q]
	e, ok := f.Pop()
	if !ok {
		return false, nil
	}
	hp.taken[q].Store(e.Seq)
	if e.Kind == kernels.FifoFlush {
		// Every earlier trigger was handled before this one was taken.
		f.Flushed(e.Seq)
		hp.done[q].Store(e.Seq)
		return true, nil
	}
	if (e.Kind != kernels.FifoPut && e.Kind != kernels.FifoSignal) || e.Chan >= len(hp.peers[q]) {
		return false, fmt.Errorf("port proxy: rank %d: request %d has kind %d on channel %d (%d port channels)", hp.ranks[q], e.Seq, e.Kind, e.Chan, len(hp.peers[q]))
	}
	ch := e.Chan
	t := proxyapi.Trigger{Rank: hp.ranks[q], Peer: hp.peers[q][ch], Channel: ch, Seq: e.Seq, SrcPtr: e.Src, DstPtr: e.Dst, Bytes: e.Size}
	var perform func()
	var failed error
	signal := func() { atomic.AddUint64(hp.qs[q].Remote[ch], 1) }
	if e.Kind == kernels.FifoPut {
		t.Kind = proxyapi.Put
		perform = func() { failed = hp.copy(q, e.Dst, e.Src, e.Size) }
	} else {
		t.Kind = proxyapi.Signal
		perform = signal
	}
	res := hp.serving.Serve(hp.h, proxyapi.NewTrigger(t, perform, signal))
	if res.Err == nil {
		res.Err = failed
	}
	if res.Err != nil {
		return false, fmt.Errorf("port proxy: rank %d: %w", hp.ranks[q], res.Err)
	}
	hp.done[q].Store(e.Seq)
	return true, nil
}

// copy is the default put: the ranks' memory, copied on the queue's
// stream of the proxy's context, complete when it returns.
func (hp *handlerProxy) copy(q int, dst, src, n uint64) error {
	if n == 0 {
		return nil
	}
	s := hp.qs[q].Stream
	if err := cuda.MemcpyPeerAsync(cuda.DevicePtr(dst), hp.data, cuda.DevicePtr(src), hp.data, int64(n), s); err != nil {
		return err
	}
	return s.Synchronize()
}

func (hp *handlerProxy) Done(q int) uint64 { return hp.done[q].Load() }

func (hp *handlerProxy) State(q int) cuda.ProxyState {
	return cuda.ProxyState{Taken: hp.taken[q].Load(), Done: hp.done[q].Load(), NextTag: hp.fifos[q].Peek()}
}

// busy names a handler stuck on one trigger, for a hang report.
func (hp *handlerProxy) busy() string { return hp.serving.Busy(0) }

func (hp *handlerProxy) Stop() { hp.quit.Store(true) }
func (hp *handlerProxy) Free() {}
