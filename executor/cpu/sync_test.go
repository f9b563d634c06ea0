package cpu

import (
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/ir"
)

// stagePlan is a one-rank allreduce (the identity) whose block 0 stages
// the input in scratch and block 1 copies it back, ordered by mid.
func stagePlan(mid0, mid1 []ir.Op, sems int) *ir.Plan {
	p := &ir.Plan{Name: "stage", Collective: ir.AllReduce, Protocol: ir.Simple, InPlace: true,
		BufferAlignment: 16, MaxMessageSize: ^uint64(0), NumThreadsPerBlock: 1024}
	g := ir.GPU{ID: 0, InputChunks: 2, OutputChunks: 2, ScratchChunks: 2}
	for range sems {
		g.Semaphores = append(g.Semaphores, ir.Semaphore{})
	}
	b0 := []ir.Op{{Code: ir.OpCopy, Src: []ir.BufRef{loc(ir.BufInput, 0)}, Dst: []ir.BufRef{loc(ir.BufScratch, 0)}}}
	b1 := append(append([]ir.Op(nil), mid1...), ir.Op{Code: ir.OpCopy, Src: []ir.BufRef{loc(ir.BufScratch, 0)}, Dst: []ir.BufRef{loc(ir.BufInput, 0)}})
	g.ThreadBlocks = []ir.ThreadBlock{{ID: 0, Ops: append(b0, mid0...)}, {ID: 1, Ops: b1}}
	p.GPUs = []ir.GPU{g}
	return p
}

func TestBarriersAndSemaphores(t *testing.T) {
	bar := func(n int) ir.Op {
		op := ir.Op{Code: ir.OpBarrier}
		op.SetBarrier(3, n)
		return op
	}
	sem := func(c ir.OpCode) ir.Op {
		op := ir.Op{Code: c}
		op.SetSemaphoreIDs([]int{0})
		return op
	}
	tests := []struct {
		name       string
		mid0, mid1 []ir.Op
		sems       int
		want       Verdict
		detail     string
	}{
		{"barrier orders blocks", []ir.Op{bar(2)}, []ir.Op{bar(2)}, 0, Correct, ""},
		{"no barrier", nil, nil, 0, Race, "gpus[0].threadblocks[1].ops[0] (copy) reads rank 0 scratch[0:"},
		{"barrier waits for a third block", []ir.Op{bar(3)}, []ir.Op{bar(3)}, 0, Deadlock, "barrier 3 of rank 0 (2 of 3 blocks arrived)"},
		{"semaphore release then acquire", []ir.Op{nop, sem(ir.OpSemRelease)}, []ir.Op{sem(ir.OpSemAcquire), nop}, 1, Correct, ""},
		{"release without the nop before it", []ir.Op{sem(ir.OpSemRelease)}, []ir.Op{sem(ir.OpSemAcquire), nop}, 1, Race, "writes rank 0 scratch"},
		{"acquire without the nop after it", []ir.Op{nop, sem(ir.OpSemRelease)}, []ir.Op{sem(ir.OpSemAcquire)}, 1, Race, "reads rank 0 scratch"},
		{"acquire with nothing released", nil, []ir.Op{sem(ir.OpSemAcquire)}, 1, Deadlock, "semaphore 0 of rank 0 (value 0)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := Run(stagePlan(tc.mid0, tc.mid1, tc.sems), Options{Size: 1024, DType: F32})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Verdict != tc.want || !strings.Contains(rep.String(), tc.detail) {
				t.Fatalf("verdict %s, want %s with %q\n%s", rep.Verdict, tc.want, tc.detail, rep)
			}
		})
	}
	// A release nobody acquires leaves the semaphore unbalanced.
	p := stagePlan([]ir.Op{nop, sem(ir.OpSemRelease)}, []ir.Op{bar(2)}, 1)
	p.GPUs[0].ThreadBlocks[0].Ops = append(p.GPUs[0].ThreadBlocks[0].Ops, bar(2))
	p.GPUs[0].ThreadBlocks[1].Ops = []ir.Op{bar(2)}
	rep, err := Run(p, Options{Size: 1024, DType: F32})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Verdict != Unbalanced || !strings.Contains(rep.String(), "semaphore 0 of rank 0 (ends at 2, starts at 0)") {
		t.Fatalf("want unbalanced semaphore:\n%s", rep)
	}
}
