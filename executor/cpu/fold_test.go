package cpu

import (
	"bytes"
	"testing"

	"github.com/msccl-go/msccl-go/ir"
)

// TestFoldFused holds the reducer (fold.go's fused loops) to the two-step
// form it replaced (widen a source into scratch, then combine) on random
// bits, so NaNs of every payload, both zeros, infinities and subnormals
// come up, in every type, reduction and source count, block edges
// included.
func TestFoldFused(t *testing.T) {
	st := uint64(1)
	for _, dt := range DTypes {
		for _, op := range []ir.ReduceOp{ir.ReduceSum, ir.ReduceMin, ir.ReduceMax, ir.ReduceProd} {
			if CheckReduction(dt, op) != nil {
				continue
			}
			for _, k := range []int{1, 2, 3, 8} {
				n := (reduceBlock + 37) * dt.Size()
				srcs := make([][]byte, k)
				for i := range srcs {
					srcs[i] = make([]byte, n)
					for j := range srcs[i] {
						srcs[i][j] = byte(splitmix(&st))
					}
					if i == 1 {
						copy(srcs[i][:n/2], srcs[0]) // equal operands: ±0 against ±0, NaN against NaN
					}
				}
				got := make([]byte, n)
				var r reducer
				r.reduce(dt, op, got, srcs)
				want := twoStepReduce(dt, op, srcs, n)
				sz := dt.Size()
				for e := 0; e < n; e += sz {
					if bytes.Equal(got[e:e+sz], want[e:e+sz]) || nanSum(dt, op, srcs, e, got, want) {
						continue
					}
					var ops []string
					for _, s := range srcs {
						ops = append(ops, formatElem(dt, s[e:]))
					}
					t.Errorf("%s %s, %d sources: element at byte %d is %s, the two-step form %s (operands %v)", dt, op, k, e, formatElem(dt, got[e:]), formatElem(dt, want[e:]), ops)
					break
				}
			}
		}
	}
}

// nanSum excuses a sum of two or more NaNs whose payload differs: x86
// keeps one operand's, and which one is the compiler's choice of operand
// order for a commutative add (in the two-step form as much as now); the
// GPU returns the canonical NaN whatever the operands, and no input of
// the oracle is a NaN.
func nanSum(dt DType, op ir.ReduceOp, srcs [][]byte, e int, got, want []byte) bool {
	if op != ir.ReduceSum || !dt.IsFloat() {
		return false
	}
	isNaN := func(b []byte) bool {
		f := make([]float32, 1)
		loadF(dt, b, f)
		return f[0] != f[0]
	}
	nans := 0
	for _, s := range srcs {
		if isNaN(s[e:]) {
			nans++
		}
	}
	return nans >= 2 && isNaN(got[e:]) && isNaN(want[e:])
}

// twoStepReduce is the reducer as it was: every source widened whole,
// then combined.
func twoStepReduce(dt DType, op ir.ReduceOp, srcs [][]byte, n int) []byte {
	if dt.IsFloat() {
		return twoStep(dt, op, srcs, n, loadF, storeF)
	}
	return twoStep(dt, op, srcs, n, loadI, storeI)
}

func twoStep[T float32 | int64](dt DType, op ir.ReduceOp, srcs [][]byte, n int, load func(DType, []byte, []T), store func(DType, []T, []byte)) []byte {
	out := make([]byte, n)
	m := n / dt.Size()
	acc, tmp := make([]T, m), make([]T, m)
	load(dt, srcs[0], acc)
	for _, s := range srcs[1:] {
		load(dt, s, tmp)
		combine(op, acc, tmp)
	}
	store(dt, acc, out)
	return out
}
