package comm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"

	"github.com/msccl-go/msccl-go/internal/socket"
)

// WordBytes is the size of one semaphore word in a sync region.
const WordBytes = 8

// Loc is a place in a Memory: a semaphore word.
type Loc struct {
	Mem Memory
	Off int64
}

// Channel is one end of a memory or port channel of this rank: a signal
// adds one to Remote (the inbound word of the paired end, in the peer's
// sync region); a wait waits for Inbound (in this rank's) to reach the
// count of signals it expects.
type Channel struct {
	Type  Kind
	Index int // position in the rank's channels of this kind (RankWiring.Memory or .Port)
	Peer  int
	// Partner is the paired channel's index at Peer, -1 when the peer
	// lists fewer channels back (a signal on it is an error; the plan
	// validator rejects plans that signal one).
	Partner int
	Inbound Loc
	Remote  Loc // zero when unpaired or when Peer is on another node
	// Net is the socket connection to Peer when it is on another node
	// (port channels only): a signal is a socket.Conn.Signal on Partner.
	Net *socket.Conn
}

// Connections are a Wiring's channels on this rank, the semaphore words
// behind them, and every node-local rank's sync region mapped here.
type Connections struct {
	Memory, Port []Channel
	Sync         []Memory // by rank: mapped sync regions (nil off node); [rank] is this rank's
	// Pulse is every node-local rank's liveness word (the last of its
	// sync region; zero Loc off node): an executor that advances its own
	// while its process runs lets the others tell a frozen process (one
	// stopped, or hung outside any wait) from one that merely waits.
	Pulse []Loc
}

// Close unmaps the peers' sync regions and frees this rank's.
func (cs *Connections) Close() error {
	var first error
	for _, m := range cs.Sync {
		if m != nil {
			if err := m.Close(); err != nil && first == nil {
				first = err
			}
		}
	}
	cs.Sync = nil
	return first
}

// syncOffset is where the inbound word of channel idx of kind k of a
// rank with nMem memory channels lives in its sync region: memory
// channels first, then port channels. Every rank computes it for every
// other from the Wiring, so no offsets travel.
func syncOffset(k Kind, idx, nMem int) int64 {
	if k == KindPort {
		idx += nMem
	}
	return int64(idx) * WordBytes
}

// Connect builds w's memory and port channels for this rank: it
// allocates the rank's sync region (one word per inbound channel end),
// exchanges it with the node's ranks and pairs every channel with its
// partner by the k-th-to-k-th rule (Wiring). Collective: every rank
// passes the same w.
func (c *Comm) Connect(ctx context.Context, w *Wiring) (*Connections, error) {
	// First, so that every rank reaches the all-gather before any refuses.
	if err := c.sameSource(ctx, w); err != nil {
		return nil, err
	}
	if len(w.Ranks) != c.size {
		return nil, fmt.Errorf("comm: plan %q has %d ranks, the job has %d", w.Name, len(w.Ranks), c.size)
	}
	me := &w.Ranks[c.rank]
	if err := c.checkReach(w); err != nil {
		return nil, err
	}
	if err := c.connectNet(ctx, w); err != nil {
		return nil, err
	}
	n := len(me.Memory) + len(me.Port) + 1 // the last word is the pulse
	own, err := c.dev.Alloc(int64(n) * WordBytes)
	if err != nil {
		return nil, fmt.Errorf("comm: allocating %d semaphore words on the %s device: %w", n, c.dev.Name(), err)
	}
	all, err := c.Exchange(ctx, own)
	if err != nil {
		own.Close()
		return nil, err
	}
	cs := &Connections{Sync: all, Pulse: make([]Loc, c.size)}
	for r, m := range all {
		if m != nil {
			cs.Pulse[r] = Loc{m, int64(len(w.Ranks[r].Memory)+len(w.Ranks[r].Port)) * WordBytes}
		}
	}
	for _, k := range []Kind{KindMemory, KindPort} {
		peers := me.chans(k)
		ends := make([]Channel, len(peers))
		for i, j := range w.partners(c.rank, k) {
			q := peers[i]
			e := Channel{Type: k, Index: i, Peer: q, Partner: j, Inbound: Loc{own, syncOffset(k, i, len(me.Memory))}}
			if j >= 0 {
				if c.SameNode(q) {
					e.Remote = Loc{all[q], syncOffset(k, j, len(w.Ranks[q].Memory))}
				} else if e.Net = c.NetConn(q); e.Net == nil {
					cs.Close()
					return nil, fmt.Errorf("comm: %s: no socket connection to rank %d on node %q", w.where(c.rank), q, c.nodes[q])
				}
			}
			ends[i] = e
		}
		if k == KindPort {
			cs.Port = ends
		} else {
			cs.Memory = ends
		}
	}
	return cs, nil
}

// checkReach refuses, before anything is allocated, what cannot be
// connected from this rank: a peer outside the job, and memory reached
// across nodes other than by port channels (memory is shared within a
// node only; port channels cross nodes through the socket transport,
// net.go).
func (c *Comm) checkReach(w *Wiring) error {
	me, at := &w.Ranks[c.rank], w.where(c.rank)
	for _, q := range me.Memory {
		if q < 0 || q >= c.size {
			return fmt.Errorf("comm: %s: channel to rank %d, outside the job's %d ranks", at, q, c.size)
		}
		if !c.SameNode(q) {
			return fmt.Errorf("comm: %s: a memory channel to rank %d, which is on node %q (this rank: %q); memory channels connect ranks of one node only (use a port channel across nodes)", at, q, c.nodes[q], c.nodes[c.rank])
		}
	}
	for _, q := range me.Port {
		if q < 0 || q >= c.size {
			return fmt.Errorf("comm: %s: channel to rank %d, outside the job's %d ranks", at, q, c.size)
		}
	}
	for i, rb := range me.Reach {
		where := rb.Where
		if where == "" {
			where = fmt.Sprintf("%s: remote buffer %d", at, i)
		}
		if rb.Rank < 0 || rb.Rank >= c.size {
			return fmt.Errorf("comm: %s: rank %d, outside the job's %d ranks", where, rb.Rank, c.size)
		}
		if c.SameNode(rb.Rank) {
			continue
		}
		for _, k := range rb.Over {
			if k != KindPort {
				return fmt.Errorf("comm: %s: rank %d is on node %q (this rank: %q) and the buffer is reached over %s channels; only port channels cross nodes", where, rb.Rank, c.nodes[rb.Rank], c.nodes[c.rank], k)
			}
		}
	}
	return nil
}

// sameSource checks that every rank connects the same source (plan):
// ranks that ran different plans would signal words their peers never
// wait on and hang, or write where the peer keeps something else.
// Collective.
func (c *Comm) sameSource(ctx context.Context, w *Wiring) error {
	sum := sha256.Sum256(w.Source)
	all, err := c.bs.AllGather(ctx, sum[:16])
	if err != nil {
		return fmt.Errorf("comm: rank %d: comparing plans: %w", c.rank, err)
	}
	var other []int
	for r, h := range all {
		if !bytes.Equal(h, sum[:16]) {
			other = append(other, r)
		}
	}
	if len(other) > 0 {
		return fmt.Errorf("comm: rank %d: ranks %v connect a different plan than this rank's %q (every rank must open the same plan)", c.rank, other, w.Name)
	}
	return nil
}
