package comm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/msccl-go/msccl-go/runtime/bootstrap"
)

// Options configure New.
type Options struct {
	// Timeout bounds every blocking step of setup and exchange; 0 means
	// 30 s.
	Timeout time.Duration
}

// Comm is one rank's communicator.
type Comm struct {
	bs      *bootstrap.Bootstrap
	dev     Device
	rank    int
	size    int
	nodes   []string
	links   map[int]*link // ranks on this node, by rank
	timeout time.Duration

	net netState // the socket transport to ranks on other nodes (net.go)

	stop    context.CancelFunc // ends the peer monitors
	watched sync.WaitGroup

	mu     sync.Mutex
	err    error         // the first peer failure
	dead   chan struct{} // closed with err
	closed bool
}

// New builds the communicator of bs's rank on dev. It is collective:
// every rank of the job calls it. On success the communicator owns bs
// (Close closes it); on error bs is still the caller's.
func New(ctx context.Context, bs *bootstrap.Bootstrap, dev Device, opt Options) (_ *Comm, err error) {
	if opt.Timeout <= 0 {
		opt.Timeout = 30 * time.Second
	}
	c := &Comm{bs: bs, dev: dev, rank: bs.Rank(), size: bs.Size(), nodes: bs.Nodes(), links: map[int]*link{},
		timeout: opt.Timeout, dead: make(chan struct{})}
	if len(c.nodes) != c.size {
		return nil, fmt.Errorf("comm: bootstrap knows the nodes of %d ranks, the job has %d", len(c.nodes), c.size)
	}
	ctx, cancel := context.WithTimeout(ctx, opt.Timeout)
	defer cancel()
	defer func() {
		if err != nil {
			for _, l := range c.links {
				l.close()
			}
		}
	}()
	if err := c.connectLinks(ctx); err != nil {
		return nil, fmt.Errorf("comm: rank %d: %w", c.rank, err)
	}
	mctx, stop := context.WithCancel(context.Background())
	c.stop = stop
	c.watched.Add(1)
	go c.watch(mctx)
	return c, nil
}

// connectLinks connects this rank with every other rank of its node: the
// higher rank of each pair dials the lower one's socket.
func (c *Comm) connectLinks(ctx context.Context) error {
	ln, name, tok, err := listenLinks()
	if err != nil {
		return err
	}
	defer ln.Close()
	blob := binary.LittleEndian.AppendUint32(nil, uint32(len(name)))
	blob = append(append(blob, name...), tok[:]...)
	all, err := c.bs.AllGather(ctx, blob)
	if err != nil {
		return fmt.Errorf("exchanging socket names: %w", err)
	}
	deadline, _ := ctx.Deadline()
	accept := map[int]bool{}
	type peerAddr struct {
		name string
		tok  [16]byte
	}
	addrs := map[int]peerAddr{}
	for r, b := range all {
		if r == c.rank || c.nodes[r] != c.nodes[c.rank] {
			continue
		}
		if len(b) < 4 || len(b) != 4+int(binary.LittleEndian.Uint32(b))+16 {
			return fmt.Errorf("rank %d sent a malformed socket address (%d bytes)", r, len(b))
		}
		n := int(binary.LittleEndian.Uint32(b))
		addrs[r] = peerAddr{string(b[4 : 4+n]), [16]byte(b[4+n:])}
		if r > c.rank {
			accept[r] = true
		}
	}
	type acc struct {
		links map[int]*link
		err   error
	}
	done := make(chan acc, 1)
	go func() {
		l, err := acceptLinks(ln, accept, tok, deadline)
		done <- acc{l, err}
	}()
	var dialErr error
	for r, a := range addrs {
		if r > c.rank {
			continue
		}
		l, err := dialLink(r, c.rank, a.name, a.tok, deadline)
		if err != nil {
			dialErr = err
			break
		}
		c.links[r] = l
	}
	if dialErr != nil {
		ln.Close() // ends the accept loop
	}
	res := <-done
	for r, l := range res.links {
		c.links[r] = l
	}
	if dialErr != nil {
		return dialErr
	}
	return res.err
}

// watch turns a failure of the job into Err and Dead. The bootstrap
// decides failures at its root and tells every rank, naming the rank that
// died or hung; Failed is closed then. (Polling with Recv cannot tell a
// job-ending *TimeoutError, which every later call returns at once, from
// a receive that merely got nothing: it would spin and never report it.)
//
// A peer that closes cleanly fails nothing in the bootstrap, yet any
// collective still waiting on it waits for the watchdog. So a departure
// fails this communicator too, as closed and naming the rank, unless this
// rank closes within closedGrace: at the end of a job every rank closes
// within moments of the others, and a wait whose peer did its part
// before leaving still completes (the executors check readiness once more
// before they give up).
func (c *Comm) watch(ctx context.Context) {
	defer c.watched.Done()
	var expire <-chan time.Time
	gone := -1
	asked := map[int]bool{}
	for {
		left, next := c.bs.Departed()
		// A rank that left after Fail sent its reason first: fail now,
		// quoting it, without the grace a clean departure gets.
		if err := c.leftFailed(ctx, left, asked); err != nil {
			c.setErr(err)
			return
		}
		if len(left) > 0 && gone < 0 {
			gone = left[0]
			t := time.NewTimer(closedGrace)
			defer t.Stop()
			expire = t.C
		}
		select {
		case <-ctx.Done():
			return
		case <-c.bs.Failed():
			err := c.bs.Err()
			if errors.Is(err, bootstrap.ErrClosed) {
				return
			}
			// The root ends the job when a rank leaves in the middle of
			// a bootstrap collective; the reason it sent first says more.
			left, _ := c.bs.Departed()
			if why := c.leftFailed(ctx, left, asked); why != nil {
				err = why
			}
			c.setErr(err)
			return
		case <-next:
		case <-expire:
			c.setErr(&bootstrap.PeerError{Op: "communicator", Rank: gone, Closed: true,
				Detail: fmt.Sprintf("it left the job while rank %d still runs (its collectives with it cannot complete)", c.rank)})
			return
		}
	}
}

// closedGrace is how long a peer may be gone before this rank, still
// open, counts it as a failure.
const closedGrace = 500 * time.Millisecond

// setErr records the first failure and closes Dead, unless Close came
// first.
func (c *Comm) setErr(err error) {
	c.mu.Lock()
	if c.err == nil && !c.closed {
		c.err = err
		close(c.dead)
	}
	c.mu.Unlock()
}

// Rank is this process's rank; Size the job's.
func (c *Comm) Rank() int { return c.rank }
func (c *Comm) Size() int { return c.size }

// Device is the device the communicator allocates on.
func (c *Comm) Device() Device { return c.dev }

// Timeout is the bound of one blocking step (Options.Timeout).
func (c *Comm) Timeout() time.Duration { return c.timeout }

// Bootstrap is the communicator's bootstrap, for the application's own
// messages (small tags; the communicator uses tags from 0x6d730000).
func (c *Comm) Bootstrap() *bootstrap.Bootstrap { return c.bs }

// SameNode reports whether rank r shares this rank's node (and so its
// memory, through the device).
func (c *Comm) SameNode(r int) bool { return r >= 0 && r < c.size && c.nodes[r] == c.nodes[c.rank] }

// Node is rank r's node identity.
func (c *Comm) Node(r int) string { return c.nodes[r] }

// Err returns the first peer failure, or nil.
func (c *Comm) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Dead is closed when a peer has failed (Err says which).
func (c *Comm) Dead() <-chan struct{} { return c.dead }

// Exchange registers mem, this rank's memory, with every rank of the node
// and maps theirs. It is collective: every rank calls it, in the same
// order as its other collective calls. The result is indexed by rank:
// this rank's entry is mem itself, ranks on other nodes have nil. The
// imported memories are the caller's to close.
func (c *Comm) Exchange(ctx context.Context, mem Memory) ([]Memory, error) {
	if err := c.Err(); err != nil {
		return nil, err
	}
	h, err := mem.Export()
	if err != nil {
		return nil, fmt.Errorf("comm: exporting %s memory: %w", c.dev.Name(), err)
	}
	deadline := time.Now().Add(c.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	out := make([]Memory, c.size)
	out[c.rank] = mem
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for r, l := range c.links {
		wg.Add(2)
		go func() {
			defer wg.Done()
			if err := l.send(h.Data, h.FD, deadline); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
		go func() {
			defer wg.Done()
			data, fd, err := l.recv(deadline)
			var m Memory
			if err == nil {
				m, err = c.dev.Import(Handle{Data: data, FD: fd})
				if err != nil {
					err = fmt.Errorf("mapping rank %d's %s memory: %w", r, c.dev.Name(), err)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			out[r] = m
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		for r, m := range out {
			if m != nil && r != c.rank {
				m.Close()
			}
		}
		if pe := c.Err(); pe != nil {
			return nil, fmt.Errorf("comm: rank %d: %w (%v)", c.rank, pe, errors.Join(errs...))
		}
		return nil, fmt.Errorf("comm: rank %d: %w", c.rank, errors.Join(errs...))
	}
	return out, nil
}

// Close leaves the job: it stops the monitor and closes the sockets and
// the bootstrap (on rank 0, which runs the rendezvous, that waits for the
// other ranks to close theirs). Memory from Exchange and Connect is the
// caller's to close; peers keep their own mappings of this rank's memory.
func (c *Comm) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	failed := c.err != nil
	c.mu.Unlock()
	c.stop()
	c.watched.Wait()
	c.closeNet()
	err := c.bs.Close()
	for _, l := range c.links {
		l.close()
	}
	if err != nil && !failed {
		return fmt.Errorf("comm: rank %d: close: %w", c.rank, err)
	}
	return nil
}

func sorted(rs []int) []int {
	sort.Ints(rs)
	return rs
}
