package cpu_test

import (
	"testing"

	"github.com/msccl-go/msccl-go/algorithms"
	"github.com/msccl-go/msccl-go/compiler"
	"github.com/msccl-go/msccl-go/executor/cpu"
)

// TestSparseClocksProveLibrary: the sparse clocks alone prove every
// library plan, so that a proof costs the same per op at any rank count
// (a plan they leave undecided is repeated on the exact clocks, whose
// cost per op grows with the ranks: a 256-rank ring took 233 s there,
// 4 s here).
func TestSparseClocksProveLibrary(t *testing.T) {
	for _, ranks := range []int64{8, 16} {
		plans, err := algorithms.Plans(map[string]int64{"ranks": ranks})
		if err != nil {
			t.Fatal(err)
		}
		for _, np := range plans {
			p := np.Plan
			prs, err := compiler.ProofRuns(p, nil, nil)
			if err != nil || !prs[0].Symbolic {
				t.Fatalf("%s at %d ranks: proof runs %v, %v", np.Name, ranks, prs, err)
			}
			rep, missed, err := cpu.RunSparse(p, cpu.Options{Size: prs[0].Size, Symbolic: true, Launches: compiler.ProofLaunches})
			switch {
			case err != nil:
				t.Errorf("%s at %d ranks: %v", np.Name, ranks, err)
			case missed:
				t.Errorf("%s at %d ranks: the sparse clocks left an access unordered", np.Name, ranks)
			case !rep.OK():
				t.Errorf("%s at %d ranks: not proven:\n%s", np.Name, ranks, rep)
			}
		}
	}
}
