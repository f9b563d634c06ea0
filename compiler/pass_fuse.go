package compiler

import "github.com/msccl-go/msccl-go/ir"

// fuse merges an action into the previous action of its block when one
// plan op can do both, as upstream's DSL does:
//
//	re/rre/repkt chains into one destination -> one multi-source reduce
//	re + put of the result   -> res      rre + put -> rres
//	repkt + ppkt             -> respkt   repkt + cpkt -> recpkt
//	recpkt + ppkt            -> recspkt
//	put + put, ppkt + ppkt   -> one op with several destinations
//
// Moving the later action up is only allowed when nothing any block did in
// between (in program order) touches what it accesses; the pass tracks the
// last write and last access of every chunk to check that.
func fuse(p *program) {
	if p.explicit {
		return
	}
	lastWrite, lastAny := newChunkTab(p.hdr.ranks), newChunkTab(p.hdr.ranks)
	prev := make([][]*action, p.hdr.ranks) // [rank][tb] last live action
	for r := range prev {
		prev[r] = make([]*action, len(p.blocks[r]))
	}
	record := func(a *action, seq int) {
		for _, s := range a.src {
			for i := s.idx; i < s.idx+s.size; i++ {
				lastAny.raise(s.rank, s.buf, i, seq)
			}
		}
		for _, d := range a.dst {
			for i := d.idx; i < d.idx+d.size; i++ {
				lastAny.raise(d.rank, d.buf, i, seq)
				lastWrite.raise(d.rank, d.buf, i, seq)
			}
		}
	}
	free := func(b *action, upTo int) bool {
		for _, s := range b.src {
			for i := s.idx; i < s.idx+s.size; i++ {
				if w, ok := lastWrite.get(s.rank, s.buf, i); ok && w > upTo {
					return false
				}
			}
		}
		for _, d := range b.dst {
			for i := d.idx; i < d.idx+d.size; i++ {
				if w, ok := lastAny.get(d.rank, d.buf, i); ok && w > upTo {
					return false
				}
			}
		}
		return true
	}
	for _, b := range p.actions {
		a := prev[b.rank][b.tb]
		if a != nil && free(b, int(a.seq)) && merge(a, b) {
			b.dead = true
			record(b, int(a.seq))
			continue
		}
		prev[b.rank][b.tb] = b
		record(b, int(b.seq))
	}
	live := p.actions[:0]
	for _, a := range p.actions {
		if !a.dead {
			live = append(live, a)
		}
	}
	for i, a := range live {
		a.seq = int32(i)
	}
	p.actions = live
	for _, row := range p.blocks {
		for _, blk := range row {
			acts := blk.acts[:0]
			for _, a := range blk.acts {
				if !a.dead {
					acts = append(acts, a)
				}
			}
			blk.acts = acts
		}
	}
}

const maxRefs = 10

// merge folds b into a when one plan op covers both; it reports whether
// it did.
func merge(a, b *action) bool {
	if a.red != b.red && a.code.Info().Reduces && b.code.Info().Reduces {
		return false
	}
	sameResult := len(b.src) > 0 && len(a.dst) > 0 && b.src[0] == plain(a.dst[0])
	switch {
	case a.code == b.code && (a.code == ir.OpRe || a.code == ir.OpRre || a.code == ir.OpRepkt):
		if b.dst[0] != a.dst[0] || b.src[0] != a.dst[0] || len(a.src)+len(b.src)-1 > maxRefs {
			return false
		}
		a.src = append(a.src, b.src[1:]...)
		if b.chType != ir.ChanNone {
			a.chType = b.chType
		}
		return true
	case b.code == ir.OpPut && b.chType == ir.ChanMemory && sameResult && len(a.dst)+1 <= maxRefs:
		c, ok := sendForm(a.code, false)
		if !ok {
			return mergeSends(a, b)
		}
		a.code = c
		a.dst = append(a.dst, b.dst[0])
		a.chType = ir.ChanMemory
		return true
	case b.code == ir.OpPpkt && sameResult && len(a.dst)+1 <= maxRefs && (a.chType == ir.ChanNone || a.chType == b.chType):
		c, ok := sendForm(a.code, true)
		if !ok {
			return mergeSends(a, b)
		}
		if remotePeers(a)+1 > 8 {
			return false
		}
		a.code = c
		a.dst = append(a.dst, b.dst[0])
		a.chType = b.chType
		return true
	case b.code == ir.OpCpkt && a.code == ir.OpRepkt && sameResult:
		a.code = ir.OpRecpkt
		a.dst = append(a.dst, b.dst[0])
		return true
	}
	return mergeSends(a, b)
}

// mergeSends joins two sends of one source to different peers over one
// channel type (upstream's multi-peer put). Sends of different sources are
// left apart: merging them would hoist a later step's send, with its
// waits, into an earlier one and serialise a pipeline such as a ring.
func mergeSends(a, b *action) bool {
	if a.code != b.code || a.chType != b.chType || len(a.dst)+len(b.dst) > 8 || a.src[0] != b.src[0] {
		return false
	}
	switch a.code {
	case ir.OpPut, ir.OpPpkt, ir.OpRppkt:
	default:
		return false
	}
	for _, d := range a.dst {
		if d.rank == b.dst[0].rank {
			return false
		}
	}
	a.src = append(a.src, b.src...)
	a.dst = append(a.dst, b.dst...)
	return true
}

func plain(r aref) aref {
	r.packet = false
	return r
}

func remotePeers(a *action) int {
	n := 0
	for _, d := range a.dst {
		if d.rank != a.rank {
			n++
		}
	}
	return n
}

// chunkTab maps every chunk of every rank's buffers to a sequence number:
// dense slices that grow on demand, far cheaper than a map over a
// million chunks. Slots hold seq+1; 0 means none.
type chunkTab [][4][]int32

func newChunkTab(ranks int) chunkTab { return make(chunkTab, ranks) }

func (t chunkTab) get(rank int, buf ir.BufferType, idx int) (int, bool) {
	if rank < 0 || rank >= len(t) || int(buf) >= len(t[rank]) || idx < 0 || idx >= len(t[rank][buf]) {
		return 0, false
	}
	v := t[rank][buf][idx]
	return int(v) - 1, v != 0
}

// raise sets the chunk's number to seq if that is higher.
func (t chunkTab) raise(rank int, buf ir.BufferType, idx, seq int) {
	s := &t[rank][buf]
	if idx >= len(*s) {
		*s = append(*s, make([]int32, idx+1-len(*s))...)
	}
	(*s)[idx] = max((*s)[idx], int32(seq+1))
}

// sendForm is the reduce-and-send op that reduction c (or its send form
// already) becomes when the put of its result joins it: a memory put
// (packet false) or a packet put (packet true). ok is false where no such
// op exists; the put then stays apart or merges with another send.
func sendForm(c ir.OpCode, packet bool) (ir.OpCode, bool) {
	switch {
	case !packet && (c == ir.OpRe || c == ir.OpRes):
		return ir.OpRes, true
	case !packet && (c == ir.OpRre || c == ir.OpRres):
		return ir.OpRres, true
	case packet && (c == ir.OpRepkt || c == ir.OpRespkt):
		return ir.OpRespkt, true
	case packet && (c == ir.OpRecpkt || c == ir.OpRecspkt):
		return ir.OpRecspkt, true
	}
	return c, false
}
