package cudaexec

import (
	"errors"
	"fmt"
	"testing"

	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/kernels"
)

// The refusals a user sees carry their codes through the executor's own
// wrapping ("cudaexec: rank 3: ..."), without a GPU: callers branch on
// ir.ErrorCode, never on these messages.
func TestErrorCodes(t *testing.T) {
	gather := &Executor{p: &ir.Plan{Collective: ir.AllGather, GPUs: make([]ir.GPU, 4)},
		rule: ir.SizeRule{Granularity: 16, Min: 64, Max: 1 << 20}}
	_, above := gather.stageFor(2 << 20)
	closed := &RankExecutor{closed: true}
	broken := &RankExecutor{rank: 1, broken: fmt.Errorf("launch 3: %w", &HangError{})}
	bufs := &RankBuffers{e: broken, in: 16}
	// fixedMax's one reducing op fixes max: it serves max alone.
	fixedMax := &ir.Plan{Name: "fixed", GPUs: []ir.GPU{{ThreadBlocks: []ir.ThreadBlock{{Ops: []ir.Op{{Code: ir.OpRe}}}}}}}
	fixedMax.GPUs[0].ThreadBlocks[0].Ops[0].SetReduceOp(ir.ReduceMax)
	reduceErr := func(p *ir.Plan, red ir.ReduceOp, dt ir.DType) error { _, err := checkReduce(p, red, dt); return err }
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"size above the rule", above, ir.CodeSizeRefused},
		{"piece of no whole elements", gather.checkStaged(&Buffers{Size: 24, InBytes: 6, OutBytes: 24}, ir.F32), ir.CodeSizeRefused},
		{"not resident", residentError("alltoall_ring", 0, 8, 256, 1024, 4096, 1, 132), ir.CodeNotResident},
		{"prod of floats", reduceErr(gather.p, ir.ReduceProd, ir.BF16), ir.CodeBadOptions},
		{"unknown reduction", reduceErr(gather.p, "avg", ir.F32), ir.CodeBadOptions},
		{"a reduction the plan does not serve", reduceErr(fixedMax, ir.ReduceSum, ir.F32), ir.CodeBadOptions},
		{"unknown port copy", func() error { _, err := resolvePortCopy(PortCopy(9)); return err }(), ir.CodeBadOptions},
		{"executor closed", closed.usable(nil), ir.CodeBroken},
		{"Wait after Close", closed.Wait(), ir.CodeBroken},
		// The earlier failure's own code (a hang) is the cause; what the
		// caller must act on now is that the executor is unusable.
		{"rank unusable after a failure", broken.usable(bufs), ir.CodeBroken},
		{"executor unusable after a failure", (&Executor{broken: errors.New("launch failed")}).brokenErr(), ir.CodeBroken},
		{"freed buffers", (&RankBuffers{freed: true}).SetInput(nil), ir.CodeBroken},
		{"input larger than the buffers", bufs.SetInput(make([]byte, 32)), ir.CodeSizeRefused},
		{"buffers for another rank count", func() error { _, err := gather.Wrap(64, nil, nil); return err }(), ir.CodeRanks},
		{"watchdog", fmt.Errorf("cudaexec: rank 1: %w", &HangError{Stuck: []kernels.WatchRecord{{Kind: kernels.WatchSignal}}}), ir.CodeWatchdog},
	} {
		if c.err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		if got := ir.ErrorCode(fmt.Errorf("rank 3: %w", c.err)); got != c.want {
			t.Errorf("%s: code %q, want %q (%v)", c.name, got, c.want, c.err)
		}
	}
	if red, err := checkReduce(fixedMax, ir.ReduceNone, ir.F32); err != nil || red != ir.ReduceMax {
		t.Errorf("a fixed-max plan run with no reduction named: %s, %v; want max", red, err)
	}
	if err := gather.checkStaged(&Buffers{Size: 64, InBytes: 16, OutBytes: 64}, ir.F32); err != nil {
		t.Errorf("whole pieces refused: %v", err)
	}
}
