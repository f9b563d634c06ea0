package compiler

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/executor/cpu"
	"github.com/msccl-go/msccl-go/internal/diag"
	"golang.org/x/tools/txtar"
)

// On every program of the wrong corpus, at each of its proof sizes
// (symbolic and in f32), the verdict that RunDiagnostics' findings add up
// to must be the executor's own: a finding that lost or changed its code
// fails here, not in a caller's verdict.
func TestFindingKindsAgreeWithExecutor(t *testing.T) {
	files := corpus(t, "../testdata/wrong/*.txtar", 1)
	seen := map[string]bool{}
	for _, f := range files {
		ar, err := txtar.ParseFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src, defs := corpusProgram(t, ar)
		p, sm, ds := CompileSource("input.msccl", src, defs, Options{})
		if p == nil || ds.HasErrors() {
			continue // rejected by the compiler: no run to classify
		}
		sizes, err := ProofSizes(p)
		if err != nil {
			continue
		}
		for _, size := range sizes {
			for _, opt := range []cpu.Options{{Size: size, Symbolic: true, Launches: ProofLaunches}, {Size: size, DType: cpu.F32, Launches: ProofLaunches}} {
				rep, err := cpu.Run(p, opt)
				if err != nil {
					continue
				}
				got := VerdictOf(RunDiagnostics(rep, sm, "run"))
				if got != rep.Verdict.String() {
					t.Errorf("%s at %d bytes (symbolic %v): findings add up to %q, the executor says %q", filepath.Base(f), size, opt.Symbolic, got, rep.Verdict)
				}
				seen[got] = true
			}
		}
	}
	for _, v := range []string{"correct", KindDeadlock, KindRace, KindUnbalanced, KindWrongResult} {
		if !seen[v] {
			t.Errorf("the corpus never produced verdict %q: the test no longer covers it", v)
		}
	}
}

// corpusProgram is the program of a txtar case and its "defines" file
// (name=value per line), as the golden and corpus tests read them.
func corpusProgram(t *testing.T, ar *txtar.Archive) (src []byte, defs map[string]int64) {
	t.Helper()
	defs = map[string]int64{}
	for _, fl := range ar.Files {
		switch fl.Name {
		case "input.msccl":
			src = fl.Data
		case "defines":
			for _, line := range strings.Fields(string(fl.Data)) {
				k, v, _ := strings.Cut(line, "=")
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					t.Fatalf("bad define %q", line)
				}
				defs[k] = n
			}
		}
	}
	return src, defs
}

func TestVerdictOf(t *testing.T) {
	ds := Diagnostics{
		{Severity: diag.Warning, Code: diag.CodeDeadlock},
		{Severity: diag.Error, Code: diag.CodeInputClobbered},
		{Severity: diag.Error, Code: diag.CodeRace},
		{Severity: diag.Error, Code: diag.CodeCannotRun},
	}
	for _, tc := range []struct {
		ds   Diagnostics
		want string
	}{
		{ds, KindRace}, // a race outranks a wrong result; warnings do not count
		{ds[:1], "correct"},
		{ds[1:2], KindWrongResult},
		{ds[3:], KindError},
		{ds[1:], KindRace},
	} {
		if got := VerdictOf(tc.ds); got != tc.want {
			t.Errorf("VerdictOf(%v) = %q, want %q", tc.ds, got, tc.want)
		}
	}
	if got := FindingKind(ds[1]); got != KindClobbered {
		t.Errorf("FindingKind(clobbered) = %q", got)
	}
}
