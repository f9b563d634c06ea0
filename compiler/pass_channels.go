package compiler

import (
	"math"
	"sort"

	"github.com/msccl-go/msccl-go/dsl"
	"github.com/msccl-go/msccl-go/ir"
)

// buildPlan allocates channels, remote buffers and semaphores and writes
// the plan. Channels between two ranks are ordered the same way on both
// sides (by the blocks at either end), which is what makes the k-th
// channel from A to B pair with the k-th from B to A.
func buildPlan(st *state) {
	h := &st.hdr
	b := &planBuilder{st: st, flat: map[chanPair][2]int{}}
	b.collectExplicitPairs()
	b.layoutChannels()
	p := &ir.Plan{Name: h.name, Collective: h.collective, Protocol: h.protocol, InPlace: h.inplace, ReuseResources: h.reuse,
		DoubleScratch: h.doubleScratch, BufferAlignment: 16, MinMessageSize: h.minMsg, MaxMessageSize: h.maxMsg,
		NumThreadsPerBlock: h.threads, GPUs: make([]ir.GPU, h.ranks)}
	if p.MaxMessageSize == 0 {
		p.MaxMessageSize = math.MaxUint64
	}
	sm := &SourceMap{ops: make([][][]opSource, h.ranks), head: h.pos}
	scratch := make([]int, h.ranks)
	for r := range p.GPUs {
		g := &p.GPUs[r]
		g.ID, g.InputChunks, g.OutputChunks = r, h.inChunks, h.outChunks
		for _, t := range []ir.ChannelType{ir.ChanMemory, ir.ChanPort} {
			if peers := b.peers[r][t]; len(peers) > 0 {
				g.Channels = append(g.Channels, ir.Channel{Type: t, ConnectedTo: peers})
			}
		}
		rb := &rankBuild{g: g, remote: map[[2]int]int{}, sems: map[semPair]int{}}
		sm.ops[r] = make([][]opSource, len(st.items[r]))
		g.ThreadBlocks = make([]ir.ThreadBlock, 0, len(st.items[r]))
		for tb, items := range st.items[r] {
			tbb := &tbBuild{rb: rb, chans: map[int]int{}, remote: map[[2]int]int{}}
			tbk := ir.ThreadBlock{ID: tb, Ops: make([]ir.Op, 0, len(items))}
			sm.ops[r][tb] = make([]opSource, 0, len(items))
			for _, it := range items {
				op, src := b.op(r, tbb, it, scratch)
				tbk.Ops = append(tbk.Ops, op)
				sm.ops[r][tb] = append(sm.ops[r][tb], src)
			}
			for _, t := range []ir.ChannelType{ir.ChanMemory, ir.ChanPort} {
				if ids := tbb.chanIDs[t]; len(ids) > 0 {
					tbk.Channels = append(tbk.Channels, ir.TBChannel{Type: t, ChannelIDs: ids})
				}
				if ids := tbb.remoteIDs[t]; len(ids) > 0 {
					tbk.RemoteBufferRefs = append(tbk.RemoteBufferRefs, ir.RemoteBufferRef{AccessChannelType: t, RemoteBufferIDs: ids})
				}
			}
			g.ThreadBlocks = append(g.ThreadBlocks, tbk)
		}
		for i := 0; i < rb.nsem; i++ {
			g.Semaphores = append(g.Semaphores, ir.Semaphore{})
		}
	}
	for r := range p.GPUs {
		p.GPUs[r].ScratchChunks = scratch[r]
	}
	st.plan, st.sm = p, sm
}

type planBuilder struct {
	st    *state
	peers [][3][]int          // [rank][type] connected_to
	flat  map[chanPair][2]int // pair -> flat index on (rankA, rankB) side
}

type rankBuild struct {
	g      *ir.GPU
	remote map[[2]int]int // (rank, buf) -> remote_buffers index
	sems   map[semPair]int
	nsem   int
}

type tbBuild struct {
	rb        *rankBuild
	chans     map[int]int // type<<24|flat -> local id
	chanIDs   [4][]int
	remote    map[[2]int]int // type, gpu remote index -> local id
	remoteIDs [4][]int
}

// collectExplicitPairs adds the channels named by channel-level ops.
func (b *planBuilder) collectExplicitPairs() {
	st := b.st
	var visit func(a *action)
	visit = func(a *action) {
		for _, in := range a.body {
			visit(in)
		}
		if !a.explicit || a.chType == ir.ChanNone {
			return
		}
		info := a.code.Info()
		a.chans = a.chans[:0]
		for _, p := range a.peers {
			tb := p.tb
			if tb == noBlock {
				tb = -1
			}
			k := pairKey(a.rank, a.tb, p.rank, tb, a.chType)
			st.pairs[k] = true
			a.chans = append(a.chans, k)
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
				for k := range st.pairs {
					if k.typ == a.chType && ((k.rankA == a.rank && k.rankB == r.rank) || (k.rankB == a.rank && k.rankA == r.rank)) {
						found = true
						break
					}
				}
				if !found {
					st.pairs[pairKey(a.rank, a.tb, r.rank, -1, a.chType)] = true
				}
			}
		}
	}
	for _, a := range st.actions {
		visit(a)
	}
}

func (b *planBuilder) layoutChannels() {
	st := b.st
	keys := make([]chanPair, 0, len(st.pairs))
	for k := range st.pairs {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		x, y := keys[i], keys[j]
		if x.typ != y.typ {
			return x.typ < y.typ
		}
		if x.rankA != y.rankA {
			return x.rankA < y.rankA
		}
		if x.rankB != y.rankB {
			return x.rankB < y.rankB
		}
		if x.tbA != y.tbA {
			return x.tbA < y.tbA
		}
		return x.tbB < y.tbB
	})
	b.peers = make([][3][]int, st.hdr.ranks)
	// Within one (type, rankA, rankB) group both sides see the pairs in the
	// same order, so appending in sorted order pairs them. Across peers the
	// order on a rank does not matter.
	for _, k := range keys {
		t := k.typ
		ia := len(b.peers[k.rankA][t])
		b.peers[k.rankA][t] = append(b.peers[k.rankA][t], k.rankB)
		ib := len(b.peers[k.rankB][t])
		b.peers[k.rankB][t] = append(b.peers[k.rankB][t], k.rankA)
		b.flat[k] = [2]int{ia, ib}
	}
}

// chanID returns the block-local id of pair k as seen from rank r.
func (b *planBuilder) chanID(r int, tbb *tbBuild, k chanPair) int {
	f := b.flat[k]
	idx := f[0]
	if k.rankB == r {
		idx = f[1]
	}
	key := int(k.typ)<<24 | idx
	if id, ok := tbb.chans[key]; ok {
		return id
	}
	id := len(tbb.chanIDs[k.typ])
	tbb.chans[key] = id
	tbb.chanIDs[k.typ] = append(tbb.chanIDs[k.typ], idx)
	return id
}

func (b *planBuilder) remoteID(tbb *tbBuild, t ir.ChannelType, rank int, buf ir.BufferType) int {
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
	lk := [2]int{int(t), gi}
	if id, ok := tbb.remote[lk]; ok {
		return id
	}
	id := len(tbb.remoteIDs[t])
	tbb.remote[lk] = id
	tbb.remoteIDs[t] = append(tbb.remoteIDs[t], gi)
	return id
}

func (b *planBuilder) refs(r int, tbb *tbBuild, a *action, refs []aref, scratch []int) []ir.BufRef {
	if len(refs) == 0 {
		return nil
	}
	out := make([]ir.BufRef, len(refs))
	for i, x := range refs {
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

func (b *planBuilder) op(r int, tbb *tbBuild, it item, scratch []int) (ir.Op, opSource) {
	src := opSource{pos: it.pos}
	switch it.kind {
	case itemAct:
		return b.actOp(r, tbb, it.act, scratch, &src), src
	case itemSemRelease, itemSemAcquire:
		id, ok := tbb.rb.sems[it.sem]
		if !ok {
			id = tbb.rb.nsem
			tbb.rb.nsem++
			tbb.rb.sems[it.sem] = id
		}
		return ir.Op{Code: itemCodes[it.kind], SemaphoreIDs: []int{id}}, src
	case itemNop:
		return ir.Op{Code: ir.OpNop}, src
	}
	if it.pairs == nil {
		return ir.Op{Code: itemCodes[it.kind], ChannelType: it.pair.typ, ChannelIDs: []int{b.chanID(r, tbb, it.pair)}}, src
	}
	op := ir.Op{Code: itemCodes[it.kind], ChannelType: it.pairs[0].typ}
	for _, k := range it.pairs {
		op.ChannelIDs = append(op.ChannelIDs, b.chanID(r, tbb, k))
	}
	return op, src
}

func (b *planBuilder) actOp(r int, tbb *tbBuild, a *action, scratch []int, src *opSource) ir.Op {
	info := a.code.Info()
	op := ir.Op{Code: a.code, TBG: a.tbg}
	if info.Chans != ir.MaskNone {
		op.ChannelType = a.chType
	}
	op.Src = b.refs(r, tbb, a, a.src, scratch)
	op.Dst = b.refs(r, tbb, a, a.dst, scratch)
	if info.ChannelIDs.Has(a.chType) {
		for _, k := range a.chans {
			op.ChannelIDs = append(op.ChannelIDs, b.chanID(r, tbb, k))
		}
	} else if info.Chans != ir.MaskNone && a.chType == ir.ChanMemory {
		// Memory data ops address peers through remote buffers, but the
		// block still holds the channel (upstream maps buffers through it).
		for _, k := range a.chans {
			b.chanID(r, tbb, k)
		}
	}
	if info.Reduces {
		op.ReduceOp = a.reduce
	}
	if info.Semaphores {
		op.SemaphoreIDs = append([]int(nil), a.sems...)
		for _, id := range a.sems {
			tbb.rb.nsem = max(tbb.rb.nsem, id+1)
		}
	}
	if a.code == ir.OpBarrier {
		op.BarrierID, op.NumTBs = a.barrier[0], a.barrier[1]
	}
	if a.code == ir.OpPipeline {
		it := *a.iter
		op.Iter = &it
		for _, in := range a.body {
			op.Ops = append(op.Ops, b.actOp(r, tbb, in, scratch, nil))
			if src != nil {
				src.inner = append(src.inner, &in.pos)
			}
		}
	}
	return op
}

// opSource is where one plan op came from.
type opSource struct {
	pos   *dsl.Range
	inner []*dsl.Range // pipeline body
}
