package socket

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Handler applies the requests a peer sends, in the order it sent them.
// Chunks of one put may interleave on the wire with the requests of
// other goroutines; each chunk names its own range. Put must copy data (the slice is reused for the next frame) and must
// refuse, with an error, a buffer or range the rank did not register:
// the error ends the connection and names the peer.
type Handler interface {
	Put(space uint32, buf uint16, off uint64, data []byte) error
	Signal(space uint32, ch uint32) error
}

// PeerError is a connection's failure, naming the peer rank.
type PeerError struct {
	Peer int
	Err  error
}

func (e *PeerError) Error() string {
	return fmt.Sprintf("socket transport: peer rank %d: %v", e.Peer, e.Err)
}

func (e *PeerError) Unwrap() error { return e.Err }

// Conn is one rank's end of a connection to a rank on another node.
// Put, Signal and WaitAcked may be called from several goroutines; the
// requests of one goroutine keep their order.
type Conn struct {
	peer int
	c    net.Conn

	wmu     sync.Mutex // one frame at a time on the wire: requests and acks interleave
	w       *bufio.Writer
	ackSent uint64 // the last count acknowledged on the wire (under wmu): acks never go back

	issued atomic.Uint64 // requests sent
	acked  atomic.Uint64 // requests the peer has applied

	mu      sync.Mutex
	changed chan struct{} // closed and replaced whenever acked or err changes
	err     error

	serving atomic.Bool
	applied atomic.Uint64 // the peer's requests applied here
	kick    chan struct{} // wakes the ack writer
	done    chan struct{} // closed when the reader stops
	once    sync.Once
}

func newConn(peer int, c net.Conn) *Conn {
	if tc, ok := c.(*net.TCPConn); ok {
		// Signals are small frames that must not wait for more data.
		tc.SetNoDelay(true)
	}
	return &Conn{peer: peer, c: c, w: bufio.NewWriterSize(c, 64<<10), changed: make(chan struct{}),
		kick: make(chan struct{}, 1), done: make(chan struct{})}
}

// Peer is the rank at the other end.
func (c *Conn) Peer() int { return c.peer }

// Err is the connection's failure, nil while it works.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *Conn) fail(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = &PeerError{Peer: c.peer, Err: err}
		close(c.changed)
		c.changed = make(chan struct{})
	}
	c.mu.Unlock()
	c.c.Close()
}

func (c *Conn) wake() {
	c.mu.Lock()
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

// send writes one frame (header and payload) and flushes it. When ends
// is set the frame completes a request, which gets its ticket here, under
// the write lock: tickets then follow the order the peer applies in, and
// an ack can never arrive for a request not yet counted.
func (c *Conn) send(f frame, payload []byte, ends bool) (uint64, error) {
	var hdr [headerBytes]byte
	f.put(hdr[:])
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.Err(); err != nil {
		return 0, err
	}
	if f.kind == kAck {
		if f.off <= c.ackSent {
			return 0, nil // a later count already went out
		}
		c.ackSent = f.off
	}
	var ticket uint64
	if ends {
		ticket = c.issued.Add(1)
	}
	_, err := c.w.Write(hdr[:])
	if err == nil && len(payload) > 0 {
		_, err = c.w.Write(payload)
	}
	if err == nil {
		err = c.w.Flush()
	}
	if err != nil {
		c.fail(err)
		return 0, c.Err()
	}
	return ticket, nil
}

// Put sends data to be written at offset off of the peer's buffer buf of
// registration space (what both mean is the two handlers' agreement),
// in chunks of at most ChunkBytes. It returns the request's ticket: the
// bytes have landed once Acked reaches it.
func (c *Conn) Put(space uint32, buf uint16, off uint64, data []byte) (uint64, error) {
	for {
		n := min(len(data), ChunkBytes)
		f := frame{kind: kPut, space: space, buf: buf, off: off, n: uint32(n)}
		last := n == len(data)
		if last {
			f.flags = flagLast
		}
		ticket, err := c.send(f, data[:n], last)
		if err != nil || last {
			return ticket, err
		}
		data, off = data[n:], off+uint64(n)
	}
}

// Signal adds one token to the peer's port channel ch (of registration
// space) once everything sent before it has been applied there. It
// returns the request's ticket.
func (c *Conn) Signal(space, ch uint32) (uint64, error) {
	return c.send(frame{kind: kSignal, space: space, ch: ch}, nil, true)
}

// Issued is the number of requests sent so far (the ticket of the last).
func (c *Conn) Issued() uint64 { return c.issued.Load() }

// Acked is the number of this side's requests the peer has applied.
func (c *Conn) Acked() uint64 { return c.acked.Load() }

// WaitAcked blocks until the peer has applied ticket requests (a flush),
// the connection fails, or ctx ends.
func (c *Conn) WaitAcked(ctx context.Context, ticket uint64) error {
	for {
		c.mu.Lock()
		ch, err := c.changed, c.err
		c.mu.Unlock()
		if c.acked.Load() >= ticket {
			return nil
		}
		if err != nil {
			return err
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("socket transport: peer rank %d applied %d of %d requests: %w", c.peer, c.acked.Load(), ticket, ctx.Err())
		}
	}
}

// Serve reads the peer's frames until the connection ends, applying
// requests through h in order and acknowledging each; it returns the
// connection's failure (nil after Close). Call it once, on its own
// goroutine.
func (c *Conn) Serve(h Handler) error {
	if !c.serving.CompareAndSwap(false, true) {
		return errors.New("socket transport: Serve called twice")
	}
	defer close(c.done)
	// Acks go out from a goroutine of their own: the reader must never
	// wait for the wire (both ranks putting at once would each stop
	// reading while their writes wait for the other to read).
	go c.ackLoop()
	r := bufio.NewReaderSize(c.c, 256<<10)
	var hdr [headerBytes]byte
	var buf []byte
	for {
		f, p, err := readFrame(r, hdr[:], &buf)
		if err != nil {
			if c.closing() {
				return nil
			}
			c.fail(err)
			return c.Err()
		}
		switch f.kind {
		case kBye:
			// The peer closed on purpose (its rank finished). Requests of
			// ours it has not applied will never be: waiters hear so.
			c.fail(errPeerClosed)
			return nil
		case kAck:
			if f.off > c.issued.Load() || f.off < c.acked.Load() {
				c.fail(fmt.Errorf("%w: ack of %d requests, %d sent and %d acked before", errFrame, f.off, c.issued.Load(), c.acked.Load()))
				return c.Err()
			}
			c.acked.Store(f.off)
			c.wake()
			continue
		case kPut:
			err = h.Put(f.space, f.buf, f.off, p)
			if err == nil && f.flags&flagLast == 0 {
				continue // the request ends with its last chunk
			}
		case kSignal:
			err = h.Signal(f.space, f.ch)
		}
		if err != nil {
			c.fail(fmt.Errorf("applying its %s: %w", kindName(f.kind), err))
			return c.Err()
		}
		c.applied.Add(1)
		select {
		case c.kick <- struct{}{}:
		default: // an ack is already due; it will carry this count too
		}
	}
}

// ackLoop sends the count of applied requests whenever it grows,
// coalescing acks the wire has no time for.
func (c *Conn) ackLoop() {
	var sent uint64
	for {
		select {
		case <-c.kick:
		case <-c.done:
			return
		}
		if n := c.applied.Load(); n > sent {
			if _, err := c.send(frame{kind: kAck, off: n}, nil, false); err != nil {
				return
			}
			sent = n
		}
	}
}

var (
	errClosed     = errors.New("closed")
	errPeerClosed = errors.New("it closed its end")
)

func (c *Conn) closing() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return errors.Is(c.err, errClosed)
}

// Close ends the connection, telling the peer it is no failure (its Serve
// returns nil); waiters and Serve return. After Close, Err reports the
// connection as closed.
func (c *Conn) Close() error {
	c.once.Do(func() {
		// Acknowledge what was applied (the ack writer may not have yet:
		// the peer's flush would otherwise find the goodbye before its
		// last ack), then tell the peer this is no crash, if the wire
		// still takes it.
		c.c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		c.send(frame{kind: kAck, off: c.applied.Load()}, nil, false)
		c.send(frame{kind: kBye}, nil, false)
		c.fail(errClosed)
	})
	if c.serving.Load() {
		select {
		case <-c.done:
		case <-time.After(5 * time.Second):
		}
	}
	return nil
}
