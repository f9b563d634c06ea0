package msccl

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	proxyapi "github.com/msccl-go/msccl-go/internal/proxy"
	"github.com/msccl-go/msccl-go/kernels"
	"github.com/msccl-go/msccl-go/runtime/comm"
)

// PortFifoEntries is the size of the request queue of a rank's port
// channels in a user's kernel.
const PortFifoEntries = 1024

// portProxy serves the FIFO of one set of port channels in a user's
// kernel with a ProxyHandler, on a goroutine of this process.
type portProxy struct {
	c      *RankComm
	fifo   *kernels.FIFO
	chans  []comm.UserChannel
	local  *Registration
	remote *Registration
	h      ProxyHandler

	// The FIFO's words, then the head word the producer counts on.
	words []uint64

	quit    atomic.Bool
	wg      sync.WaitGroup
	serving proxyapi.Serving
	mu      sync.Mutex
	err     error
}

// PortChannels builds one port channel to each of peers (pairing as
// MemoryChannels does), whose requests a proxy goroutine of this process
// serves with h (nil: DefaultProxyHandler). Collective. A channel's src
// is local's buffer, dst the peer's buffer of remote; puts copy between
// them and a signal raises the peer's semaphore once the puts before it
// are done. This build serves them on the cpu device (whose producers are
// host code: kernels.Push); on cuda they are refused, with the reason.
func (c *RankComm) PortChannels(ctx context.Context, peers []int, local, remote *Registration, h ProxyHandler) (*Handles, error) {
	why := ""
	if c.gpu != nil {
		why = "port channels in a user's kernel are served on the cpu device only in this build (the cuda proxy for them, which must signal device memory without queueing behind the kernel, is not written)"
	}
	hs, err := c.userChannels(ctx, "PortChannels", why, peers, local, remote)
	if err != nil {
		return nil, err
	}
	if h == nil {
		h = DefaultProxyHandler{}
	}
	p := &portProxy{c: c, chans: hs.chans.Chans, local: local, remote: remote, h: h}
	hs.port = p
	err = c.do(func() error {
		watch, err := hs.newWatch()
		if err != nil {
			return err
		}
		var fifo kernels.Fifo
		if fifo, err = p.alloc(); err != nil {
			return err
		}
		ph := make([]kernels.PortChannelHandle, len(peers))
		for i, ch := range hs.chans.Chans {
			ph[i] = kernels.PortChannelHandle{
				Sem: kernels.SemaphoreHandle{Chan: kernels.Chan{
					Inbound: locAddr(ch.Inbound), Expected: locAddr(ch.Expected), Peer: int32(ch.Peer), Index: uint32(i),
				}, Watch: watch},
				Fifo: fifo,
				Dst:  memAddr(remote.r.Peers[ch.Peer]),
				Src:  memAddr(local.r.Local),
			}
		}
		return place(hs, ph)
	})
	if err != nil {
		hs.Close()
		return nil, fmt.Errorf("msccl: PortChannels: %w", err)
	}
	p.wg.Add(1)
	go p.serve()
	return hs, nil
}

// alloc makes the FIFO and its head word and returns them as the
// kernel's struct Fifo sees them.
func (p *portProxy) alloc() (kernels.Fifo, error) {
	n := kernels.FIFOBytes(PortFifoEntries)
	p.words = make([]uint64, n/8+1) // the FIFO, then the head word
	mem := unsafe.Slice((*byte)(unsafe.Pointer(&p.words[0])), n)
	f := kernels.Fifo{Size: PortFifoEntries, Entries: uint64(uintptr(unsafe.Pointer(&p.words[0])))}
	f.Head = f.Entries + uint64(n)
	f.Tail = f.Entries + 8*kernels.FifoEntryWords*PortFifoEntries
	f.Flushed = f.Tail + 8
	var err error
	p.fifo, err = kernels.NewFIFO(mem, PortFifoEntries)
	return f, err
}

// fifoMem is the FIFO's memory and head word as this process writes
// them (a producer on the host: kernels.Push).
func (p *portProxy) fifoMem() ([]byte, *atomic.Uint64) {
	n := kernels.FIFOBytes(PortFifoEntries)
	return unsafe.Slice((*byte)(unsafe.Pointer(&p.words[0])), n), (*atomic.Uint64)(unsafe.Pointer(&p.words[n/8]))
}

func (p *portProxy) fail(err error) {
	p.mu.Lock()
	if p.err == nil {
		p.err = err
	}
	p.mu.Unlock()
}

func (p *portProxy) failure() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// serve pops requests until stop; the first failure ends it (Check
// reports it) and the kernel's flushes then time out under its watchdog.
func (p *portProxy) serve() {
	defer p.wg.Done()
	for !p.quit.Load() {
		e, ok := p.fifo.Pop()
		if !ok {
			time.Sleep(5 * time.Microsecond)
			continue
		}
		if err := p.handle(e); err != nil {
			p.fail(fmt.Errorf("rank %d's port proxy: %w", p.c.Rank(), err))
			return
		}
	}
}

func (p *portProxy) handle(e kernels.Entry) error {
	if e.Kind == kernels.FifoFlush {
		p.fifo.Flushed(e.Seq) // every earlier request was handled before
		return nil
	}
	if (e.Kind != kernels.FifoPut && e.Kind != kernels.FifoSignal) || e.Chan >= len(p.chans) {
		return fmt.Errorf("request %d has kind %d on channel %d (%d port channels)", e.Seq, e.Kind, e.Chan, len(p.chans))
	}
	ch := p.chans[e.Chan]
	t := Trigger{Rank: p.c.Rank(), Peer: ch.Peer, Channel: e.Chan, Seq: e.Seq}
	var failed error
	signal := func() {
		if err := p.signal(e.Chan); err != nil && failed == nil {
			failed = err
		}
	}
	perform := signal
	if e.Kind == kernels.FifoPut {
		t.Kind, t.SrcPtr, t.DstPtr, t.Bytes = TriggerPut, e.Src, e.Dst, e.Size
		var err error
		if t.Src, err = p.bytesAt(e.Src, e.Size, p.local.r.Local); err != nil {
			return fmt.Errorf("request %d: source: %w", e.Seq, err)
		}
		if t.Dst, err = p.bytesAt(e.Dst, e.Size, p.remote.r.Peers[ch.Peer]); err != nil {
			return fmt.Errorf("request %d: destination: %w", e.Seq, err)
		}
		perform = func() { copy(t.Dst, t.Src) }
	} else {
		t.Kind = TriggerSignal
	}
	res := p.serving.Serve(p.h, proxyapi.NewTrigger(t, perform, signal))
	return errors.Join(res.Err, failed)
}

// bytesAt is [addr, addr+n) of m as this process maps it, or why not.
func (p *portProxy) bytesAt(addr, n uint64, m comm.Memory) ([]byte, error) {
	b, ok := m.(interface{ Bytes() []byte })
	if !ok || m == nil {
		return nil, fmt.Errorf("%#x: no mapped buffer", addr)
	}
	base := memAddr(m)
	if addr < base || addr+n > base+uint64(len(b.Bytes())) || addr+n < addr {
		return nil, fmt.Errorf("[%#x, +%d) is outside the registered buffer [%#x, +%d)", addr, n, base, len(b.Bytes()))
	}
	return b.Bytes()[addr-base : addr-base+n], nil
}

// signal raises the peer's semaphore of channel i by one.
func (p *portProxy) signal(i int) error {
	r := p.chans[i].Remote
	b, ok := r.Mem.(interface{ Bytes() []byte })
	if !ok {
		return fmt.Errorf("channel %d: the peer's semaphore is not mapped here", i)
	}
	atomic.AddUint64((*uint64)(unsafe.Pointer(&b.Bytes()[r.Off])), 1)
	return nil
}

// stop ends serve, giving up on a handler blocked past the timeout.
func (p *portProxy) stop(timeout time.Duration) error {
	p.quit.Store(true)
	if !proxyapi.WaitTimeout(&p.wg, timeout) {
		return fmt.Errorf("msccl: rank %d's port proxy did not stop within %v: %s", p.c.Rank(), timeout, p.serving.Busy(0))
	}
	return nil
}
