package cpu

import (
	"bytes"
	"testing"
)

// TestInputPieces rebuilds inputs from InputPieces the way a device does
// (piece by piece from the table) and requires Input's bytes, for every
// type, odd and even ranks (FP8 negates odd ones), several launches and
// lengths that end inside a piece.
func TestInputPieces(t *testing.T) {
	p := fixtures(t)["allreduce.json"]
	n := len(p.GPUs)
	var at []int64
	for _, dt := range []DType{F32, F16, BF16, I32, F8E4M3, F8E5M2} {
		for _, size := range []int64{1 << 10, 64<<10 + 48, 1 << 20} {
			for launch := range 3 {
				for rank := range n {
					opt := Options{Size: size, DType: dt, Seed: 7}
					want, err := Input(p, opt, launch, rank)
					if err != nil {
						t.Fatal(err)
					}
					var tab []byte
					tab, at = InputPieces(dt, opt.Seed, launch, rank, int64(len(want)), at)
					got := make([]byte, len(want))
					for i, off := range at {
						copy(got[int64(i)*InputPiece:min(int64(i+1)*InputPiece, int64(len(got)))], tab[off:])
					}
					if !bytes.Equal(got, want) {
						t.Fatalf("%s size %d launch %d rank %d: pieces do not rebuild Input", dt, size, launch, rank)
					}
				}
			}
		}
	}
}
