package cpu

import (
	"math"

	"github.com/msccl-go/msccl-go/ir"
)

// The reducer's inner loops. Widening a whole block of a source into a
// scratch array and then combining it with the accumulators read and
// wrote every element twice more than the arithmetic needs; at 64 MiB
// per rank the plan's own reductions were half of a GPU-oracle case's
// CPU time. foldF and foldI widen each element as they combine it, for
// the types and reductions of the GPU matrix on little-endian hosts;
// the rest goes through loadF/loadI and combine as before. The values
// are the same (the same widening, then the same min, max or fp32 add
// in the same order): TestFoldFused holds them to the two-step form.

// foldF sets acc[i] = op(acc[i], widen(src[i])) for float types; tmp is
// the two-step form's scratch.
func foldF(dt DType, op ir.ReduceOp, acc []float32, src []byte, tmp *[]float32) {
	m := len(acc)
	if !hostLE || (op != ir.ReduceSum && op != ir.ReduceMin && op != ir.ReduceMax) {
		*tmp = grow(*tmp, m)
		loadF(dt, src, (*tmp)[:m])
		combine(op, acc, (*tmp)[:m])
		return
	}
	switch dt {
	case F32:
		foldF32(op, acc, view[uint32](src[:4*m], m))
	case BF16:
		foldBF16(op, acc, view[uint16](src[:2*m], m))
	case F16:
		foldTab(op, acc, view[uint16](src[:2*m], m), f16Widen()[:])
	case F8E4M3:
		foldTab(op, acc, src[:m], f8Tables[0][:])
	case F8E5M2:
		foldTab(op, acc, src[:m], f8Tables[1][:])
	}
}

func foldF32(op ir.ReduceOp, acc []float32, v []uint32) {
	v = v[:len(acc)]
	switch op {
	case ir.ReduceMin:
		for i, x := range v {
			acc[i] = min(acc[i], math.Float32frombits(x))
		}
	case ir.ReduceMax:
		for i, x := range v {
			acc[i] = max(acc[i], math.Float32frombits(x))
		}
	default:
		for i, x := range v {
			acc[i] += math.Float32frombits(x)
		}
	}
}

func foldBF16(op ir.ReduceOp, acc []float32, v []uint16) {
	v = v[:len(acc)]
	switch op {
	case ir.ReduceMin:
		for i, x := range v {
			acc[i] = min(acc[i], math.Float32frombits(uint32(x)<<16))
		}
	case ir.ReduceMax:
		for i, x := range v {
			acc[i] = max(acc[i], math.Float32frombits(uint32(x)<<16))
		}
	default:
		for i, x := range v {
			acc[i] += math.Float32frombits(uint32(x) << 16)
		}
	}
}

// foldTab widens through a table indexed by the element's bits (FP8,
// f16).
func foldTab[E uint8 | uint16](op ir.ReduceOp, acc []float32, v []E, tab []float32) {
	v = v[:len(acc)]
	switch op {
	case ir.ReduceMin:
		for i, x := range v {
			acc[i] = min(acc[i], tab[x])
		}
	case ir.ReduceMax:
		for i, x := range v {
			acc[i] = max(acc[i], tab[x])
		}
	default:
		for i, x := range v {
			acc[i] += tab[x]
		}
	}
}

// foldI is foldF for integer types: i32 is fused, the rest two-step.
func foldI(dt DType, op ir.ReduceOp, acc []int64, src []byte, tmp *[]int64) {
	m := len(acc)
	if dt != I32 || !hostLE || (op != ir.ReduceSum && op != ir.ReduceMin && op != ir.ReduceMax) {
		*tmp = grow(*tmp, m)
		loadI(dt, src, (*tmp)[:m])
		combine(op, acc, (*tmp)[:m])
		return
	}
	v := view[uint32](src[:4*m], m)
	switch op {
	case ir.ReduceMin:
		for i, x := range v {
			acc[i] = min(acc[i], int64(int32(x)))
		}
	case ir.ReduceMax:
		for i, x := range v {
			acc[i] = max(acc[i], int64(int32(x)))
		}
	default:
		for i, x := range v {
			acc[i] += int64(int32(x))
		}
	}
}
