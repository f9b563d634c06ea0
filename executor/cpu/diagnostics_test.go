package cpu

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/internal/diag"
)

// Every broken fixture's report comes back as diagnostics whose codes
// say what its verdict says, each at a plan path; a correct run has none.
func TestReportDiagnostics(t *testing.T) {
	want := map[Verdict]string{Deadlock: diag.CodeDeadlock, Race: diag.CodeRace, Unbalanced: diag.CodeUnbalanced, WrongResult: diag.CodeWrongResult}
	for _, c := range brokenCases {
		t.Run(c.file, func(t *testing.T) {
			p := loadPlan(t, filepath.Join(brokenDir, c.file))
			rep, err := Run(p, Options{Size: sizes(p)[0] * 4, DType: I32, Seed: 1, Launches: c.launches})
			if err != nil {
				t.Fatal(err)
			}
			ds := rep.Diagnostics()
			if !ds.Has(want[rep.Verdict]) {
				t.Fatalf("verdict %s, diagnostics lack %s:\n%s", rep.Verdict, want[rep.Verdict], ds)
			}
			for _, d := range ds {
				if !d.IsError() || d.Code == "" || d.Summary == "" {
					t.Errorf("incomplete diagnostic %+v", d)
				}
				if d.Code != diag.CodeWrongResult && !strings.HasPrefix(d.Path, "gpus[") {
					t.Errorf("%s: no plan path", d)
				}
			}
		})
	}
}
