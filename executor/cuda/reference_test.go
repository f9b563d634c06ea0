package cudaexec

import (
	"bytes"
	"fmt"
	"testing"
	"unsafe"

	"github.com/msccl-go/msccl-go/executor/cpu"
	"github.com/msccl-go/msccl-go/executor/cuda/reference"
	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/runtime/cuda"
)

// TestGPUReference runs every reference kernel on the executor of the
// plan it mirrors and compares its output, byte for byte, with the CPU
// executor's result for the plan (as msccl-bench -c does), over several
// launches so that epochs, LL flags and scratch halves advance.
func TestGPUReference(t *testing.T) {
	needGPU(t)
	for _, k := range reference.Kernels {
		for _, c := range []struct {
			ranks int
			size  int64
			dt    ir.DType
			red   ir.ReduceOp
			ll    int
		}{
			{8, 64 << 10, ir.F16, ir.ReduceSum, 16},
			{8, 1 << 20, ir.F32, ir.ReduceMax, 8},
			{4, 4 << 10, ir.BF16, ir.ReduceSum, 16},
		} {
			if k.Collective == ir.AllGather && c.red != ir.ReduceSum {
				continue
			}
			t.Run(fmt.Sprintf("%s/%dranks/%d/%s/%s/ll%d", k.Name, c.ranks, c.size, c.dt, c.red, c.ll), func(t *testing.T) {
				e, b := openAlgo(t, k.Plan, map[string]int64{"ranks": int64(c.ranks)}, c.size)
				rep, err := cpu.Run(e.p, cpu.Options{Size: c.size, DType: c.dt, Reduce: c.red, Launches: 1, LLWidth: c.ll})
				if err != nil || !rep.OK() {
					t.Fatalf("CPU executor: %v %v", err, rep.Verdict)
				}
				ref, err := e.Reference(k.Name)
				if err != nil {
					t.Fatal(err)
				}
				defer ref.Close()
				s, err := cuda.NewStream(true)
				if err != nil {
					t.Fatal(err)
				}
				defer s.Destroy()
				call := Call{Buffers: b, DType: c.dt, Reduce: c.red, LLWidth: c.ll, Stream: s}
				for launch := 0; launch < 3; launch++ {
					for r := range e.p.GPUs {
						in := rep.Inputs[0][r]
						if err := cuda.MemcpyHtoDAsync(b.In[r], unsafe.Pointer(&in[0]), int64(len(in)), s); err != nil {
							t.Fatal(err)
						}
					}
					if err := ref.Run(call); err != nil {
						t.Fatal(err)
					}
					if err := ref.Wait(s); err != nil {
						t.Fatal(err)
					}
					for r := range e.p.GPUs {
						want := rep.Outputs[0][r]
						got := make([]byte, len(want))
						if err := cuda.MemcpyDtoH(got, b.Out[r]); err != nil {
							t.Fatal(err)
						}
						if !bytes.Equal(got, want) {
							t.Fatalf("launch %d rank %d: output differs from the CPU executor's at byte %d", launch, r, firstDiff(got, want))
						}
					}
				}
				// A graph replays the same collective.
				g, err := ref.Capture(call)
				if err != nil {
					t.Fatal(err)
				}
				defer g.Destroy()
				for i := 0; i < 4; i++ {
					if err := g.Launch(); err != nil {
						t.Fatal(err)
					}
				}
				if err := ref.Wait(s); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// TestGPUReferenceRefuses: a reference for another collective, or a size
// its vector width does not divide, is refused with a reason.
func TestGPUReferenceRefuses(t *testing.T) {
	needGPU(t)
	e, b := openAlgo(t, "allgather_direct", map[string]int64{"ranks": 4}, 4<<10)
	if _, err := e.Reference("allreduce_twoshot"); err == nil {
		t.Error("an allreduce reference ran an allgather plan")
	}
	if _, err := e.Reference("nope"); err == nil {
		t.Error("unknown reference accepted")
	}
	ref, err := e.Reference("allgather_direct")
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	if err := ref.Prepare(Call{Buffers: b, DType: ir.F32}); err != nil {
		t.Fatal(err)
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
