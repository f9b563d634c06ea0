package compiler

import (
	"github.com/msccl-go/msccl-go/internal/par"
	"github.com/msccl-go/msccl-go/ir"
)

// A protocol Simple chunk-level program lowers each op on its own: with no
// packets, lowering reads only the header and the op (the packet table
// stays empty). Workers then lower contiguous ranges of the ops, each with
// its own lowerer, slabs and diagnostics, into their places in the action
// list, so the result is the serial one. A diagnostic
// throws the workers' results away and lowers serially, which reports
// exactly as before. (LL programs track packet slots from op to op, in
// order, so they always lower serially.)

// minParallelLower: fewer ops are not worth the goroutines.
const minParallelLower = 1 << 14

// chunksParallel lowers ops into p.actions (empty, with room for
// them) on several workers and reports whether it did; when it did not,
// nothing was changed.
func (lw *lowerer) chunksParallel(p *program, ops []*evOp) bool {
	st := lw.st
	n := len(ops)
	workers := par.Workers(p.hdr.ranks)
	if p.hdr.protocol != ir.Simple || workers <= 1 || n < minParallelLower {
		return false
	}
	parts := 4 * workers
	ok := make([]bool, parts)
	// Without a diagnostic every op makes one action, so action i is op
	// i's: workers put theirs in place, numbered.
	acts := p.actions[:n]
	par.ForEach(workers, parts, func(_, part int) {
		w := &lowerer{st: st.sub(), p: p, pkt: lw.pkt}
		good := true
		for i := part * n / parts; i < (part+1)*n/parts; i++ {
			a := w.chunk(ops[i])
			if a == nil {
				good = false // reported; the serial rerun reports it again
				break
			}
			a.seq = int32(i)
			acts[i] = a
		}
		ok[part] = good && len(w.st.diags) == 0
	})
	for _, good := range ok {
		if !good {
			clear(acts)
			return false
		}
	}
	p.actions = acts
	return true
}
