package compiler

import (
	"regexp"
	"testing"

	"github.com/msccl-go/msccl-go/executor/cpu"
	"github.com/msccl-go/msccl-go/internal/fulltest"
	"github.com/msccl-go/msccl-go/ir"
)

// TestFuseSyncCapsSemaphores compiles the all-pairs allreduce without its
// `tb` clauses at 32 ranks: automatic assignment gives each peer its own
// block, and the block that publishes the reduced chunk releases 30
// semaphores in a row. Fused without a cap they became one sem_release the
// upstream executor cannot hold (16 per op); the plan must compile, keep
// every op within the limits and verify.
func TestFuseSyncCapsSemaphores(t *testing.T) {
	src := readFile(t, "../algorithms/allreduce_allpairs.msccl")
	src = regexp.MustCompile(` tb [0-9]+`).ReplaceAll(src, nil)
	// The library file requires ranks <= 17 for its explicit one block per
	// peer; without tb clauses blocks are assigned within the limits.
	src = regexp.MustCompile(`(?m)^require .*$`).ReplaceAll(src, nil)
	p, sm, ds := CompileSource("allpairs_auto.msccl", src, map[string]int64{"ranks": 32}, Options{})
	if ds.HasErrors() || p == nil {
		t.Fatalf("does not compile:\n%s", ds)
	}
	split := false
	for r := range p.GPUs {
		for b, tb := range p.GPUs[r].ThreadBlocks {
			for i, op := range tb.Ops {
				if n := len(op.SemaphoreIDs()); n > ir.MaxSemaphoresPerOp {
					t.Fatalf("rank %d tb %d op %d: %s names %d semaphores", r, b, i, op.Info().Name, n)
				}
				if len(op.ChannelIDs) > ir.MaxChannelsPerOp {
					t.Fatalf("rank %d tb %d op %d: %s names %d channels", r, b, i, op.Info().Name, len(op.ChannelIDs))
				}
				if i > 0 && op.Code == ir.OpSemRelease && tb.Ops[i-1].Code == ir.OpSemRelease {
					split = true
				}
			}
		}
	}
	if !split {
		t.Errorf("no sem_release was split at the cap; the test no longer exercises it")
	}
	if fulltest.Sample() {
		return
	}
	if vs := Verify(p, sm, []int64{32 * 4096}, []cpu.DType{cpu.F32}); vs.HasErrors() {
		t.Fatalf("does not verify:\n%s", vs)
	}
}
