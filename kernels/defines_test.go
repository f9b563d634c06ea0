package kernels

import (
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/internal/fulltest"
	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/runtime/nvrtc"
	"github.com/msccl-go/msccl-go/runtime/nvrtc/nvrtctest"
)

func TestParseDefines(t *testing.T) {
	for _, c := range []struct {
		in, want, err string
	}{
		{"", "", ""},
		{"RED_BATCH=8", "#define RED_BATCH 8\n", ""},
		{" RED_BATCH=2,COPY_DEPTH=8\tRED_LOCAL_SPANS=1 ", "#define RED_BATCH 2\n#define COPY_DEPTH 8\n#define RED_LOCAL_SPANS 1\n", ""},
		{"RED_BATCH", "", `"RED_BATCH" is not NAME=INTEGER`},
		{"RED_BACTH=4", "", `unknown knob "RED_BACTH" (have COPY_DEPTH, RED_BATCH`},
		{"RED_BATCH=x", "", `RED_BATCH="x" is not an integer in 0..16`},
		{"COPY_DEPTH=17", "", `COPY_DEPTH="17" is not an integer`},
		{"COPY_DEPTH=-1", "", `COPY_DEPTH="-1" is not an integer`},
		{"MSCCL_TRACE=1", "", `unknown knob "MSCCL_TRACE"`},
	} {
		got, err := parseDefines(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), DefinesEnv) {
				t.Errorf("parseDefines(%q) = %q, %v; want an error containing %q", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("parseDefines(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

// TestSourceForDefines: the knobs reach the source ahead of the kernel
// (so the disk cache, keyed by the source, keeps variants apart), a
// malformed value fails SourceFor, and a variant that the knobs select
// (the per-thread operand arrays, other batch and copy depths) still
// compiles to PTX, since a device run may select it.
func TestSourceForDefines(t *testing.T) {
	t.Setenv(DefinesEnv, "RED_LOCAL_SPANS=1 RED_BATCH=2 COPY_DEPTH=2 SIGNAL_FENCE=0")
	src, err := SourceFor(ir.F16, 16)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(src, "#define RED_LOCAL_SPANS 1\n#define RED_BATCH 2\n#define COPY_DEPTH 2\n#define SIGNAL_FENCE 0\n") {
		t.Errorf("source does not start with the knobs:\n%.200s", src)
	}
	if tr, err := TraceSourceFor(ir.F16, 16); err != nil || !strings.Contains(tr, "#define RED_BATCH 2\n") {
		t.Errorf("TraceSourceFor: %v, knobs missing", err)
	}
	if fulltest.Sample() {
		return
	}
	nvrtctest.Need(t)
	name, _ := KernelName(ir.F16, 16)
	if _, log, err := nvrtc.Compile(src, name+".cu", CompileOptions("compute_90")); err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	t.Setenv(DefinesEnv, "RED_BATCH=four")
	if _, err := SourceFor(ir.F16, 16); err == nil || !strings.Contains(err.Error(), DefinesEnv) {
		t.Errorf("SourceFor with a malformed %s: %v, want an error naming it", DefinesEnv, err)
	}
}
