package compiler

import (
	"slices"

	"github.com/msccl-go/msccl-go/internal/intset"
	"github.com/msccl-go/msccl-go/internal/par"
	"github.com/msccl-go/msccl-go/ir"
)

// fuseSync merges what sync left side by side in a block: consecutive
// signals (waits, relaxed variants, flushes, semaphore ops) of one channel
// type become one multi-channel op; duplicate nops collapse; a port put
// followed by a port signal on exactly its channels becomes pws, and a flush of
// them after that makes it pwsf.
func fuseSync(b *built) {
	n := len(b.plan.GPUs)
	workers := par.Workers(n)
	if len(b.sm.inner) > 0 {
		// moveOp rewrites the shared map of pipeline body sources.
		workers = 1
	}
	par.ForEach(workers, n, func(_, r int) { fuseRank(b, r) })
}

func fuseRank(b *built, r int) {
	g := &b.plan.GPUs[r]
	for t := range g.ThreadBlocks {
		tb := &g.ThreadBlocks[t]
		// Compact in place: the write index never passes the read index.
		n := 0
		for i := range tb.Ops {
			if n > 0 && fuseInto(&tb.Ops[n-1], &tb.Ops[i]) {
				b.sm.moveOp(r, t, i, -1)
				continue
			}
			if n != i {
				tb.Ops[n] = tb.Ops[i]
				b.sm.moveOp(r, t, i, n)
			}
			n++
		}
		tb.Ops = tb.Ops[:n]
		b.sm.ops[r][t] = b.sm.ops[r][t][:n]
	}
}

// fuseInto merges op into prev when one op can do both.
func fuseInto(prev, op *ir.Op) bool {
	switch op.Code {
	case ir.OpNop:
		return prev.Code == ir.OpNop
	case ir.OpSignal, ir.OpWait, ir.OpRlxSignal, ir.OpRlxWait, ir.OpFlush:
		// Channel ids index a per-type table of the block: memory channel
		// 0 and port channel 0 are different channels, so only a port
		// signal on the put's own channels joins it.
		samePort := prev.ChannelType == ir.ChanPort && op.ChannelType == ir.ChanPort && intset.Same(prev.ChannelIDs, op.ChannelIDs)
		if prev.Code == ir.OpPut && op.Code == ir.OpSignal && samePort {
			prev.Code = ir.OpPws
			return true
		}
		if prev.Code == ir.OpPws && op.Code == ir.OpFlush && samePort {
			prev.Code = ir.OpPwsf
			return true
		}
		if prev.Code != op.Code || prev.ChannelType != op.ChannelType || len(prev.ChannelIDs)+len(op.ChannelIDs) > ir.MaxChannelsPerOp {
			return false
		}
		for _, id := range op.ChannelIDs {
			if slices.Contains(prev.ChannelIDs, id) {
				if op.Code == ir.OpFlush {
					continue
				}
				// Two tokens on one channel cannot share an op.
				return false
			}
		}
		for _, id := range op.ChannelIDs {
			if !slices.Contains(prev.ChannelIDs, id) {
				prev.ChannelIDs = append(prev.ChannelIDs, id)
			}
		}
		return true
	case ir.OpSemRelease, ir.OpSemAcquire:
		// The executor's op holds a fixed number of semaphore ids; past it
		// the ops stay apart (a block of 31 peers would otherwise release
		// all of them in one op that upstream cannot load).
		if prev.Code != op.Code || len(prev.SemaphoreIDs())+len(op.SemaphoreIDs()) > ir.MaxSemaphoresPerOp {
			return false
		}
		for _, id := range op.SemaphoreIDs() {
			if slices.Contains(prev.SemaphoreIDs(), id) {
				return false
			}
		}
		prev.SetSemaphoreIDs(append(prev.SemaphoreIDs(), op.SemaphoreIDs()...))
		return true
	}
	return false
}
