package compiler

// replicate implements `option instances = I`: every chunk is split into
// I pieces and every block into I copies, copy i moving piece i. A
// reference to chunks [c, c+s) becomes [c*I + i*s, c*I + (i+1)*s), so two
// references of equal size that named the same data still do. Blocks
// become tb*I + i (peer block references alike), semaphores and barrier
// ids likewise.
func replicate(st *state, p *program) {
	I := p.hdr.instances
	if I <= 1 {
		return
	}
	h := &p.hdr
	h.inChunks *= I
	h.outChunks *= I
	out := make([]*action, 0, len(p.actions)*I)
	for _, a := range p.actions {
		// Undo compaction's peer renumbering is unnecessary: it happened on
		// dense ids, which we scale here consistently.
		for i := 0; i < I; i++ {
			c := a.instance(I, i)
			c.seq = int32(len(out))
			out = append(out, c)
		}
	}
	p.actions = out
	for _, a := range p.actions {
		a.tbHint = int32(a.tb)
	}
	compactBlocks(st, p)
}

func (a *action) instance(I, i int) *action {
	c := *a
	c.src = scaleRefs(a.src, I, i)
	c.dst = scaleRefs(a.dst, I, i)
	c.tb = a.tb*I + i
	if a.links != nil {
		// Each instance settles its own channels.
		l := *a.links
		c.links = &l
	}
	if a.ch == nil {
		return &c
	}
	ch := *a.ch
	c.ch = &ch
	ch.peers = make([]peerSpec, len(a.ch.peers))
	for k, p := range a.ch.peers {
		if p.tb >= 0 {
			p.tb = p.tb*I + i
		}
		ch.peers[k] = p
	}
	if a.ch.sems != nil {
		ch.sems = make([]int, len(a.ch.sems))
		for k, s := range a.ch.sems {
			ch.sems[k] = s*I + i
		}
	}
	ch.barrier[0] = a.ch.barrier[0]*I + i
	ch.body = nil
	for _, in := range a.ch.body {
		ch.body = append(ch.body, in.instance(I, i))
	}
	return &c
}

func scaleRefs(refs []aref, I, i int) []aref {
	if refs == nil {
		return nil
	}
	out := make([]aref, len(refs))
	for k, r := range refs {
		r.idx = r.idx*I + i*r.size
		out[k] = r
	}
	return out
}
