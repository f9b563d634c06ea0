package compiler

import (
	"testing"

	"github.com/msccl-go/msccl-go/executor/cpu"
)

// TestPerfPlans keeps the measurement-only programs of testdata/perf
// (scripts/gpu/perf.sh compiles them on the GPU machine) compiling and
// proven, so a language change cannot break a device session.
func TestPerfPlans(t *testing.T) {
	files := corpus(t, "../testdata/perf/*.msccl", 1)
	for _, f := range files {
		src := readFile(t, f)
		p, sm, ds := CompileSource(f, src, nil, Options{})
		if ds.HasErrors() {
			t.Fatalf("%s:\n%s", f, ds)
		}
		if vs := Verify(p, sm, nil, []cpu.DType{cpu.F32}); len(vs) > 0 {
			t.Errorf("%s: not proven:\n%s", f, vs)
		}
	}
}
