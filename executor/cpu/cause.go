package cpu

import (
	"fmt"
	"slices"

	"github.com/msccl-go/msccl-go/ir"
)

// A race names two accesses, which is the symptom; the mistake is usually
// one missing step next to one of them. raceCause reads the plan around
// the two ops for the mistakes people make most (docs/model.md's rules,
// one each) and names the step, so a report can say "add a nop after the
// wait at ..." instead of leaving the reader to work it out.

// CauseKind is a known mistake behind a race.
type CauseKind uint8

const (
	// CauseNopBetween: two ops of one block touch the bytes with no nop
	// between them (threads stride differently from op to op).
	CauseNopBetween CauseKind = iota + 1
	// CauseNopAfterWait: a block reads a peer's data after its wait with
	// no nop between: only the waiting thread has acquired.
	CauseNopAfterWait
	// CauseNopBeforeSignal: a block writes, then signals with no nop
	// between: the signal publishes the signalling thread's writes only.
	CauseNopBeforeSignal
	// CauseFlush: a port put's source is rewritten in its block with no
	// flush between: the proxy may still be copying it.
	CauseFlush
	// CauseRelaxed: the only signal (or wait) between a write and a peer's
	// read is relaxed, which orders execution but publishes no data.
	CauseRelaxed
	// CauseChannelMismatch: a port put is published by a signal on a
	// memory channel, which does not wait for the proxy's copy.
	CauseChannelMismatch
	// CauseWaitAfterRead: the wait on the writer comes after the read.
	CauseWaitAfterRead
)

// Cause is the step a racing plan is missing: the op the fix goes next
// to (At) and the other op the fix concerns (Other). The zero Cause
// names none.
type Cause struct {
	Kind      CauseKind
	At, Other Place
}

// fixWords words each kind's fix from the At op and the Other op.
var fixWords = [...]string{
	CauseNopBetween:      "add a nop between the %s and the %s: ops of one block are unordered between nops",
	CauseNopAfterWait:    "add a nop after the %s: only the thread that waited has acquired the peer's writes, and the %s reads them with every thread",
	CauseNopBeforeSignal: "add a nop before the %s: a signal publishes what the signalling thread wrote, not what the other threads of the %s wrote",
	CauseFlush:           "add a flush after the port %s: the proxy may still be copying its source when the %s rewrites it",
	CauseRelaxed:         "the %s is relaxed and publishes no data: use signal and wait to make what the %s wrote readable",
	CauseChannelMismatch: "the %s goes over a port channel, but the %s is on a memory channel, which does not wait for the proxy's copy: signal on the put's port channel (or flush before signalling)",
	CauseWaitAfterRead:   "move the %s (and a nop after it) before the %s: the read is not ordered after the peer's signal",
}

// Fix words the missing step; where names an op's location (its source
// position or plan path, with the leading "at").
func (c Cause) Fix(where func(Place) string) string {
	if c.Kind == 0 || int(c.Kind) >= len(fixWords) {
		return ""
	}
	return fmt.Sprintf(fixWords[c.Kind], opWords(c.At, where), opWords(c.Other, where))
}

// opWords names an op with where's location, or a rank's host.
func opWords(pl Place, where func(Place) string) string {
	if pl.Block < 0 {
		return fmt.Sprintf("host of rank %d (between launches)", pl.Rank)
	}
	return pl.OpName + " " + where(pl)
}

// raceCause finds the step missing between the two accesses of a race;
// its Kind is 0 when none of the known mistakes fits.
func raceCause(p *ir.Plan, a, b Access) Cause {
	if a.Inner >= 0 || b.Inner >= 0 {
		return Cause{} // pipeline bodies repeat; their ops are not read here
	}
	if a.Block >= 0 && a.Rank == b.Rank && a.Block == b.Block {
		if b.Op < a.Op {
			a, b = b, a
		}
		return blockCause(p, a, b)
	}
	if c := proxySourceCause(p, a, b); c.Kind != 0 {
		return c
	}
	w, r := a, b
	if !w.Write {
		w, r = b, a
	}
	if !w.Write || r.Write || w.Block < 0 || w.Rank == r.Rank {
		return Cause{}
	}
	return publishCause(p, w, r)
}

// proxySourceCause: a port put's source, read by the proxy, rewritten on
// its rank by another block or by the host after the kernel, with no
// flush after the put in its block.
func proxySourceCause(p *ir.Plan, a, b Access) Cause {
	for _, x := range [2][2]Access{{a, b}, {b, a}} {
		rd, wr := x[0], x[1]
		if rd.Block < 0 || rd.Write || !wr.Write || wr.Rank != rd.Rank || wr.Block == rd.Block {
			continue
		}
		ops := p.GPUs[rd.Rank].ThreadBlocks[rd.Block].Ops
		if rd.Op >= len(ops) {
			continue
		}
		put := &ops[rd.Op]
		if put.ChannelType != ir.ChanPort || put.Info().Class == ir.ClassSync || put.Code == ir.OpPwsf || hasOp(ops[rd.Op+1:], ir.OpFlush) {
			continue
		}
		return Cause{Kind: CauseFlush, At: rd.Place, Other: wr.Place}
	}
	return Cause{}
}

// blockCause: a and b are ops of one block, a first.
func blockCause(p *ir.Plan, a, b Access) Cause {
	ops := p.GPUs[a.Rank].ThreadBlocks[a.Block].Ops
	if a.Op == b.Op || b.Op >= len(ops) {
		return Cause{}
	}
	first := &ops[a.Op]
	if !a.Write && b.Write && first.ChannelType == ir.ChanPort && first.Info().Class != ir.ClassSync {
		// The proxy reads a port put's source; a nop does not wait for it.
		if first.Code == ir.OpPwsf || hasOp(ops[a.Op+1:b.Op], ir.OpFlush) {
			return Cause{}
		}
		return Cause{Kind: CauseFlush, At: a.Place, Other: b.Place}
	}
	if hasOp(ops[a.Op+1:b.Op], ir.OpNop, ir.OpBarrier) {
		return Cause{}
	}
	return Cause{Kind: CauseNopBetween, At: a.Place, Other: b.Place}
}

// publishCause: w writes what another rank's op (or host) r reads.
func publishCause(p *ir.Plan, w, r Access) Cause {
	wops := p.GPUs[w.Rank].ThreadBlocks[w.Block].Ops
	wop := &wops[w.Op]
	// The writer's first release and relaxed signals to the reader's
	// rank after the write.
	rel, rlx := -1, -1
	for k := w.Op; k < len(wops); k++ {
		op := &wops[k]
		switch op.Code {
		case ir.OpSignal, ir.OpPws, ir.OpPwsf:
			if rel < 0 && slices.Contains(chanPeers(p, w.Rank, w.Block, op), r.Rank) {
				rel = k
			}
		case ir.OpRlxSignal:
			if rlx < 0 && slices.Contains(chanPeers(p, w.Rank, w.Block, op), r.Rank) {
				rlx = k
			}
		}
	}
	if rel < 0 {
		if rlx >= 0 {
			return Cause{Kind: CauseRelaxed, At: opPlace(p, w.Rank, w.Block, rlx), Other: w.Place}
		}
		return Cause{}
	}
	sig := &wops[rel]
	if rel > w.Op {
		if wop.ChannelType == ir.ChanPort && wop.Info().Class != ir.ClassSync && sig.ChannelType == ir.ChanMemory && !hasOp(wops[w.Op+1:rel], ir.OpFlush) {
			return Cause{Kind: CauseChannelMismatch, At: w.Place, Other: opPlace(p, w.Rank, w.Block, rel)}
		}
		if wop.ChannelType != ir.ChanPort && !hasOp(wops[w.Op+1:rel], ir.OpNop, ir.OpBarrier) {
			return Cause{Kind: CauseNopBeforeSignal, At: opPlace(p, w.Rank, w.Block, rel), Other: w.Place}
		}
	}
	if r.Block < 0 {
		return Cause{} // the host reads after its kernel's end, a fence of every block
	}
	// The wait that consumes the writer's signal: the n-th wait on the
	// partner channel takes the n-th signal.
	rops := p.GPUs[r.Rank].ThreadBlocks[r.Block].Ops
	k := pairedWait(p, w, rel, r)
	switch {
	case k < 0 || r.Op >= len(rops):
		return Cause{}
	case k < r.Op:
		if rops[k].Code == ir.OpRlxWait {
			return Cause{Kind: CauseRelaxed, At: opPlace(p, r.Rank, r.Block, k), Other: w.Place}
		}
		if hasOp(rops[k+1:r.Op], ir.OpNop, ir.OpBarrier) {
			return Cause{}
		}
		return Cause{Kind: CauseNopAfterWait, At: opPlace(p, r.Rank, r.Block, k), Other: r.Place}
	}
	// The wait comes after the read. If the reader signals the writer in
	// between, the read was meant to come first (the writer should have
	// waited for that signal): no step of the reader's is missing.
	for j := r.Op + 1; j < k; j++ {
		switch rops[j].Code {
		case ir.OpSignal, ir.OpRlxSignal, ir.OpPws, ir.OpPwsf:
			if slices.Contains(chanPeers(p, r.Rank, r.Block, &rops[j]), w.Rank) {
				return Cause{}
			}
		}
	}
	return Cause{Kind: CauseWaitAfterRead, At: opPlace(p, r.Rank, r.Block, k), Other: r.Place}
}

// pairedWait returns the op index in r's block of the wait (or rlxwait)
// that consumes the signal at op sig of w's block, or -1.
func pairedWait(p *ir.Plan, w Access, sig int, r Access) int {
	wtb := &p.GPUs[w.Rank].ThreadBlocks[w.Block]
	op := &wtb.Ops[sig]
	t := op.ChannelType
	table := wtb.ChannelTable(t)
	ch := -1
	for _, id := range op.ChannelIDs {
		if id >= 0 && id < len(table) {
			if peer, _, ok := p.Partner(w.Rank, t, table[id]); ok && peer == r.Rank {
				ch = table[id]
				break
			}
		}
	}
	if ch < 0 {
		return -1
	}
	_, pch, _ := p.Partner(w.Rank, t, ch)
	n := countOn(wtb, t, ch, sig+1, ir.OpSignal, ir.OpRlxSignal, ir.OpPws, ir.OpPwsf)
	rtb := &p.GPUs[r.Rank].ThreadBlocks[r.Block]
	for k := range rtb.Ops {
		if op := &rtb.Ops[k]; (op.Code == ir.OpWait || op.Code == ir.OpRlxWait) && usesChan(rtb, op, t, pch) {
			if n--; n == 0 {
				return k
			}
		}
	}
	return -1
}

// countOn counts the ops among tb's first n of the codes that use GPU
// channel ch of type t.
func countOn(tb *ir.ThreadBlock, t ir.ChannelType, ch, n int, codes ...ir.OpCode) int {
	c := 0
	for k := 0; k < n && k < len(tb.Ops); k++ {
		if op := &tb.Ops[k]; op.ChannelType == t && slices.Contains(codes, op.Code) && usesChan(tb, op, t, ch) {
			c++
		}
	}
	return c
}

// usesChan reports whether op of tb names GPU channel ch of type t.
func usesChan(tb *ir.ThreadBlock, op *ir.Op, t ir.ChannelType, ch int) bool {
	if op.ChannelType != t {
		return false
	}
	table := tb.ChannelTable(t)
	for _, id := range op.ChannelIDs {
		if id >= 0 && id < len(table) && table[id] == ch {
			return true
		}
	}
	return false
}

// hasOp reports whether ops holds an op of one of the codes.
func hasOp(ops []ir.Op, codes ...ir.OpCode) bool {
	for i := range ops {
		if slices.Contains(codes, ops[i].Code) {
			return true
		}
	}
	return false
}

// chanPeers lists the ranks at the other end of op's channels.
func chanPeers(p *ir.Plan, rank, block int, op *ir.Op) []int {
	g := &p.GPUs[rank]
	table := g.ThreadBlocks[block].ChannelTable(op.ChannelType)
	flat := g.FlatChannels(op.ChannelType)
	var peers []int
	for _, id := range op.ChannelIDs {
		if id >= 0 && id < len(table) && table[id] >= 0 && table[id] < len(flat) {
			peers = append(peers, flat[table[id]].Peer)
		}
	}
	return peers
}

// planWhere names an op by its plan path, for reports without a source.
func planWhere(pl Place) string { return "at " + pl.Path() }

func opPlace(p *ir.Plan, rank, block, op int) Place {
	return Place{Rank: rank, Block: block, Op: op, Inner: -1, OpName: p.GPUs[rank].ThreadBlocks[block].Ops[op].Code.String()}
}
