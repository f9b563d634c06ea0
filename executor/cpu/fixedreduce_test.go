package cpu

import (
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/ir"
)

// TestFixedReduction: a plan whose reduce_op fixes max serves max alone
// (ir.Plan.FixedReduce). Run with no reduction named runs max and is
// correct; sum or min is refused with exec.options before anything runs;
// a plan that fixes both min and max serves none.
func TestFixedReduction(t *testing.T) {
	p := reduceFixtureWith(t, ir.ReduceMax)
	first := true
	for _, opt := range []Options{{Size: 4096, DType: F32}, {Size: 4096, DType: I32, Reduce: ir.ReduceMax}, {Size: 4096, Symbolic: true}} {
		rep, err := Run(p, opt)
		if err != nil {
			t.Fatalf("%+v: %v", opt, err)
		}
		if !rep.OK() {
			t.Fatalf("%+v:\n%s", opt, rep)
		}
	}
	for _, opt := range []Options{{Size: 4096, DType: F32, Reduce: ir.ReduceSum}, {Size: 4096, DType: F32, Reduce: ir.ReduceMin}, {Size: 4096, Symbolic: true, Reduce: ir.ReduceSum}} {
		red := opt.Reduce
		_, err := Run(p, opt)
		if err == nil || ir.ErrorCode(err) != ir.CodeBadOptions || !strings.Contains(err.Error(), "serves reduction max only") {
			t.Errorf("%s on a max plan: want an exec.options refusal, got %v", red, err)
		}
	}
	eachOp(p, func(_, _, _, _ int, o *ir.Op) {
		if o.Info().Reduces && first {
			o.SetReduceOp(ir.ReduceMin)
			first = false
		}
	})
	if _, err := Run(p, Options{Size: 4096, Symbolic: true}); err == nil || !strings.Contains(err.Error(), "serves no reduction") {
		t.Errorf("min and max in one plan: want a refusal, got %v", err)
	}
}
