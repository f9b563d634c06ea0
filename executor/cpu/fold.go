package cpu

import (
	"math"
	"sync"

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

// f16 min and max, and bf16 max, compare order-preserving integer keys
// of the elements' own bits instead of widened floats. Go's float min on
// amd64 is two MINSS and a POR per element, max three sign flips more;
// on keys (sign-magnitude bits with the magnitude flipped when negative,
// so -0 < +0, the order min and max give zeros) it is a compare and a
// conditional move, the key read from a table indexed by the element's
// bits, and the result's bits come back from its key with no widening
// and narrowing: min/max of non-NaN values returns one operand, and
// narrowing an element's exact widening gives its bits back. NaNs have
// no key: their entry is a sentinel below (min) or above (max) every
// key, so an element keeps it exactly when some source held a NaN there,
// and that element is recomputed with foldF's float chain (x86 gives an
// OR of the operands' bits, not one of them). TestKeyMinMax holds the
// result to foldF bit for bit. Measured with 8 sources of 64 KiB
// (BenchmarkMinMax, paired medians, 2-core VM, 4 runs): f16 max 1.17-1.85x,
// bf16 max 1.35-1.8x (one run 0.96x), f16 min 1.11-1.17x; bf16 min and FP8 min and max
// gained under 10% (bf16 min's float loop has no sign flips and no table
// to read; FP8's keys loop is as long as its float one), so they
// keep foldF, as does f32, whose keys would cost more to compute than
// the float compare.

// keyTabs holds the keys of f16's and bf16's bits for [min, max].
var keyTabs = sync.OnceValue(func() *[2][2][1 << 16]int32 {
	t := new([2][2][1 << 16]int32) // [f16, bf16][min, max]
	for o := range 2 {
		for v := range 1 << 16 {
			c := int32(int16(v))
			t[0][o][v], t[1][o][v] = codeKey(c), codeKey(c)
			if f16ToF32(uint16(v)) != f16ToF32(uint16(v)) {
				t[0][o][v] = nanKey[o]
			}
			if bf16ToF32(uint16(v)) != bf16ToF32(uint16(v)) {
				t[1][o][v] = nanKey[o]
			}
		}
	}
	return t
})

// nanKey is the sentinel key of a NaN for min (0) and max (1).
var nanKey = [2]int32{math.MinInt32, math.MaxInt32}

// codeKey maps the bits of a 16-bit float, sign-extended, to their key,
// and a key back to the bits (it is its own inverse).
func codeKey(c int32) int32 { return c ^ (c>>31)&0x7fff }

// keyMinMax reduces out = op(srcs[...][b0:b0+len(out)]) through keys and
// reports whether it did (f16 min and max, bf16 max, on little-endian
// hosts); keysp is the reducer's key buffer. It writes out element by
// element, so out must not overlap a source at another offset.
func keyMinMax(dt DType, op ir.ReduceOp, out []byte, srcs [][]byte, b0 int, keysp *[]int32) bool {
	o := 0
	switch {
	case !hostLE || (dt != F16 && dt != BF16):
		return false
	case op == ir.ReduceMax:
		o = 1
	case op != ir.ReduceMin || dt == BF16:
		return false
	}
	tab := &keyTabs()[0][o]
	if dt == BF16 {
		tab = &keyTabs()[1][o]
	}
	m := len(out) / 2
	*keysp = grow(*keysp, m)
	keys := (*keysp)[:m]
	for j, s := range srcs {
		keyFold(j == 0, o == 0, keys, view[uint16](s[b0:b0+len(out)], m), tab)
	}
	out16 := view[uint16](out, m)
	for i, k := range keys {
		if k != nanKey[o] {
			out16[i] = uint16(codeKey(k))
			continue
		}
		// Some source is a NaN here: foldF's float chain.
		var f, g [1]float32
		e := b0 + 2*i
		loadF(dt, srcs[0][e:], f[:])
		for _, s := range srcs[1:] {
			loadF(dt, s[e:], g[:])
			if o == 0 {
				f[0] = min(f[0], g[0])
			} else {
				f[0] = max(f[0], g[0])
			}
		}
		storeF(dt, f[:], out[2*i:])
	}
	return true
}

// keyFold sets keys[i] to the key of v[i] (first) or combines it in.
func keyFold(first, isMin bool, keys []int32, v []uint16, tab *[1 << 16]int32) {
	v = v[:len(keys)]
	switch {
	case first:
		for i, x := range v {
			keys[i] = tab[x]
		}
	case isMin:
		for i, x := range v {
			keys[i] = min(keys[i], tab[x])
		}
	default:
		for i, x := range v {
			keys[i] = max(keys[i], tab[x])
		}
	}
}
