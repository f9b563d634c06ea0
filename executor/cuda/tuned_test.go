package cudaexec

import (
	"fmt"
	"testing"

	"github.com/msccl-go/msccl-go/executor/cpu"
	"github.com/msccl-go/msccl-go/ir"
)

// TestGPUTunedShapes runs the launch shapes msccl-bench --tune chooses
// from (more instances, fewer threads per block) against the CPU oracle,
// bit for bit, in the types whose reduction batches differ (RED_BATCH in
// kernels/executor.cu: f16 four sources at a time, FP8 two): 8 ranks give
// 8 sources per reduction (two batches), 3 ranks a partial one.
func TestGPUTunedShapes(t *testing.T) {
	needGPU(t)
	shapes := []struct {
		algo                      string
		ranks, instances, threads int64
	}{
		{"allreduce_twoshot", 8, 8, 256},
		{"allreduce_twoshot", 8, 4, 512},
		{"allreduce_allpairs", 8, 16, 1024},
		{"allreduce_allpairs", 3, 4, 32},
		{"reducescatter_direct", 8, 2, 512},
		{"allgather_direct", 8, 8, 256},
	}
	for _, s := range shapes {
		name := fmt.Sprintf("%s@%d/i%d/t%d", s.algo, s.ranks, s.instances, s.threads)
		t.Run(name, func(t *testing.T) {
			p, err := compileWith("../../algorithms/"+s.algo+".msccl", map[string]int64{"ranks": s.ranks, "instances": s.instances, "threads": s.threads})
			if err != nil {
				t.Fatal(err)
			}
			if p.NumThreadsPerBlock != int(s.threads) {
				t.Fatalf("plan runs %d threads per block, want %d", p.NumThreadsPerBlock, s.threads)
			}
			n := int64(len(p.GPUs))
			uneven := 16 * (n*s.instances*1009 + 3)
			reds := []ir.ReduceOp{ir.ReduceSum}
			if reduces(p) {
				reds = append(reds, ir.ReduceMax)
			}
			var cs []gcase
			for _, dt := range []cpu.DType{cpu.F16, cpu.F8E4M3, cpu.BF16} {
				for _, red := range reds {
					cs = append(cs, gcase{size: uneven, dt: dt, red: red, launches: 3, ll: 16})
				}
			}
			cs = append(cs, gcase{size: 4 << 20, dt: cpu.F16, red: ir.ReduceSum, launches: 2, ll: 16})
			rule, err := p.SizeRule()
			if err != nil {
				t.Fatal(err)
			}
			for i := range cs {
				if m, ok := rule.Next(cs[i].size); ok {
					cs[i].size = m
				}
			}
			checkCases(t, name, p, cs)
		})
	}
}
