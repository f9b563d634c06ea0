package cpu

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/msccl-go/msccl-go/internal/fulltest"
	"github.com/msccl-go/msccl-go/ir"
)

// TestSymbolicAgreesAtRandomSizes: the library plans (testdata/symbolic,
// kept fresh by the compiler's TestSymbolicFixturesFresh), the upstream
// fixtures and the direct plans at random sizes their rule admits (most
// of them split unevenly into chunks), 1 to 5 launches. The symbolic
// verdict must equal the byte-level one taken over every type and every
// reduction the type allows (prod on integers), and a library plan must
// be correct. TestSymbolicAgreesOnLibrary covers even splits in depth;
// this one covers what the size rule admits beyond them, where uniform
// scratch slots hold chunks shorter than the slot.
func TestSymbolicAgreesAtRandomSizes(t *testing.T) {
	plans := symPlans(t)
	rng := rand.New(rand.NewSource(12))
	perPlan, dtypes := 3, ir.DTypes
	if fulltest.Sample() {
		perPlan, dtypes = 1, []DType{F32, F16, I32, U8, F8E4M3}
	}
	for _, name := range sortedNames(plans) {
		p := plans[name]
		rule, err := p.SizeRule()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for k := 0; k < perPlan; k++ {
			// Up to 300 granules past the smallest size: lengths of a few
			// units per chunk, where remainders are a large share.
			size := rule.Min + rule.Granularity*rng.Int63n(300)
			launches := 1 + rng.Intn(5)
			t.Run(fmt.Sprintf("%s/%d/%d", name, size, launches), func(t *testing.T) {
				sym, err := Run(p, Options{Size: size, Symbolic: true, Launches: launches, Seed: 3})
				if err != nil {
					t.Fatal(err)
				}
				ok, why := true, ""
				for _, dt := range dtypes {
					for _, red := range []ir.ReduceOp{ir.ReduceSum, ir.ReduceMin, ir.ReduceMax, ir.ReduceProd} {
						if CheckReduction(dt, red) != nil {
							continue
						}
						rep, err := Run(p, Options{Size: size, DType: dt, Reduce: red, Launches: launches, Seed: 3})
						if err != nil {
							t.Fatalf("%s %s: %v", dt, red, err)
						}
						if !rep.OK() {
							ok = false
							why += fmt.Sprintf("%s/%s: %s\n", dt, red, rep)
						}
					}
				}
				if sym.OK() != ok {
					t.Fatalf("symbolic says %s, byte level all correct: %v\nsymbolic:\n%s\nbyte level:\n%s", sym.Verdict, ok, sym, why)
				}
				if _, racy := knownRacy[name]; !ok && !racy {
					t.Errorf("plan is not correct at %d bytes:\n%s", size, why)
				}
			})
		}
	}
}
