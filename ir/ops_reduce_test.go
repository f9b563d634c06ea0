package ir

import (
	"strings"
	"testing"
)

// reducePlan is one rank with one block of re ops, each fixing the
// reduction given (ReduceNone: reduce_op absent), the last inside a
// pipeline when piped.
func reducePlan(piped bool, reds ...ReduceOp) *Plan {
	var ops []Op
	for _, r := range reds {
		op := Op{Code: OpRe}
		op.SetReduceOp(r)
		ops = append(ops, op)
	}
	if piped && len(ops) > 0 {
		pipe := Op{Code: OpPipeline}
		pipe.SetOps([]Op{ops[len(ops)-1]})
		ops[len(ops)-1] = pipe
	}
	return &Plan{Name: "p", GPUs: []GPU{{ThreadBlocks: []ThreadBlock{{Ops: ops}}}}}
}

func TestFixedReduce(t *testing.T) {
	for _, c := range []struct {
		name  string
		p     *Plan
		fixed ReduceOp
		err   string
	}{
		{"no reducing op", reducePlan(false), ReduceNone, ""},
		{"absent and sum defer to the run", reducePlan(false, ReduceNone, ReduceSum), ReduceNone, ""},
		{"max fixes max", reducePlan(false, ReduceMax), ReduceMax, ""},
		{"max beside the run's reduction", reducePlan(false, ReduceSum, ReduceMax, ReduceNone), ReduceMax, ""},
		{"in a pipeline body", reducePlan(true, ReduceNone, ReduceMin), ReduceMin, ""},
		{"min and max serve none", reducePlan(true, ReduceMin, ReduceMax), ReduceNone, "gpus[0].threadblocks[0].ops[0] fixes reduce_op min, gpus[0].threadblocks[0].ops[1].ops[0] fixes max"},
	} {
		t.Run(c.name, func(t *testing.T) {
			fixed, err := c.p.FixedReduce()
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) || ErrorCode(err) != CodeBadOptions {
					t.Fatalf("want an exec.options error naming %q, got %v", c.err, err)
				}
				if _, err := c.p.RunReduce(ReduceNone); err == nil {
					t.Fatal("RunReduce: a plan that serves no reduction ran")
				}
				return
			}
			if err != nil || fixed != c.fixed {
				t.Fatalf("FixedReduce = %q, %v; want %q", fixed, err, c.fixed)
			}
			for _, ask := range []ReduceOp{ReduceNone, ReduceSum, ReduceMin, ReduceMax, ReduceProd} {
				got, err := c.p.RunReduce(ask)
				want := ask
				switch {
				case ask == ReduceNone && fixed == ReduceNone:
					want = ReduceSum
				case ask == ReduceNone:
					want = fixed
				}
				refused := fixed != ReduceNone && ask != ReduceNone && ask != fixed
				if refused {
					if err == nil || ErrorCode(err) != CodeBadOptions || !strings.Contains(err.Error(), "serves reduction "+string(fixed)+" only") {
						t.Errorf("RunReduce(%q): want an exec.options refusal naming %s, got %q, %v", ask, fixed, got, err)
					}
					continue
				}
				if err != nil || got != want {
					t.Errorf("RunReduce(%q) = %q, %v; want %q", ask, got, err, want)
				}
			}
		})
	}
	if got := reducePlan(false, ReduceMax).Reductions(); got != "reduction max only" {
		t.Errorf("Reductions: %q", got)
	}
	if got := reducePlan(false, ReduceSum).Reductions(); got != "every reduction" {
		t.Errorf("Reductions: %q", got)
	}
}
