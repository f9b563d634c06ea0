package msccl

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
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
// kernel with a ProxyHandler, on a goroutine of this process locked to
// its OS thread (the cuda device's copies are issued from a context
// current there).
type portProxy struct {
	c      *RankComm
	dev    portDevice
	fifo   *kernels.FIFO
	chans  []comm.UserChannel
	local  *Registration
	remote *Registration
	h      ProxyHandler

	quit    atomic.Bool
	wg      sync.WaitGroup
	serving proxyapi.Serving
	mu      sync.Mutex
	err     error
	flushes flushTrack
}

// portDevice is what a port proxy does differently on each device: where
// the FIFO lives and how a put, a signal and a flush move data. hostPort
// serves the cpu device, cudaPort the cuda device.
type portDevice interface {
	// alloc makes the FIFO (entries, tail, flushed) and its head word
	// and returns the FIFO's memory as this process reads it and the
	// kernel's struct Fifo. In the rank's context.
	alloc(entries uint64) ([]byte, kernels.Fifo, error)
	// begin prepares the serving goroutine's locked OS thread; end
	// undoes it there once serving is over, reporting what was left
	// unfinished.
	begin() error
	end() error
	// view is the n bytes at addr of m as this process maps them (nil
	// where they are device memory: a Trigger then carries addresses
	// only).
	view(m comm.Memory, addr, n uint64) []byte
	// put copies a put trigger's bytes (its addresses checked against
	// the registered buffers); signal raises the peer's inbound word of
	// channel ch by one, ordered behind every put issued before it.
	put(t *Trigger) error
	signal(ch int, to comm.Loc) error
	// complete returns once every put and signal issued so far is done:
	// a flush is published after it.
	complete() error
	// free releases what alloc made. In the rank's context, after end.
	free() error
	// describe says what a hang report should know of the device's
	// proxy ("" for nothing).
	describe() string
}

// PortChannels builds one port channel to each of peers (pairing as
// MemoryChannels does), whose requests a proxy goroutine of this process
// serves with h (nil: DefaultProxyHandler). Collective. A channel's src
// is local's buffer, dst the peer's buffer of remote; puts copy between
// them and a signal raises the peer's semaphore once the puts before it
// are done. On the cpu device the producers are host code (kernels.Push);
// on cuda a kernel's msccl::PortChannel, whose puts the proxy copies
// with the copy engines (docs/primitives.md, "Port channels on cuda").
func (c *RankComm) PortChannels(ctx context.Context, peers []int, local, remote *Registration, h ProxyHandler) (*Handles, error) {
	hs, err := c.userChannels(ctx, "PortChannels", "", peers, local, remote)
	if err != nil {
		return nil, err
	}
	if h == nil {
		h = DefaultProxyHandler{}
	}
	p := &portProxy{c: c, chans: hs.chans.Chans, local: local, remote: remote, h: h}
	p.flushes.chans = make([]chanPuts, len(peers))
	if c.gpu != nil {
		_, builtin := h.(DefaultProxyHandler)
		p.dev = newCUDAPort(c.gpu.Context(), !builtin)
	} else {
		p.dev = &hostPort{}
	}
	err = c.do(func() error {
		watch, err := hs.newWatch()
		if err != nil {
			return err
		}
		hs.port = p // Close frees what alloc made, even in part
		mem, fifo, err := p.dev.alloc(PortFifoEntries)
		if err != nil {
			return err
		}
		if p.fifo, err = kernels.NewFIFO(mem, PortFifoEntries); err != nil {
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
	if err == nil {
		err = p.start()
	}
	if err != nil {
		hs.Close()
		return nil, fmt.Errorf("msccl: PortChannels: %w", err)
	}
	return hs, nil
}

// fifoAt is the kernel's view of a FIFO of size entries at entries (the
// tail and flushed words follow them) whose head word is at head.
func fifoAt(entries, head, size uint64) kernels.Fifo {
	tail := entries + 8*kernels.FifoEntryWords*size
	return kernels.Fifo{Entries: entries, Head: head, Tail: tail, Flushed: tail + 8, Size: size}
}

// start runs serve on a goroutine of its own and returns once its
// thread is ready (or why it is not).
func (p *portProxy) start() error {
	ready := make(chan error, 1)
	p.wg.Add(1)
	go p.serve(ready)
	return <-ready
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
func (p *portProxy) serve(ready chan<- error) {
	defer p.wg.Done()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := p.dev.begin(); err != nil {
		ready <- fmt.Errorf("rank %d's port proxy: %w", p.c.Rank(), err)
		return
	}
	ready <- nil
	defer func() {
		if err := p.dev.end(); err != nil {
			p.fail(fmt.Errorf("rank %d's port proxy: finishing its copies: %w", p.c.Rank(), err))
		}
	}()
	for !p.quit.Load() {
		e, ok := p.fifo.Pop()
		if !ok {
			p.flushes.empty()
			time.Sleep(5 * time.Microsecond)
			continue
		}
		if err := p.handle(e); err != nil {
			p.fail(fmt.Errorf("rank %d's port proxy: %w", p.c.Rank(), err))
			return
		}
		p.flushes.served(e)
	}
}

func (p *portProxy) handle(e kernels.Entry) error {
	if e.Kind == kernels.FifoFlush {
		// Every earlier request was handled before; its copies may
		// still be running on the device.
		if err := p.dev.complete(); err != nil {
			return fmt.Errorf("request %d (flush): %w", e.Seq, err)
		}
		p.fifo.Flushed(e.Seq)
		return nil
	}
	if (e.Kind != kernels.FifoPut && e.Kind != kernels.FifoSignal) || e.Chan >= len(p.chans) {
		return fmt.Errorf("request %d has kind %d on channel %d (%d port channels)", e.Seq, e.Kind, e.Chan, len(p.chans))
	}
	ch := p.chans[e.Chan]
	t := Trigger{Rank: p.c.Rank(), Peer: ch.Peer, Channel: e.Chan, Seq: e.Seq}
	var failed error
	note := func(err error) {
		if err != nil && failed == nil {
			failed = err
		}
	}
	signal := func() { note(p.dev.signal(e.Chan, ch.Remote)) }
	perform := signal
	if e.Kind == kernels.FifoPut {
		t.Kind, t.SrcPtr, t.DstPtr, t.Bytes = TriggerPut, e.Src, e.Dst, e.Size
		src, dst := p.local.r.Local, p.remote.r.Peers[ch.Peer]
		if err := within(e.Src, e.Size, src); err != nil {
			return fmt.Errorf("request %d: source: %w", e.Seq, err)
		}
		if err := within(e.Dst, e.Size, dst); err != nil {
			return fmt.Errorf("request %d: destination: %w", e.Seq, err)
		}
		t.Src, t.Dst = p.dev.view(src, e.Src, e.Size), p.dev.view(dst, e.Dst, e.Size)
		perform = func() { note(p.dev.put(&t)) }
	} else {
		t.Kind = TriggerSignal
	}
	res := p.serving.Serve(p.h, proxyapi.NewTrigger(t, perform, signal))
	return errors.Join(res.Err, failed)
}

// within says why [addr, addr+n) is not inside m, the registered buffer
// a request must stay in (nil when it is).
func within(addr, n uint64, m comm.Memory) error {
	if m == nil {
		return fmt.Errorf("%#x: no mapped buffer", addr)
	}
	base, size := memAddr(m), uint64(m.Size())
	if addr < base || addr+n > base+size || addr+n < addr {
		return fmt.Errorf("[%#x, +%d) is outside the registered buffer [%#x, +%d)", addr, n, base, size)
	}
	return nil
}

// stop ends serve, giving up on a handler blocked past the timeout (the
// FIFO must then stay: it may still wake; otherwise dev.free frees it).
func (p *portProxy) stop(timeout time.Duration) error {
	p.quit.Store(true)
	if !proxyapi.WaitTimeout(&p.wg, timeout) {
		return fmt.Errorf("msccl: rank %d's port proxy did not stop within %v: %s", p.c.Rank(), timeout, p.serving.Busy(0))
	}
	return nil
}

// report is the proxy's part of Handles.Check: its failure; otherwise
// the handler it is blocked in when a wait of the kernel timed out
// (stuck), and the port channels whose last puts no flush followed.
func (p *portProxy) report(stuck bool) error {
	if err := p.failure(); err != nil {
		return err // the requests after the failed one were never served
	}
	var errs []error
	if stuck {
		var why []string
		if b := p.serving.Busy(0); b != "" {
			why = append(why, b)
		}
		if d := p.dev.describe(); d != "" {
			why = append(why, d)
		}
		if len(why) > 0 {
			errs = append(errs, fmt.Errorf("rank %d's port proxy: %s", p.c.Rank(), strings.Join(why, "; ")))
		}
	}
	if u := p.unflushed(unflushedWait); u != nil {
		errs = append(errs, u)
	}
	return errors.Join(errs...)
}

// unflushedWait bounds how long Check waits for the proxy to serve what
// an ended kernel left in its FIFO before judging its flushes (a proxy
// still busy after it, or a handler busy on one request for a tenth of
// it, gets no verdict).
const unflushedWait = time.Second

// unflushed waits, up to within, until the serving goroutine has found
// the FIFO empty in a poll that began after the call (the kernel had
// ended by then, so every request it pushed has been served), and
// reports the channels whose last puts no flush on the channel followed.
// nil when there are none, or when the proxy did not get there in time.
func (p *portProxy) unflushed(within time.Duration) *UnflushedError {
	// Two more empty polls: the first may have begun before the call.
	want := p.flushes.emptyPolls() + 2
	deadline := time.Now().Add(within)
	for p.flushes.emptyPolls() < want {
		// A handler blocked on one request (the stuck report names it)
		// gets no verdict either, without making Check wait the whole
		// bound.
		if p.failure() != nil || time.Now().After(deadline) || p.serving.Busy(within/10) != "" {
			return nil
		}
		time.Sleep(20 * time.Microsecond)
	}
	return p.flushes.report(p.c.Rank(), p.chans)
}

// flushTrack follows, for each port channel, the puts the proxy served
// after the channel's last flush. Only the serving goroutine writes it.
type flushTrack struct {
	mu        sync.Mutex
	chans     []chanPuts // by channel index
	lastFlush uint64     // request number of the last flush on any channel
	flushChan int        // its channel
	empties   uint64     // polls that found the FIFO empty
}

// chanPuts are a channel's puts since its last flush.
type chanPuts struct {
	puts, bytes uint64
	last        uint64 // request number of the latest
}

func (f *flushTrack) empty() {
	f.mu.Lock()
	f.empties++
	f.mu.Unlock()
}

func (f *flushTrack) emptyPolls() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.empties
}

// served notes a request the handler is done with.
func (f *flushTrack) served(e kernels.Entry) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var c *chanPuts
	if e.Chan < len(f.chans) {
		c = &f.chans[e.Chan]
	}
	switch {
	case e.Kind == kernels.FifoFlush:
		f.lastFlush, f.flushChan = e.Seq, e.Chan
		if c != nil {
			*c = chanPuts{}
		}
	case e.Kind == kernels.FifoPut && c != nil:
		c.puts++
		c.bytes += e.Size
		c.last = e.Seq
	}
}

func (f *flushTrack) report(rank int, chans []comm.UserChannel) *UnflushedError {
	f.mu.Lock()
	defer f.mu.Unlock()
	var u *UnflushedError
	for i, c := range f.chans {
		if c.puts == 0 {
			continue
		}
		if u == nil {
			u = &UnflushedError{Rank: rank}
		}
		ch := UnflushedChannel{Channel: i, Peer: chans[i].Peer, Puts: c.puts, Bytes: c.bytes, CompletedBy: -1}
		if f.lastFlush > c.last {
			ch.CompletedBy = f.flushChan
		}
		u.Channels = append(u.Channels, ch)
	}
	return u
}

// UnflushedError is Handles.Check's report of port channels whose last
// puts (put, putWithSignal) no flush on the same channel followed, once
// the kernel had ended and the proxy had served every request it pushed.
// A put's copy may run until a flush returns (on cuda the built-in proxy
// queues it on a stream until then), so the kernel, its next launch or
// the host may overwrite the source before it is read. A program that
// flushes in a later launch on purpose tells this error apart with
// errors.As; a flush on the channel clears it.
type UnflushedError struct {
	Rank     int
	Channels []UnflushedChannel
}

// UnflushedChannel is one port channel of an UnflushedError: its index
// in the handle array, its peer, and the puts and bytes since its last
// flush.
type UnflushedChannel struct {
	Channel, Peer int
	Puts, Bytes   uint64
	// CompletedBy is the channel of a later flush that completed these
	// puts too (-1: none did). That is enough where the thread that
	// pushed the puts pushed that flush; Check cannot tell, so it
	// reports them still.
	CompletedBy int
}

func (e *UnflushedError) Error() string {
	s := make([]string, len(e.Channels))
	for i, c := range e.Channels {
		s[i] = fmt.Sprintf("rank %d channel %d (peer rank %d): %d puts (%d bytes) with no flush after them", e.Rank, c.Channel, c.Peer, c.Puts, c.Bytes)
		if c.CompletedBy >= 0 {
			s[i] += fmt.Sprintf(" on the channel (a later flush on channel %d completed them, which covers only puts pushed by the thread that flushed)", c.CompletedBy)
		}
	}
	return strings.Join(s, "; ") + ": flush() before reusing a put's source or ending the kernel"
}

// hostPort is the cpu device's: the FIFO in Go memory that the rank's
// host producers write, puts copied and signals added by the proxy's
// goroutine.
type hostPort struct {
	words []uint64 // the FIFO's words, then the head word
}

func (d *hostPort) alloc(entries uint64) ([]byte, kernels.Fifo, error) {
	n := kernels.FIFOBytes(entries)
	d.words = make([]uint64, n/8+1)
	mem := unsafe.Slice((*byte)(unsafe.Pointer(&d.words[0])), n)
	base := uint64(uintptr(unsafe.Pointer(&d.words[0])))
	return mem, fifoAt(base, base+uint64(n), entries), nil
}

// fifoMem is the FIFO's memory and head word as this process writes
// them (a producer on the host: kernels.Push).
func (d *hostPort) fifoMem() ([]byte, *atomic.Uint64) {
	n := len(d.words) - 1
	return unsafe.Slice((*byte)(unsafe.Pointer(&d.words[0])), 8*n), (*atomic.Uint64)(unsafe.Pointer(&d.words[n]))
}

func (d *hostPort) begin() error     { return nil }
func (d *hostPort) end() error       { return nil }
func (d *hostPort) complete() error  { return nil }
func (d *hostPort) free() error      { return nil }
func (d *hostPort) describe() string { return "" }

func (d *hostPort) view(m comm.Memory, addr, n uint64) []byte {
	h, ok := m.(interface{ Bytes() []byte })
	if !ok {
		return nil
	}
	base := memAddr(m) // within checked the range
	return h.Bytes()[addr-base : addr-base+n]
}

func (d *hostPort) put(t *Trigger) error {
	if t.Src == nil || t.Dst == nil {
		return fmt.Errorf("%s: its buffers are not mapped in this process", t)
	}
	copy(t.Dst, t.Src)
	return nil
}

func (d *hostPort) signal(ch int, to comm.Loc) error {
	b, ok := to.Mem.(interface{ Bytes() []byte })
	if !ok {
		return fmt.Errorf("channel %d: the peer's semaphore is not mapped here", ch)
	}
	atomic.AddUint64((*uint64)(unsafe.Pointer(&b.Bytes()[to.Off])), 1)
	return nil
}
