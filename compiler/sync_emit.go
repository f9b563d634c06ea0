package compiler

import (
	"slices"
	"sort"

	"github.com/msccl-go/msccl-go/internal/par"
	"github.com/msccl-go/msccl-go/ir"
)

// crossLaunch orders accesses of launch k against conflicting accesses of
// launch k+1 by other ranks. A pair is already ordered when the later
// access's rank learned of the earlier access before its launch ended;
// otherwise the earlier access's rank signals at the start of launch k+1
// (which is after all of its launch k) and the later access waits for it.
func (s *syncer) crossLaunch() {
	p := s.p
	h := &p.hdr
	workers := par.Workers(h.ranks)
	// What each rank knows at its launch's end, from all its blocks.
	endE := make([]map[int32]int32, h.ranks)
	par.ForEach(workers, h.ranks, func(_, r int) {
		m := map[int32]int32{}
		for _, g := range s.gid[r] {
			s.fE[g].each(func(k, v int32) { m[k] = max(m[k], v) })
		}
		endE[r] = m
	})
	// The chunks' records in pieces, for the workers.
	var pieces [][]chunkInfo
	for buf := range s.diag {
		for all := s.diag[buf].all; len(all) > 0; all = all[min(len(all), 4096):] {
			pieces = append(pieces, all[:min(len(all), 4096)])
		}
	}
	// With double scratch, alternate launches use alternate halves: a
	// scratch access of launch k meets the same bytes again in launch k+2,
	// which a rank can reach while a peer is still in launch k when nothing
	// flows back from the peer (a one-way broadcast). Those chunks are
	// ordered k against k+2 instead of k+1.
	var halves [][]chunkInfo
	for r := range s.chunks {
		for buf := range s.chunks[r] {
			if len(s.chunks[r][buf]) == 0 {
				continue
			}
			if h.doubleScratch && ir.BufferType(buf) == ir.BufScratch {
				halves = append(halves, s.chunks[r][buf])
				continue
			}
			pieces = append(pieces, s.chunks[r][buf])
		}
	}
	var hears [][]bool
	if len(halves) > 0 {
		hears = s.hearsWithin(endE)
	}
	needs := make([]map[hsKey]hsVal, workers)
	par.ForEach(workers, len(pieces)+len(halves), func(w, i int) {
		if needs[w] == nil {
			needs[w] = map[hsKey]hsVal{}
		}
		var acc []access
		if i >= len(pieces) {
			for _, c := range halves[i-len(pieces)] {
				acc = c.accesses(acc[:0])
				s.crossPairs(acc, nil, hears, needs[w])
			}
			return
		}
		for ci := range pieces[i] {
			acc = pieces[i][ci].accesses(acc[:0])
			s.crossPairs(acc, endE, nil, needs[w])
		}
	})
	// Merged the way crossPairs merges: minima and unions, so neither the
	// order of chunks nor their split among workers shows.
	need := needs[0]
	for _, m := range needs[1:] {
		for k, v := range m {
			if need == nil {
				need = map[hsKey]hsVal{}
			}
			if old, ok := need[k]; ok {
				v.first, v.full = min(v.first, old.first), v.full || old.full
			}
			need[k] = v
		}
	}
	s.addHandshakes(need)
}

// hearsWithin returns hears[b][q]: within one launch rank b learns of
// some event of rank q, by the sync edges (endE, what each rank knows at
// its launch's end) or by reading q's LL packets. Rank q's launch k+1
// starts after all of its launch k, so then b's launch k+2 is ordered
// after q's launch k. Only double-scratch plans need it.
func (s *syncer) hearsWithin(endE []map[int32]int32) [][]bool {
	n := s.p.hdr.ranks
	hears := make([][]bool, n)
	for b := range hears {
		hears[b] = make([]bool, n)
		for g := range endE[b] {
			hears[b][s.blkRank[g]] = true
		}
	}
	// LL readers spin until the writer's packets arrive, which orders them
	// after the writer without any signal (the sync walk adds no edge for
	// them, so endE does not show it). A slot takes one packet write per
	// launch, so every reader of a packet slot hears from its writer.
	var acc []access
	for r := range s.chunks {
		for buf := range s.chunks[r] {
			for ci := range s.chunks[r][buf] {
				c := &s.chunks[r][buf][ci]
				if !c.wPacket {
					continue
				}
				acc = c.accesses(acc[:0])
				for _, w := range acc {
					if !w.write {
						continue
					}
					for _, rd := range acc {
						if !rd.write {
							hears[s.nodes[rd.seq].rank][s.nodes[w.seq].rank] = true
						}
					}
				}
			}
		}
	}
	return hears
}

type hsKey struct {
	from int
	to   int32 // consumer block
}

type hsVal struct {
	first int32 // earliest consumer node in that block
	full  bool
}

// crossPairs finds the unordered conflicting pairs of one chunk's
// accesses between launch k and the launch that next touches the same
// bytes. With hears nil that is k+1: a pair is ordered when the later
// access's rank learned of the earlier access before its launch ended
// (endE). With hears set it is k+2 (double scratch): a pair is ordered when
// the later access's rank hears from the earlier access's rank within a
// launch, whose launch k+1 starts after all of its launch k. Either way a
// start-of-launch signal the later block already waits for orders it, and
// otherwise the handshake added orders k before k+1, hence before k+2.
func (s *syncer) crossPairs(all []access, endE []map[int32]int32, hears [][]bool, need map[hsKey]hsVal) {
	for _, a := range all {
		an := &s.nodes[a.seq]
		if an.host != 0 {
			continue
		}
		for _, b := range all {
			bn := &s.nodes[b.seq]
			if bn.host != 0 || bn.rank == an.rank || !(a.write || b.write) {
				continue
			}
			if hears != nil {
				if hears[bn.rank][an.rank] {
					continue
				}
			} else if v, ok := endE[bn.rank][an.gid]; ok && v >= a.seq {
				continue
			}
			if s.startKnowledge(int32(an.rank), bn.gid) >= b2k(a.write) {
				continue // a start-of-launch signal from that rank already orders it
			}
			hk := hsKey{from: an.rank, to: bn.gid}
			v, ok := need[hk]
			if !ok || b.seq < v.first {
				v.first = b.seq
			}
			v.full = v.full || a.write
			need[hk] = v
		}
	}
}

func (s *syncer) addHandshakes(need map[hsKey]hsVal) {
	hks := make([]hsKey, 0, len(need))
	for k := range need {
		hks = append(hks, k)
	}
	sort.Slice(hks, func(i, j int) bool {
		if hks[i].to != hks[j].to {
			return hks[i].to < hks[j].to
		}
		return hks[i].from < hks[j].from
	})
	for _, hk := range hks {
		v := need[hk]
		pg := s.blockOn(hk.from, hk.to)
		pr, ptb := s.blkRank[pg], s.blkTB[pg]
		cr, ctb := s.blkRank[hk.to], s.blkTB[hk.to]
		pk := pairKey(pr, ptb, cr, ctb, s.chanType(pr, cr))
		pid := s.addPair(pk)
		s.setStart(int32(hk.from), hk.to, b2k(v.full))
		sig, wait := pairItem(itemRlxSignal, pk, pid, pr), pairItem(itemRlxWait, pk, pid, cr)
		if v.full {
			sig.kind, wait.kind = itemSignal, itemWait
		}
		wait.pos = s.nodes[v.first].act.pos
		sig.pos = wait.pos
		s.start[pg] = append(s.start[pg], sig)
		g := s.nodes[v.first].gid
		s.startWait[g] = append(s.startWait[g], wait)
	}
}

// dataPairs picks the channel of every remote destination of a port data
// op (the channel its first consumer's signal uses, so put and signal
// travel in one FIFO and fuse into pws), and makes sure memory data ops
// have some memory channel to each peer (the validator and upstream need
// one to map the peer's buffers).
func (s *syncer) dataPairs(a *action) {
	if a.chType == ir.ChanNone {
		return
	}
	var seenBuf [8]int
	seen := seenBuf[:0] // peers met so far; an op names a few
	for _, refs := range [2][]aref{a.src, a.dst} {
		for _, r := range refs {
			if r.rank == a.rank || slices.Contains(seen, r.rank) {
				continue
			}
			seen = append(seen, r.rank)
			if a.chType == ir.ChanPort {
				continue
			}
			if !s.rankPairs[rankPairKey(a.rank, r.rank, ir.ChanMemory)] {
				s.addPair(pairKey(a.rank, a.tb, r.rank, -1, ir.ChanMemory))
			}
		}
	}
	if a.chType != ir.ChanPort {
		return
	}
	l := a.ownLinks()
	l.chans = l.chans[:0]
	for _, d := range a.dst {
		if d.rank == a.rank {
			continue
		}
		var pk chanPair
		ok := false
		for _, o := range l.outs {
			if o.typ == ir.ChanPort && (int(o.rankA) == d.rank || int(o.rankB) == d.rank) {
				pk, ok = o, true
				break
			}
		}
		if !ok {
			pk = pairKey(a.rank, a.tb, d.rank, -1, ir.ChanPort)
		}
		s.addPair(pk)
		l.chans = append(l.chans, pk)
	}
}

// mayNeedPairs says whether dataPairs could add a pair for a: a port
// op, or a memory op reaching a rank that no memory channel connects yet.
// It only reads the syncer.
func (s *syncer) mayNeedPairs(a *action) bool {
	switch a.chType {
	case ir.ChanNone:
		return false
	case ir.ChanPort:
		return true
	}
	for _, refs := range [2][]aref{a.src, a.dst} {
		for _, r := range refs {
			if r.rank != a.rank && !s.rankPairs[rankPairKey(a.rank, r.rank, ir.ChanMemory)] {
				return true
			}
		}
	}
	return false
}

// materialize settles the channels of every data op, in block order (the
// first op to reach a peer creates its channel), and leaves the layout of
// each block's op list to layoutBlock, which buildPlan calls block by
// block: a plan of millions of ops never holds them all as items too.
func (s *syncer) materialize() {
	p := s.p
	// Most data ops need nothing here: memory ops whose ranks the walk
	// already connected (pairs are only ever added). Workers pick out, per
	// rank and in block order, the ops that may need something; only
	// those go through dataPairs, in the same order as all ops would.
	todo := make([][]*action, len(p.blocks))
	par.ForEach(par.Workers(len(p.blocks)), len(p.blocks), func(_, r int) {
		for _, blk := range p.blocks[r] {
			for _, a := range blk.acts {
				if s.mayNeedPairs(a) {
					todo[r] = append(todo[r], a)
				}
			}
		}
	})
	for r, row := range p.blocks {
		for _, a := range todo[r] {
			s.dataPairs(a)
		}
		if len(row) == 1 {
			g := s.gid[r][0]
			if len(row[0].acts) == 0 && len(s.start[g]) == 0 && len(s.startWait[g]) == 0 && len(s.end[g]) == 0 {
				// The spare block of an idle rank was not needed.
				p.blocks[r] = nil
			}
		}
	}
}

// release drops what only the walk needed; buildPlan lays blocks out from
// the rest. For a large program that is a few hundred megabytes the plan
// can reuse instead of growing the heap further.
func (s *syncer) release() {
	s.nodes, s.chunks, s.diag, s.fE, s.fV, s.nopPos = nil, nil, [4]diagTable{}, nil, nil, nil
	s.touch, s.startKnown, s.rankPairs, s.semIDs = nil, nil, nil, nil
	s.partners, s.blkRank, s.blkTB = nil, nil, nil
	s.needBuf, s.bestBuf, s.sameBuf = nil, nil, nil
}

// layoutBlock lays block tb of rank r out into k: start signals, then per
// action its waits, a nop, the op, then flushes, a nop and its signals; at
// the end the remaining flushes and the waits that serve the host.
func (s *syncer) layoutBlock(r, tb int, k *opSink) {
	blk := s.p.blocks[r][tb]
	g := s.gid[r][tb]
	k.putAll(s.start[g])
	k.putAll(s.startWait[g])
	if len(s.startWait[g]) > 0 && len(blk.acts) > 0 {
		k.put(&item{kind: itemNop, pos: blk.acts[0].pos})
	}
	dirty := false
	var unflushed []chanPair
	flush := func(ps []chanPair) {
		if len(ps) > 0 {
			// The sink is done with the item when put returns: no copy.
			hold := ps
			k.put(&item{kind: itemFlush, pairs: &hold, pos: k.last})
		}
	}
	var preBuf, postBuf [4]syncItem
	for _, a := range blk.acts {
		ns := &a.sync
		pre := list(preBuf[:0], a.wait1, s.lists.pre, a.waitsAt)
		if ns.preFl {
			flush(unflushed)
			unflushed = nil
		}
		for _, x := range pre {
			it := x.item(a.pos)
			k.put(&it)
		}
		if len(pre) > 0 || ns.preNop {
			k.put(&item{kind: itemNop, pos: a.pos})
		}
		k.put(&item{kind: itemAct, act: a, pos: a.pos})
		// Port ops are carried out by the proxy, not the block's
		// threads: they leave nothing for a nop to fence.
		dirty = dirty || a.chType != ir.ChanPort
		for _, c := range a.chanList() {
			if !containsPair(unflushed, c) {
				unflushed = append(unflushed, c)
			}
		}
		post := list(postBuf[:0], a.signal1, s.lists.post, a.signalsAt)
		if len(post) == 0 {
			continue
		}
		var keep, fl []chanPair
		for _, u := range unflushed {
			onlyU := true
			for _, x := range post {
				if x.kind == itemSemRelease || s.syncItemPair(x) != u {
					onlyU = false
				}
			}
			if onlyU {
				keep = append(keep, u)
			} else {
				fl = append(fl, u)
			}
		}
		flush(fl)
		unflushed = keep
		if dirty {
			k.put(&item{kind: itemNop, pos: a.pos})
			dirty = false
		}
		for _, x := range post {
			it := x.item(a.pos)
			k.put(&it)
		}
	}
	if k.n > 0 {
		flush(unflushed)
	}
	k.putAll(s.end[g])
}

func containsPair(ps []chanPair, p chanPair) bool {
	for _, x := range ps {
		if x == p {
			return true
		}
	}
	return false
}

// explicitItems passes a channel-level program through: its ops are the
// plan's ops, in order.
func (s *syncer) explicitItems() *synced {
	p := s.p
	items := make([][][]item, p.hdr.ranks)
	for r, row := range p.blocks {
		items[r] = make([][]item, len(row))
		for tb, blk := range row {
			for _, a := range blk.acts {
				items[r][tb] = append(items[r][tb], item{kind: itemAct, act: a, pos: a.pos})
			}
		}
		if len(row) == 1 && len(items[r][0]) == 0 {
			items[r], p.blocks[r] = nil, nil
		}
	}
	return &synced{items: items, pairs: newPairSet()}
}

// rankPairKey names the unordered pair of ranks a, b and a channel type.
func rankPairKey(a, b int, t ir.ChannelType) uint64 {
	if a > b {
		a, b = b, a
	}
	return uint64(uint32(a))<<32 | uint64(uint32(b))<<3 | uint64(t)&7
}

func (s *syncer) addPair(k chanPair) int32 {
	s.rankPairs[rankPairKey(int(k.rankA), int(k.rankB), k.typ)] = true
	if k.tbA < 0 || k.tbB < 0 {
		return s.pairs.add(k)
	}
	a, b := s.gid[k.rankA][k.tbA], s.gid[k.rankB][k.tbB]
	if id := s.pairOf(a, b); id >= 0 {
		if s.pairs.list[id] == k {
			return id
		}
		return s.pairs.add(k)
	}
	// Every pair between two blocks is one of their partners, so a pair
	// of blocks that are not partners is new: no lookup needed.
	id := s.pairs.addNew(k)
	s.addPartner(a, b, id)
	if a != b {
		s.addPartner(b, a, id)
	}
	return id
}

// partner is an entry of syncer.partners: block g, and the id of the
// pair it shares with the block whose list holds the entry.
type partner struct{ g, pair int32 }

// addPartner notes that block a shares pair id with block b. Lists start
// with room for four: a large program has a hundred thousand blocks, and
// growing each from one entry made half of sync's allocations.
func (s *syncer) addPartner(a, b, id int32) {
	if s.partners[a] == nil {
		s.partners[a] = make([]partner, 0, 4)
	}
	s.partners[a] = append(s.partners[a], partner{g: b, pair: id})
}

// pairOf returns the id of the pair that blocks a and b share, or -1.
func (s *syncer) pairOf(a, b int32) int32 {
	for _, pt := range s.partners[a] {
		if pt.g == b {
			return pt.pair
		}
	}
	return -1
}

// syncItemPair is the channel pair of a signal or wait item.
func (s *syncer) syncItemPair(x syncItem) chanPair {
	if x.id == 0 || x.kind == itemSemRelease || x.kind == itemSemAcquire {
		return chanPair{}
	}
	return s.pairs.list[x.id-1]
}

// semID interns a semaphore pair.
func (s *syncer) semID(sp semPair) int32 {
	if id, ok := s.semIDs[sp]; ok {
		return id
	}
	id := int32(len(s.sems))
	s.semIDs[sp] = id
	s.sems = append(s.sems, sp)
	return id
}
