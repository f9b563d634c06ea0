package compiler

import (
	"strconv"
	"strings"

	"github.com/msccl-go/msccl-go/dsl"
)

// SourceMap maps every op of a compiled plan back to the DSL statement it
// came from. Synchronisation the compiler inserted maps to the statement
// that needed it (a wait to the op that waits, a signal to the op whose
// result it publishes).
type SourceMap struct {
	ops [][][]*dsl.Range // [rank][block][op]
	// inner holds the sources of pipeline bodies, for the few ops that
	// have one: a plan of millions of ops keeps one pointer per op.
	inner map[[3]int][]*dsl.Range // (rank, block, op)
	head  dsl.Range               // the collective header: findings about the whole plan
}

func (m *SourceMap) setInner(rank, block, op int, inner []*dsl.Range) {
	if m.inner == nil {
		m.inner = map[[3]int][]*dsl.Range{}
	}
	m.inner[[3]int{rank, block, op}] = inner
}

// moveOp moves op from's sources to op to of the same block (fuse-sync
// compacting a block); from's are dropped when to < 0.
func (m *SourceMap) moveOp(rank, block, from, to int) {
	ops := m.ops[rank][block]
	if to >= 0 {
		ops[to] = ops[from]
	}
	if len(m.inner) == 0 {
		return
	}
	k := [3]int{rank, block, from}
	in, ok := m.inner[k]
	delete(m.inner, k)
	if to >= 0 {
		if ok {
			m.inner[[3]int{rank, block, to}] = in
		} else {
			delete(m.inner, [3]int{rank, block, to})
		}
	}
}

func (m *SourceMap) header() dsl.Range {
	if m == nil {
		return dsl.Range{}
	}
	return m.head
}

// Lookup returns the source position of plan op (rank, block, op); inner
// is the index inside a pipeline body, or -1.
func (m *SourceMap) Lookup(rank, block, op, inner int) (dsl.Pos, bool) {
	r, ok := m.lookup(rank, block, op, inner)
	return r.Start, ok
}

// Range is Lookup returning the whole source range.
func (m *SourceMap) Range(rank, block, op, inner int) (dsl.Range, bool) {
	return m.lookup(rank, block, op, inner)
}

func (m *SourceMap) lookup(rank, block, op, inner int) (dsl.Range, bool) {
	if m == nil || rank < 0 || rank >= len(m.ops) || block < 0 || block >= len(m.ops[rank]) || op < 0 || op >= len(m.ops[rank][block]) {
		return dsl.Range{}, false
	}
	pos := m.ops[rank][block][op]
	if in := m.inner[[3]int{rank, block, op}]; inner >= 0 && inner < len(in) && in[inner] != nil {
		return *in[inner], in[inner].Start.IsValid()
	}
	if pos == nil {
		return dsl.Range{}, false
	}
	return *pos, pos.Start.IsValid()
}

// rangeOfPath finds the source of an ir diagnostic path
// (gpus[R].threadblocks[B].ops[O]..., inside a pipeline ops[O].ops[I]...),
// or the file when it cannot.
func (m *SourceMap) rangeOfPath(path, filename string) dsl.Range {
	pp := parsePlanPath(path)
	if pp.op >= 0 {
		if rg, ok := m.lookup(pp.rank, pp.block, pp.op, pp.inner); ok {
			return rg
		}
	}
	return dsl.Range{Start: dsl.Pos{Filename: filename}}
}

// planPath is the leading part of an ir diagnostic path: rank, block, op
// and pipeline body op, each -1 where the path stops before it; rest is
// the remainder (".semaphore_ids", ".channels[2].channel_ids[16]").
type planPath struct {
	rank, block, op, inner int
	rest                   string
}

func parsePlanPath(path string) planPath {
	pp := planPath{rank: -1, block: -1, op: -1, inner: -1, rest: path}
	for i, key := range [...]string{"gpus", ".threadblocks", ".ops", ".ops"} {
		n, rest, ok := pathIndex(pp.rest, key)
		if !ok {
			break
		}
		switch i {
		case 0:
			pp.rank = n
		case 1:
			pp.block = n
		case 2:
			pp.op = n
		case 3:
			pp.inner = n
		}
		pp.rest = rest
	}
	return pp
}

// pathIndex reads key[N] at the start of s.
func pathIndex(s, key string) (n int, rest string, ok bool) {
	s, ok = strings.CutPrefix(s, key+"[")
	if !ok {
		return 0, "", false
	}
	num, rest, ok := strings.Cut(s, "]")
	if !ok {
		return 0, "", false
	}
	n, err := strconv.Atoi(num)
	if err != nil || n < 0 {
		return 0, "", false
	}
	return n, rest, true
}
