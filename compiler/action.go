package compiler

import (
	"fmt"
	"strings"

	"github.com/msccl-go/msccl-go/dsl"
	"github.com/msccl-go/msccl-go/ir"
)

// aref is one buffer reference of an action: rank is the rank whose
// memory it is, packet says the bytes hold LL packets.
type aref struct {
	rank   int
	idx    int
	size   int
	buf    ir.BufferType // the small fields share a word: a million ops hold two arefs each
	packet bool
}

func (r aref) String() string {
	p := ""
	if r.packet {
		p = "pkt"
	}
	return fmt.Sprintf("r%d.%s[%d:%d]%s", r.rank, r.buf, r.idx, r.idx+r.size, p)
}

// action is one plan op before channels and ids are resolved.
type action struct {
	// seq and tbHint share a word; both fit in 32 bits: evaluate caps
	// ops at 4M and instances at 64, `tb` at 1023.
	seq    int32
	tbHint int32 // from `tb N`; -1 when absent
	rank   int   // executing rank
	tb     int   // -1 until assign-tbs
	// The action's first wait and signal, and where sync put the rest
	// (see syncLists).
	wait1, signal1     syncItem
	waitsAt, signalsAt int32
	// The one-byte fields share a word: there are millions of actions.
	code   ir.OpCode
	chType ir.ChannelType // channel type of remote refs; ChanNone when local
	// dead marks an action fused into an earlier one.
	dead     bool
	explicit bool
	// red is the reduction's index in reduceOps, one byte in the shared
	// word rather than a 16-byte string in every action.
	red uint8
	// sync is what the sync pass notes for the action (two flags, in the
	// shared word too).
	sync nodeSync
	src  []aref
	dst  []aref
	pos  *dsl.Range // shared by the actions of one statement
	// ch holds the fields only channel-level ops use; nil for chunk-level
	// ones, which are millions and need none of them.
	ch *chanLevel
	// links: the channels of port data ops and channel-level ops; nil
	// for the million memory copies and puts that have none.
	links *actLinks
}

// reduceOps are the reductions evaluate accepts (the `reduce` option and
// `op` clauses check their names), "" first.
var reduceOps = [...]ir.ReduceOp{ir.ReduceNone, ir.ReduceSum, ir.ReduceMin, ir.ReduceMax, ir.ReduceProd}

// setReduce sets a's reduction.
func (a *action) setReduce(r ir.ReduceOp) {
	for i, x := range reduceOps {
		if x == r {
			a.red = uint8(i)
			return
		}
	}
	panic(fmt.Sprintf("compiler: reduction %q was not checked", r))
}

// reduce returns a's reduction.
func (a *action) reduce() ir.ReduceOp { return reduceOps[a.red] }

// actLinks holds the channels an action uses, behind a pointer: 40 bytes
// less per action for the many that have none.
type actLinks struct {
	// chans: for port data ops, the channel carrying each remote dst;
	// for channel-level ops, the pair of each peer.
	chans []chanPair
	// outs are the port channels of edges leaving a port data op (which
	// dataPairs picks its channels from).
	outs []chanPair
}

// chanList returns a.links.chans, nil when a has no links.
func (a *action) chanList() []chanPair {
	if a.links == nil {
		return nil
	}
	return a.links.chans
}

// ownLinks returns a's links for writing, making them if needed.
func (a *action) ownLinks() *actLinks {
	if a.links == nil {
		a.links = &actLinks{}
	}
	return a.links
}

// chanLevel is the part of an action only channel-level ops have.
type chanLevel struct {
	peers   []peerSpec // signal/wait/flush targets, port data channels
	sems    []int
	tbg     *ir.TBGInfo
	barrier [2]int // id, num blocks
	iter    *ir.IterContext
	body    []*action
}

// peers, sems, tbg, barrier, iter and body read a.ch, empty when nil.
func (a *action) peers() []peerSpec {
	if a.ch == nil {
		return nil
	}
	return a.ch.peers
}

func (a *action) body() []*action {
	if a.ch == nil {
		return nil
	}
	return a.ch.body
}

func (a *action) sems() []int {
	if a.ch == nil {
		return nil
	}
	return a.ch.sems
}

func (a *action) tbg() *ir.TBGInfo {
	if a.ch == nil {
		return nil
	}
	return a.ch.tbg
}

// block is one thread block's action list during compilation.
type block struct {
	rank, tb int
	acts     []*action
	n        int // compactBlocks: the number of actions, while it counts
}

func (a *action) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "r%d tb%d %s", a.rank, a.tb, a.code)
	writeRefs(&b, " src=", a.src)
	writeRefs(&b, " dst=", a.dst)
	if a.chType != ir.ChanNone {
		b.WriteString(" via " + a.chType.String())
	}
	for _, p := range a.peers() {
		fmt.Fprintf(&b, " to r%d@%d", p.rank, p.tb)
	}
	fmt.Fprintf(&b, "  // %d:%d", a.pos.Start.Line, a.pos.Start.Col)
	return b.String()
}

// writeRefs writes label and refs, comma-separated; nothing when there
// are none.
func writeRefs(b *strings.Builder, label string, refs []aref) {
	if len(refs) == 0 {
		return
	}
	b.WriteString(label)
	for i, r := range refs {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(r.String())
	}
}

// dumpActions writes the header and the live actions, or the evaluated
// ops when there are no actions yet.
func dumpActions(h *header, acts []*action, ops []*evOp) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s ranks=%d nodes=%d chunks in=%d out=%d instances=%d\n", h.collective, h.protocol, h.ranks, h.nodes, h.inChunks, h.outChunks, h.instances)
	if acts == nil {
		for _, o := range ops {
			fmt.Fprintf(&b, "%s %v -> %v  // %d:%d\n", o.name, o.src, o.dst, o.rng().Start.Line, o.rng().Start.Col)
		}
		return b.String()
	}
	for _, a := range acts {
		if a.dead {
			continue
		}
		b.WriteString(a.String())
		b.WriteByte('\n')
		for _, in := range a.body() {
			b.WriteString("    " + in.String() + "\n")
		}
	}
	return b.String()
}

func (lw *lowerer) newAction() *action {
	if len(lw.actSlab) == cap(lw.actSlab) {
		lw.actSlab = make([]action, 0, slabSize(cap(lw.actSlab), 1024))
	}
	lw.actSlab = lw.actSlab[:len(lw.actSlab)+1]
	return &lw.actSlab[len(lw.actSlab)-1]
}

// slabSize is the size of a slab following one of size prev: small
// programs start with small slabs, large ones soon reach limit.
func slabSize(prev, limit int) int {
	return min(max(32, 2*prev), limit)
}
