package compiler

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/dsl"
	"github.com/msccl-go/msccl-go/executor/cpu"
	"golang.org/x/tools/txtar"
)

// FindingKind reads the wording of reportDiags; on every program of the
// wrong corpus, at each of its proof sizes (symbolic and in f32), the
// verdict its findings add up to must be the executor's own. A change of
// wording that loses a kind fails here, not in a caller's verdict.
func TestFindingKindsAgreeWithExecutor(t *testing.T) {
	files, _ := filepath.Glob("../testdata/wrong/*.txtar")
	if len(files) == 0 {
		t.Fatal("no testdata/wrong corpus")
	}
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

func TestFindingKindFallbacks(t *testing.T) {
	for _, tc := range []struct{ summary, kind string }{
		{"verdict: race", KindRace},
		{"verdict: wrong result", KindWrongResult},
		{"input clobbered: rank 0's input bytes [0:4) changed", KindClobbered},
		{"cannot simulate (64 bytes, f32): too large", KindError},
		{"the plan serves no message size: x", KindError},
	} {
		if got := FindingKind(dsl.Diagnostic{Summary: tc.summary}); got != tc.kind {
			t.Errorf("FindingKind(%q) = %q, want %q", tc.summary, got, tc.kind)
		}
	}
	ds := Diagnostics{{Severity: dsl.Warning, Summary: "deadlock: x"}, {Severity: dsl.Error, Summary: "input clobbered: y"}, {Severity: dsl.Error, Summary: "race on z"}}
	if got := VerdictOf(ds); got != KindRace {
		t.Errorf("VerdictOf = %q, want race (a race outranks a wrong result; warnings do not count)", got)
	}
	if got := VerdictOf(ds[:1]); got != "correct" {
		t.Errorf("VerdictOf(warning only) = %q, want correct", got)
	}
	if got := VerdictOf(ds[1:2]); got != KindWrongResult {
		t.Errorf("VerdictOf(clobber) = %q, want wrong result", got)
	}
}
