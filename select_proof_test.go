package msccl

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/internal/diag"
	"github.com/msccl-go/msccl-go/ir"
)

// TestSelectPlanProvesAtSixRanks is issue 12's example: at 6 ranks the
// table's 1 MiB allreduce row (two-shot) used to come back unproven and
// wrong at 1 MiB. SelectPlan now compiles it for 6 ranks, proves it and
// checks the size against the plan's rule; a second call for the same
// plan is answered from the proof cache.
func TestSelectPlanProvesAtSixRanks(t *testing.T) {
	before := proofsRun.Load()
	p, err := SelectPlan("algorithms/selection.yaml", "allreduce", 6, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.GPUs) != 6 || !strings.HasPrefix(p.Name, "allreduce_twoshot") {
		t.Fatalf("selected %s with %d ranks, want allreduce_twoshot at 6", p.Name, len(p.GPUs))
	}
	if err := Prove(p, nil); err != nil {
		t.Fatalf("selected plan is not proven: %v", err)
	}
	ran := proofsRun.Load()
	if ran == before {
		t.Fatalf("SelectPlan returned a plan without proving it")
	}
	// The same plan again: the hash, no proof.
	if _, err := SelectPlan("algorithms/selection.yaml", "allreduce", 6, 1<<20); err != nil {
		t.Fatal(err)
	}
	if got := proofsRun.Load(); got != ran {
		t.Errorf("a second SelectPlan of the same plan ran %d more proofs, want 0 (cached by plan hash)", got-ran)
	}
	// What a caller does to its plan does not reach the next caller.
	p.Name = "changed by the caller"
	if q, err := SelectPlan("algorithms/selection.yaml", "allreduce", 6, 1<<20); err != nil || q.Name == p.Name {
		t.Errorf("second SelectPlan: %v, %v; want a fresh copy of the proven plan", q, err)
	}
	// A size outside the plan's rule is refused with the rule named.
	if _, err := SelectPlan("algorithms/selection.yaml", "allreduce", 6, 1<<20+4); err == nil || !strings.Contains(err.Error(), "outside the plan's size rule: multiples of 16 bytes") {
		t.Errorf("1 MiB + 4 bytes at 6 ranks: %v, want a refusal naming the rule", err)
	}
}

// wrongAllreduce adds only its neighbour's chunk: rank r misses every
// other contribution. It compiles; only the proof can refuse it.
const wrongAllreduce = `// wrong on purpose: two contributions of ranks
collective allreduce chunks 1 inplace
param ranks = 4
for r in 0..ranks {
  copy rank(r).input[0] -> rank((r + 1) % ranks).scratch[0]
}
for r in 0..ranks {
  reduce rank(r).input[0], rank(r).scratch[0] -> rank(r).input[0]
}
`

// TestSelectAndCompileRefuseUnprovenPlans: a table row, or a program,
// whose plan compiles but is wrong never comes back from SelectPlan or
// CompileAlgorithm; the error carries the proof's finding at its line.
func TestSelectAndCompileRefuseUnprovenPlans(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "bad_allreduce.msccl"), []byte(wrongAllreduce), 0o644); err != nil {
		t.Fatal(err)
	}
	sel := `- collective: allreduce
  ranks: [2, 8]
  ranks_per_node: [2, 8]
  min_message_size: 0
  max_message_size: inf
  algorithm: bad_allreduce.msccl
`
	if err := os.WriteFile(filepath.Join(dir, "selection.yaml"), []byte(sel), 0o644); err != nil {
		t.Fatal(err)
	}
	want := "is not proven correct"
	if p, err := SelectPlan(filepath.Join(dir, "selection.yaml"), "allreduce", 4, 4096); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "bad_allreduce.msccl:8:3: error: wrong result") {
		t.Errorf("SelectPlan of a wrong row: %v, %v; want %q with the finding at line 8", p, err, want)
	}
	if p, err := CompileAlgorithm(dir, "bad_allreduce", map[string]int64{"ranks": 4}); err == nil || !strings.Contains(err.Error(), want) || ir.ErrorCode(err) != diag.CodeWrongResult {
		t.Errorf("CompileAlgorithm of a wrong program: %v, %v; want %q", p, err, want)
	}
	// Fixed on disk, the row is compiled and proven again (the selection
	// cache is keyed by the files' contents).
	good, err := os.ReadFile("algorithms/allreduce_allpairs.msccl")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bad_allreduce.msccl"), good, 0o644); err != nil {
		t.Fatal(err)
	}
	if p, err := SelectPlan(filepath.Join(dir, "selection.yaml"), "allreduce", 4, 4096); err != nil || len(p.GPUs) != 4 {
		t.Errorf("SelectPlan after the fix: %v, %v", p, err)
	}
}

// BenchmarkSelectPlanAgain is the cost of a SelectPlan the cache answers
// (compiling every row of the table again cost 0.2-0.4 s before it).
func BenchmarkSelectPlanAgain(b *testing.B) {
	for _, ranks := range []int{8, 32} {
		b.Run(fmt.Sprint(ranks), func(b *testing.B) {
			if _, err := SelectPlan("", "allreduce", ranks, 1<<20); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := SelectPlan("", "allreduce", ranks, 1<<20); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
