package kernels

import (
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/runtime/nvrtc"
	"github.com/msccl-go/msccl-go/runtime/nvrtc/nvrtctest"
)

// TestSignalScopeGPU: SIGNAL_SCOPE_GPU=1 gives memory channels GPU-scope
// signals and waits, and system scope stays for the ports (and for every
// channel by default), since the knob is only right with every peer on
// this GPU.
func TestSignalScopeGPU(t *testing.T) {
	nvrtctest.Need(t)
	name, _ := KernelName(ir.F32, 16)
	ptx := func(defs string) string {
		t.Setenv(DefinesEnv, defs)
		src, err := SourceFor(ir.F32, 16)
		if err != nil {
			t.Fatal(err)
		}
		out, log, err := nvrtc.Compile(src, name+".cu", CompileOptions("compute_90"))
		if err != nil {
			t.Fatalf("%s: %v\n%s", defs, err, log)
		}
		return string(out)
	}
	gpuOps := []string{"red.release.gpu.global.add.u64", "ld.acquire.gpu.global.u64", "fence.acq_rel.gpu"}
	def := ptx("")
	for _, ins := range gpuOps {
		if strings.Contains(def, ins) {
			t.Errorf("default PTX has %s", ins)
		}
	}
	scoped := ptx("SIGNAL_SCOPE_GPU=1")
	for _, ins := range append(gpuOps, "ld.acquire.sys.global.u64", "red.release.sys.global.add.u64") {
		if !strings.Contains(scoped, ins) {
			t.Errorf("SIGNAL_SCOPE_GPU=1 PTX lacks %s", ins)
		}
	}
}
