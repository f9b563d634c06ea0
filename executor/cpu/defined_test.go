package cpu

import (
	"testing"

	"github.com/msccl-go/msccl-go/ir"
)

// Comparisons look at the bytes a collective defines: everything but the non-root
// outputs of reduce and gather (an in-place gather's non-root rank keeps
// its own slice).
func TestDefinedOutput(t *testing.T) {
	for _, c := range []struct {
		col     ir.Collective
		inplace bool
		root, r int
		lo, hi  int64
	}{
		{ir.ReduceScatter, true, 0, 3, 0, 128},
		{ir.AllReduce, false, 0, 1, 0, 128},
		{ir.Reduce, false, 2, 2, 0, 128},
		{ir.Reduce, false, 2, 1, 0, 0},
		{ir.Gather, false, 0, 1, 0, 0},
		{ir.Gather, true, 0, 3, 48, 64},
	} {
		p := &ir.Plan{Collective: c.col, InPlace: c.inplace, Root: c.root}
		if lo, hi := DefinedOutput(p, c.r, 16, 128); lo != c.lo || hi != c.hi {
			t.Errorf("%s inplace=%v root %d rank %d: [%d, %d), want [%d, %d)", c.col, c.inplace, c.root, c.r, lo, hi, c.lo, c.hi)
		}
	}
}
