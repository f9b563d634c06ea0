package kernels

import (
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/internal/fulltest"
	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/runtime/nvrtc"
	"github.com/msccl-go/msccl-go/runtime/nvrtc/nvrtctest"
)

// TestReduceNoSpill compiles kernel instances down to sm_90 machine code
// with ptxas -v and requires that op_reduce, the Simple protocol's
// reduction (its own function, so that its loads in flight get the
// registers the interpreter around it would take), spills nothing: a
// batch of loads that ptxas parks in local memory costs a round trip per
// source, the latency the batch is there to hide (RED_BATCH in
// executor.cu).
func TestReduceNoSpill(t *testing.T) {
	nvrtctest.Need(t)
	cases := []ir.DType{ir.F16, ir.F8E4M3, ir.F32}
	if fulltest.Sample() {
		cases = cases[:1]
	}
	for _, dt := range cases {
		name, err := KernelName(dt, 16)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(name, func(t *testing.T) {
			src, err := SourceFor(dt, 16)
			if err != nil {
				t.Fatal(err)
			}
			_, log, err := nvrtc.Compile(src, name+".cu", append(CompileOptions("sm_90"), "--ptxas-options=-v"))
			if err != nil {
				t.Fatalf("%v\n%s", err, log)
			}
			props, ok := functionProps(log, "op_reduce")
			if !ok {
				t.Fatalf("ptxas reports no function op_reduce (inlined?):\n%s", log)
			}
			if !strings.Contains(props, "0 bytes spill stores, 0 bytes spill loads") {
				t.Errorf("op_reduce spills:\n%s", props)
			}
		})
	}
}

// functionProps returns ptxas's property lines for the first function
// whose (mangled) name contains fn.
func functionProps(log, fn string) (string, bool) {
	lines := strings.Split(log, "\n")
	for i, l := range lines {
		if strings.Contains(l, "Function properties for") && strings.Contains(l, fn) {
			var b strings.Builder
			b.WriteString(l + "\n")
			for _, m := range lines[i+1:] {
				if strings.Contains(m, "Function properties for") || strings.Contains(m, "Compiling entry") {
					break
				}
				b.WriteString(m + "\n")
			}
			return b.String(), true
		}
	}
	return "", false
}
