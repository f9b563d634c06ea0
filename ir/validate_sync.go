package ir

// usage records, per rank, which GPU channels some op signals on, and
// which blocks take part in each barrier. The wait and barrier checks need
// the whole rank (and its peers) at hand, so Validate gathers it first.
type usage struct {
	signaled [numChanTypes][]bool // by GPU channel index: some op signals it
	waited   [numChanTypes][]bool
	barriers map[int]*barrierUse
}

type barrierUse struct {
	blocks   map[int]bool
	num      int    // num_threadblocks at the first use
	firstUse string // its path
}

// gatherUsage fills v.use[r] (worker w is unused: par.ForEach's signature).
func (v *validator) gatherUsage(_, r int) {
	u := &v.use[r]
	for t := range u.signaled {
		u.signaled[t], u.waited[t] = make([]bool, len(v.flat[r][t])), make([]bool, len(v.flat[r][t]))
	}
	u.barriers = map[int]*barrierUse{}
	g := &v.p.GPUs[r]
	for t := range g.ThreadBlocks {
		tb := &g.ThreadBlocks[t]
		var tables [numChanTypes][]int
		for ct := ChanMemory; ct < numChanTypes; ct++ {
			tables[ct] = tb.ChannelTable(ct)
		}
		gp := jpath{key: "gpus", idx: r}
		tp := gp.at(".threadblocks", t)
		for i := range tb.Ops {
			op := &tb.Ops[i]
			opPath := tp.at(".ops", i)
			v.noteUse(u, r, t, op, &opPath, &tables)
			if len(op.Ops()) > 0 {
				v.noteBody(u, r, t, op.Ops(), heapPath(&opPath), &tables)
			}
		}
	}
}

func (v *validator) noteBody(u *usage, r, t int, ops []Op, path *jpath, tables *[numChanTypes][]int) {
	for i := range ops {
		opPath := &jpath{up: path, key: ".ops", idx: i}
		v.noteUse(u, r, t, &ops[i], opPath, tables)
		if len(ops[i].Ops()) > 0 {
			v.noteBody(u, r, t, ops[i].Ops(), opPath, tables)
		}
	}
}

func (v *validator) noteUse(u *usage, r, t int, op *Op, path *jpath, tables *[numChanTypes][]int) {
	if op.Code == OpBarrier {
		b := u.barriers[op.BarrierID()]
		if b == nil {
			b = &barrierUse{blocks: map[int]bool{}, num: op.NumTBs(), firstUse: path.String()}
			u.barriers[op.BarrierID()] = b
		}
		b.blocks[t] = true
	}
	ct := op.ChannelType
	if ct != ChanMemory && ct != ChanPort {
		return
	}
	var m []bool
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
	if back := v.byPeer[fc.Peer][t][r]; fc.Nth < len(back) {
		return fc.Peer, back[fc.Nth], true
	}
	return 0, 0, false
}

// syncPartner checks the far end of a signal or wait whose channel has a
// partner: a wait that nothing on the peer signals can never return; a
// signal that nothing on the peer waits for is left unconsumed.
func (v *validator) syncPartner(c *blockCtx, op *Op, jp *jpath, id, gi, peer, pj int) {
	t := op.ChannelType
	switch op.Code {
	case OpWait, OpRlxWait:
		if !v.use[peer].signaled[t][pj] {
			v.codep(jp, "", CodeUnsignaledWait, "%s on %s channel %d (gpu channel %d, to rank %d) can never return: no op of rank %d signals its partner, gpu channel %d",
				op.Code, t, id, gi, peer, peer, pj)
		}
	case OpSignal, OpRlxSignal, OpPws, OpPwsf:
		if !v.use[peer].waited[t][pj] {
			v.warnp(jp, "", "%s on %s channel %d (gpu channel %d, to rank %d) is never consumed: no op of rank %d waits on its partner, gpu channel %d",
				op.Code, t, id, gi, peer, peer, pj)
		}
	}
}

// barrier checks that a barrier can complete: every use of one barrier
// id on a rank agrees on the block count, and that many blocks use it.
func (v *validator) barrier(c *blockCtx, op *Op, jp *jpath) {
	b := v.use[c.r].barriers[op.BarrierID()]
	if b == nil || op.NumTBs() < 1 || op.NumTBs() > len(c.g.ThreadBlocks) {
		return
	}
	path := jp.String()
	switch {
	case op.NumTBs() != b.num:
		v.errorf(path+".num_threadblocks", "barrier %d is used with num_threadblocks %d here but %d at %s", op.BarrierID(), op.NumTBs(), b.num, b.firstUse)
	case len(b.blocks) < op.NumTBs() && b.firstUse == path:
		v.errorf(path+".num_threadblocks", "barrier %d waits for %d blocks but only %s of gpu %d use it, so it can never complete", op.BarrierID(), op.NumTBs(), count(len(b.blocks), "block"), c.r)
	}
}
