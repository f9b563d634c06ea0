package compiler

import (
	"fmt"

	"github.com/msccl-go/msccl-go/dsl"
	"github.com/msccl-go/msccl-go/ir"
)

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

func (ev *evaluator) newEvOp() *evOp {
	if len(ev.opSlab) == cap(ev.opSlab) {
		ev.opSlab = make([]evOp, 0, slabSize(cap(ev.opSlab), 1024))
	}
	ev.opSlab = ev.opSlab[:len(ev.opSlab)+1]
	return &ev.opSlab[len(ev.opSlab)-1]
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
