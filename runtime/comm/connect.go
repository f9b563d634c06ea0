package comm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"

	"github.com/msccl-go/msccl-go/internal/socket"
	"github.com/msccl-go/msccl-go/ir"
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
	Type  ir.ChannelType
	Index int // position in the rank's channels of this type (ir.GPU.FlatChannels)
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

// Connections are a plan's channels on this rank, the semaphore words
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

// Chans returns the channels of type t (memory or port).
func (cs *Connections) Chans(t ir.ChannelType) []Channel {
	if t == ir.ChanPort {
		return cs.Port
	}
	return cs.Memory
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

// syncOffset is where the inbound word of channel idx of type t of a
// rank with nMem memory channels lives in its sync region: memory
// channels first, then port channels. Every rank computes it for every
// other from the plan, so no offsets travel.
func syncOffset(t ir.ChannelType, idx, nMem int) int64 {
	if t == ir.ChanPort {
		idx += nMem
	}
	return int64(idx) * WordBytes
}

// Connect builds p's memory and port channels for this rank: it
// allocates the rank's sync region (one word per inbound channel end),
// exchanges it with the node's ranks and pairs every channel with its
// partner by the plan's rule. Collective.
func (c *Comm) Connect(ctx context.Context, p *ir.Plan) (*Connections, error) {
	// First, so that every rank reaches the all-gather before any refuses.
	if err := c.samePlan(ctx, p); err != nil {
		return nil, err
	}
	if len(p.GPUs) != c.size {
		return nil, fmt.Errorf("comm: plan %q has %d ranks, the job has %d", p.Name, len(p.GPUs), c.size)
	}
	me := &p.GPUs[c.rank]
	mem, port := me.FlatChannels(ir.ChanMemory), me.FlatChannels(ir.ChanPort)
	// Refuse before allocating what cannot be connected: memory is
	// shared within a node only; port channels cross nodes through the
	// socket transport (net.go).
	for _, fc := range mem {
		if fc.Peer < 0 || fc.Peer >= c.size {
			return nil, fmt.Errorf("comm: gpus[%d]: channel to rank %d, outside the job's %d ranks", c.rank, fc.Peer, c.size)
		}
		if !c.SameNode(fc.Peer) {
			return nil, fmt.Errorf("comm: gpus[%d]: a memory channel to rank %d, which is on node %q (this rank: %q); memory channels connect ranks of one node only (use a port channel across nodes)", c.rank, fc.Peer, c.nodes[fc.Peer], c.nodes[c.rank])
		}
	}
	for _, fc := range port {
		if fc.Peer < 0 || fc.Peer >= c.size {
			return nil, fmt.Errorf("comm: gpus[%d]: channel to rank %d, outside the job's %d ranks", c.rank, fc.Peer, c.size)
		}
	}
	for i, rb := range me.RemoteBuffers {
		if rb.Rank < 0 || rb.Rank >= c.size {
			return nil, fmt.Errorf("comm: gpus[%d].remote_buffers[%d]: rank %d, outside the job's %d ranks", c.rank, i, rb.Rank, c.size)
		}
		if c.SameNode(rb.Rank) {
			continue
		}
		for _, t := range rb.AccessChannelTypes {
			if t != ir.ChanPort {
				return nil, fmt.Errorf("comm: gpus[%d].remote_buffers[%d]: rank %d is on node %q (this rank: %q) and the buffer is reached over %s channels; only port channels cross nodes", c.rank, i, rb.Rank, c.nodes[rb.Rank], c.nodes[c.rank], t)
			}
		}
	}
	if err := c.connectNet(ctx, p); err != nil {
		return nil, err
	}
	n := len(mem) + len(port) + 1 // the last word is the pulse
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
			g := &p.GPUs[r]
			cs.Pulse[r] = Loc{m, int64(len(g.FlatChannels(ir.ChanMemory))+len(g.FlatChannels(ir.ChanPort))) * WordBytes}
		}
	}
	for _, t := range []ir.ChannelType{ir.ChanMemory, ir.ChanPort} {
		flat := mem
		if t == ir.ChanPort {
			flat = port
		}
		ends := make([]Channel, len(flat))
		for i, fc := range flat {
			e := Channel{Type: t, Index: i, Peer: fc.Peer, Partner: -1, Inbound: Loc{own, syncOffset(t, i, len(mem))}}
			if _, j, ok := p.Partner(c.rank, t, i); ok {
				e.Partner = j
				if c.SameNode(fc.Peer) {
					peerMem := len(p.GPUs[fc.Peer].FlatChannels(ir.ChanMemory))
					e.Remote = Loc{all[fc.Peer], syncOffset(t, j, peerMem)}
				} else if e.Net = c.NetConn(fc.Peer); e.Net == nil {
					cs.Close()
					return nil, fmt.Errorf("comm: gpus[%d]: no socket connection to rank %d on node %q", c.rank, fc.Peer, c.nodes[fc.Peer])
				}
			}
			ends[i] = e
		}
		if t == ir.ChanPort {
			cs.Port = ends
		} else {
			cs.Memory = ends
		}
	}
	return cs, nil
}

// samePlan checks that every rank connects the same plan: ranks that ran
// different plans would signal words their peers never wait on and hang,
// or write where the peer keeps something else. Collective.
func (c *Comm) samePlan(ctx context.Context, p *ir.Plan) error {
	data, err := ir.Encode(p)
	if err != nil {
		return fmt.Errorf("comm: plan %q: %w", p.Name, err)
	}
	sum := sha256.Sum256(data)
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
		return fmt.Errorf("comm: rank %d: ranks %v connect a different plan than this rank's %q (every rank must open the same plan)", c.rank, other, p.Name)
	}
	return nil
}
