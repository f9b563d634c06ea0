package cpu

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/msccl-go/msccl-go/ir"
)

// TestCollectiveDefinitions runs a direct algorithm of every collective:
// the expected results (and the port-channel model) must agree with them.
func TestCollectiveDefinitions(t *testing.T) {
	plans := collectivePlans()
	for _, name := range slices.Sorted(maps.Keys(plans)) {
		p := plans[name]
		for _, size := range []int64{256, 4096 * 4, 16 * 4 * 1003} {
			for _, dt := range []DType{F32, F16, BF16, I32, U32, U8} {
				t.Run(fmt.Sprintf("%s/%d/%s", name, size, dt), func(t *testing.T) {
					rep, err := Run(p, Options{Size: size, DType: dt, Launches: 3, Seed: 11})
					if err != nil {
						t.Fatal(err)
					}
					if !rep.OK() {
						t.Fatalf("not correct:\n%s", rep)
					}
				})
			}
		}
	}
}

// TestCollectiveBreaks checks that the same algorithms with one defect
// each are caught with the right kind.
func TestCollectiveBreaks(t *testing.T) {
	plans := collectivePlans()
	tests := []struct {
		name, plan string
		edit       func(p *ir.Plan)
		want       Verdict
	}{
		{"sendrecv to the wrong peer", "sendrecv", func(p *ir.Plan) {
			for r := range p.GPUs {
				op := &p.GPUs[r].ThreadBlocks[0].Ops[3]
				op.Dst[0].BufferID = (op.Dst[0].BufferID + 1) % 3
			}
		}, WrongResult},
		{"port put without flush", "allgather_port", func(p *ir.Plan) {
			ops := &p.GPUs[1].ThreadBlocks[0].Ops
			*ops = append((*ops)[:6], (*ops)[7:]...)
		}, Race},
		{"reduce-scatter without the final handshake", "reducescatter", func(p *ir.Plan) {
			for r := range p.GPUs {
				ops := &p.GPUs[r].ThreadBlocks[0].Ops
				*ops = (*ops)[:len(*ops)-3]
			}
		}, Race},
		{"allgather without the start handshake", "allgather", func(p *ir.Plan) {
			for r := range p.GPUs {
				ops := &p.GPUs[r].ThreadBlocks[0].Ops
				*ops = (*ops)[3:]
			}
		}, Race},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := clonePlan(plans[tc.plan])
			tc.edit(p)
			rep, err := Run(p, Options{Size: 4096, DType: I32})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Verdict != tc.want {
				t.Fatalf("verdict %s, want %s\n%s", rep.Verdict, tc.want, rep)
			}
		})
	}
}

func TestInputMatchesRun(t *testing.T) {
	p := fixtures(t)["allreduce_packet.json"]
	opt := Options{Size: 4096, DType: BF16, Seed: 99, Launches: 3}
	rep, err := Run(p, opt)
	if err != nil {
		t.Fatal(err)
	}
	for l := range 3 {
		for r := range p.GPUs {
			in, err := Input(p, opt, l, r)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(in, rep.Inputs[l][r]) {
				t.Fatalf("launch %d rank %d: Input differs from what Run fed", l, r)
			}
		}
	}
	a, _ := Input(p, opt, 0, 0)
	b, _ := Input(p, opt, 1, 0)
	c, _ := Input(p, Options{Size: 4096, DType: BF16, Seed: 100}, 0, 0)
	if bytes.Equal(a, b) || bytes.Equal(a, c) {
		t.Fatal("inputs must differ across launches and seeds")
	}
}

// Run refuses what it cannot run with an error whose code says which
// of the caller's choices to change (ir.ErrorCode): the size, an option,
// or neither (proof.cannot-run).
func TestSetupErrors(t *testing.T) {
	plans := fixtures(t)
	tests := []struct {
		name string
		plan string
		opt  Options
		code string
	}{
		{"size not split into chunks", "allreduce.json", Options{Size: 16 * 15}, ir.CodeSizeRefused},
		{"size not aligned", "allreduce.json", Options{Size: 16*16 + 8}, ir.CodeSizeRefused},
		{"allgather size not a multiple of ranks", "transfer_pack.json", Options{Size: 48}, ir.CodeSizeRefused},
		{"prod of floats", "reduce.json", Options{Size: 4096, Reduce: ir.ReduceProd}, ir.CodeBadOptions},
		{"unknown reduction", "reduce.json", Options{Size: 4096, Reduce: "avg"}, ir.CodeBadOptions},
		{"bad LL width", "reduce_pack.json", Options{Size: 4096, LLWidth: 4}, ir.CodeBadOptions},
		{"bad dtype", "reduce.json", Options{Size: 4096, DType: DType(42)}, ir.CodeBadOptions},
		{"too many launches", "reduce.json", Options{Size: 4096, Launches: 1000}, ir.CodeBadOptions},
		{"zero size", "reduce.json", Options{}, ir.CodeSizeRefused},
		{"no plan", "", Options{Size: 4096}, ir.CodeCannotRun},
		{"step limit", "reduce.json", Options{Size: 4096, MaxSteps: 1}, ir.CodeCannotRun},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Run(plans[tc.plan], tc.opt)
			if err == nil {
				t.Fatal("want an error")
			}
			if got := ir.ErrorCode(err); got != tc.code {
				t.Errorf("code %q, want %q (%v)", got, tc.code, err)
			}
			t.Log(err)
		})
	}
}

func TestOptionsVariants(t *testing.T) {
	plans := fixtures(t)
	for _, tc := range []struct {
		plan string
		opt  Options
	}{
		{"transfer_pack_tbg.json", Options{Size: 4096, LLWidth: 8, DType: U8}},
		{"allreduce_packet.json", Options{Size: 4096, LLWidth: 8, DType: U32, Launches: 5}},
		{"reduce.json", Options{Size: 4096, DType: I32, Reduce: ir.ReduceProd}},
		{"allreduce_pipeline.json", Options{Size: 3 << 20, DType: F16, Reduce: ir.ReduceMax, Launches: 1}},
		{"reduce_nvls_pipeline.json", Options{Size: 5 << 20, DType: BF16, Reduce: ir.ReduceMin, Launches: 3}},
	} {
		t.Run(fmt.Sprintf("%s/%+v", tc.plan, tc.opt), func(t *testing.T) {
			rep, err := Run(plans[tc.plan], tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			if knownRacy[tc.plan] != "" {
				if rep.Verdict != Race || rep.WrongTotal > 0 {
					t.Fatalf("want a race with right results:\n%s", rep)
				}
				return
			}
			if !rep.OK() {
				t.Fatalf("not correct:\n%s", rep)
			}
		})
	}
}

// TestPlanReduceOpHonoured: an op's explicit reduce_op wins over the run's
// reduction ("sum", the upstream default, defers to it).
func TestPlanReduceOpHonoured(t *testing.T) {
	p := reduceFixtureWith(t, ir.ReduceMax)
	rep, err := Run(p, Options{Size: 4096, DType: I32, Reduce: ir.ReduceMax})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Errorf("run with max:\n%s", rep)
	}
	// Its sum ops would apply the run's reduction and its max ops max:
	// the plan serves max alone, and other runs are refused
	// (TestFixedReduction).
	for _, red := range []ir.ReduceOp{ir.ReduceSum, ir.ReduceMin} {
		if _, err := Run(p, Options{Size: 4096, DType: I32, Reduce: red}); ir.ErrorCode(err) != ir.CodeBadOptions {
			t.Errorf("run with %s: want an exec.options refusal, got %v", red, err)
		}
	}
}
