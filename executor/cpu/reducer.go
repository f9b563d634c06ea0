package cpu

import (
	"github.com/msccl-go/msccl-go/internal/diag"
	"github.com/msccl-go/msccl-go/ir"
)

// Reducer applies a reduction element-wise exactly as Run does (floats
// accumulate in fp32 in source order and round once), for executors that
// run plans on real memory (executor/host), so that their results are
// bit-identical to this package's. The zero value is ready; a Reducer
// keeps its scratch buffers between calls and is not safe for concurrent
// use (one per thread block).
type Reducer struct{ r reducer }

// Reduce writes op(srcs[0], srcs[1], ...) into out; every source holds at
// least len(out) bytes and out may alias any of them. Check the pair
// (dt, op) with Supports first.
func (r *Reducer) Reduce(dt DType, op ir.ReduceOp, out []byte, srcs [][]byte) {
	r.r.reduce(dt, op, out, srcs)
}

// CheckReduction says whether op applies to elements of type d, with
// the message Run gives: prod is for integer types only.
func CheckReduction(d DType, op ir.ReduceOp) error {
	if !d.Valid() {
		return diag.Errorc(diag.CodeBadOptions, "unsupported data type %d", d)
	}
	switch op {
	case ir.ReduceSum, ir.ReduceMin, ir.ReduceMax:
		return nil
	case ir.ReduceProd:
		if d.IsFloat() {
			return diag.Errorc(diag.CodeBadOptions, "reduction prod is supported for integer types only, not %s", d)
		}
		return nil
	}
	return diag.Errorc(diag.CodeBadOptions, "unknown reduction %q (want sum, min, max or prod)", op)
}
