package cudaexec

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/msccl-go/msccl-go/internal/par"
	"github.com/msccl-go/msccl-go/internal/socket"
	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/kernels"
)

// hostNet is the socket transport's device in host memory: regions at
// made-up addresses, and streams whose copies a goroutine of their own
// runs in order a little later (so a reader that does not wait for a
// mark reads what is not there yet), logging each copy's destination to
// check the order of data and signals.
type hostNet struct {
	mu      sync.Mutex
	regions []hostRegion
	next    uint64
	log     []uint64 // destinations, in the order copies ran
	slow    bool     // streams made now copy slower than the wire
}

type hostRegion struct {
	addr uint64
	b    []byte
}

func (h *hostNet) alloc(n int) (uint64, []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.next += 1 << 32
	b := make([]byte, n)
	h.regions = append(h.regions, hostRegion{h.next, b})
	return h.next, b
}

// at is the memory at [a, a+n); call it with h.mu held.
func (h *hostNet) at(a uint64, n int64) ([]byte, error) {
	for _, r := range h.regions {
		if a >= r.addr && a+uint64(n) <= r.addr+uint64(len(r.b)) {
			return r.b[a-r.addr : a-r.addr+uint64(n)], nil
		}
	}
	return nil, fmt.Errorf("no memory at [%#x, +%d)", a, n)
}

func (h *hostNet) read(a uint64, n int64) []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	b, err := h.at(a, n)
	if err != nil {
		return nil
	}
	return bytes.Clone(b)
}

func (h *hostNet) word(a uint64) uint64 {
	if b := h.read(a, 8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

func (h *hostNet) stage(n int) (*netStage, error) {
	a, b := h.alloc(n)
	return &netStage{host: b, addr: a, free: func() error { return nil }}, nil
}

func (h *hostNet) stream(marks int) (netStream, error) {
	s := &hostStream{h: h, jobs: make(chan [3]uint64, 1024), marks: make([]uint64, marks), slow: h.slow}
	s.cond = sync.NewCond(&s.mu)
	go s.run()
	return s, nil
}

type hostStream struct {
	h      *hostNet
	jobs   chan [3]uint64 // dst, src, n
	mu     sync.Mutex
	cond   *sync.Cond
	queued uint64
	ran    uint64
	marks  []uint64
	err    error
	slow   bool
}

func (s *hostStream) run() {
	for j := range s.jobs {
		if s.slow {
			time.Sleep(time.Duration(2*j[2]) * time.Nanosecond)
		}
		s.h.mu.Lock()
		d, err := s.h.at(j[0], int64(j[2]))
		var sb []byte
		if err == nil {
			sb, err = s.h.at(j[1], int64(j[2]))
		}
		if err == nil {
			copy(d, sb)
			s.h.log = append(s.h.log, j[0])
		}
		s.h.mu.Unlock()
		s.mu.Lock()
		s.ran++
		if err != nil && s.err == nil {
			s.err = err
		}
		s.cond.Broadcast()
		s.mu.Unlock()
	}
}

func (s *hostStream) copy(dst, src uint64, n int64) error {
	s.mu.Lock()
	s.queued++
	s.mu.Unlock()
	s.jobs <- [3]uint64{dst, src, uint64(n)}
	return nil
}

func (s *hostStream) mark(i int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.marks[i] = s.queued
	return nil
}

func (s *hostStream) until(n uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.ran < n {
		s.cond.Wait()
	}
	return s.err
}

func (s *hostStream) wait(i int) error {
	s.mu.Lock()
	n := s.marks[i]
	s.mu.Unlock()
	return s.until(n)
}

func (s *hostStream) sync() error {
	s.mu.Lock()
	n := s.queued
	s.mu.Unlock()
	return s.until(n)
}

func (s *hostStream) destroy() error {
	err := s.sync()
	close(s.jobs)
	return err
}

// toTarget hands one connection's requests to a receiver, as the
// communicator's dispatch does.
type toTarget struct {
	r    *netRecv
	peer int
}

func (d toTarget) Put(_ uint32, buf uint16, off uint64, data []byte) error {
	return d.r.NetPut(d.peer, buf, off, data)
}
func (d toTarget) Signal(_ uint32, ch uint32) error { return d.r.NetSignal(d.peer, ch) }

// fakeKernel pushes FIFO requests as the kernel's fifo_push does.
type fakeKernel struct {
	fifo []uint64
	size uint64
	head atomic.Uint64
}

func (k *fakeKernel) push(t *testing.T, kind uint64, ch int, src, dst, n uint64) uint64 {
	idx := k.head.Add(1) - 1
	deadline := time.Now().Add(5 * time.Second)
	for idx >= atomic.LoadUint64(&k.fifo[kernels.FifoEntryWords*k.size])+k.size {
		if time.Now().After(deadline) {
			t.Fatalf("FIFO full at request %d", idx)
		}
		time.Sleep(time.Microsecond)
	}
	e := k.fifo[kernels.FifoEntryWords*(idx&(k.size-1)):]
	atomic.StoreUint64(&e[0], src)
	atomic.StoreUint64(&e[1], dst)
	atomic.StoreUint64(&e[2], n)
	atomic.StoreUint64(&e[3], kind<<kernels.FifoKindShift|uint64(ch)<<kernels.FifoChanShift|(idx+1)&(1<<kernels.FifoSeqBits-1))
	return idx
}

func (k *fakeKernel) flushed() uint64 {
	return atomic.LoadUint64(&k.fifo[kernels.FifoEntryWords*k.size+1])
}

// netPair connects rank 0 (sender, on node a) to rank 1 (receiver, on
// node b) over loopback TCP: rank 0's proxy reads fk's FIFO; rank 1's
// receiver writes into b, raising inbound.
type netPair struct {
	dev     *hostNet
	fk      *fakeKernel
	np      *netProxy
	nr      *netRecv
	b       *RankBuffers
	inbound uint64
	served  chan error
}

func newNetPair(t *testing.T, size uint64, bufBytes int64) *netPair {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var secret [16]byte
	copy(secret[:], "net transport test")
	ls := make([]*socket.Listener, 2)
	for r := range ls {
		l, err := socket.Listen("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		ls[r] = l
	}
	conns := make([]map[int]*socket.Conn, 2)
	errs := par.Each(2, func(r int) (err error) {
		conns[r], err = socket.Connect(ctx, ls[r], r, map[int]string{1 - r: ls[1-r].Addr("")}, secret)
		return err
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	for _, m := range conns {
		for _, c := range m {
			t.Cleanup(func() { c.Close() })
		}
	}
	np := &netPair{dev: &hostNet{}, fk: &fakeKernel{size: size}, served: make(chan error, 1)}
	np.fk.fifo = make([]uint64, kernels.FifoEntryWords*size+2)
	np.inbound, _ = np.dev.alloc(8)
	var err error
	// The receiver's copies to the device lag behind the wire, so its
	// staging slots fill up; the sender's copies out keep up.
	np.dev.slow = true
	if np.nr, err = newNetRecv(np.dev, 1, 2*time.Second, []netPort{{peer: 0, net: true, inbound: np.inbound}}); err != nil {
		t.Fatal(err)
	}
	in, _ := np.dev.alloc(int(bufBytes))
	out, _ := np.dev.alloc(int(bufBytes))
	scr, _ := np.dev.alloc(int(bufBytes))
	np.b = &RankBuffers{netID: 5, bufs: []bufSet{{}, {in: in, out: out, scratch: scr, inN: bufBytes, outN: bufBytes, scratchN: bufBytes}}}
	np.nr.register(np.b)
	np.dev.slow = false
	go func() { np.served <- conns[1][0].Serve(toTarget{np.nr, 0}) }()
	go conns[0][1].Serve(toTarget{}) // acknowledgements only
	pushed := func() (uint64, error) { return np.fk.head.Load(), nil }
	if np.np, err = startNetProxy(np.dev, 0, 1, np.fk.fifo, size, pushed, []netChan{{conn: conns[0][1], peer: 1, partner: 0}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		np.np.close()
		np.nr.close()
	})
	return np
}

func waitFor(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// The sending proxy takes the kernel's requests in FIFO order (a FIFO of
// 8 entries, so it wraps and the kernel waits for room), puts arrive in
// chunks at the named buffer and offset, each signal raises the
// receiver's inbound word only after the data before it was copied in,
// a flush completes once the puts before it were handed over, and drain
// returns once the receiver acknowledged everything.
func TestNetTransport(t *testing.T) {
	const bufBytes = 8 << 20
	p := newNetPair(t, 8, bufBytes)
	srcAddr, src := p.dev.alloc(bufBytes)
	for i := range src {
		src[i] = byte(i*7 + i>>13 + i>>20*13) // no two chunks alike
	}
	// One put of 5.5 chunks (more than the receiver's staging slots)
	// into the output at byte 4096, then a signal and a flush.
	n := uint64(11 * socket.ChunkBytes / 2)
	p.fk.push(t, kernels.FifoPut, 0, srcAddr+16, netAddr(5, int(ir.BufOutput))+4096, n)
	p.fk.push(t, kernels.FifoSignal, 0, 0, 0, 0)
	fl := p.fk.push(t, kernels.FifoFlush, 0, 0, 0, 0)
	waitFor(t, "the flush", func() bool { return p.fk.flushed() > fl })
	waitFor(t, "the signal", func() bool { return p.dev.word(p.inbound) == 1 })
	if !bytes.Equal(p.dev.read(p.b.bufs[1].out+4096, int64(n)), src[16:16+n]) {
		t.Fatal("the output does not hold what was put")
	}
	// Many small puts into scratch, each followed by a signal: 40
	// requests through a FIFO of 8.
	for i := range 20 {
		p.fk.push(t, kernels.FifoPut, 0, srcAddr+uint64(i), netAddr(5, int(ir.BufScratch))+uint64(1000*i), 1000)
		p.fk.push(t, kernels.FifoSignal, 0, 0, 0, 0)
	}
	waitFor(t, "20 more signals", func() bool { return p.dev.word(p.inbound) == 21 })
	for i := range 20 {
		if !bytes.Equal(p.dev.read(p.b.bufs[1].scratch+uint64(1000*i), 1000), src[i:i+1000]) {
			t.Fatalf("scratch put %d differs", i)
		}
	}
	// Every signal's count was written after the data put before it.
	p.dev.mu.Lock()
	var order []string
	for _, d := range p.dev.log {
		switch {
		case d == p.inbound:
			order = append(order, "S")
		case d >= p.b.bufs[1].out && d < p.b.bufs[1].out+bufBytes:
			order = append(order, "o")
		case d >= p.b.bufs[1].scratch && d < p.b.bufs[1].scratch+bufBytes:
			order = append(order, "s")
		}
	}
	p.dev.mu.Unlock()
	if got, want := strings.Join(order, ""), "ooooooS"+strings.Repeat("sS", 20); !strings.HasSuffix(got, want) {
		t.Errorf("receiver's copies in order %s, want ...%s (o, s: output, scratch chunk; S: signal)", got, want)
	}
	if err := p.np.drain(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := p.np.failure(); err != nil {
		t.Fatal(err)
	}
}

// A request the transport cannot serve fails the proxy or the
// connection with an error that says what and where, instead of writing
// anywhere: a put outside the receiver's buffer, a put to an address
// that names no other node's buffer, a request on a channel without a
// connection.
func TestNetTransportRefuses(t *testing.T) {
	t.Run("outside", func(t *testing.T) {
		p := newNetPair(t, 8, 4096)
		srcAddr, _ := p.dev.alloc(8192)
		p.fk.push(t, kernels.FifoPut, 0, srcAddr, netAddr(5, int(ir.BufInput))+1024, 4096)
		select {
		case err := <-p.served:
			if err == nil || !strings.Contains(err.Error(), "put 4096 bytes at byte 1024 of rank 1's input buffer (4096 bytes), outside it") {
				t.Errorf("receiver: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the receiver took a put outside its buffer")
		}
	})
	t.Run("unknown set", func(t *testing.T) {
		p := newNetPair(t, 8, 4096)
		srcAddr, _ := p.dev.alloc(8192)
		p.fk.push(t, kernels.FifoPut, 0, srcAddr, netAddr(6, int(ir.BufInput)), 16)
		select {
		case err := <-p.served:
			if err == nil || !strings.Contains(err.Error(), "rank 1 has no buffer set 6") {
				t.Errorf("receiver: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the receiver took a put to a set it does not have")
		}
	})
	for _, tc := range []struct {
		name string
		ch   int
		dst  uint64
		want string
	}{
		{"device address", 0, 0x7f0000001000, "not a buffer of another node's rank"},
		{"no connection", 3, netAddr(5, int(ir.BufInput)), "request 0 on port channel 3: no socket connection"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newNetPair(t, 8, 4096)
			srcAddr, _ := p.dev.alloc(64)
			p.fk.push(t, kernels.FifoPut, tc.ch, srcAddr, tc.dst, 16)
			waitFor(t, "the proxy's failure", func() bool { return p.np.failure() != nil })
			if err := p.np.failure(); !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
			// Still taken, so the kernel does not also wait for room,
			// and drain reports the failure.
			if err := p.np.drain(time.Second); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("drain: %v", err)
			}
		})
	}
}
