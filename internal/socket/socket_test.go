package socket

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/msccl-go/msccl-go/internal/par"
)

var testSecret = [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}

// mem is a rank's registered memory for the tests: buffers by index,
// and a token counter per port channel. Put checks the range, and a
// signal records how many bytes had landed when it arrived.
type mem struct {
	mu      sync.Mutex
	bufs    [][]byte
	landed  int64
	tokens  [4]atomic.Uint64
	atToken []int64
}

func (m *mem) Put(space uint32, buf uint16, off uint64, data []byte) error {
	if space != 5 {
		return fmt.Errorf("put into unknown space %d", space)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if int(buf) >= len(m.bufs) || off > uint64(len(m.bufs[buf])) || uint64(len(data)) > uint64(len(m.bufs[buf]))-off {
		return fmt.Errorf("put of %d bytes at %d outside buffer %d", len(data), off, buf)
	}
	copy(m.bufs[buf][off:], data)
	m.landed += int64(len(data))
	return nil
}

func (m *mem) Signal(space, ch uint32) error {
	if space != 5 {
		return fmt.Errorf("signal into unknown space %d", space)
	}
	if int(ch) >= len(m.tokens) {
		return fmt.Errorf("signal on unknown channel %d", ch)
	}
	m.mu.Lock()
	m.atToken = append(m.atToken, m.landed)
	m.mu.Unlock()
	m.tokens[ch].Add(1)
	return nil
}

// job connects n ranks over loopback, every pair a socket connection,
// and serves each rank's memory.
func job(t *testing.T, n int, bufBytes int) ([]map[int]*Conn, []*mem) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ls := make([]*Listener, n)
	addrs := map[int]string{}
	for r := range n {
		l := listen(t)
		ls[r], addrs[r] = l, l.Addr("")
	}
	conns := make([]map[int]*Conn, n)
	errs := par.Each(n, func(r int) error {
		peers := map[int]string{}
		for p, a := range addrs {
			if p != r {
				peers[p] = a
			}
		}
		var err error
		conns[r], err = Connect(ctx, ls[r], r, peers, testSecret)
		return err
	})
	mems := make([]*mem, n)
	for r := range n {
		if errs[r] != nil {
			t.Fatalf("rank %d: %v", r, errs[r])
		}
		mems[r] = &mem{}
		for range n {
			mems[r].bufs = append(mems[r].bufs, make([]byte, bufBytes))
		}
		for _, c := range conns[r] {
			go c.Serve(mems[r])
			t.Cleanup(func() { c.Close() })
		}
	}
	return conns, mems
}

// TestPutSignalFlush: every rank puts to every other rank (several chunks
// per put, both directions at once), then signals and flushes. A signal
// must find every byte put before it landed, and after the flush the
// memory must hold exactly what was put.
func TestPutSignalFlush(t *testing.T) {
	const n = 3
	size := 2*ChunkBytes + 12345
	conns, mems := job(t, n, size+64)
	data := make([][]byte, n)
	for r := range n {
		data[r] = make([]byte, size)
		rand.New(rand.NewSource(int64(r))).Read(data[r])
	}
	var wg sync.WaitGroup
	for r := range n {
		for _, c := range conns[r] {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Rank r writes buffer r of its peer.
				if _, err := c.Put(5, uint16(r), 32, data[r]); err != nil {
					t.Error(err)
					return
				}
				tk, err := c.Signal(5, uint32(r))
				if err != nil {
					t.Error(err)
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if err := c.WaitAcked(ctx, tk); err != nil {
					t.Error(err)
				}
			}()
		}
	}
	wg.Wait()
	for p := range n {
		m := mems[p]
		m.mu.Lock()
		for r := range n {
			if r == p {
				continue
			}
			if !bytes.Equal(m.bufs[r][32:32+size], data[r]) {
				t.Errorf("rank %d's buffer %d does not hold rank %d's put", p, r, r)
			}
			if got := m.tokens[r].Load(); got != 1 {
				t.Errorf("rank %d channel %d: %d tokens, want 1", p, r, got)
			}
		}
		// Each signal comes after its own put; with two writers the
		// first signal finds at least one whole put landed.
		for i, at := range m.atToken {
			if at < int64(size)*int64(i+1) {
				t.Errorf("rank %d: signal %d arrived with %d bytes landed, want at least %d", p, i, at, size*(i+1))
			}
		}
		m.mu.Unlock()
	}
}

// TestManySmallRequests: thousands of small puts and signals keep order.
func TestManySmallRequests(t *testing.T) {
	conns, mems := job(t, 2, 1<<16)
	c := conns[0][1]
	var last uint64
	for i := range 5000 {
		if _, err := c.Put(5, 0, uint64(i%4096)*8, []byte{byte(i), byte(i >> 8), 0, 0, 0, 0, 0, 1}); err != nil {
			t.Fatal(err)
		}
		tk, err := c.Signal(5, 0)
		if err != nil {
			t.Fatal(err)
		}
		last = tk
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.WaitAcked(ctx, last); err != nil {
		t.Fatal(err)
	}
	if got := mems[1].tokens[0].Load(); got != 5000 {
		t.Fatalf("%d tokens, want 5000", got)
	}
	for i, at := range mems[1].atToken {
		if at != int64(8*(i+1)) {
			t.Fatalf("signal %d saw %d bytes landed, want %d", i, at, 8*(i+1))
		}
	}
}

// TestStrangerRefused: a process without the secret dials a rank while
// the job connects: it is refused and the job connects anyway.
func TestStrangerRefused(t *testing.T) {
	l0, l1 := listen(t), listen(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	strangerErr := make(chan error, 1)
	go func() {
		wrong := testSecret
		wrong[0] ^= 1
		_, err := dial(ctx, l0.Addr(""), key(wrong), 1, 0)
		strangerErr <- err
	}()
	// A silent stranger too: connects and says nothing.
	silent, err := net.Dial("tcp", l0.Addr(""))
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	time.Sleep(50 * time.Millisecond)
	var c0, c1 map[int]*Conn
	var e0, e1 error
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); c0, e0 = Connect(ctx, l0, 0, map[int]string{1: l1.Addr("")}, testSecret) }()
	go func() { defer wg.Done(); c1, e1 = Connect(ctx, l1, 1, map[int]string{0: l0.Addr("")}, testSecret) }()
	wg.Wait()
	if e0 != nil || e1 != nil {
		t.Fatalf("job failed beside a stranger: %v / %v", e0, e1)
	}
	c0[1].Close()
	c1[0].Close()
	if err := <-strangerErr; !errors.Is(err, errAuth) {
		t.Fatalf("stranger: got %v, want an authentication failure", err)
	}
}

// TestMissingPeer: a peer that never connects is named when the deadline
// passes.
func TestMissingPeer(t *testing.T) {
	l0 := listen(t)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := Connect(ctx, l0, 0, map[int]string{3: "127.0.0.1:1"}, testSecret)
	if err == nil || !strings.Contains(err.Error(), "rank(s) 3 did not connect") {
		t.Fatalf("got %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("took %v for a 300 ms deadline", d)
	}
}

// TestPeerDies: when the peer's process goes away, a flush waiting on it
// returns promptly with an error naming the peer.
func TestPeerDies(t *testing.T) {
	conns, _ := job(t, 2, 1<<10)
	c := conns[0][1]
	tk, err := c.Signal(5, 9) // channel 9 does not exist: rank 1 drops the connection
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = c.WaitAcked(ctx, tk)
	var pe *PeerError
	if !errors.As(err, &pe) || pe.Peer != 1 {
		t.Fatalf("got %v, want a PeerError naming rank 1", err)
	}
	conns[1][0].Close()
	if _, err := c.Put(5, 0, 0, []byte{1}); err == nil {
		t.Error("put on a dead connection succeeded")
	}
}

// TestCloseIsNoFailure: a rank that finishes and closes says so; its
// peer's Serve ends without an error (a crash, an EOF without the
// goodbye, is one: TestPeerDies).
func TestCloseIsNoFailure(t *testing.T) {
	l0, l1 := listen(t), listen(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var c0, c1 map[int]*Conn
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); c0, _ = Connect(ctx, l0, 0, map[int]string{1: l1.Addr("")}, testSecret) }()
	go func() { defer wg.Done(); c1, _ = Connect(ctx, l1, 1, map[int]string{0: l0.Addr("")}, testSecret) }()
	wg.Wait()
	if c0 == nil || c1 == nil {
		t.Fatal("connect failed")
	}
	served := make(chan error, 1)
	go func() { served <- c0[1].Serve(&mem{}) }()
	go c1[0].Serve(&mem{})
	c1[0].Close()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("peer closed on purpose, Serve returned %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after the peer closed")
	}
	c0[1].Close()
}

// TestDecodeHeader: the decoder refuses what a well-behaved rank never
// sends.
func TestDecodeHeader(t *testing.T) {
	good := frame{kind: kPut, flags: flagLast, buf: 1, off: 8, n: 16, space: 3}
	var b [headerBytes]byte
	good.put(b[:])
	if f, err := decodeHeader(b[:]); err != nil || f != good {
		t.Fatalf("round trip: %+v, %v", f, err)
	}
	for _, bad := range []frame{
		{kind: 9},
		{kind: kPut, n: ChunkBytes + 1},
		{kind: kPut, flags: 2},
		{kind: kSignal, n: 3},
		{kind: kAck, buf: 1},
		{kind: kSignal, off: 1},
		{kind: kAck, space: 2},
	} {
		bad.put(b[:])
		if _, err := decodeHeader(b[:]); !errors.Is(err, errFrame) {
			t.Errorf("%+v: got %v", bad, err)
		}
	}
}

// FuzzServe feeds arbitrary bytes to a connection's reader: it must
// return an error or nil, never panic, and never apply a put outside the
// registered memory.
func FuzzServe(f *testing.F) {
	var b [headerBytes]byte
	fr := frame{kind: kPut, flags: flagLast, off: 4, n: 4, space: 5}
	fr.put(b[:])
	f.Add(append(append([]byte{}, b[:]...), 1, 2, 3, 4))
	fr = frame{kind: kSignal, ch: 1, space: 5}
	fr.put(b[:])
	f.Add(append([]byte{}, b[:]...))
	fr = frame{kind: kAck, off: 0}
	fr.put(b[:])
	f.Add(append([]byte{}, b[:]...))
	f.Add([]byte("garbage"))
	f.Fuzz(func(t *testing.T, in []byte) {
		a, z := net.Pipe()
		c := newConn(7, a)
		done := make(chan error, 1)
		m := &mem{bufs: [][]byte{make([]byte, 64)}}
		go func() { done <- c.Serve(m) }()
		go func() {
			// Drain acks so the ack writer never blocks.
			buf := make([]byte, 256)
			for {
				if _, err := z.Read(buf); err != nil {
					return
				}
			}
		}()
		z.SetWriteDeadline(time.Now().Add(time.Second))
		z.Write(in)
		z.Close()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("Serve did not return after the peer closed")
		}
		c.Close()
	})
}

// listen opens a listener on loopback that closes when the test ends.
func listen(t testing.TB) *Listener {
	t.Helper()
	l, err := Listen("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}
