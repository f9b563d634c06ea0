package compiler

import (
	"cmp"
	"math"
	"slices"

	"github.com/msccl-go/msccl-go/dsl"
	"github.com/msccl-go/msccl-go/internal/par"
	"github.com/msccl-go/msccl-go/ir"
)

// buildPlan allocates channels, remote buffers and semaphores and writes
// the plan. Channels between two ranks are ordered the same way on both
// sides (by the blocks at either end), which is what makes the k-th
// channel from A to B pair with the k-th from B to A.
//
// It reports nothing: what a program can get wrong was reported before
// (evaluate, lower, sync) or is limits' to report on the plan.
func buildPlan(prog *program, syn *synced) *built {
	h := &prog.hdr
	b := &planBuilder{prog: prog, syn: syn}
	if prog.explicit {
		// Chunk-level actions name no channels themselves.
		b.collectExplicitPairs()
	}
	b.layoutChannels()
	b.pktShift = packetShifts(prog)
	// The workers below look pairs up concurrently.
	syn.pairs.index()
	p := &ir.Plan{Name: h.name, Collective: h.collective, Protocol: h.protocol, InPlace: h.inplace, ReuseResources: h.reuse,
		DoubleScratch: h.doubleScratch, BufferAlignment: 16, MinMessageSize: h.minMsg, MaxMessageSize: h.maxMsg,
		NumThreadsPerBlock: h.threads, GPUs: make([]ir.GPU, h.ranks), Root: h.root, Peers: h.peers,
		// Any chunk fits any scratch slot, so data moved into scratch keeps
		// its length at sizes that do not split evenly (ir.SizeRule).
		UniformScratch: true}
	if p.MaxMessageSize == 0 {
		p.MaxMessageSize = math.MaxUint64
	}
	sm := &SourceMap{ops: make([][][]*dsl.Range, h.ranks), head: h.pos}
	nw := par.Workers(h.ranks)
	ws := make([]*rankWorker, nw)
	for w := range ws {
		// Each worker has its own slabs and scratch high-water marks; the
		// tables b holds are only read from here on.
		wb := *b
		wb.ints, wb.refs = &intSlab{}, &refSlab{}
		ws[w] = &rankWorker{b: &wb, scratch: make([]int, h.ranks)}
	}
	par.ForEach(nw, h.ranks, func(w, r int) { ws[w].buildRank(p, sm, r) })
	for _, w := range ws {
		for r, n := range w.scratch {
			p.GPUs[r].ScratchChunks = max(p.GPUs[r].ScratchChunks, n)
		}
		for _, in := range w.inner {
			sm.setInner(in.rank, in.tb, in.op, in.srcs)
		}
	}
	// Later passes work on the plan. Handing on neither the actions nor
	// sync's tables (hundreds of megabytes for a large program) spares
	// the collector from marking them again; a channel-level program
	// keeps its actions for the balance check.
	out := &built{plan: p, sm: sm, explicit: prog.explicit}
	if prog.explicit {
		out.acts = prog.actions
	}
	return out
}

// rankWorker builds the ranks one worker is given.
type rankWorker struct {
	b       *planBuilder
	scratch []int       // per rank: scratch chunks the ops built so far reach
	inner   []innerSrcs // pipeline body sources, for the source map
	// ops and srcs are the worker's slabs of plan ops and their sources:
	// blocks take consecutive runs of them (see opSink).
	ops  []ir.Op
	srcs []*dsl.Range
}

type innerSrcs struct {
	rank, tb, op int
	srcs         []*dsl.Range
}

// opSlabMax is the most ops one slab holds (5.6 MB): few enough
// allocations for a plan of millions of ops, little left unused at the
// end of a small one, as slabs start small and double.
const opSlabMax = 64 << 10

// opSink receives a rank's items in order and writes each as a plan op in
// place, at the end of the worker's slab: a block's ops are one run of
// it. Writing in place spares copying finished ops (a write barrier per
// pointer while the collector runs), and slabs shared by blocks spare
// allocating a block's few dozen ops on their own (rounded up to a size
// class, 5% more memory for a large plan, and a header each). Items are
// never stored: a large plan would copy millions of them.
type opSink struct {
	n     int        // items put so far in this rank
	last  *dsl.Range // source of the last item put
	w     *rankWorker
	r, tb int
	lo    int // the current block's first op in w.ops
	tbb   tbBuild
}

func (k *opSink) put(it *item) {
	k.last = it.pos
	w := k.w
	if len(w.ops) == cap(w.ops) {
		k.grow()
	}
	i := len(w.ops)
	w.ops, w.srcs = w.ops[:i+1], w.srcs[:i+1]
	var inner []*dsl.Range
	w.srcs[i] = w.b.op(&w.ops[i], k.r, &k.tbb, it, w.scratch, &inner)
	if inner != nil {
		w.inner = append(w.inner, innerSrcs{rank: k.r, tb: k.tb, op: i - k.lo, srcs: inner})
	}
	k.n++
}

// grow starts a new slab, twice the last one (up to opSlabMax) and at
// least twice the current block, and moves the block's ops there.
func (k *opSink) grow() {
	w := k.w
	done := len(w.ops) - k.lo
	n := max(min(2*cap(w.ops), opSlabMax), 64, 2*done)
	ops, srcs := make([]ir.Op, done, n), make([]*dsl.Range, done, n)
	copy(ops, w.ops[k.lo:])
	copy(srcs, w.srcs[k.lo:])
	// The old slab's tail belongs to no block; it must not keep what
	// its ops point to alive.
	clear(w.ops[k.lo:])
	clear(w.srcs[k.lo:])
	w.ops, w.srcs, k.lo = ops, srcs, 0
}

// block returns the ops put since the current block started and their
// sources, and starts the next block after them. Both are capped, so that
// growing one block's ops copies them rather than running into the next
// block's.
func (k *opSink) block() ([]ir.Op, []*dsl.Range) {
	w := k.w
	if w.ops == nil {
		// Empty, not nil, as every block's list.
		return []ir.Op{}, []*dsl.Range{}
	}
	lo, hi := k.lo, len(w.ops)
	k.lo = hi
	return w.ops[lo:hi:hi], w.srcs[lo:hi:hi]
}

func (k *opSink) putAll(its []item) {
	for i := range its {
		k.put(&its[i])
	}
}

// layout puts block tb of rank r into k.
func (w *rankWorker) layout(r, tb int, k *opSink) {
	syn := w.b.syn
	if syn.sync != nil {
		syn.sync.layoutBlock(r, tb, k)
		return
	}
	k.putAll(syn.items[r][tb])
}

// buildRank writes rank r's GPU entry and its row of the source map.
func (w *rankWorker) buildRank(p *ir.Plan, sm *SourceMap, r int) {
	b, prog, h := w.b, w.b.prog, &w.b.prog.hdr
	g := &p.GPUs[r]
	g.ID, g.InputChunks, g.OutputChunks = r, h.inChunks, h.outChunks
	for _, t := range []ir.ChannelType{ir.ChanMemory, ir.ChanPort} {
		if peers := b.peers[r][t]; len(peers) > 0 {
			g.Channels = append(g.Channels, ir.Channel{Type: t, ConnectedTo: peers})
		}
	}
	rb := &rankBuild{g: g, remote: map[[2]int]int{}, sems: map[int32]int{}}
	sm.ops[r] = make([][]*dsl.Range, len(prog.blocks[r]))
	g.ThreadBlocks = make([]ir.ThreadBlock, 0, len(prog.blocks[r]))
	k := opSink{w: w, r: r, lo: len(w.ops)}
	for tb := range prog.blocks[r] {
		k.tb, k.tbb = tb, tbBuild{rb: rb}
		w.layout(r, tb, &k)
		ops, srcs := k.block()
		tbk := ir.ThreadBlock{ID: tb, Ops: ops}
		sm.ops[r][tb] = srcs
		for _, t := range []ir.ChannelType{ir.ChanMemory, ir.ChanPort} {
			if ids := k.tbb.chanIDs[t]; len(ids) > 0 {
				tbk.Channels = append(tbk.Channels, ir.TBChannel{Type: t, ChannelIDs: ids})
			}
			if ids := k.tbb.remoteIDs[t]; len(ids) > 0 {
				tbk.RemoteBufferRefs = append(tbk.RemoteBufferRefs, ir.RemoteBufferRef{AccessChannelType: t, RemoteBufferIDs: ids})
			}
		}
		g.ThreadBlocks = append(g.ThreadBlocks, tbk)
	}
	for i := 0; i < rb.nsem; i++ {
		g.Semaphores = append(g.Semaphores, ir.Semaphore{})
	}
}

type planBuilder struct {
	prog  *program
	syn   *synced    // what sync handed over
	peers [][3][]int // [rank][type] connected_to
	// flatOf[id]: the flat index of pair id on its (rankA, rankB) sides.
	flatOf [][2]int
	ints   *intSlab
	refs   *refSlab
	// pktShift[r]: how far rank r's packet slots move (packetShifts);
	// nil when no rank's do.
	pktShift []int
}

// intSlab and refSlab hand out the small id and operand lists of plan
// ops from shared arrays: one allocation per few thousand ops instead of
// one per op. Each list is capped at its length, so an append to it (as
// fuse-sync does) copies rather than runs into its neighbour.
type intSlab struct{ buf []int }

func (s *intSlab) take(n int) []int {
	if len(s.buf)+n > cap(s.buf) {
		s.buf = make([]int, 0, max(slabSize(cap(s.buf), 4096), n))
	}
	l := len(s.buf)
	s.buf = s.buf[:l+n]
	return s.buf[l : l+n : l+n]
}

type refSlab struct{ buf []ir.BufRef }

func (s *refSlab) take(n int) []ir.BufRef {
	if len(s.buf)+n > cap(s.buf) {
		s.buf = make([]ir.BufRef, 0, max(slabSize(cap(s.buf), 2048), n))
	}
	l := len(s.buf)
	s.buf = s.buf[:l+n]
	return s.buf[l : l+n : l+n]
}

type rankBuild struct {
	g      *ir.GPU
	remote map[[2]int]int // (rank, buf) -> remote_buffers index
	sems   map[int32]int  // state sems index -> semaphore id
	nsem   int
}

// tbBuild is one block's channel and remote buffer tables: local id k of
// type t names chanIDs[t][k] (remoteIDs[t][k]). Blocks hold a handful
// of each, so a scan beats a map.
type tbBuild struct {
	rb        *rankBuild
	chanIDs   [4][]int
	remoteIDs [4][]int
	// seen caches the pairs already resolved in this block (a block
	// signals the same few channels over and over), sparing the lookup
	// in planBuilder.flat.
	seen   []chanPair
	seenID []int
	// lastRemote caches remoteID's last answer.
	lastRemote lastRemote
}

type lastRemote struct {
	ok   bool
	t    ir.ChannelType
	buf  ir.BufferType
	rank int
	id   int
}

// collectExplicitPairs adds the channels named by channel-level ops.
func (b *planBuilder) collectExplicitPairs() {
	prog := b.prog
	var visit func(a *action)
	visit = func(a *action) {
		for _, in := range a.body() {
			visit(in)
		}
		if !a.explicit || a.chType == ir.ChanNone {
			return
		}
		info := a.code.Info()
		l := a.ownLinks()
		l.chans = l.chans[:0]
		for _, p := range a.peers() {
			tb := p.tb
			if tb == noBlock {
				tb = -1
			}
			k := pairKey(a.rank, a.tb, p.rank, tb, a.chType)
			b.syn.pairs.add(k)
			l.chans = append(l.chans, k)
		}
		if info.Class == ir.ClassSync {
			return
		}
		// Data ops reach peers' memory; make sure a channel of their type
		// connects the ranks.
		for _, refs := range [][]aref{a.src, a.dst} {
			for _, r := range refs {
				if r.rank == a.rank {
					continue
				}
				found := false
				for _, k := range b.syn.pairs.list {
					if k.typ == a.chType && ((int(k.rankA) == a.rank && int(k.rankB) == r.rank) || (int(k.rankB) == a.rank && int(k.rankA) == r.rank)) {
						found = true
						break
					}
				}
				if !found {
					b.syn.pairs.add(pairKey(a.rank, a.tb, r.rank, -1, a.chType))
				}
			}
		}
	}
	for _, a := range prog.actions {
		visit(a)
	}
}

func (b *planBuilder) layoutChannels() {
	prog := b.prog
	list := b.syn.pairs.list
	order := make([]int32, len(list))
	for i := range order {
		order[i] = int32(i)
	}
	if keys, ok := sortKeys(list); ok {
		// Hundreds of thousands of pairs in a large plan: one integer
		// compare each instead of five field compares through the list.
		type kid struct {
			key uint64
			id  int32
		}
		ks := make([]kid, len(list))
		for i, k := range keys {
			ks[i] = kid{k, int32(i)}
		}
		slices.SortFunc(ks, func(x, y kid) int { return cmp.Compare(x.key, y.key) })
		for i := range ks {
			order[i] = ks[i].id
		}
	} else {
		slices.SortFunc(order, func(i, j int32) int {
			x, y := &list[i], &list[j]
			return cmp.Or(cmp.Compare(x.typ, y.typ), cmp.Compare(x.rankA, y.rankA), cmp.Compare(x.rankB, y.rankB),
				cmp.Compare(x.tbA, y.tbA), cmp.Compare(x.tbB, y.tbB))
		})
	}
	b.flatOf = make([][2]int, len(list))
	b.peers = make([][3][]int, prog.hdr.ranks)
	// Within one (type, rankA, rankB) group both sides see the pairs in the
	// same order, so appending in sorted order pairs them. Across peers the
	// order on a rank does not matter.
	for _, id := range order {
		k := list[id]
		t := k.typ
		ia := len(b.peers[k.rankA][t])
		b.peers[k.rankA][t] = append(b.peers[k.rankA][t], int(k.rankB))
		ib := len(b.peers[k.rankB][t])
		b.peers[k.rankB][t] = append(b.peers[k.rankB][t], int(k.rankA))
		b.flatOf[id] = [2]int{ia, ib}
	}
}

// sortKeys packs each pair into an integer that sorts as (typ, rankA,
// rankB, tbA, tbB) do; ok is false when some pair does not fit.
func sortKeys(list []chanPair) ([]uint64, bool) {
	const rankBits, tbBits = 14, 16
	keys := make([]uint64, len(list))
	for i, k := range list {
		if uint(k.rankA) >= 1<<rankBits || uint(k.rankB) >= 1<<rankBits || uint(k.tbA+1) >= 1<<tbBits || uint(k.tbB+1) >= 1<<tbBits || uint(k.typ) >= 8 {
			return nil, false
		}
		keys[i] = uint64(k.typ)<<(2*rankBits+2*tbBits) | uint64(k.rankA)<<(rankBits+2*tbBits) | uint64(k.rankB)<<(2*tbBits) |
			uint64(k.tbA+1)<<tbBits | uint64(k.tbB+1)
	}
	return keys, true
}

// chanID returns the block-local id of pair k as seen from rank r.
func (b *planBuilder) chanID(r int, tbb *tbBuild, k chanPair) int {
	for i := range tbb.seen {
		if tbb.seen[i] == k {
			return tbb.seenID[i]
		}
	}
	return b.addChanID(r, tbb, k)
}

func (b *planBuilder) addChanID(r int, tbb *tbBuild, k chanPair) int {
	id := b.newChanID(r, tbb, k)
	tbb.seen = append(tbb.seen, k)
	tbb.seenID = append(tbb.seenID, id)
	return id
}

func (b *planBuilder) newChanID(r int, tbb *tbBuild, k chanPair) int {
	id, ok := b.syn.pairs.id(k)
	if !ok {
		// Not a pair of the plan; the validator reports its use.
		id = -1
	}
	var side uint8
	if int(k.rankB) == r {
		side = 1
	}
	return b.localChan(tbb, k.typ, side, id)
}

// localChan returns the block-local id of pair id (-1: no such pair) of
// type t, seen from its end side.
func (b *planBuilder) localChan(tbb *tbBuild, t ir.ChannelType, side uint8, id int32) int {
	idx := 0
	if id >= 0 {
		idx = b.flatOf[id][side]
	}
	for id, x := range tbb.chanIDs[t] {
		if x == idx {
			return id
		}
	}
	tbb.chanIDs[t] = append(tbb.chanIDs[t], idx)
	return len(tbb.chanIDs[t]) - 1
}

func (b *planBuilder) remoteID(tbb *tbBuild, t ir.ChannelType, rank int, buf ir.BufferType) int {
	if l := &tbb.lastRemote; l.ok && l.t == t && l.rank == rank && l.buf == buf {
		// A block's ops mostly reach one peer buffer: its id, as found
		// before, spares the map lookup and the scans below.
		return l.id
	}
	id := b.newRemoteID(tbb, t, rank, buf)
	tbb.lastRemote = lastRemote{ok: true, t: t, rank: rank, buf: buf, id: id}
	return id
}

func (b *planBuilder) newRemoteID(tbb *tbBuild, t ir.ChannelType, rank int, buf ir.BufferType) int {
	rb := tbb.rb
	k := [2]int{rank, int(buf)}
	gi, ok := rb.remote[k]
	if !ok {
		gi = len(rb.g.RemoteBuffers)
		rb.remote[k] = gi
		rb.g.RemoteBuffers = append(rb.g.RemoteBuffers, ir.RemoteBuffer{Rank: rank, Type: buf})
	}
	gb := &rb.g.RemoteBuffers[gi]
	has := false
	for _, x := range gb.AccessChannelTypes {
		has = has || x == t
	}
	if !has {
		gb.AccessChannelTypes = append(gb.AccessChannelTypes, t)
	}
	for id, x := range tbb.remoteIDs[t] {
		if x == gi {
			return id
		}
	}
	tbb.remoteIDs[t] = append(tbb.remoteIDs[t], gi)
	return len(tbb.remoteIDs[t]) - 1
}

func (b *planBuilder) bufRefs(r int, tbb *tbBuild, a *action, refs []aref, scratch []int) []ir.BufRef {
	if len(refs) == 0 {
		return nil
	}
	out := b.refs.take(len(refs))
	for i, x := range refs {
		if x.packet && b.pktShift != nil && x.buf == ir.BufScratch {
			x.idx += b.pktShift[x.rank]
		}
		if x.buf == ir.BufScratch {
			scratch[x.rank] = max(scratch[x.rank], x.idx+x.size)
		}
		if x.rank == r {
			out[i] = ir.BufRef{Kind: ir.RefLocal, Type: x.buf, Index: x.idx, Size: x.size}
		} else {
			out[i] = ir.BufRef{Kind: ir.RefRemote, BufferID: b.remoteID(tbb, a.chType, x.rank, x.buf), Index: x.idx, Size: x.size}
		}
	}
	return out
}

var itemCodes = [...]ir.OpCode{itemNop: ir.OpNop, itemSignal: ir.OpSignal, itemWait: ir.OpWait, itemRlxSignal: ir.OpRlxSignal,
	itemRlxWait: ir.OpRlxWait, itemSemRelease: ir.OpSemRelease, itemSemAcquire: ir.OpSemAcquire, itemFlush: ir.OpFlush}

// op writes item it as *op (which is zero) and returns its source; the
// sources of a pipeline's body go to inner.
func (b *planBuilder) op(op *ir.Op, r int, tbb *tbBuild, it *item, scratch []int, inner *[]*dsl.Range) *dsl.Range {
	src := it.pos
	switch it.kind {
	case itemAct:
		b.actOp(op, r, tbb, it.act, scratch, inner)
		return src
	case itemSemRelease, itemSemAcquire:
		id, ok := tbb.rb.sems[it.id]
		if !ok {
			id = tbb.rb.nsem
			tbb.rb.nsem++
			tbb.rb.sems[it.id] = id
		}
		ids := b.ints.take(1)
		ids[0] = id
		op.Code = itemCodes[it.kind]
		op.SetSemaphoreIDs(ids)
		return src
	case itemNop:
		op.Code = ir.OpNop
		return src
	}
	op.Code = itemCodes[it.kind]
	if it.pairs == nil {
		op.ChannelType, op.ChannelIDs = it.typ, b.ints.take(1)
		op.ChannelIDs[0] = b.localChan(tbb, it.typ, it.side, it.id-1)
		return src
	}
	op.ChannelType = (*it.pairs)[0].typ
	for _, k := range *it.pairs {
		op.ChannelIDs = append(op.ChannelIDs, b.chanID(r, tbb, k))
	}
	return src
}

// actOp writes action a as *op (which is zero) in place: copying a
// finished op into the plan would cost a write barrier per pointer field.
func (b *planBuilder) actOp(op *ir.Op, r int, tbb *tbBuild, a *action, scratch []int, inner *[]*dsl.Range) {
	info := a.code.Info()
	op.Code = a.code
	if t := a.tbg(); t != nil {
		// Only then: clearing an absent field reads the op's fresh memory
		// first, a second page fault where a write alone takes one.
		op.SetTBG(t)
	}
	if info.Chans != ir.MaskNone {
		op.ChannelType = a.chType
	}
	op.Src = b.bufRefs(r, tbb, a, a.src, scratch)
	op.Dst = b.bufRefs(r, tbb, a, a.dst, scratch)
	if info.ChannelIDs.Has(a.chType) {
		for _, k := range a.chanList() {
			op.ChannelIDs = append(op.ChannelIDs, b.chanID(r, tbb, k))
		}
	} else if info.Chans != ir.MaskNone && a.chType == ir.ChanMemory {
		// Memory data ops address peers through remote buffers, but the
		// block still holds the channel (upstream maps buffers through it).
		for _, k := range a.chanList() {
			b.chanID(r, tbb, k)
		}
	}
	if info.Reduces {
		op.SetReduceOp(a.reduce())
	}
	if info.Semaphores {
		op.SetSemaphoreIDs(append([]int(nil), a.sems()...))
		for _, id := range a.sems() {
			tbb.rb.nsem = max(tbb.rb.nsem, id+1)
		}
	}
	if a.code == ir.OpBarrier && a.ch != nil {
		op.SetBarrier(a.ch.barrier[0], a.ch.barrier[1])
	}
	if a.code == ir.OpPipeline && a.ch != nil {
		it := *a.ch.iter
		op.SetIter(&it)
		var body []ir.Op
		if len(a.ch.body) > 0 {
			body = make([]ir.Op, len(a.ch.body))
		}
		for i, in := range a.ch.body {
			b.actOp(&body[i], r, tbb, in, scratch, nil)
			if inner != nil {
				*inner = append(*inner, in.pos)
			}
		}
		op.SetOps(body)
	}
}
