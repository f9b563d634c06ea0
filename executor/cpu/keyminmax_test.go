package cpu

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/msccl-go/msccl-go/ir"
)

// refMinMax is the reducer without keyMinMax: foldBlock with foldF, as
// every float min and max ran before keys.
func refMinMax(dt DType, op ir.ReduceOp, srcs [][]byte, n int) []byte {
	out := make([]byte, n)
	var acc, tmp []float32
	for b0 := 0; b0 < n; b0 += reduceBlock * dt.Size() {
		b1 := min(n, b0+reduceBlock*dt.Size())
		foldBlock(dt, op, out[b0:b1], srcs, b0, &acc, &tmp, loadF, foldF, storeF)
	}
	return out
}

func checkKeyMinMax(t *testing.T, dt DType, op ir.ReduceOp, srcs [][]byte) {
	t.Helper()
	n := len(srcs[0])
	got := make([]byte, n)
	var r reducer
	r.reduce(dt, op, got, srcs)
	want := refMinMax(dt, op, srcs, n)
	if bytes.Equal(got, want) {
		return
	}
	sz := dt.Size()
	for e := 0; e < n; e += sz {
		if !bytes.Equal(got[e:e+sz], want[e:e+sz]) {
			var ops [][]byte
			for _, s := range srcs {
				ops = append(ops, s[e:e+sz])
			}
			t.Fatalf("%s %s: element at byte %d is %x, foldF's %x (operands %x)", dt, op, e, got[e:e+sz], want[e:e+sz], ops)
		}
	}
}

// TestKeyMinMax holds the reducer to foldF bit for bit for float min and
// max (keyMinMax where it applies): every ordered pair of FP8 values; for f16 and bf16 every value against every special value
// (both orders) and 4M random pairs; chains of 3 and 8 random sources
// (NaNs included, so the float fallback's OR of later operands is
// covered) in every type.
func TestKeyMinMax(t *testing.T) {
	st := uint64(7)
	for _, op := range []ir.ReduceOp{ir.ReduceMin, ir.ReduceMax} {
		for _, dt := range []DType{F8E4M3, F8E5M2} {
			a, b := make([]byte, 1<<16), make([]byte, 1<<16)
			for i := range 1 << 16 {
				a[i], b[i] = byte(i), byte(i>>8)
			}
			checkKeyMinMax(t, dt, op, [][]byte{a, b})
		}
		for _, dt := range []DType{F16, BF16} {
			var special []uint16
			for _, v := range []uint16{0, 1, 2, 0x3ff, 0x400, 0x3c00, 0x7bff, 0x7c00, 0x7c01, 0x7e00, 0x7fff, 0x7d55,
				0x7f, 0x80, 0x7f7f, 0x7f80, 0x7f81, 0x7fc0, 0x7fbf} {
				special = append(special, v, v|0x8000)
			}
			n := 1 << 16
			a, b := make([]byte, 2*n*len(special)), make([]byte, 2*n*len(special))
			for j, s := range special {
				for v := range n {
					e := 2 * (j*n + v)
					a[e], a[e+1] = byte(v), byte(v>>8)
					b[e], b[e+1] = byte(s), byte(s>>8)
				}
			}
			checkKeyMinMax(t, dt, op, [][]byte{a, b})
			checkKeyMinMax(t, dt, op, [][]byte{b, a})
			a, b = make([]byte, 8<<20), make([]byte, 8<<20)
			for i := range a {
				a[i], b[i] = byte(splitmix(&st)), byte(splitmix(&st))
			}
			checkKeyMinMax(t, dt, op, [][]byte{a, b})
		}
		for _, dt := range []DType{F16, BF16, F8E4M3, F8E5M2} {
			for _, k := range []int{1, 3, 8} {
				srcs := make([][]byte, k)
				for i := range srcs {
					srcs[i] = make([]byte, (3*reduceBlock+5)*dt.Size())
					for j := range srcs[i] {
						srcs[i][j] = byte(splitmix(&st))
					}
				}
				checkKeyMinMax(t, dt, op, srcs)
			}
		}
	}
}

// BenchmarkMinMax reduces 8 sources of 64 KiB of random non-NaN values,
// through foldF ("ref") and the reducer ("keys"), paired in one run.
func BenchmarkMinMax(b *testing.B) {
	for _, dt := range []DType{F16, BF16, F8E4M3, F8E5M2} {
		for _, op := range []ir.ReduceOp{ir.ReduceMin, ir.ReduceMax} {
			n := 64 << 10
			st := uint64(1)
			srcs := make([][]byte, 8)
			for i := range srcs {
				srcs[i] = make([]byte, n)
				f := make([]float32, n/dt.Size())
				for j := range f {
					f[j] = float32(int64(splitmix(&st)%20001)-10000) / 64
				}
				storeF(dt, f, srcs[i])
			}
			out := make([]byte, n)
			var acc, tmp []float32
			b.Run(fmt.Sprint(dt, "_", op)+"/ref", func(b *testing.B) {
				b.SetBytes(int64(8 * n))
				for b.Loop() {
					for b0 := 0; b0 < n; b0 += reduceBlock * dt.Size() {
						b1 := min(n, b0+reduceBlock*dt.Size())
						foldBlock(dt, op, out[b0:b1], srcs, b0, &acc, &tmp, loadF, foldF, storeF)
					}
				}
			})
			var r reducer
			b.Run(fmt.Sprint(dt, "_", op)+"/keys", func(b *testing.B) {
				b.SetBytes(int64(8 * n))
				for b.Loop() {
					r.reduce(dt, op, out, srcs)
				}
			})
		}
	}
}
