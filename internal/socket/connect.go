package socket

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"strings"
	"sync"
	"time"
)

const (
	magic    = "msccl-sock1\x00"
	nonceLen = 16
	// helloBytes: magic, then the acceptor's nonce (acceptor → dialer);
	// dialBytes: dialer rank, acceptor rank (u32 each), nonce, MAC.
	helloBytes = len(magic) + nonceLen
	dialBytes  = 8 + nonceLen + sha256.Size
)

// Listener accepts the connections of the ranks that dial this one.
type Listener struct {
	l net.Listener
}

// Listen opens a TCP listener on host (":0"-style port choice; "" listens
// on every interface). Publish Addr to the peers (the bootstrap's
// all-gather does) before Connect.
func Listen(host string) (*Listener, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, fmt.Errorf("socket transport: listen: %w", err)
	}
	return &Listener{l: l}, nil
}

// Addr is the address peers dial. An unspecified listen address is
// replaced by advertise (the host name or address the peers reach this
// node by) when given.
func (l *Listener) Addr(advertise string) string {
	a := l.l.Addr().(*net.TCPAddr)
	host := a.IP.String()
	if a.IP.IsUnspecified() {
		host = "127.0.0.1"
		if advertise != "" {
			host = advertise
		}
	}
	return net.JoinHostPort(host, fmt.Sprint(a.Port))
}

// Close stops accepting; established connections stay.
func (l *Listener) Close() error { return l.l.Close() }

// key derives the transport's MAC key from the job's secret, so that a
// MAC made here is no use against the bootstrap and vice versa.
func key(secret [16]byte) []byte {
	h := hmac.New(sha256.New, secret[:])
	h.Write([]byte("msccl-socket-transport\x00"))
	return h.Sum(nil)
}

func mac(k []byte, role string, from, to int, n1, n2 []byte) []byte {
	h := hmac.New(sha256.New, k)
	h.Write([]byte(role))
	var b [8]byte
	binary.LittleEndian.PutUint32(b[:], uint32(from))
	binary.LittleEndian.PutUint32(b[4:], uint32(to))
	h.Write(b[:])
	h.Write(n1)
	h.Write(n2)
	return h.Sum(nil)
}

func newNonce() []byte {
	n := make([]byte, nonceLen)
	rand.Read(n) // never fails on Linux; a weak nonce only weakens replay protection
	return n
}

// Connect makes one authenticated Conn to each peer (rank → address):
// this rank dials the peers of lower rank and accepts the peers of
// higher rank on l. Connections from anyone else, or without the secret,
// are refused and do not count. It returns when every peer is connected,
// or fails naming the peers that did not connect by ctx's deadline.
func Connect(ctx context.Context, l *Listener, self int, peers map[int]string, secret [16]byte) (map[int]*Conn, error) {
	k := key(secret)
	out := map[int]*Conn{}
	var mu sync.Mutex
	var firstErr error
	want := map[int]bool{}
	for p := range peers {
		if p == self {
			return nil, fmt.Errorf("socket transport: rank %d listed as its own peer", self)
		}
		if p > self {
			want[p] = true
		}
	}
	closeAll := func() {
		for _, c := range out {
			c.Close()
		}
	}
	tl := l.l.(*net.TCPListener)
	// Accept the higher ranks. Handshakes run concurrently so that a
	// stranger who connects and says nothing holds up no one; those still
	// pending when every peer is in are cut off.
	allIn := make(chan struct{})
	if len(want) == 0 {
		close(allIn)
	}
	pending := map[net.Conn]bool{}
	var hs sync.WaitGroup
	acceptDone := make(chan struct{})
	go func() {
		defer close(acceptDone)
		for {
			nc, err := tl.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			pending[nc] = true
			hs.Add(1)
			mu.Unlock()
			go func() {
				defer hs.Done()
				peer, err := acceptHandshake(ctx, nc, k, self, func(p int) bool {
					mu.Lock()
					defer mu.Unlock()
					return want[p]
				})
				mu.Lock()
				defer mu.Unlock()
				delete(pending, nc)
				if err != nil || !want[peer] {
					nc.Close() // a stranger or a duplicate: refused, not fatal
					return
				}
				delete(want, peer)
				out[peer] = newConn(peer, nc)
				if len(want) == 0 {
					close(allIn)
				}
			}()
		}
	}()
	// Dial the lower ranks.
	var wg sync.WaitGroup
	for p, addr := range peers {
		if p > self {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := dial(ctx, addr, k, self, p)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = fmt.Errorf("socket transport: rank %d dialing rank %d at %s: %w", self, p, addr, err)
				}
				return
			}
			out[p] = c
		}()
	}
	wg.Wait()
	mu.Lock()
	failed := firstErr != nil
	mu.Unlock()
	if !failed {
		select {
		case <-allIn:
		case <-ctx.Done():
		}
	}
	tl.SetDeadline(time.Now()) // ends Accept
	<-acceptDone
	mu.Lock()
	for nc := range pending {
		nc.Close()
	}
	mu.Unlock()
	hs.Wait()
	tl.SetDeadline(time.Time{})
	mu.Lock()
	defer mu.Unlock()
	if firstErr != nil {
		closeAll()
		return nil, firstErr
	}
	if len(want) > 0 {
		var missing []int
		for p := range want {
			missing = append(missing, p)
		}
		sort.Ints(missing)
		closeAll()
		return nil, fmt.Errorf("socket transport: rank %d: rank(s) %s did not connect: %w", self, strings.Trim(fmt.Sprint(missing), "[]"), context.DeadlineExceeded)
	}
	return out, nil
}

// dial connects to rank peer at addr, retrying while it is not yet
// listening, and runs the dialer's half of the handshake.
func dial(ctx context.Context, addr string, k []byte, self, peer int) (*Conn, error) {
	var d net.Dialer
	for {
		nc, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			if err = dialHandshake(ctx, nc, k, self, peer); err == nil {
				return newConn(peer, nc), nil
			}
			nc.Close()
			if errors.Is(err, errAuth) {
				return nil, err
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%v (last attempt: %w)", ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

var errAuth = errors.New("authentication failed: the other side does not hold this job's secret")

func deadline(ctx context.Context) time.Time {
	if d, ok := ctx.Deadline(); ok {
		return d
	}
	return time.Now().Add(30 * time.Second)
}

// acceptHandshake: send magic and a nonce; read the dialer's claims and
// MAC; check it and that the dialer is expected; answer with our MAC.
func acceptHandshake(ctx context.Context, nc net.Conn, k []byte, self int, expected func(int) bool) (int, error) {
	nc.SetDeadline(deadline(ctx))
	defer nc.SetDeadline(time.Time{})
	na := newNonce()
	if _, err := nc.Write(append([]byte(magic), na...)); err != nil {
		return -1, err
	}
	var b [dialBytes]byte
	if _, err := io.ReadFull(nc, b[:]); err != nil {
		return -1, err
	}
	from, to := int(binary.LittleEndian.Uint32(b[0:])), int(binary.LittleEndian.Uint32(b[4:]))
	nd, m := b[8:8+nonceLen], b[8+nonceLen:]
	if to != self || !expected(from) {
		return -1, fmt.Errorf("unexpected dialer: rank %d for rank %d", from, to)
	}
	if !hmac.Equal(m, mac(k, "dial", from, to, na, nd)) {
		return -1, errAuth
	}
	if _, err := nc.Write(mac(k, "accept", to, from, nd, na)); err != nil {
		return -1, err
	}
	return from, nil
}

func dialHandshake(ctx context.Context, nc net.Conn, k []byte, self, peer int) error {
	nc.SetDeadline(deadline(ctx))
	defer nc.SetDeadline(time.Time{})
	var h [helloBytes]byte
	if _, err := io.ReadFull(nc, h[:]); err != nil {
		return err
	}
	if string(h[:len(magic)]) != magic {
		return fmt.Errorf("%w: not an msccl socket transport listener", errFrame)
	}
	na := h[len(magic):]
	nd := newNonce()
	var b [dialBytes]byte
	binary.LittleEndian.PutUint32(b[0:], uint32(self))
	binary.LittleEndian.PutUint32(b[4:], uint32(peer))
	copy(b[8:], nd)
	copy(b[8+nonceLen:], mac(k, "dial", self, peer, na, nd))
	if _, err := nc.Write(b[:]); err != nil {
		return err
	}
	var m [sha256.Size]byte
	if _, err := io.ReadFull(nc, m[:]); err != nil {
		// The acceptor hangs up on a bad MAC.
		return fmt.Errorf("%w (%v)", errAuth, err)
	}
	if !hmac.Equal(m[:], mac(k, "accept", peer, self, nd, na)) {
		return errAuth
	}
	return nil
}
