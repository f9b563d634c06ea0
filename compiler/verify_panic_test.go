package compiler

import (
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/executor/cpu"
	"github.com/msccl-go/msccl-go/internal/diag"
	"github.com/msccl-go/msccl-go/ir"
)

// A proof run that panics (a bug of the executor) must come back as an
// internal-error diagnostic naming the run, not crash the process that
// hosts the compiler (the Python module, libmsccl). Runs go on several
// workers, so the panic is raised off the caller's goroutine.
func TestVerifyPanicIsAnError(t *testing.T) {
	p, sm := compileFile(t, "../algorithms/allreduce_ring.msccl", map[string]int64{"ranks": 4}, Options{})
	old := proofRun
	t.Cleanup(func() { proofRun = old })
	proofRun = func(p *ir.Plan, o cpu.Options) (*cpu.Report, error) {
		if o.Symbolic {
			panic("injected proof bug")
		}
		return old(p, o)
	}
	ds := Verify(p, sm, nil, []cpu.DType{cpu.F32, cpu.I32})
	var found bool
	for _, d := range ds {
		if d.Code == diag.CodeInternal && strings.Contains(d.Summary, "internal error in the proof") && strings.Contains(d.Summary, "injected proof bug") {
			found = true
		}
	}
	if !found || !ds.HasErrors() {
		t.Fatalf("want an internal-error diagnostic for the panicking run, got:\n%s", ds)
	}
}
