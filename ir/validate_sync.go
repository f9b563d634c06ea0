package ir

import "fmt"

// usage records, per rank, which GPU channels some op signals on, and
// which blocks take part in each barrier. The wait and barrier checks need
// the whole rank (and its peers) at hand, so Validate gathers it first.
type usage struct {
	signaled [numChanTypes]map[int]bool // GPU channel index → some op signals it
	waited   [numChanTypes]map[int]bool
	barriers map[int]*barrierUse
}

type barrierUse struct {
	blocks   map[int]bool
	num      int    // num_threadblocks at the first use
	firstUse string // its path
}

func (v *validator) gatherUsage() {
	v.use = make([]usage, len(v.p.GPUs))
	for r := range v.p.GPUs {
		u := &v.use[r]
		for t := range u.signaled {
			u.signaled[t], u.waited[t] = map[int]bool{}, map[int]bool{}
		}
		u.barriers = map[int]*barrierUse{}
		g := &v.p.GPUs[r]
		for t := range g.ThreadBlocks {
			tb := &g.ThreadBlocks[t]
			var tables [numChanTypes][]int
			for ct := ChanMemory; ct < numChanTypes; ct++ {
				tables[ct] = tb.ChannelTable(ct)
			}
			var walk func(ops []Op, path string)
			walk = func(ops []Op, path string) {
				for i := range ops {
					op := &ops[i]
					// Paths are only needed for barriers and bodies; building
					// one per op would dominate the cost of this pass.
					opPath := ""
					if op.Code == OpBarrier || len(op.Ops) > 0 {
						opPath = fmt.Sprintf("%s.ops[%d]", path, i)
					}
					v.noteUse(u, r, t, op, opPath, &tables)
					walk(op.Ops, opPath)
				}
			}
			walk(tb.Ops, fmt.Sprintf("gpus[%d].threadblocks[%d]", r, t))
		}
	}
}

func (v *validator) noteUse(u *usage, r, t int, op *Op, path string, tables *[numChanTypes][]int) {
	if op.Code == OpBarrier {
		b := u.barriers[op.BarrierID]
		if b == nil {
			b = &barrierUse{blocks: map[int]bool{}, num: op.NumTBs, firstUse: path}
			u.barriers[op.BarrierID] = b
		}
		b.blocks[t] = true
	}
	ct := op.ChannelType
	if ct != ChanMemory && ct != ChanPort {
		return
	}
	var m map[int]bool
	switch op.Code {
	case OpSignal, OpRlxSignal, OpPws, OpPwsf:
		m = u.signaled[ct]
	case OpWait, OpRlxWait:
		m = u.waited[ct]
	default:
		return
	}
	for _, id := range op.ChannelIDs {
		if id >= 0 && id < len(tables[ct]) && tables[ct][id] >= 0 && tables[ct][id] < len(v.flat[r][ct]) {
			m[tables[ct][id]] = true
		}
	}
}

// partner is Plan.Partner over the validator's cached channel lists.
func (v *validator) partner(r int, t ChannelType, gi int) (peer, peerIdx int, ok bool) {
	fc := v.flat[r][t][gi]
	if fc.Peer < 0 || fc.Peer >= len(v.p.GPUs) || fc.Peer == r {
		return 0, 0, false
	}
	for j, pc := range v.flat[fc.Peer][t] {
		if pc.Peer == r && pc.Nth == fc.Nth {
			return fc.Peer, j, true
		}
	}
	return 0, 0, false
}

// syncPartner checks the far end of a signal or wait whose channel has a
// partner: a wait that nothing on the peer signals can never return; a
// signal that nothing on the peer waits for is left unconsumed.
func (v *validator) syncPartner(c *blockCtx, op *Op, jp string, id, gi, peer, pj int) {
	t := op.ChannelType
	switch op.Code {
	case OpWait, OpRlxWait:
		if !v.use[peer].signaled[t][pj] {
			v.errorf(jp, "%s on %s channel %d (gpu channel %d, to rank %d) can never return: no op of rank %d signals its partner, gpu channel %d",
				op.Code, t, id, gi, peer, peer, pj)
		}
	case OpSignal, OpRlxSignal, OpPws, OpPwsf:
		if !v.use[peer].waited[t][pj] {
			v.warnf(jp, "%s on %s channel %d (gpu channel %d, to rank %d) is never consumed: no op of rank %d waits on its partner, gpu channel %d",
				op.Code, t, id, gi, peer, peer, pj)
		}
	}
}

// barrier checks that a barrier can complete: every use of one barrier
// id on a rank agrees on the block count, and that many blocks use it.
func (v *validator) barrier(c *blockCtx, op *Op, path string) {
	b := v.use[c.r].barriers[op.BarrierID]
	if b == nil || op.NumTBs < 1 || op.NumTBs > len(c.g.ThreadBlocks) {
		return
	}
	switch {
	case op.NumTBs != b.num:
		v.errorf(path+".num_threadblocks", "barrier %d is used with num_threadblocks %d here but %d at %s", op.BarrierID, op.NumTBs, b.num, b.firstUse)
	case len(b.blocks) < op.NumTBs && b.firstUse == path:
		v.errorf(path+".num_threadblocks", "barrier %d waits for %d blocks but only %s of gpu %d use it, so it can never complete", op.BarrierID, op.NumTBs, count(len(b.blocks), "block"), c.r)
	}
}
