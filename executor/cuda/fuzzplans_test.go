package cudaexec

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/executor/cpu"
	"github.com/msccl-go/msccl-go/ir"
)

// fuzzPlansDir is FuzzProof's corpus as plan files (compiler's
// TestFuzzProofDump writes it and checks it is current).
const fuzzPlansDir = "../../testdata/fuzzplans"

// fuzzCase is one case of fuzzPlansDir/manifest.json: a plan the proof
// accepts at Size and Launches, in every DTypes × Reductions.
type fuzzCase struct {
	Plan       string   `json:"plan"`
	Input      string   `json:"input"`
	Source     string   `json:"source"`
	Mutation   string   `json:"mutation"`
	Size       int64    `json:"size"`
	Launches   int      `json:"launches"`
	DTypes     []string `json:"dtypes"`
	Reductions []string `json:"reductions"`
}

// loadFuzzCases reads the manifest and each case's plan (decoded and
// validated by ir.LoadFile), and the oracle cases each runs.
func loadFuzzCases(t *testing.T) ([]fuzzCase, []*ir.Plan, [][]gcase) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fuzzPlansDir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	var m struct {
		Comment string     `json:"comment"`
		Cases   []fuzzCase `json:"cases"`
	}
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("%s/manifest.json: %v", fuzzPlansDir, err)
	}
	if len(m.Cases) == 0 {
		t.Fatalf("%s/manifest.json has no cases", fuzzPlansDir)
	}
	plans := make([]*ir.Plan, len(m.Cases))
	cases := make([][]gcase, len(m.Cases))
	for i, c := range m.Cases {
		plans[i] = loadPlan(t, filepath.Join(fuzzPlansDir, c.Plan))
		cs, err := fuzzGCases(c)
		if err != nil {
			t.Fatalf("manifest case %d (%s): %v", i, c.Input, err)
		}
		cases[i] = cs
	}
	return m.Cases, plans, cases
}

// fuzzGCases is c as oracle cases: every type and reduction it lists at
// its size and launch count, prod in i32 only (as FuzzProof runs it);
// MSCCL_GPU_DTYPES narrows the types as it does for the other GPU tests.
func fuzzGCases(c fuzzCase) ([]gcase, error) {
	if c.Size <= 0 || c.Launches < 1 || len(c.DTypes) == 0 || len(c.Reductions) == 0 {
		return nil, fmt.Errorf("want a positive size, launches, dtypes and reductions, got %+v", c)
	}
	var out []gcase
	for _, name := range c.DTypes {
		dt, err := cpu.ParseDType(name)
		if err != nil {
			return nil, err
		}
		for _, r := range c.Reductions {
			red := ir.ReduceOp(r)
			switch red {
			case ir.ReduceSum, ir.ReduceMin, ir.ReduceMax:
			case ir.ReduceProd:
				if dt != cpu.I32 {
					continue
				}
			default:
				return nil, fmt.Errorf("unknown reduction %q", r)
			}
			out = append(out, gcase{size: c.Size, dt: dt, red: red, launches: c.Launches, ll: 16})
		}
	}
	if only := os.Getenv("MSCCL_GPU_DTYPES"); only != "" {
		out = onlyDTypes(out, only)
	}
	return out, nil
}

// TestFuzzPlansManifest is the CPU side of TestGPUFuzzPlans: every case
// of the dump decodes, validates and is proven by the CPU executor's
// symbolic run at its size and launch count, so a GPU mismatch is the
// GPU's.
func TestFuzzPlansManifest(t *testing.T) {
	fcs, plans, cases := loadFuzzCases(t)
	for i, c := range fcs {
		rep, err := cpu.Run(plans[i], cpu.Options{Size: c.Size, Symbolic: true, Launches: c.Launches})
		switch {
		case err != nil:
			t.Errorf("case %d (%s, %s): %v", i, c.Input, c.Plan, err)
		case !rep.OK():
			t.Errorf("case %d (%s, %s): the CPU executor's verdict is %s at %d bytes, %d launches:\n%s", i, c.Input, c.Plan, rep.Verdict, c.Size, c.Launches, rep)
		case len(cases[i]) == 0:
			t.Errorf("case %d (%s): no oracle case", i, c.Input)
		}
	}
}

// TestGPUFuzzPlans replays FuzzProof's corpus on the GPU: each case of
// testdata/fuzzplans (a seed or corpus input the proof accepts, often a
// mutated plan: dropped or moved sync, relaxed signals, pipelines,
// double scratch, fixed reductions) runs at its size and launch count in
// every type and reduction it lists, eagerly and by graph replay, and
// must match the CPU executor byte for byte.
func TestGPUFuzzPlans(t *testing.T) {
	needGPU(t)
	fcs, plans, cases := loadFuzzCases(t)
	for i, c := range fcs {
		name := fmt.Sprintf("%02d_%s", i, strings.TrimSuffix(c.Plan, ".json"))
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			t.Logf("%s: %s, mutated: %s", c.Input, c.Source, c.Mutation)
			checkCases(t, name, plans[i], cases[i])
		})
	}
}
