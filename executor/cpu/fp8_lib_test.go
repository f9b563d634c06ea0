package cpu_test

import (
	"fmt"
	"testing"

	"github.com/msccl-go/msccl-go/executor/cpu"
	"github.com/msccl-go/msccl-go/internal/fulltest"
	"github.com/msccl-go/msccl-go/ir"
)

// TestFP8LibraryAllReduce runs library allreduce plans, Simple and LL, in
// both FP8 types under sum, min and max: every launch's output must equal
// the collective's definition bit for bit, which the FP8 inputs (0/1 on
// even ranks, 0/-1 on odd) keep exact whatever order the plan sums in.
// It also checks that the outputs are not all zero, so that a sum that
// cancels everywhere cannot pass for a correct one.
func TestFP8LibraryAllReduce(t *testing.T) {
	ranks := []int64{4, 8}
	if !fulltest.Sample() {
		ranks = append(ranks, 16) // E5M2's exact limit: sums within [-8, 8]
	}
	for _, name := range []string{"allreduce_ring", "allreduce_allpairs_packet"} {
		for _, n := range ranks {
			p := compileLibrary(t, name, n)
			rule, err := p.SizeRule()
			if err != nil {
				t.Fatal(err)
			}
			size, ok := rule.Next(1000 * n)
			if !ok {
				t.Fatalf("%s/%d: no size from %d", name, n, 1000*n)
			}
			for _, dt := range []cpu.DType{cpu.F8E4M3, cpu.F8E5M2} {
				for _, red := range []ir.ReduceOp{ir.ReduceSum, ir.ReduceMin, ir.ReduceMax} {
					t.Run(fmt.Sprintf("%s/%d/%s/%s", name, n, dt, red), func(t *testing.T) {
						rep, err := cpu.Run(p, cpu.Options{Size: size, DType: dt, Reduce: red, Launches: 2})
						if err != nil {
							t.Fatal(err)
						}
						if !rep.OK() {
							t.Fatalf("not correct:\n%s", rep)
						}
						nonzero := 0
						for _, out := range rep.Outputs[len(rep.Outputs)-1] {
							for _, b := range out {
								if b&0x7f != 0 {
									nonzero++
								}
							}
						}
						if nonzero == 0 {
							t.Error("every output element is zero")
						}
					})
				}
			}
		}
	}
}
