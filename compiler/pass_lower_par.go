package compiler

import (
	"github.com/msccl-go/msccl-go/internal/par"
	"github.com/msccl-go/msccl-go/ir"
)

// A protocol Simple chunk-level program lowers each op on its own: with no
// packets, lowering reads only the header and the op (the packet table
// stays empty). Workers then lower contiguous ranges of the ops, each with
// its own lowerer, slabs and diagnostics, and the ranges' actions are
// appended in op order, so the result is the serial one. A diagnostic
// throws the workers' results away and lowers serially, which reports
// exactly as before. (LL programs track packet slots from op to op, in
// order, so they always lower serially.)

// minParallelLower: fewer ops are not worth the goroutines.
const minParallelLower = 1 << 14

// chunksParallel lowers st.ops into st.actions on several workers and
// reports whether it did; when it did not, nothing was changed.
func (lw *lowerer) chunksParallel() bool {
	st := lw.st
	n := len(st.ops)
	workers := par.Workers(st.hdr.ranks)
	if st.hdr.protocol != ir.Simple || workers <= 1 || n < minParallelLower {
		return false
	}
	parts := 4 * workers
	type result struct {
		acts []*action
		ok   bool
	}
	res := make([]result, parts)
	par.ForEach(workers, parts, func(_, p int) {
		w := &lowerer{st: &state{file: st.file, defines: st.defines, opts: st.opts, hdr: st.hdr}, pkt: lw.pkt}
		acts := make([]*action, 0, (p+1)*n/parts-p*n/parts)
		for _, o := range st.ops[p*n/parts : (p+1)*n/parts] {
			if a := w.chunk(o); a != nil {
				acts = append(acts, a)
			}
		}
		res[p] = result{acts: acts, ok: len(w.st.diags) == 0}
	})
	for _, r := range res {
		if !r.ok {
			return false
		}
	}
	for _, r := range res {
		for _, a := range r.acts {
			a.seq = int32(len(st.actions))
			st.actions = append(st.actions, a)
		}
	}
	return true
}
