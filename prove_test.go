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

// TestProveConsistency: ProveWith and VerifyPlanWith say what
// msccl-compile compile says about rank consistency. The ring allreduce
// is rank-consistent; the one-shot, where each rank adds every peer's
// input to its own, is not from three ranks on, and RequireConsistent
// refuses it with --require-consistent's message, naming two output
// bytes.
func TestProveConsistency(t *testing.T) {
	ring, err := CompileAlgorithm("algorithms", "allreduce_ring", map[string]int64{"ranks": 4})
	if err != nil {
		t.Fatal(err)
	}
	c, err := ProveWith(ring, nil, ProveOptions{RequireConsistent: true})
	if err != nil || c == nil || !c.Identical || !c.Fixed {
		t.Fatalf("ring: %+v, %v; want rank-consistent with a fixed order", c, err)
	}
	if !strings.HasPrefix(c.String(), "rank-consistent: yes") {
		t.Errorf("ring: summary %q", c.String())
	}
	v := VerifyPlanWith(ring, nil, VerifyOptions{RequireConsistent: true})
	if !v.OK || v.Consistency == nil || v.Consistency.Err() != nil || v.ConsistencyLine != c.String() {
		t.Errorf("ring verdict: ok %v, %q, line %q", v.OK, v.Verdict, v.ConsistencyLine)
	}

	one, err := CompileAlgorithm("testdata/consistency", "allreduce_oneshot", map[string]int64{"ranks": 3})
	if err != nil {
		t.Fatal(err)
	}
	c, err = ProveWith(one, nil, ProveOptions{})
	if err != nil || c == nil || c.Identical {
		t.Fatalf("one-shot: %+v, %v; want proven and reported not rank-consistent", c, err)
	}
	want := c.Err().Error() // what msccl-compile compile --require-consistent prints
	if !strings.HasPrefix(want, "the plan is not rank-consistent: rank ") || !strings.Contains(want, "output byte") {
		t.Errorf("one-shot refusal %q does not name two output bytes", want)
	}
	if _, err := ProveWith(one, nil, ProveOptions{RequireConsistent: true}); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("one-shot required consistent: %v; want %q", err, want)
	}
	v = VerifyPlanWith(one, nil, VerifyOptions{})
	if !v.OK || v.Verdict != "correct" || v.Consistency == nil || !strings.HasPrefix(v.ConsistencyLine, "rank-consistent: no, ") {
		t.Errorf("one-shot verdict: ok %v, %q, line %q; want correct and not rank-consistent", v.OK, v.Verdict, v.ConsistencyLine)
	}
	v = VerifyPlanWith(one, nil, VerifyOptions{RequireConsistent: true})
	if v.OK || v.Verdict != VerdictInconsistent || v.Inconsistent != want {
		t.Errorf("one-shot verdict, consistency required: ok %v, %q, %q; want refused with %q", v.OK, v.Verdict, v.Inconsistent, want)
	}

	// An unproven plan has no consistency verdict, and says why.
	bad := VerifyPlanWith(dropFirstSignal(t, ring), nil, VerifyOptions{RequireConsistent: true})
	if bad.OK || bad.Consistency != nil || bad.Verdict == VerdictInconsistent {
		t.Errorf("plan without a signal: ok %v, %q, consistency %v; want the proof's finding", bad.OK, bad.Verdict, bad.Consistency)
	}
}

// dropFirstSignal is a copy of p without its first signal.
func dropFirstSignal(t *testing.T, p *Plan) *Plan {
	t.Helper()
	js, err := ir.Encode(p)
	if err != nil {
		t.Fatal(err)
	}
	q, ds := ir.Decode(js)
	if ds.HasErrors() {
		t.Fatal(ds.Err())
	}
	for g := range q.GPUs {
		for b := range q.GPUs[g].ThreadBlocks {
			ops := &q.GPUs[g].ThreadBlocks[b].Ops
			for i, op := range *ops {
				if op.Info().Signals {
					*ops = append((*ops)[:i:i], (*ops)[i+1:]...)
					return q
				}
			}
		}
	}
	t.Fatal("no signal to drop")
	return nil
}
