package compiler

import (
	"fmt"
	"strings"

	"github.com/msccl-go/msccl-go/dsl"
	"github.com/msccl-go/msccl-go/internal/diag"
	"github.com/msccl-go/msccl-go/ir"
)

// state is what the passes share besides the form they hand on (form,
// passes.go): the program, the options and the diagnostics. No pass's
// result is part of it.
type state struct {
	file    *dsl.File
	defines map[string]int64
	opts    Options
	diags   Diagnostics
	// code is what errorf's diagnostics carry: the running pass's
	// (diag.CompilePass) unless a check names a more precise one.
	code string
}

// sub returns a state for a worker or a trial: the same program and
// options, diagnostics of its own.
func (st *state) sub() *state {
	return &state{file: st.file, defines: st.defines, code: st.code, opts: st.opts}
}

// evaluated is the ops form: evaluate's result.
type evaluated struct {
	hdr header
	ops []*evOp // program order
}

// program is the action form: lower's result, placed on thread blocks
// by assign-tbs, rewritten by instances and fuse, read by sync.
type program struct {
	// hdr is evaluate's header; instances scales its chunk counts.
	hdr     header
	actions []*action // program order
	// blocks holds the same actions by thread block: [rank][tb], tb ids
	// dense; nil until assign-tbs.
	blocks [][]*block
	// explicit says the program is channel-level: no sync is inserted.
	explicit bool
}

// built is the plan form: the plan sync writes and its source map (the
// statement behind each op), which fuse-sync rewrites together and limits
// checks.
type built struct {
	plan *ir.Plan
	sm   *SourceMap
	// explicit says the program was channel-level; acts are then its
	// actions, which limits' balance check reads (nil for chunk-level
	// programs, whose millions of actions the plan no longer needs).
	explicit bool
	acts     []*action
}

// header is the evaluated collective header, params and options.
type header struct {
	collective    ir.Collective
	inplace       bool
	chunks        int
	ranks         int
	nodes         int
	gpusPerNode   int
	inChunks      int
	outChunks     int
	root          int   // broadcast, reduce, gather, scatter
	peers         []int // sendrecv; nil for the default (r+1) mod ranks
	protocol      ir.Protocol
	instances     int
	threads       int
	minMsg        uint64
	maxMsg        uint64
	doubleScratch bool
	reuse         bool
	name          string
	reduce        ir.ReduceOp
	intra, inter  ir.ChannelType
	pos           dsl.Range
}

// evRef is an evaluated chunk slice.
type evRef struct {
	// The range and rank share two words: a million-op program evaluates
	// millions of references (ranks and chunk indices are capped far
	// below 2^31).
	lo, hi int32 // chunk range [lo, hi)
	rank   int32
	buf    ir.BufferType
	// src is the reference in the source; its range is spelled only for
	// a message (a million-op program evaluates millions of them).
	src *dsl.Ref
}

// rng is the reference's source range.
func (r evRef) rng() dsl.Range {
	if r.src == nil {
		return dsl.Range{}
	}
	return dsl.RangeOf(r.src.Pos, r.src.EndPos)
}

func (r evRef) String() string {
	return fmt.Sprintf("rank(%d).%s[%d:%d]", r.rank, r.buf.Long(), r.lo, r.hi)
}

// peerSpec is `to p@tb` of a channel-level op; tb -1 means "same tb".
type peerSpec struct {
	rank, tb int
	rng      dsl.Range
}

// evOp is one evaluated operation statement.
type evOp struct {
	name     string
	src, dst []evRef
	// rngp is the statement's range, shared by all its ops (and the
	// actions made from them).
	rngp *dsl.Range
	// The numbers share two words: a million-op program evaluates a
	// million of these (ranks and blocks are capped far below 2^31).
	tb     int32 // -1: not given
	onRank int32 // channel level: the `on` block's rank; -1 for chunk ops
	onTB   int32
	// The clauses chunk-level ops rarely have live behind a pointer,
	// shared read-only (noExtra) until an op sets one: a million-op
	// program then holds ~140 bytes less per op to write and to scan.
	// Reads go through the promoted fields; writes through own().
	*evExtra
}

// evExtra is the rarely set part of an evOp.
type evExtra struct {
	reduce   ir.ReduceOp // `op` clause; "" when absent
	via      []string
	viaRng   *dsl.Range // set with via
	to       []peerSpec
	sems     []int
	tbg      *ir.TBGInfo
	id, cnt  int
	pipeline *ir.IterContext
	body     []*evOp
}

// noExtra is the shared, never written evExtra of ops with none.
var noExtra = &evExtra{id: -1, cnt: -1}

// own returns the op's private evExtra, for writing.
func (o *evOp) own() *evExtra {
	if o.evExtra == noExtra {
		x := *noExtra
		o.evExtra = &x
	}
	return o.evExtra
}

// aref is one buffer reference of an action: rank is the rank whose
// memory it is, packet says the bytes hold LL packets.
type aref struct {
	rank   int
	idx    int
	size   int
	buf    ir.BufferType // the small fields share a word: a million ops hold two arefs each
	packet bool
}

func (r aref) String() string {
	p := ""
	if r.packet {
		p = "pkt"
	}
	return fmt.Sprintf("r%d.%s[%d:%d]%s", r.rank, r.buf, r.idx, r.idx+r.size, p)
}

// action is one plan op before channels and ids are resolved.
type action struct {
	// seq and tbHint share a word; both fit in 32 bits: evaluate caps
	// ops at 4M and instances at 64, `tb` at 1023.
	seq    int32
	tbHint int32 // from `tb N`; -1 when absent
	rank   int   // executing rank
	tb     int   // -1 until assign-tbs
	// The action's first wait and signal, and where sync put the rest
	// (see syncLists).
	wait1, signal1     syncItem
	waitsAt, signalsAt int32
	// The one-byte fields share a word: there are millions of actions.
	code   ir.OpCode
	chType ir.ChannelType // channel type of remote refs; ChanNone when local
	// dead marks an action fused into an earlier one.
	dead     bool
	explicit bool
	// red is the reduction's index in reduceOps, one byte in the shared
	// word rather than a 16-byte string in every action.
	red uint8
	// sync is what the sync pass notes for the action (two flags, in the
	// shared word too).
	sync nodeSync
	src  []aref
	dst  []aref
	pos  *dsl.Range // shared by the actions of one statement
	// ch holds the fields only channel-level ops use; nil for chunk-level
	// ones, which are millions and need none of them.
	ch *chanLevel
	// links: the channels of port data ops and channel-level ops; nil
	// for the million memory copies and puts that have none.
	links *actLinks
}

// reduceOps are the reductions evaluate accepts (the `reduce` option and
// `op` clauses check their names), "" first.
var reduceOps = [...]ir.ReduceOp{ir.ReduceNone, ir.ReduceSum, ir.ReduceMin, ir.ReduceMax, ir.ReduceProd}

// setReduce sets a's reduction.
func (a *action) setReduce(r ir.ReduceOp) {
	for i, x := range reduceOps {
		if x == r {
			a.red = uint8(i)
			return
		}
	}
	panic(fmt.Sprintf("compiler: reduction %q was not checked", r))
}

// reduce returns a's reduction.
func (a *action) reduce() ir.ReduceOp { return reduceOps[a.red] }

// actLinks holds the channels an action uses, behind a pointer: 40 bytes
// less per action for the many that have none.
type actLinks struct {
	// chans: for port data ops, the channel carrying each remote dst;
	// for channel-level ops, the pair of each peer.
	chans []chanPair
	// outs are the port channels of edges leaving a port data op (which
	// dataPairs picks its channels from).
	outs []chanPair
}

// chanList returns a.links.chans, nil when a has no links.
func (a *action) chanList() []chanPair {
	if a.links == nil {
		return nil
	}
	return a.links.chans
}

// ownLinks returns a's links for writing, making them if needed.
func (a *action) ownLinks() *actLinks {
	if a.links == nil {
		a.links = &actLinks{}
	}
	return a.links
}

// chanLevel is the part of an action only channel-level ops have.
type chanLevel struct {
	peers   []peerSpec // signal/wait/flush targets, port data channels
	sems    []int
	tbg     *ir.TBGInfo
	barrier [2]int // id, num blocks
	iter    *ir.IterContext
	body    []*action
}

// peers, sems, tbg, barrier, iter and body read a.ch, empty when nil.
func (a *action) peers() []peerSpec {
	if a.ch == nil {
		return nil
	}
	return a.ch.peers
}

func (a *action) body() []*action {
	if a.ch == nil {
		return nil
	}
	return a.ch.body
}

func (a *action) sems() []int {
	if a.ch == nil {
		return nil
	}
	return a.ch.sems
}

func (a *action) tbg() *ir.TBGInfo {
	if a.ch == nil {
		return nil
	}
	return a.ch.tbg
}

// block is one thread block's action list during compilation.
type block struct {
	rank, tb int
	acts     []*action
	n        int // compactBlocks: the number of actions, while it counts
}

func (a *action) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "r%d tb%d %s", a.rank, a.tb, a.code)
	writeRefs(&b, " src=", a.src)
	writeRefs(&b, " dst=", a.dst)
	if a.chType != ir.ChanNone {
		b.WriteString(" via " + a.chType.String())
	}
	for _, p := range a.peers() {
		fmt.Fprintf(&b, " to r%d@%d", p.rank, p.tb)
	}
	fmt.Fprintf(&b, "  // %d:%d", a.pos.Start.Line, a.pos.Start.Col)
	return b.String()
}

// writeRefs writes label and refs, comma-separated; nothing when there
// are none.
func writeRefs(b *strings.Builder, label string, refs []aref) {
	if len(refs) == 0 {
		return
	}
	b.WriteString(label)
	for i, r := range refs {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(r.String())
	}
}

func dumpActions(f form) string {
	var acts []*action
	var h *header
	var ops []*evOp
	switch {
	case f.prog != nil:
		acts, h = f.prog.actions, &f.prog.hdr
	case f.ev != nil:
		ops, h = f.ev.ops, &f.ev.hdr
	default:
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s ranks=%d nodes=%d chunks in=%d out=%d instances=%d\n", h.collective, h.protocol, h.ranks, h.nodes, h.inChunks, h.outChunks, h.instances)
	if acts == nil {
		for _, o := range ops {
			fmt.Fprintf(&b, "%s %v -> %v  // %d:%d\n", o.name, o.src, o.dst, o.rng().Start.Line, o.rng().Start.Col)
		}
		return b.String()
	}
	for _, a := range acts {
		if a.dead {
			continue
		}
		b.WriteString(a.String())
		b.WriteByte('\n')
		for _, in := range a.body() {
			b.WriteString("    " + in.String() + "\n")
		}
	}
	return b.String()
}

// errorf reports an error at r with the running pass's code.
func (st *state) errorf(r dsl.Range, detail, format string, args ...any) {
	code := st.code
	if code == "" {
		code = diag.CompilePass("evaluate")
	}
	st.errorc(code, r, detail, format, args...)
}

// errorc reports an error at r with code.
func (st *state) errorc(code string, r dsl.Range, detail, format string, args ...any) {
	if len(st.diags) >= 50 {
		return // one mistake in a loop body must not bury the rest
	}
	d := diag.Errorf(code, r, detail, format, args...)
	for _, x := range st.diags {
		if x == d {
			return // the same mistake met again in a later loop iteration
		}
	}
	st.diags = append(st.diags, d)
}

func (ev *evaluator) newEvOp() *evOp {
	if len(ev.opSlab) == cap(ev.opSlab) {
		ev.opSlab = make([]evOp, 0, slabSize(cap(ev.opSlab), 1024))
	}
	ev.opSlab = ev.opSlab[:len(ev.opSlab)+1]
	return &ev.opSlab[len(ev.opSlab)-1]
}

func (lw *lowerer) newAction() *action {
	if len(lw.actSlab) == cap(lw.actSlab) {
		lw.actSlab = make([]action, 0, slabSize(cap(lw.actSlab), 1024))
	}
	lw.actSlab = lw.actSlab[:len(lw.actSlab)+1]
	return &lw.actSlab[len(lw.actSlab)-1]
}

// slabSize is the size of a slab following one of size prev: small
// programs start with small slabs, large ones soon reach limit.
func slabSize(prev, limit int) int {
	return min(max(32, 2*prev), limit)
}

// viaRange is where the op's via clause is, for messages about it.
func (o *evOp) viaRange() dsl.Range {
	if o.viaRng == nil {
		return o.rng()
	}
	return *o.viaRng
}

// posRef returns the op's range as a pointer shared with the statement's
// other ops where the evaluator made one.
func (o *evOp) posRef() *dsl.Range { return o.rngp }

// rng is the op's source range.
func (o *evOp) rng() dsl.Range {
	if o.rngp == nil {
		return dsl.Range{}
	}
	return *o.rngp
}
