package bootstrap

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// outbox queues frames for one connection and writes them from its own
// goroutine, so the root never blocks on a slow reader and a Send returns
// once its frame is queued (order is queue order). A peer that stops
// reading for a whole timeout fails the write, and onErr reports it.
type outbox struct {
	conn    net.Conn
	timeout time.Duration
	onErr   func(error)

	mu      sync.Mutex
	cond    sync.Cond
	q       [][]byte
	closing bool // write what is queued, then close the write side
	done    chan struct{}
}

func newOutbox(conn net.Conn, timeout time.Duration, onErr func(error)) *outbox {
	o := &outbox{conn: conn, timeout: timeout, onErr: onErr, done: make(chan struct{})}
	o.cond.L = &o.mu
	go o.run()
	return o
}

func (o *outbox) push(frame []byte) {
	o.mu.Lock()
	if !o.closing {
		o.q = append(o.q, frame)
		o.cond.Signal()
	}
	o.mu.Unlock()
}

// finish asks the writer to flush and then close the write side, which
// the peer reads as a clean end of stream.
func (o *outbox) finish() {
	o.mu.Lock()
	o.closing = true
	o.cond.Signal()
	o.mu.Unlock()
}

func (o *outbox) run() {
	defer close(o.done)
	for {
		o.mu.Lock()
		for len(o.q) == 0 && !o.closing {
			o.cond.Wait()
		}
		batch := net.Buffers(o.q)
		o.q = nil
		last := o.closing
		o.mu.Unlock()
		if len(batch) > 0 {
			o.conn.SetWriteDeadline(time.Now().Add(o.timeout))
			if _, err := batch.WriteTo(o.conn); err != nil {
				o.mu.Lock()
				o.closing, o.q = true, nil
				o.mu.Unlock()
				o.onErr(err)
				return
			}
		}
		if last {
			o.mu.Lock()
			empty := len(o.q) == 0
			o.mu.Unlock()
			if empty {
				if tc, ok := o.conn.(*net.TCPConn); ok {
					tc.CloseWrite()
				}
				return
			}
		}
	}
}

// The handshake. The root speaks first with a fresh nonce; the rank
// answers with its own nonce, who it is and an HMAC-SHA256 under the
// secret over both nonces and its claims; the root checks it in constant
// time (hmac.Equal) and proves in turn that it holds the secret with an
// HMAC over the nonces in the other order. The secret never travels, a
// recorded handshake cannot be replayed (fresh nonces), and a rank never
// joins a root of another job that happens to listen on the same port.
// Every field of the hello is under the MAC, the time left included: the
// root shortens the connect phase by it, so a forged value could end the
// job's wait early.

func helloMAC(secret [16]byte, rootNonce []byte, m *msg) []byte {
	h := hmac.New(sha256.New, secret[:])
	h.Write([]byte("msccl-bootstrap rank\x00"))
	h.Write(rootNonce)
	h.Write(m.nonce)
	var b []byte
	b = binary.AppendUvarint(b, uint64(m.rank))
	b = binary.AppendUvarint(b, uint64(m.world))
	b = binary.AppendUvarint(b, m.ms)
	b = binary.AppendUvarint(b, uint64(len(m.node)))
	h.Write(b)
	h.Write([]byte(m.node))
	return h.Sum(nil)
}

func acceptMAC(secret [16]byte, rootNonce, rankNonce []byte) []byte {
	h := hmac.New(sha256.New, secret[:])
	h.Write([]byte("msccl-bootstrap root\x00"))
	h.Write(rankNonce)
	h.Write(rootNonce)
	return h.Sum(nil)
}

func nonce() []byte {
	n := make([]byte, nonceLen)
	if _, err := rand.Read(n); err != nil {
		// crypto/rand does not fail on Linux; a zero nonce only weakens
		// replay protection, it does not admit anyone without the secret.
		return n
	}
	return n
}

// errRefused marks a handshake the root answered with a reject: retrying
// the same credentials cannot help.
var errRefused = errors.New("refused")

// errAuth marks a hello whose MAC is wrong: the sender does not hold the
// secret.
var errAuth = errors.New("authentication failed")

// errNotRoot marks a listener that does not speak this protocol.
var errNotRoot = errors.New("not an msccl bootstrap root")

// readMsg reads and decodes one frame.
func readMsg(c net.Conn, limit int) (*msg, error) {
	kind, body, err := readFrame(c, limit)
	if err != nil {
		return nil, err
	}
	return decode(kind, body)
}

// serverHello runs the root's half up to checking the rank's MAC. It
// returns the hello and the root's nonce; the caller accepts or rejects.
// A hello with a wrong MAC comes back too, with errAuth, so the root can
// say which rank a refused connection claimed to be.
func serverHello(c net.Conn, secret [16]byte, deadline time.Time) (*msg, []byte, error) {
	c.SetDeadline(deadline)
	rn := nonce()
	if _, err := c.Write(encode(&msg{kind: kChallenge, nonce: rn})); err != nil {
		return nil, nil, err
	}
	m, err := readMsg(c, handshakeLimit)
	if err != nil {
		return nil, nil, err
	}
	if m.kind != kHello {
		return nil, nil, fmt.Errorf("%w: expected hello, got %s", errFrame, kindName(m.kind))
	}
	if !hmac.Equal(m.mac, helloMAC(secret, rn, m)) {
		c.Write(encode(&msg{kind: kReject, text: "authentication failed: the connecting process does not hold this job's secret"}))
		return m, nil, errAuth
	}
	return m, rn, nil
}

// clientHello runs a rank's half of the handshake on a fresh connection.
func clientHello(c net.Conn, cfg *Config, msLeft uint64, deadline time.Time) error {
	c.SetDeadline(deadline)
	ch, err := readMsg(c, handshakeLimit)
	if err != nil {
		if errors.Is(err, errFrame) {
			return fmt.Errorf("%w: %v", errNotRoot, err)
		}
		return err
	}
	if ch.kind != kChallenge {
		return fmt.Errorf("%w: it opened with %s", errNotRoot, kindName(ch.kind))
	}
	h := &msg{kind: kHello, rank: cfg.Rank, world: cfg.World, ms: msLeft, nonce: nonce(), node: cfg.Node}
	h.mac = helloMAC(cfg.ID.Secret, ch.nonce, h)
	if _, err := c.Write(encode(h)); err != nil {
		return err
	}
	r, err := readMsg(c, handshakeLimit)
	if err != nil {
		return err
	}
	switch r.kind {
	case kAbort:
		return fmt.Errorf("%w: %w", errRefused, abortErr(r))
	case kReject:
		return fmt.Errorf("%w: %s", errRefused, r.text)
	case kAccept:
		if !hmac.Equal(r.mac, acceptMAC(cfg.ID.Secret, ch.nonce, h.nonce)) {
			return fmt.Errorf("%w: it did not prove it holds the secret (another job's root on this port?)", errRefused)
		}
		c.SetDeadline(time.Time{})
		return nil
	}
	return fmt.Errorf("%w: it answered the hello with %s", errNotRoot, kindName(r.kind))
}
