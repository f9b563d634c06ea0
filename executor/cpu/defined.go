package cpu

import "github.com/msccl-go/msccl-go/ir"

// DefinedOutput is the part [lo, hi) of rank's output buffer (of out
// bytes; in is the input's size) that p's collective defines, which is
// all that a comparison with Run's outputs may look at: a reduce's or
// gather's non-root outputs are undefined (an in-place gather's non-root
// rank keeps only its own input, at slice rank).
func DefinedOutput(p *ir.Plan, rank int, in, out int64) (lo, hi int64) {
	if (p.Collective == ir.Reduce || p.Collective == ir.Gather) && rank != p.Root {
		if p.Collective == ir.Gather && p.InPlace {
			return int64(rank) * in, int64(rank+1) * in
		}
		return 0, 0
	}
	return 0, out
}
