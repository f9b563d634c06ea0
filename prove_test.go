package msccl

import (
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/ir"
)

// TestProveFixedReduction: Prove agrees with the executors on which
// reductions a plan serves. A plan whose reduce_op fixes max is proven
// (for max, which its byte-level run uses); one that fixes max and min
// serves none and is not proven.
func TestProveFixedReduction(t *testing.T) {
	p, err := LoadPlan("testdata/peer-plans/reduce.json")
	if err != nil {
		t.Fatal(err)
	}
	var reducing []*ir.Op
	for g := range p.GPUs {
		for b := range p.GPUs[g].ThreadBlocks {
			for i := range p.GPUs[g].ThreadBlocks[b].Ops {
				if op := &p.GPUs[g].ThreadBlocks[b].Ops[i]; op.Info().Reduces {
					op.SetReduceOp(ir.ReduceMax)
					reducing = append(reducing, op)
				}
			}
		}
	}
	if len(reducing) < 2 {
		t.Fatalf("reduce.json has %d reducing ops, want at least 2", len(reducing))
	}
	if err := Prove(p, nil); err != nil {
		t.Fatalf("max plan: %v", err)
	}
	if red, err := p.RunReduce(Sum); err == nil || ir.ErrorCode(err) != ir.CodeBadOptions {
		t.Errorf("max plan run with sum: %s, %v; want an exec.options refusal", red, err)
	}
	reducing[0].SetReduceOp(ir.ReduceMin)
	if err := Prove(p, nil); err == nil || !strings.Contains(err.Error(), "serves no reduction") {
		t.Errorf("min and max plan: %v; want it unproven, naming why", err)
	}
}
