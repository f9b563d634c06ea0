package bootstrap

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"sort"
	"sync"
	"time"
)

// Bootstrap is one rank's connection to the rendezvous. Its methods are
// safe for concurrent use; collectives must be called in the same order
// on every rank (they are numbered, and the root checks the numbers).
type Bootstrap struct {
	cfg   Config
	nodes []string
	conn  net.Conn
	out   *outbox
	hub   *hub // rank 0 only
	rdone chan struct{}

	mu      sync.Mutex
	kick    chan struct{} // closed and replaced on every state change
	err     error         // sticky: the job failed
	failed  chan struct{} // closed when err is set
	closing bool
	seq     uint64
	results map[uint64][][]byte
	mail    map[mailKey][][]byte
	left    map[int]bool
	// departed is closed and replaced when a rank closes cleanly.
	departed chan struct{}
}

type mailKey struct {
	peer int
	tag  int64
}

// maxData bounds one blob or message so its frame fits frameLimit.
const maxData = frameLimit - 64

// stepDeadline is when a blocking step started now must end.
func stepDeadline(ctx context.Context, timeout time.Duration) time.Time {
	d := time.Now().Add(timeout)
	if cd, ok := ctx.Deadline(); ok && cd.Before(d) {
		return cd
	}
	return d
}

// grace is how long a rank waits past its deadline for the root's
// verdict (which names the ranks at fault) before it blames the root.
func grace(timeout time.Duration) time.Duration {
	g := timeout / 4
	if g > 2*time.Second {
		g = 2 * time.Second
	}
	if g < 200*time.Millisecond {
		g = 200 * time.Millisecond
	}
	return g
}

func msLeft(deadline time.Time) uint64 {
	d := time.Until(deadline)
	if d < 0 {
		return 0
	}
	return uint64(d / time.Millisecond)
}

// Connect joins the rendezvous cfg names. Rank 0 runs the root (it
// listens on cfg.ListenAddr, or ID.Addr) and joins it like every other
// rank. It returns once every rank has joined, or fails naming the ranks
// that did not arrive within cfg.Timeout (or ctx's deadline).
func Connect(ctx context.Context, cfg Config) (*Bootstrap, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.World < 1 || cfg.World > maxWorld || cfg.Rank < 0 || cfg.Rank >= cfg.World {
		return nil, fmt.Errorf("bootstrap: rank %d of world size %d: want 0 <= rank < world <= %d", cfg.Rank, cfg.World, maxWorld)
	}
	if cfg.Node == "" {
		h, err := hostname()
		if err != nil {
			return nil, fmt.Errorf("bootstrap: host name for the node identity: %w (set Config.Node)", err)
		}
		cfg.Node = h
	}
	if len(cfg.Node) > maxNode {
		return nil, fmt.Errorf("bootstrap: node identity of %d bytes (limit %d)", len(cfg.Node), maxNode)
	}
	deadline := stepDeadline(ctx, cfg.Timeout)
	if cfg.IDFile != "" && cfg.Rank == 0 {
		// A fresh id: a random secret, and the address the root gets
		// when it binds a free port (so no other program can take it in
		// between), written to the file once it listens.
		if _, err := rand.Read(cfg.ID.Secret[:]); err != nil {
			return nil, fmt.Errorf("bootstrap: random secret: %w", err)
		}
		cfg.ID.Addr = net.JoinHostPort(localAddress(), "0")
		cfg.ListenAddr, cfg.ListenFD = cfg.ID.Addr, 0
	} else if cfg.IDFile != "" {
		id, err := readIDFile(cfg.IDFile, deadline, cfg.Timeout)
		if err != nil {
			return nil, err
		}
		cfg.ID = id
	}
	if cfg.ID.Addr == "" {
		return nil, errors.New("bootstrap: Config.ID has no root address (use NewUniqueID, ParseUniqueID or FromEnv)")
	}
	dial := cfg.ID.Addr
	var h *hub
	if cfg.Rank == 0 {
		var err error
		if h, dial, err = startHub(&cfg, deadline); err != nil {
			return nil, err
		}
		if cfg.IDFile != "" {
			cfg.ID.Addr = h.ln.Addr().String()
			if err := writeIDFile(cfg.IDFile, cfg.ID); err != nil {
				h.mu.Lock()
				h.fail(rootGaveUp(err))
				h.mu.Unlock()
				h.shutdown(grace(cfg.Timeout))
				return nil, err
			}
		}
	}
	b, err := join(ctx, &cfg, dial, deadline)
	if err != nil {
		if h != nil {
			h.mu.Lock()
			h.fail(rootGaveUp(err)) // a no-op when the root decided the failure itself
			h.mu.Unlock()
			// The process may exit as soon as Connect returns, and its
			// sockets with it: first let the connected ranks read the
			// verdict (they close their ends when they have).
			h.linger(grace(cfg.Timeout))
			// Until the connect deadline, ranks that arrive late hear it
			// too rather than find no root; the process exiting ends this
			// sooner, which is fine.
			go func() {
				time.Sleep(time.Until(deadline))
				h.shutdown(0)
			}()
		}
		return nil, err
	}
	b.hub = h
	return b, nil
}

// rootGaveUp is the verdict the other ranks get when rank 0 itself fails
// to join (its context ended, it could not publish the id): they are told
// that rank 0 left, rather than an error that names nobody.
func rootGaveUp(err error) error {
	var te *TimeoutError
	var pe *PeerError
	var pr *ProtocolError
	if errors.As(err, &te) || errors.As(err, &pe) || errors.As(err, &pr) {
		return err
	}
	return &PeerError{Op: "connect", Rank: 0, Closed: true, Detail: "rank 0 gave up: " + err.Error()}
}

// join dials the root (retrying until it listens), authenticates and
// waits for the welcome.
func join(ctx context.Context, cfg *Config, addr string, deadline time.Time) (*Bootstrap, error) {
	var last error
	backoff := 10 * time.Millisecond
	for {
		if err := ctx.Err(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return nil, err
		}
		if !time.Now().Before(deadline) {
			detail := fmt.Sprintf("rank %d could not join the root at %s", cfg.Rank, addr)
			if last != nil {
				detail += ": " + last.Error()
			}
			return nil, &TimeoutError{Op: "connect", Ranks: []int{0}, After: cfg.Timeout, Detail: detail}
		}
		if cfg.IDFile != "" && cfg.Rank != 0 && last != nil {
			// The file may be an earlier job's, which rank 0 overwrites
			// when it starts: take the latest before every try, and keep
			// trying while refused.
			if id, err := readIDFile(cfg.IDFile, time.Now(), cfg.Timeout); err == nil {
				cfg.ID, addr = id, id.Addr
			}
		}
		d := net.Dialer{Deadline: deadline}
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			err = clientHello(c, cfg, msLeft(deadline), deadline)
			if err == nil {
				return welcome(ctx, cfg, c, deadline)
			}
			c.Close()
			if (errors.Is(err, errRefused) || errors.Is(err, errNotRoot)) && cfg.IDFile == "" {
				return nil, fmt.Errorf("bootstrap: rank %d: joining the root at %s: %w (configuration from %s)", cfg.Rank, addr, err, cfg.Source)
			}
		}
		last = err
		time.Sleep(min(backoff, time.Until(deadline)))
		backoff = min(2*backoff, 250*time.Millisecond)
	}
}

// welcome waits for every rank to have joined.
func welcome(ctx context.Context, cfg *Config, c net.Conn, deadline time.Time) (*Bootstrap, error) {
	stop := context.AfterFunc(ctx, func() {
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			c.SetReadDeadline(time.Now())
		}
	})
	defer stop()
	c.SetReadDeadline(deadline.Add(grace(cfg.Timeout)))
	m, err := readMsg(c, frameLimit)
	c.SetReadDeadline(time.Time{})
	switch {
	case err != nil && ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded):
		err = ctx.Err()
	case err != nil && isTimeout(err):
		err = &TimeoutError{Op: "connect", Ranks: []int{0}, After: cfg.Timeout, Detail: "rank 0 (the root) did not answer"}
	case err != nil:
		err = &PeerError{Op: "connect", Rank: 0, Detail: err.Error()}
	case m.kind == kAbort:
		err = abortErr(m)
	case m.kind != kWelcome || len(m.list) != cfg.World:
		err = &ProtocolError{Rank: 0, Detail: fmt.Sprintf("the root answered with %s instead of a welcome for %d ranks", kindName(m.kind), cfg.World)}
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	b := &Bootstrap{cfg: *cfg, conn: c, rdone: make(chan struct{}), kick: make(chan struct{}), failed: make(chan struct{}),
		results: map[uint64][][]byte{}, mail: map[mailKey][][]byte{}, left: map[int]bool{}, departed: make(chan struct{})}
	for _, n := range m.list {
		b.nodes = append(b.nodes, string(n))
	}
	b.out = newOutbox(c, cfg.Timeout, func(err error) {
		b.fail(&PeerError{Op: "send to the root", Rank: 0, Detail: err.Error()})
	})
	go b.read()
	return b, nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// read takes the root's frames: results, deliveries, departures, the
// verdict. A connection that ends without a verdict means rank 0 died.
func (b *Bootstrap) read() {
	defer close(b.rdone)
	for {
		m, err := readMsg(b.conn, frameLimit)
		if err != nil {
			b.mu.Lock()
			closing := b.closing
			b.mu.Unlock()
			if closing {
				b.fail(ErrClosed)
			} else if errors.Is(err, errFrame) {
				b.fail(&ProtocolError{Rank: 0, Detail: err.Error()})
			} else {
				b.fail(&PeerError{Op: "rendezvous", Rank: 0, Detail: err.Error()})
			}
			return
		}
		b.mu.Lock()
		switch m.kind {
		case kGathered:
			if m.list == nil {
				m.list = [][]byte{}
			}
			b.results[m.seq] = m.list
		case kDeliver:
			k := mailKey{m.peer, m.tag}
			b.mail[k] = append(b.mail[k], m.data)
		case kLeft:
			b.left[m.peer] = true
			close(b.departed)
			b.departed = make(chan struct{})
		case kAbort:
			b.setErr(abortErr(m))
		default:
			b.setErr(&ProtocolError{Rank: 0, Detail: "the root sent " + kindName(m.kind)})
		}
		b.notify()
		b.mu.Unlock()
	}
}

// notify wakes every waiter; b.mu is held.
func (b *Bootstrap) notify() {
	close(b.kick)
	b.kick = make(chan struct{})
}

// setErr records the first failure; b.mu is held.
func (b *Bootstrap) setErr(err error) {
	if b.err == nil {
		b.err = err
		close(b.failed)
	}
}

// Departed returns the ranks that have closed their bootstrap cleanly
// so far, in order, and a channel closed at the next departure. A
// communicator watches it: a peer that leaves while this rank still runs
// collectives with it will never answer them.
func (b *Bootstrap) Departed() ([]int, <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []int
	for r := range b.left {
		out = append(out, r)
	}
	sort.Ints(out)
	return out, b.departed
}

// Failed is closed when the job has failed (or this rank closed): Err then
// says why. A watcher selects on it instead of polling with Recv.
func (b *Bootstrap) Failed() <-chan struct{} { return b.failed }

// Err is the failure that ended the job for this rank (a *TimeoutError,
// *PeerError or *ProtocolError decided at the root, or ErrClosed after
// Close), or nil while it is usable. A Recv that merely timed out returns
// a *TimeoutError but leaves Err nil: the bootstrap is still usable.
func (b *Bootstrap) Err() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

func (b *Bootstrap) fail(err error) {
	b.mu.Lock()
	b.setErr(err)
	b.notify()
	b.mu.Unlock()
}

// errTimedOut is await's signal that the deadline (plus grace) passed.
var errTimedOut = errors.New("timed out")

// await blocks until check reports done or an error, ctx is cancelled,
// or deadline+extra passes. A ctx deadline does not end the wait early:
// the root's verdict, which names the ranks at fault, is still to come.
func (b *Bootstrap) await(ctx context.Context, deadline time.Time, extra time.Duration, check func() (bool, error)) error {
	t := time.NewTimer(time.Until(deadline.Add(extra)))
	defer t.Stop()
	done := ctx.Done()
	for {
		b.mu.Lock()
		ok, err := check()
		kick := b.kick
		b.mu.Unlock()
		if ok || err != nil {
			return err
		}
		select {
		case <-kick:
		case <-done:
			if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return ctx.Err()
			}
			done = nil
		case <-t.C:
			return errTimedOut
		}
	}
}

// Rank is this process's rank.
func (b *Bootstrap) Rank() int { return b.cfg.Rank }

// Size is the number of ranks.
func (b *Bootstrap) Size() int { return b.cfg.World }

// Nodes is every rank's node identity (index = rank), as each rank
// declared it at Connect.
func (b *Bootstrap) Nodes() []string { return append([]string(nil), b.nodes...) }

// Config is the configuration this rank connected with.
func (b *Bootstrap) Config() Config { return b.cfg }

// usable reports why no new call may start; b.mu is held.
func (b *Bootstrap) usable() error {
	if b.err != nil {
		return b.err
	}
	if b.closing {
		return ErrClosed
	}
	return nil
}

// AllGather gives blob to every rank and returns every rank's blob,
// index = rank. Every rank must call it (in the same order relative to
// Barrier); a rank that does not arrive in time is named in the
// *TimeoutError every rank gets.
func (b *Bootstrap) AllGather(ctx context.Context, blob []byte) ([][]byte, error) {
	return b.collective(ctx, opAllGather, blob)
}

// Barrier returns once every rank has called it.
func (b *Bootstrap) Barrier(ctx context.Context) error {
	_, err := b.collective(ctx, opBarrier, nil)
	return err
}

func (b *Bootstrap) collective(ctx context.Context, op byte, blob []byte) ([][]byte, error) {
	if len(blob) > maxData/b.cfg.World {
		return nil, fmt.Errorf("bootstrap: all-gather blob of %d bytes: at most %d per rank in a world of %d", len(blob), maxData/b.cfg.World, b.cfg.World)
	}
	deadline := stepDeadline(ctx, b.cfg.Timeout)
	b.mu.Lock()
	if err := b.usable(); err != nil {
		b.mu.Unlock()
		return nil, err
	}
	b.seq++
	seq := b.seq
	b.out.push(encode(&msg{kind: kGather, seq: seq, op: op, ms: msLeft(deadline), data: blob}))
	b.mu.Unlock()
	var res [][]byte
	err := b.await(ctx, deadline, grace(b.cfg.Timeout), func() (bool, error) {
		if r, ok := b.results[seq]; ok {
			delete(b.results, seq)
			res = r
			return true, nil
		}
		return false, b.err
	})
	switch {
	case err == nil && op == opAllGather && len(res) != b.cfg.World:
		err = &ProtocolError{Rank: 0, Detail: fmt.Sprintf("%s returned %d blobs for %d ranks", opName(op, seq), len(res), b.cfg.World)}
		res = nil
		b.fail(err)
	case err == errTimedOut:
		err = &TimeoutError{Op: opName(op, seq), Ranks: []int{0}, After: b.cfg.Timeout, Detail: "rank 0 (the root) gave no verdict"}
		b.fail(err)
	case err != nil && b.err == nil:
		// Cancelled mid-collective: the others may complete without us,
		// but our numbering is now out of step, so nothing more can run.
		b.fail(fmt.Errorf("bootstrap: %s was cancelled; this bootstrap cannot run further collectives: %w", opName(op, seq), err))
	}
	return res, err
}

// Send queues data for peer under tag and returns; messages to one
// (peer, tag) arrive in the order they were sent. They go through the
// root, which relays them in the order it reads them.
func (b *Bootstrap) Send(ctx context.Context, peer, tag int, data []byte) error {
	if peer < 0 || peer >= b.cfg.World {
		return fmt.Errorf("bootstrap: send to rank %d: out of range for world size %d", peer, b.cfg.World)
	}
	if len(data) > maxData {
		return fmt.Errorf("bootstrap: send of %d bytes: at most %d", len(data), maxData)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.usable(); err != nil {
		return err
	}
	b.out.push(encode(&msg{kind: kSend, peer: peer, tag: int64(tag), data: data}))
	return nil
}

// Recv returns the next message peer sent under tag, waiting up to the
// timeout for it. A timeout names peer; it does not break the bootstrap.
// Once the job has failed, Recv returns the failure (Err) at once, which
// may itself be a *TimeoutError: watch Failed to tell the two apart.
func (b *Bootstrap) Recv(ctx context.Context, peer, tag int) ([]byte, error) {
	if peer < 0 || peer >= b.cfg.World {
		return nil, fmt.Errorf("bootstrap: receive from rank %d: out of range for world size %d", peer, b.cfg.World)
	}
	deadline := stepDeadline(ctx, b.cfg.Timeout)
	k := mailKey{peer, int64(tag)}
	var data []byte
	err := b.await(ctx, deadline, 0, func() (bool, error) {
		if q := b.mail[k]; len(q) > 0 {
			data = q[0]
			if len(q) == 1 {
				delete(b.mail, k)
			} else {
				b.mail[k] = q[1:]
			}
			return true, nil
		}
		if err := b.usable(); err != nil {
			return false, err
		}
		if b.left[peer] {
			return false, &PeerError{Op: fmt.Sprintf("receive from rank %d (tag %d)", peer, tag), Rank: peer, Closed: true}
		}
		return false, nil
	})
	if err == errTimedOut {
		err = &TimeoutError{Op: fmt.Sprintf("receive from rank %d (tag %d)", peer, tag), Ranks: []int{peer}, After: b.cfg.Timeout}
	}
	return data, err
}

// Close leaves the rendezvous. Messages already sent are delivered first.
// On rank 0, which runs the root, Close waits (up to the timeout) for the
// other ranks to close, since their messages may still be passing through.
func (b *Bootstrap) Close() error {
	b.mu.Lock()
	if b.closing {
		b.mu.Unlock()
		return nil
	}
	b.closing = true
	failed := b.err
	b.notify()
	b.mu.Unlock()
	if failed == nil {
		b.out.push(encode(&msg{kind: kBye}))
		b.out.finish()
		// The root closes its side once it has our bye; wait for that, so
		// no unread data makes the kernel reset the connection under the
		// root before it has read what we sent.
		select {
		case <-b.rdone:
		case <-time.After(b.cfg.Timeout):
		}
	}
	b.out.finish()
	b.conn.Close()
	<-b.rdone
	b.fail(ErrClosed)
	if b.hub != nil {
		// The others' messages may still pass through the root: wait for
		// them to leave, up to the timeout (after a failure, for them to
		// read the verdict: a hung rank never will).
		linger := b.cfg.Timeout
		if failed != nil {
			linger = grace(b.cfg.Timeout)
		}
		b.hub.shutdown(linger)
		if b.cfg.IDFile != "" {
			// Leave no stale id behind for the next job (only ours).
			if id, err := readIDFile(b.cfg.IDFile, time.Now(), 0); err == nil && id == b.cfg.ID {
				os.Remove(b.cfg.IDFile)
			}
		}
	}
	return nil
}
