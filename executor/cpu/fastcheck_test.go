package cpu_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/compiler"
	"github.com/msccl-go/msccl-go/executor/cpu"
	"github.com/msccl-go/msccl-go/internal/fulltest"
	"github.com/msccl-go/msccl-go/ir"
)

// TestCheckFast is the differential test of the byte-level check's fast
// path (fastcheck.go) against the full one (expected), on every peer
// fixture and every library algorithm at 2, 3, 4 and 8 ranks, in every
// type of the GPU matrix under sum, min and max, at an uneven size:
// checkFast must accept exactly the launches whose outputs equal the
// definition, and refuse them with any one byte of a defined output
// changed.
func TestCheckFast(t *testing.T) {
	plans := cpu.Fixtures(t)
	nfix := len(plans)
	algs, _ := filepath.Glob("../../algorithms/*.msccl")
	ranks := []int64{2, 3, 4, 8}
	if fulltest.Sample() {
		ranks = []int64{3, 8}
	}
	for _, f := range algs {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range ranks {
			p, _, ds := compiler.CompileSource(filepath.Base(f), src, map[string]int64{"ranks": n}, compiler.Options{})
			if !ds.HasErrors() && p != nil {
				plans[fmt.Sprintf("%s@%d", strings.TrimSuffix(filepath.Base(f), ".msccl"), n)] = p
			}
		}
	}
	if len(plans) <= nfix {
		t.Fatalf("%d fixtures, %d plans: the walk found no algorithm", nfix, len(plans))
	}
	dts := []cpu.DType{cpu.F32, cpu.F16, cpu.BF16, cpu.I32, cpu.F8E4M3, cpu.F8E5M2}
	accepted := 0
	for name, p := range plans {
		rule, err := p.SizeRule()
		if err != nil {
			continue
		}
		n := int64(len(p.GPUs))
		size, ok := rule.Next(16 * (n*97 + 3))
		if !ok {
			t.Fatalf("%s: no size", name)
		}
		for _, dt := range dts {
			for _, red := range []ir.ReduceOp{ir.ReduceSum, ir.ReduceMin, ir.ReduceMax} {
				k, err := cpu.CheckFastAgrees(p, cpu.Options{Size: size, DType: dt, Reduce: red, Launches: 2, Seed: uint64(n)}, uint64(len(name)))
				if err != nil && strings.Contains(err.Error(), "checkFast") {
					t.Errorf("%s %s %s: %v", name, dt, red, err)
				}
				accepted += k
			}
		}
	}
	if accepted == 0 {
		t.Error("checkFast accepted no launch")
	}
	t.Logf("%d plans, %d launches accepted by the fast check", len(plans), accepted)
}
