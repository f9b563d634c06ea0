package compiler

import (
	"slices"
	"sync/atomic"

	"github.com/msccl-go/msccl-go/dsl"
	"github.com/msccl-go/msccl-go/internal/par"
)

// A chunk-level `for` whose body only emits ops (let, for, if and op
// statements: every binding dies with its iteration) can run its
// iterations on several cores. Each worker evaluates a contiguous range of
// iterations with its own evaluator and op slab; the ranges' ops are
// appended in iteration order, so the result is the serial one. Anything
// unusual (a diagnostic, a limit reached) throws the workers' results away
// and runs the loop serially, which reports exactly as before.

// minParallelIters: shorter loops are not worth the goroutines.
const minParallelIters = 64

// pureBody says whether a loop body only emits chunk-level ops, caching
// the answer per loop; on the way it gives every op statement of the body
// its shared range, so that workers only read ev.ranges.
func (ev *evaluator) pureBody(f *dsl.ForStmt) bool {
	if v, ok := ev.pure[f]; ok {
		return v
	}
	var walk func(ss []*dsl.Stmt) bool
	walk = func(ss []*dsl.Stmt) bool {
		for _, s := range ss {
			switch {
			case s.Let != nil:
			case s.For != nil:
				if !walk(s.For.Body) {
					return false
				}
			case s.If != nil:
				for i := s.If; i != nil; i = i.ElseIf {
					if !walk(i.Then) || !walk(i.Else) {
						return false
					}
				}
			case s.Op != nil:
				ev.rangeOf(s.Op)
			default:
				return false
			}
		}
		return true
	}
	v := walk(f.Body)
	if ev.pure == nil {
		ev.pure = map[*dsl.ForStmt]bool{}
	}
	ev.pure[f] = v
	return v
}

// rangeOf returns the op statement's range, one pointer per statement.
func (ev *evaluator) rangeOf(o *dsl.OpStmt) *dsl.Range {
	rp := ev.ranges[o]
	if rp == nil {
		r := dsl.RangeOf(o.Pos, o.EndPos)
		rp = &r
		if ev.ranges == nil {
			ev.ranges = map[*dsl.OpStmt]*dsl.Range{}
		}
		ev.ranges[o] = rp
	}
	return rp
}

// forParallel runs the loop's n iterations from, from+step, ... on
// several workers and reports whether it did; when it did not, nothing
// was changed and the caller runs the loop serially.
func (ev *evaluator) forParallel(f *dsl.ForStmt, from, step, n int64) bool {
	st := ev.st
	if ev.worker || st.diags.HasErrors() || n <= 0 {
		return false
	}
	workers := par.Workers(ev.hdr.ranks)
	if workers <= 1 || n < minParallelIters || int64(ev.iters)+n > int64(ev.maxIt) || !ev.pureBody(f) {
		return false
	}
	// A few ranges per worker even out bodies of uneven cost (an `if`
	// that emits only in some iterations).
	parts := int(min(n, int64(4*workers)))
	type result struct {
		ops   []*evOp
		nops  int
		iters int
		ok    bool
	}
	res := make([]result, parts)
	// The workers share one op budget: each adds what an iteration made
	// and all stop once the sum passes the limit. Each on a budget of its
	// own, a program far past the limit cost the limit's worth of ops per
	// worker and then once more serially (a 16384-rank ring took two
	// minutes and 5 GB to be refused).
	var produced atomic.Int64
	var over atomic.Pointer[dsl.Range] // an op statement the budget ran out at
	budget := int64(ev.maxOps - ev.nops)
	par.ForEach(workers, parts, func(_, p int) {
		lo, hi := int64(p)*n/int64(parts), int64(p+1)*n/int64(parts)
		w := ev.fork()
		for k := lo; k < hi && !w.stop; k++ {
			made := w.nops
			w.iters++
			w.push()
			w.bind(f.Var, loopValue(from, step, k))
			w.stmts(f.Body, -1, -1, false)
			w.pop()
			if produced.Add(int64(w.nops-made)) > budget {
				if len(w.ops) > 0 {
					over.CompareAndSwap(nil, w.ops[len(w.ops)-1].rngp)
				}
				break
			}
		}
		res[p] = result{ops: w.ops, nops: w.nops, iters: w.iters, ok: !w.stop && len(w.st.diags) == 0}
	})
	if at := over.Load(); produced.Load() > budget && at != nil {
		// The workers made distinct ops of the program, more than the
		// limit, whichever order they ran in: refuse here, at an op
		// statement of this loop, without a serial run to the limit.
		ev.st.errorf(*at, "reduce ranks or chunks", "the program produces more than %d ops", ev.maxOps)
		ev.stop = true
		return true
	}
	nops, iters, total := ev.nops, ev.iters, 0
	for _, r := range res {
		if !r.ok {
			return false
		}
		nops, iters, total = nops+r.nops, iters+r.iters, total+len(r.ops)
	}
	if nops > ev.maxOps || iters > ev.maxIt {
		return false // the serial loop reports where the limit is crossed
	}
	ev.nops, ev.iters = nops, iters
	ev.ops = slices.Grow(ev.ops, total)
	for _, r := range res {
		ev.ops = append(ev.ops, r.ops...)
	}
	return true
}

// fork returns an evaluator for a worker: the current scopes copied,
// params and statement ranges shared read-only, op lists of its own and a
// state of its own that collects diagnostics. Its limits are what is left of ev's, so a
// runaway body stops early (and the loop then runs serially).
func (ev *evaluator) fork() *evaluator {
	st := ev.st
	return &evaluator{
		st:     st.sub(),
		hdr:    ev.hdr,
		params: ev.params, badParams: ev.badParams,
		names:  ev.names,
		fns:    ev.fns,
		vars:   append([]binding(nil), ev.vars...),
		marks:  append([]int(nil), ev.marks...),
		maxOps: ev.maxOps - ev.nops,
		maxIt:  ev.maxIt - ev.iters,
		ranges: ev.ranges,
		pure:   ev.pure,
		worker: true,
	}
}
