package host

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/msccl-go/msccl-go/compiler"
	"github.com/msccl-go/msccl-go/executor/cpu"
	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/runtime/comm"
)

// An in-place allgather's input is rank r's slice of the output and no
// more (ir.Plan.Region): a plan that reads input chunk 1, which lies in
// the next rank's slice, is refused here as the CPU executor refuses it,
// rather than run. Until both executors shared Region, this one let the
// input run on to the end of the output.
func TestInPlaceGatherInputBound(t *testing.T) {
	const src = `collective allgather chunks 1 inplace
param ranks = 2
for r in 0..ranks {
  for p in 0..ranks {
    if p != r {
      copy rank(r).input[0] -> rank(p).output[r]
    }
  }
}
`
	p, _, ds := compiler.CompileSource("inplace.msccl", []byte(src), nil, compiler.Options{})
	if ds.HasErrors() {
		t.Fatal(ds.String())
	}
	const size = 128
	if rep, err := cpu.Run(p, cpu.Options{Size: size, DType: cpu.F32, Reduce: ir.ReduceSum}); err != nil || !rep.OK() {
		t.Fatalf("the plan as compiled: %v %v", err, rep)
	}
	// The compiler names rank 0's own chunk by its output slice; make the
	// put read input chunk 1 instead: bytes [64, 128) past rank 0's input
	// start, which are rank 1's slice of the shared output.
	var read *ir.BufRef
	for _, tb := range p.GPUs[0].ThreadBlocks {
		for i := range tb.Ops {
			if tb.Ops[i].Code == ir.OpPut && len(tb.Ops[i].Src) == 1 {
				read = &tb.Ops[i].Src[0]
			}
		}
	}
	if read == nil {
		t.Fatal("rank 0 has no put")
	}
	read.Type, read.Index = ir.BufInput, 1
	const want = "past the 64 bytes of rank 0's input"
	if _, err := cpu.Run(p, cpu.Options{Size: size, DType: cpu.F32, Reduce: ir.ReduceSum}); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("CPU executor: got %v, want an error with %q", err, want)
	}
	errs := execRanks(t, 2, 10*time.Second, onNode0, p, Options{Timeout: 5 * time.Second}, func(ctx context.Context, c *comm.Comm, ex *Executor) error {
		b, err := ex.Alloc(ctx, size)
		if err == nil {
			b.Free()
		}
		return err
	})
	if errs[0] == nil || !strings.Contains(errs[0].Error(), want) {
		t.Errorf("rank 0: got %v, want an error with %q", errs[0], want)
	}
}
