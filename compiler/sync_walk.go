package compiler

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/msccl-go/msccl-go/internal/par"
	"github.com/msccl-go/msccl-go/ir"
)

func (s *syncer) run() {
	p := s.p
	n := p.hdr.ranks
	s.nodes = make([]node, 0, 2*n+len(p.actions))
	for r := 0; r < n; r++ {
		s.nodes = append(s.nodes, node{rank: r, gid: -1, host: 1})
	}
	for _, a := range p.actions {
		s.nodes = append(s.nodes, node{rank: a.rank, gid: s.gid[a.rank][a.tb], act: a})
	}
	for r := 0; r < n; r++ {
		s.nodes = append(s.nodes, node{rank: r, gid: -1, host: 2})
	}
	s.walk()
	s.finishLists()
}

// walkBatch is how many nodes the walk's phases hand over at a time.
const walkBatch = 4096

// walk visits the nodes in program order in two phases, one feeding the
// other batch by batch: deps follows the chunks to find what each node
// must wait for, order turns that into sync items. Neither reads what the
// other writes, so on several cores they overlap (the walk is the longest
// single-threaded part of a large compile); records go through in program
// order, so the result does not depend on the schedule. With more than one
// core, programs without packet writes take walkSharded, which splits
// deps further.
func (s *syncer) walk() {
	if w := par.Workers(s.p.hdr.ranks); w >= 2 && !s.packetWrites() {
		// One shard on two or three cores: the walk becomes a pipeline of
		// three stages (gather and record, group, order) with no work
		// added. deps alone was the slower of two phases (0.45-0.6 s for
		// the 1024-rank ring on the 2-core VM, order 0.33-0.5); split,
		// the walk took 0.52-0.63 s where it had taken 0.53-0.86.
		shards := 1
		if w >= minShardWorkers {
			shards = w - 2
		}
		s.walkSharded(shards)
		return
	}
	n := len(s.nodes)
	nb := (n + walkBatch - 1) / walkBatch
	// Room for every batch, so that deps never blocks: with one worker
	// it runs to the end before order starts.
	full, free := make(chan []int32, nb), make(chan []int32, nb)
	par.ForEach(min(par.Workers(s.p.hdr.ranks), 2), 2, func(_, phase int) {
		if phase == 1 {
			for recs := range full {
				for len(recs) > 0 {
					recs = s.order(recs)
				}
				free <- recs[:0]
			}
			return
		}
		defer close(full)
		last := 0 // records of the previous batch
		for lo := 0; lo < n; lo += walkBatch {
			var out []int32
			select {
			case out = <-free:
			default:
				// deps usually runs ahead of order, so nothing comes back
				// to reuse; sized like the last batch, the records are
				// not copied again and again as they grow.
				out = make([]int32, 0, last+last/8)
			}
			for seq := lo; seq < min(lo+walkBatch, n); seq++ {
				out = s.deps(int32(seq), out)
			}
			last = len(out)
			full <- out
		}
	})
}

// accesses lists the chunks a node reads and writes (packet flag kept).
func (s *syncer) accesses(nd *node) (reads, writes []aref) {
	h := &s.p.hdr
	if nd.host != 0 {
		in := aref{rank: nd.rank, buf: ir.BufInput, idx: 0, size: h.inChunks}
		out := aref{rank: nd.rank, buf: ir.BufOutput, idx: 0, size: h.outChunks}
		if h.inplace {
			switch {
			case h.collective.Gathers():
				in = aref{rank: nd.rank, buf: ir.BufOutput, idx: nd.rank * h.inChunks, size: h.inChunks}
			case h.collective.Scatters():
				out = aref{rank: nd.rank, buf: ir.BufInput, idx: nd.rank * h.outChunks, size: h.outChunks}
			default:
				out = in
			}
		}
		return []aref{out}, []aref{in}
	}
	return nd.act.src, nd.act.dst
}

// info returns the record of one chunk; the pointer is valid until the
// next call (the slice may grow).
func (s *syncer) info(rank int, buf ir.BufferType, idx int) *chunkInfo {
	if d := &s.diag[buf]; idx < d.n {
		return &d.all[d.at(rank, idx)]
	}
	cs := &s.chunks[rank][buf]
	for len(*cs) <= idx {
		*cs = append(*cs, chunkInfo{lastW: -1})
	}
	return &(*cs)[idx]
}

// deps is the walk's first phase for node seq: it finds the earlier
// accesses the node's must follow, then records the node's own. It
// appends to out a record for order (see group). A node that needs
// nothing adds nothing.
func (s *syncer) deps(seq int32, out []int32) []int32 {
	nd := &s.nodes[seq]
	reads, writes := s.accesses(nd)
	need, ok := s.gather(seq, nd, reads, writes, 0, s.p.hdr.ranks, s.needBuf[:0])
	s.needBuf = need
	if !ok {
		return out
	}
	out = s.group(seq, need, out)
	s.record(seq, reads, writes, 0, s.p.hdr.ranks)
	return out
}

// gather appends to need the earlier accesses that node seq must follow,
// among the chunks of ranks [lo, hi), possibly repeated. It reports a
// second packet write to a slot and returns false; the sharded walk runs
// only on programs that have no packet writes, so only the serial walk
// reports.
func (s *syncer) gather(seq int32, nd *node, reads, writes []aref, lo, hi int, need []edgeNeed) ([]edgeNeed, bool) {
	add := func(p int32, full bool) {
		if p != seq {
			need = append(need, edgeNeed{seq: p, full: full})
		}
	}
	// A packet read waits for the packets' flags, which orders it after
	// their write, unless a port channel's proxy does the reading: it
	// copies the bytes as they are, so the write must be ordered first.
	flagged := nd.act == nil || nd.act.chType != ir.ChanPort
	for _, r := range reads {
		if r.rank < lo || r.rank >= hi {
			continue
		}
		for i := r.idx; i < r.idx+r.size; i++ {
			ci := s.info(r.rank, r.buf, i)
			if ci.lastW >= 0 && !(r.packet && ci.wPacket && flagged) {
				add(ci.lastW, true)
			}
		}
	}
	for _, w := range writes {
		if w.rank < lo || w.rank >= hi {
			continue
		}
		for i := w.idx; i < w.idx+w.size; i++ {
			ci := s.info(w.rank, w.buf, i)
			if ci.lastW >= 0 {
				if w.packet && ci.wPacket && nd.act != nil {
					prev := s.nodes[ci.lastW].act
					if prev != nil {
						s.st.errorf(*nd.act.pos, fmt.Sprintf("the slot was already written with packets at %s; LL readers cannot tell two writes of one launch apart: use another scratch chunk", prev.pos.Start),
							"rank %d's scratch chunk %d is written with packets twice in one launch", w.rank, i)
						return need, false
					}
				}
				add(ci.lastW, true)
			}
			for k := int32(0); k < ci.nrd; k++ {
				add(ci.reader(k), false)
			}
		}
	}
	return need, true
}

// group turns the producers node seq needs (gather's list, in any order)
// into a record for order: seq, the number of edges, the number of
// same-block producers, the edges (producer<<1 | full) by producer block,
// then the same-block producers. It appends nothing when nothing is
// needed.
func (s *syncer) group(seq int32, need []edgeNeed, out []int32) []int32 {
	nd := &s.nodes[seq]
	// Deterministic order: producers by sequence, duplicates merged.
	slices.SortFunc(need, func(a, b edgeNeed) int { return cmp.Compare(a.seq, b.seq) })
	sameBlock := s.sameBuf[:0]
	// Latest need per producer block (key -2-rank for a host start); few
	// per node, so a slice beats a map.
	best := s.bestBuf[:0]
	for i, e := range need {
		if i+1 < len(need) && need[i+1].seq == e.seq {
			need[i+1].full = need[i+1].full || e.full
			continue
		}
		p := e.seq
		pn := &s.nodes[p]
		switch {
		case pn.host == 1 && pn.rank == nd.rank:
			// The rank's own host: the kernel boundary orders it.
		case nd.host == 2 && pn.rank == nd.rank:
			// The kernel's end orders the rank's own blocks before its host.
		case pn.gid >= 0 && pn.gid == nd.gid:
			sameBlock = append(sameBlock, p)
		default:
			key := pn.gid
			if pn.host == 1 {
				key = int32(-2 - pn.rank)
			}
			found := false
			for j := range best {
				if best[j].key == key {
					best[j].seq = max(best[j].seq, p)
					best[j].full = best[j].full || e.full
					found = true
					break
				}
			}
			if !found {
				best = append(best, keyedNeed{key: key, edgeNeed: edgeNeed{seq: p, full: e.full}})
			}
		}
	}
	slices.SortFunc(best, func(a, b keyedNeed) int { return cmp.Compare(a.key, b.key) })
	s.bestBuf = best
	s.sameBuf = sameBlock
	if len(best)+len(sameBlock) > 0 {
		out = append(out, seq, int32(len(best)), int32(len(sameBlock)))
		for _, b := range best {
			e := b.seq << 1
			if b.full {
				e |= 1
			}
			out = append(out, e)
		}
		out = append(out, sameBlock...)
	}
	return out
}

// record notes node seq's accesses to the chunks of ranks [lo, hi).
func (s *syncer) record(seq int32, reads, writes []aref, lo, hi int) {
	for _, r := range reads {
		if r.rank < lo || r.rank >= hi {
			continue
		}
		for i := r.idx; i < r.idx+r.size; i++ {
			ci := s.info(r.rank, r.buf, i)
			ci.addReader(seq)
			ci.addAccess(access{seq: seq})
		}
	}
	for _, w := range writes {
		if w.rank < lo || w.rank >= hi {
			continue
		}
		for i := w.idx; i < w.idx+w.size; i++ {
			ci := s.info(w.rank, w.buf, i)
			ci.lastW, ci.wPacket, ci.nrd = seq, w.packet, 0
			if ci.more != nil {
				ci.more.readers = ci.more.readers[:0]
			}
			ci.addAccess(access{seq: seq, write: true})
		}
	}
}

// order is the walk's second phase: it turns the first record of recs
// (see deps) into edges and nops and returns the rest.
func (s *syncer) order(recs []int32) []int32 {
	seq, nb, ns := recs[0], recs[1], recs[2]
	edges, same := recs[3:3+nb], recs[3+nb:3+nb+ns]
	for _, e := range edges {
		s.edge(e>>1, seq, e&1 != 0)
	}
	nd := &s.nodes[seq]
	for _, p := range same {
		if s.nopPos[nd.gid] < 2*p+1 {
			nd.act.sync.preNop = true
			s.nopPos[nd.gid] = 2*seq - 1
		}
		if a := s.nodes[p].act; a != nil && a.chType == ir.ChanPort && a.code.Info().Class != ir.ClassSync {
			nd.act.sync.preFl = true
		}
	}
	return recs[3+nb+ns:]
}
