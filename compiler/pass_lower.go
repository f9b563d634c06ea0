package compiler

import (
	"fmt"
	"strings"

	"github.com/msccl-go/msccl-go/dsl"
	"github.com/msccl-go/msccl-go/internal/diag"
	"github.com/msccl-go/msccl-go/ir"
)

// lower turns evaluated ops into actions. Chunk-level copy/reduce get an
// executing rank, a plan op and a channel type here: memory inside a node,
// port across nodes (options intra/inter, or `via` on the op, override);
// with protocol LL, scratch chunks written by packet ops are tracked so
// later reads use the packet ops (upkt, repkt, rppkt). Channel-level ops
// are checked against the op table and passed through.
func lower(st *state, e *evaluated) *program {
	ops := e.ops
	var chunkOp, chanOp *evOp
	for _, o := range ops {
		if o.name == "require" {
			// A `require` with nothing after it on its line (at the end of
			// a block or file) parses as an op statement of that name; say
			// what is missing rather than "unknown operation".
			st.errorf(o.rng(), "write e.g. `require ranks % 2 == 0, \"the ring pairs ranks\"`", "require needs a condition")
			continue
		}
		if o.onRank >= 0 {
			if chanOp == nil {
				chanOp = o
			}
		} else if chunkOp == nil {
			chunkOp = o
		}
	}
	if st.diags.HasErrors() {
		return nil
	}
	if chunkOp != nil && chanOp != nil {
		st.errorf(chunkOp.rng(), fmt.Sprintf("the program also has channel-level ops (first at %s); the compiler cannot place synchronisation around hand-placed ops, so write it all at one level", chanOp.rng().Start),
			"chunk-level %s outside `on` in a channel-level program", chunkOp.name)
		return nil
	}
	p := &program{hdr: e.hdr, explicit: chanOp != nil}
	lw := &lowerer{st: st, p: p, pkt: make([]map[int]bool, p.hdr.ranks)}
	if p.hdr.protocol == ir.LL {
		lw.sg.scratchEnd = make([]int, p.hdr.ranks)
	}
	// One action per op at most: sized once, not grown through a dozen
	// copies for a million ops.
	p.actions = make([]*action, 0, len(ops))
	if !p.explicit && lw.chunksParallel(p, ops) {
		return p
	}
	for _, o := range ops {
		var a *action
		if p.explicit {
			a = lw.explicit(o)
		} else {
			a = lw.chunk(o)
		}
		if a != nil {
			a.seq = int32(len(p.actions))
			p.actions = append(p.actions, a)
			lw.sg.wrote(a)
		}
	}
	lw.sg.placeStaging()
	lw.foldPairErrors()
	if len(p.actions) == 0 {
		p.actions = nil // as if never grown
	}
	return p
}

type lowerer struct {
	st *state
	p  *program // the program being made; read only for its header
	// actSlab backs the actions, a thousand to an allocation rather than
	// one each for the millions a large program makes.
	actSlab []action
	refs    []aref         // slab for copy operands
	pkt     []map[int]bool // [rank] scratch chunk -> holds packets
	sg      staging        // LL copies over port channels
	// pairErrs: errors met once per rank pair, folded (lower_pairerr.go)
	pairErrs map[pairErrKey]*pairErr
}

// canon maps a reference through the in-place aliasing of the collective,
// so that one memory location has one name for dependency analysis.
func (lw *lowerer) canon(r evRef) aref {
	h := &lw.p.hdr
	a := aref{rank: int(r.rank), buf: r.buf, idx: int(r.lo), size: int(r.hi - r.lo)}
	lw.sg.noteScratch(a)
	if !h.inplace {
		return a
	}
	switch {
	case h.collective.Gathers():
		if a.buf == ir.BufInput {
			a.buf, a.idx = ir.BufOutput, int(r.rank)*h.inChunks+a.idx
		}
	case h.collective.Scatters():
		if a.buf == ir.BufOutput {
			a.buf, a.idx = ir.BufInput, int(r.rank)*h.outChunks+a.idx
		}
	default:
		if a.buf == ir.BufOutput {
			a.buf = ir.BufInput
		}
	}
	return a
}

func (lw *lowerer) node(r int) int { return r / lw.p.hdr.gpusPerNode }

// chanFor picks the channel type between two ranks, honouring `via`.
func (lw *lowerer) chanFor(o *evOp, a, b int) (ir.ChannelType, bool) {
	h := &lw.p.hdr
	t := h.intra
	if lw.node(a) != lw.node(b) {
		t = h.inter
	}
	for _, v := range o.via {
		switch v {
		case "memory":
			t = ir.ChanMemory
		case "port":
			t = ir.ChanPort
		}
	}
	if t == ir.ChanMemory && lw.node(a) != lw.node(b) {
		fix := "use `via port` or a port-capable op"
		if !contains(o.via, "memory") {
			fix = "`option inter = memory` chose it: set `option inter = port`"
		}
		lw.pairErrorf("memory-across-nodes", o.rng(), fmt.Sprintf("ranks %d and %d are on nodes %d and %d (gpus_per_node = %d); memory channels only reach GPUs of one node: %s", a, b, lw.node(a), lw.node(b), h.gpusPerNode, fix),
			"no usable channel type for %s between rank %d and rank %d", o.name, a, b)
		return t, false
	}
	return t, true
}

func (lw *lowerer) isPkt(r aref) (all, any bool) {
	if r.buf != ir.BufScratch {
		return false, false
	}
	all = true
	for i := r.idx; i < r.idx+r.size; i++ {
		p := lw.pkt[r.rank][i]
		all = all && p
		any = any || p
	}
	return all, any
}

func (lw *lowerer) setPkt(r aref, v bool) {
	if r.buf != ir.BufScratch || (!v && lw.pkt[r.rank] == nil) {
		// Nothing to clear: no map is made (chunksParallel relies on
		// protocol Simple programs never writing lw.pkt).
		return
	}
	if lw.pkt[r.rank] == nil {
		lw.pkt[r.rank] = map[int]bool{}
	}
	for i := r.idx; i < r.idx+r.size; i++ {
		if v {
			lw.pkt[r.rank][i] = true
		} else {
			delete(lw.pkt[r.rank], i)
		}
	}
}

func overlaps(a, b aref) bool {
	return a.rank == b.rank && a.buf == b.buf && a.idx < b.idx+b.size && b.idx < a.idx+a.size
}

func (lw *lowerer) chunk(o *evOp) *action {
	st := lw.st
	switch o.name {
	case "copy", "reduce":
	default:
		if _, ok := ir.LookupOp(o.name); ok {
			st.errorf(o.rng(), "channel-level ops go inside an `on rank(r) tb N { ... }` block; at chunk level use copy or reduce", "%s is a channel-level op", o.name)
		} else {
			st.errorf(o.rng(), joinDetail(diag.Suggest(o.name, []string{"copy", "reduce"}), "chunk-level ops are copy and reduce"), "unknown operation %q", o.name)
		}
		return nil
	}
	if len(o.to) > 0 || o.sems != nil || o.tbg != nil || o.id >= 0 || o.cnt >= 0 {
		st.errorf(o.rng(), "chunk-level ops take tb, via and op clauses; the compiler places channels, semaphores and barriers", "channel-level clause on %s", o.name)
		return nil
	}
	if !o.hasArrow() {
		st.errorf(o.rng(), "write: "+o.name+" SRC -> DST", "%s needs sources and a destination", o.name)
		return nil
	}
	if len(o.dst) != 1 {
		st.errorf(o.rng(), "", "%s has one destination, got %d", o.name, len(o.dst))
		return nil
	}
	size := o.dst[0].hi - o.dst[0].lo
	for _, s := range o.src {
		if s.hi-s.lo != size {
			st.errorf(s.rng(), fmt.Sprintf("the destination %s covers %d chunk(s)", o.dst[0], size), "source %s covers %d chunk(s)", s, s.hi-s.lo)
			return nil
		}
	}
	a := lw.newAction()
	*a = action{rank: -1, tb: -1, tbHint: o.tb, pos: o.posRef()}
	a.setReduce(lw.p.hdr.reduce)
	if o.reduce != "" {
		a.setReduce(o.reduce)
	}
	dst := lw.canon(o.dst[0])
	if o.name == "copy" {
		if len(o.src) != 1 {
			st.errorf(o.rng(), "use reduce to combine several sources", "copy has one source, got %d", len(o.src))
			return nil
		}
		if o.reduce != "" {
			st.errorf(o.rng(), "", "copy does not reduce; drop the op clause")
			return nil
		}
		return lw.copyOp(o, a, lw.canon(o.src[0]), dst)
	}
	if len(o.src) < 2 {
		st.errorf(o.rng(), "list the chunks to combine, including the destination to accumulate into it: reduce D, X -> D", "reduce needs at least two sources, got %d", len(o.src))
		return nil
	}
	srcs := make([]aref, len(o.src))
	for i, s := range o.src {
		srcs[i] = lw.canon(s)
	}
	return lw.reduceOp(o, a, srcs, dst)
}

func (o *evOp) hasArrow() bool { return len(o.dst) > 0 }

func (lw *lowerer) copyOp(o *evOp, a *action, src, dst aref) *action {
	st, ll := lw.st, lw.p.hdr.protocol == ir.LL
	if overlaps(src, dst) {
		st.errorf(o.rng(), "", "copy source and destination overlap")
		return nil
	}
	get := contains(o.via, "get")
	srcAll, srcAny := lw.isPkt(src)
	if srcAny && !srcAll {
		st.errorf(o.rng(), "copy whole packet slots: split the slice where packet and plain chunks meet", "source %s mixes packet and plain chunks", src)
		return nil
	}
	// One slab slot pair for both operands; each is capped, so a later
	// append (fuse) copies instead of spilling into its neighbour.
	if len(lw.refs)+2 > cap(lw.refs) {
		lw.refs = make([]aref, 0, slabSize(cap(lw.refs), 2048))
	}
	n := len(lw.refs)
	lw.refs = append(lw.refs, src, dst)
	a.src, a.dst = lw.refs[n:n+1:n+1], lw.refs[n+1:n+2:n+2]
	a.src[0].packet = srcAll
	if src.rank == dst.rank {
		a.rank = src.rank
		switch {
		case srcAll:
			a.code = ir.OpUpkt
			lw.setPkt(dst, false)
		case ll && dst.buf == ir.BufScratch:
			a.code = ir.OpCpkt
			a.dst[0].packet = true
			lw.setPkt(dst, true)
		default:
			a.code = ir.OpCopy
			lw.setPkt(dst, false)
		}
		if get {
			st.errorf(o.viaRange(), "", "`via get` needs a copy between two ranks")
			return nil
		}
		return a
	}
	t, ok := lw.chanFor(o, src.rank, dst.rank)
	if !ok {
		return nil
	}
	a.chType = t
	if ll {
		if get {
			st.errorf(o.viaRange(), "LL packets are pushed by the sender; drop `via get` or use protocol Simple", "`via get` with protocol LL")
			return nil
		}
		if dst.buf != ir.BufScratch {
			st.errorf(o.dst[0].rng(), "with protocol LL, data crosses ranks as packets into the peer's scratch; copy it there, then copy it locally to its final place (the compiler unpacks it)",
				"LL copy to rank %d's %s", dst.rank, dst.buf.Long())
			return nil
		}
		a.rank = src.rank
		a.code = ir.OpPpkt
		switch {
		case srcAll:
			a.code = ir.OpRppkt
		case t == ir.ChanPort:
			a.src[0] = lw.stage(o, src)
			lw.sg.refs = append(lw.sg.refs, &a.src[0])
		}
		a.dst[0].packet = true
		lw.setPkt(dst, true)
		return a
	}
	if srcAll {
		st.errorf(o.rng(), "", "packet data can only cross ranks with protocol LL")
		return nil
	}
	lw.setPkt(dst, false)
	if get {
		if t != ir.ChanMemory {
			st.errorf(o.viaRange(), "get reads the peer's memory directly, which needs a memory channel", "no usable channel type for get between rank %d and rank %d", src.rank, dst.rank)
			return nil
		}
		a.rank, a.code = dst.rank, ir.OpGet
		return a
	}
	a.rank, a.code = src.rank, ir.OpPut
	return a
}

func (lw *lowerer) reduceOp(o *evOp, a *action, srcs []aref, dst aref) *action {
	st, ll := lw.st, lw.p.hdr.protocol == ir.LL
	if contains(o.via, "get") {
		st.errorf(o.viaRange(), "a reduce reads remote sources directly when it needs to", "`via get` on reduce")
		return nil
	}
	a.rank = dst.rank
	// The destination itself goes first when it is a source (accumulate),
	// then other local chunks, then remote ones: rre and repkt want the
	// local plain operand in front.
	var local, remote []aref
	for _, s := range srcs {
		all, any := lw.isPkt(s)
		if any && !all {
			st.errorf(o.rng(), "", "source %s mixes packet and plain chunks", s)
			return nil
		}
		s.packet = all
		switch {
		case s.rank != dst.rank:
			remote = append(remote, s)
		case s == dst:
			local = append([]aref{s}, local...)
		default:
			local = append(local, s)
		}
	}
	if len(srcs) > 10 {
		st.errorf(o.rng(), "the executor takes at most 10 buffer references per op; split the reduction", "reduce of %d sources", len(srcs))
		return nil
	}
	a.dst = []aref{dst}
	if ll {
		if len(remote) > 0 {
			st.errorf(remote[0].rangeHint(o), "with protocol LL, copy remote chunks into this rank's scratch first (as packets) and reduce from there",
				"LL reduce reads rank %d's memory", remote[0].rank)
			return nil
		}
		var plain, pk []aref
		for _, s := range local {
			if s.packet {
				pk = append(pk, s)
			} else {
				plain = append(plain, s)
			}
		}
		switch {
		case len(pk) == 0:
			a.code = ir.OpRe
		case len(plain) == 1:
			a.code = ir.OpRepkt
		default:
			st.errorf(o.rng(), "packet reductions combine one plain chunk with packets: reduce the plain chunks first", "LL reduce with %d plain and %d packet sources", len(plain), len(pk))
			return nil
		}
		a.src = append(plain, pk...)
		lw.setPkt(dst, false)
		return a
	}
	for _, s := range local {
		if s.packet {
			st.errorf(o.rng(), "", "packet source %s in a protocol Simple program", s)
			return nil
		}
	}
	lw.setPkt(dst, false)
	if len(remote) == 0 {
		a.code, a.src = ir.OpRe, local
		return a
	}
	if len(local) != 1 {
		st.errorf(o.rng(), "a remote-reading reduce (rre) combines exactly one chunk of the destination rank with remote chunks; reduce the local ones first",
			"reduce with %d local and %d remote sources", len(local), len(remote))
		return nil
	}
	for _, r := range remote {
		if lw.node(r.rank) != lw.node(dst.rank) || contains(o.via, "port") || lw.p.hdr.intra != ir.ChanMemory {
			lw.pairErrorf("remote-reduce", o.rng(), fmt.Sprintf("reading rank %d's memory needs a memory channel, and ranks %d and %d are not connected by one; copy the chunk over first (a port put), then reduce locally", r.rank, r.rank, dst.rank),
				"no usable channel type for a reduce reading rank %d from rank %d", r.rank, dst.rank)
			return nil
		}
	}
	a.code, a.src, a.chType = ir.OpRre, append(local, remote...), ir.ChanMemory
	return a
}

// noBlock marks a channel end that no block of the peer uses: a port put
// needs a channel to reach the peer, not a partner block.
const noBlock = -1000

func (r aref) rangeHint(o *evOp) dsl.Range { return o.rng() }

// explicit lowers a channel-level op: the op name is a plan op, refs on the
// `on` rank are local and others remote, and the operands must fit the op
// table.
func (lw *lowerer) explicit(o *evOp) *action {
	if o.name == "pipeline" {
		return lw.explicitPipeline(o)
	}
	code, ok := ir.LookupOp(o.name)
	if !ok {
		lw.unknownOp(o)
		return nil
	}
	in := code.Info()
	a := &action{rank: int(o.onRank), tb: int(o.onTB), tbHint: o.onTB, code: code, explicit: true, pos: o.posRef(), ch: &chanLevel{tbg: o.tbg, sems: o.sems}}
	if !lw.explicitClauses(o, a, in) {
		return nil
	}
	if !lw.operands(o, a, "source", o.src, in.Src, in.IsPacketSrc, &a.src) || !lw.operands(o, a, "destination", o.dst, in.Dst, in.IsPacketDst, &a.dst) {
		return nil
	}
	remotes, ok := lw.explicitPeers(o, a, in)
	if !ok {
		return nil
	}
	if in.Chans == ir.MaskNone {
		if len(o.via) > 0 || len(o.to) > 0 {
			lw.st.errorf(o.rng(), "", "%s uses no channel; drop via/to", o.name)
			return nil
		}
		if len(remotes) > 0 {
			lw.st.errorf(o.rng(), "", "%s works on local buffers only", o.name)
			return nil
		}
		return a
	}
	if !lw.explicitChannel(o, a, in, remotes) {
		return nil
	}
	return a
}

// explicitPipeline lowers a pipeline block: its body ops, one level
// deep.
func (lw *lowerer) explicitPipeline(o *evOp) *action {
	st := lw.st
	a := &action{rank: int(o.onRank), tb: int(o.onTB), tbHint: o.onTB, code: ir.OpPipeline, explicit: true, pos: o.posRef(), ch: &chanLevel{iter: o.pipeline}}
	for _, in := range o.body {
		if in.name == "pipeline" {
			st.errorf(in.rng(), "", "pipelines cannot be nested")
			return nil
		}
		b := lw.explicit(in)
		if b == nil {
			return nil
		}
		a.ch.body = append(a.ch.body, b)
	}
	return a
}

// unknownOp reports an op name the op table lacks, with the nearest
// name (or, for the chunk-level reduce, the plan ops that reduce).
func (lw *lowerer) unknownOp(o *evOp) {
	st := lw.st
	var names []string
	for _, in := range ir.Ops() {
		names = append(names, in.Name)
	}
	hint := diag.Suggest(o.name, names)
	if o.name == "reduce" {
		hint = `did you mean "re"? (reduce is chunk level; inside on blocks use the plan ops re, rre, res, rres, repkt, ...)`
	}
	st.errorf(o.rng(), joinDetail(hint, "channel-level ops are the plan ops listed in docs/dsl.md"), "unknown op %q", o.name)
}

// explicitClauses checks the op's clauses against the op table (reduce,
// thread-block group, semaphores, barrier count; no switch ops) and sets
// the reduction on a.
func (lw *lowerer) explicitClauses(o *evOp, a *action, in *ir.OpInfo) bool {
	st := lw.st
	if in.Reduces {
		a.setReduce(lw.p.hdr.reduce)
		if o.reduce != "" {
			a.setReduce(o.reduce)
		}
	} else if o.reduce != "" {
		st.errorf(o.rng(), "", "%s does not reduce; drop the op clause", o.name)
		return false
	}
	if o.tbg != nil && !in.TBG {
		st.errorf(o.rng(), "", "%s takes no thread-block group", o.name)
		return false
	}
	if in.Semaphores {
		if len(o.sems) == 0 {
			st.errorf(o.rng(), "write e.g. `sem_release sem 0`", "%s needs semaphore ids", o.name)
			return false
		}
		for _, id := range o.sems {
			// An id is an expression (`7- 8` is -1): refuse it here, at
			// its statement, before the plan's validator meets it.
			if id < 0 {
				st.errorf(o.rng(), "semaphore ids count from 0", "%s names semaphore %d", o.name, id)
				return false
			}
		}
	} else if o.sems != nil {
		st.errorf(o.rng(), "", "%s takes no semaphores", o.name)
		return false
	}
	if a.code == ir.OpBarrier {
		a.ch.barrier = [2]int{max(o.id, 0), o.cnt}
		if o.cnt < 1 {
			st.errorf(o.rng(), "write e.g. `barrier id 0 count 4` (count = blocks of this rank that take part)", "barrier needs a count")
			return false
		}
	}
	if in.Class == ir.ClassSwitch {
		st.errorf(o.rng(), "switch channels (NVLink multicast) are not generated by the compiler; load an upstream plan to use them", "switch op %s is not supported in the language", o.name)
		return false
	}
	return true
}

// explicitPeers takes the peers `to` names into a and returns the ranks
// the operands reach outside this one.
func (lw *lowerer) explicitPeers(o *evOp, a *action, in *ir.OpInfo) (map[int]bool, bool) {
	st := lw.st
	// Peers: explicit `to`, else the owners of remote refs.
	for _, p := range o.to {
		if p.rank == int(o.onRank) {
			st.errorf(p.rng, "", "a channel connects two different ranks; rank %d is this block's own", p.rank)
			return nil, false
		}
		a.ch.peers = append(a.ch.peers, p)
	}
	remotes := map[int]bool{}
	for _, r := range append(append([]aref{}, a.src...), a.dst...) {
		if r.rank != int(o.onRank) {
			remotes[r.rank] = true
		}
	}
	if in.ChannelIDs != ir.MaskNone && in.Class == ir.ClassSync && len(a.ch.peers) == 0 {
		st.errorf(o.rng(), "name the peers: e.g. `"+o.name+" to 1` or `to 1@2` for rank 1's thread block 2", "%s needs `to PEER`", o.name)
		return nil, false
	}
	return remotes, true
}

// explicitChannel picks the channel type an op that moves data between
// ranks runs over (the one its peer's channels give, or the op's only
// one) and, for port data ops, one peer per remote destination.
func (lw *lowerer) explicitChannel(o *evOp, a *action, in *ir.OpInfo, remotes map[int]bool) bool {
	st := lw.st
	peer := -1
	if len(a.ch.peers) > 0 {
		peer = a.ch.peers[0].rank
	}
	for r := range remotes {
		if peer < 0 || r < peer {
			peer = r
		}
	}
	if peer < 0 {
		st.errorf(o.rng(), "", "%s moves data between ranks but names no other rank", o.name)
		return false
	}
	t, ok := lw.chanFor(o, int(o.onRank), peer)
	if !ok {
		return false
	}
	if !in.Chans.Has(t) {
		var names []string
		for _, c := range []ir.ChannelType{ir.ChanMemory, ir.ChanPort} {
			if in.Chans.Has(c) {
				names = append(names, c.String())
			}
		}
		if len(names) == 1 && len(o.via) == 0 {
			t, _ = ir.ParseChannelType(names[0])
			if _, ok := lw.chanFor(&evOp{name: o.name, rngp: o.rngp, evExtra: &evExtra{id: -1, cnt: -1, via: []string{names[0]}}}, int(o.onRank), peer); !ok {
				return false
			}
		} else {
			st.errorf(o.rng(), "it runs over "+strings.Join(names, " or ")+" channels", "no usable channel type: %s cannot use a %s channel", o.name, t)
			return false
		}
	}
	a.chType = t
	// Port data ops name one channel per remote destination.
	if t == ir.ChanPort && in.ChannelIDs.Has(ir.ChanPort) && in.Class != ir.ClassSync && len(a.ch.peers) == 0 {
		for _, d := range a.dst {
			if d.rank != int(o.onRank) {
				a.ch.peers = append(a.ch.peers, peerSpec{rank: d.rank, tb: noBlock, rng: o.rng()})
			}
		}
	}
	return true
}

// operands converts refs and checks them against the op table's shape.
func (lw *lowerer) operands(o *evOp, a *action, what string, refs []evRef, spec ir.Operand, pkt func(int) bool, out *[]aref) bool {
	st := lw.st
	if len(refs) < spec.Min || len(refs) > spec.Max {
		if spec.Max == 0 {
			st.errorf(o.rng(), "", "%s takes no %s buffers", o.name, what)
		} else {
			st.errorf(o.rng(), "", "%s takes %d..%d %s buffers, got %d", o.name, spec.Min, spec.Max, what, len(refs))
		}
		return false
	}
	for k, r := range refs {
		ar := lw.canon(r)
		ar.packet = pkt(k)
		mask := spec.First
		if k > 0 {
			mask = spec.Rest
		}
		kind := ir.RefLocal
		if r.rank != o.onRank {
			kind = ir.RefRemote
		}
		if !mask.Has(kind) {
			where := "a local buffer of rank " + fmt.Sprint(o.onRank)
			if kind == ir.RefLocal {
				where = "another rank's buffer"
			}
			st.errorf(r.rng(), fmt.Sprintf("%s %d of %s must be %s", what, k, o.name, where), "%s is in the wrong place for %s", r, o.name)
			return false
		}
		*out = append(*out, ar)
	}
	return true
}
