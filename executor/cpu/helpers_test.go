package cpu

import (
	"flag"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/msccl-go/msccl-go/ir"
)

var update = flag.Bool("update", false, "rewrite golden files")

const fixtureDir = "../../testdata/peer-plans"

// fixtures returns the upstream plans by file name.
func fixtures(t testing.TB) map[string]*ir.Plan {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(fixtureDir, "*.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no fixtures in %s: %v", fixtureDir, err)
	}
	out := map[string]*ir.Plan{}
	for _, p := range paths {
		out[filepath.Base(p)] = loadPlan(t, p)
	}
	return out
}

func loadPlan(t testing.TB, path string) *ir.Plan {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p, ds := ir.Decode(data)
	if ds.HasErrors() {
		t.Fatalf("%s: %v", path, ds.Err())
	}
	return p
}

func sortedNames(m map[string]*ir.Plan) []string {
	var names []string
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// reduces reports whether any op of the plan reduces.
func reduces(p *ir.Plan) bool {
	return anyOp(p, func(op *ir.Op) bool { return op.Info().Reduces })
}

// sizes are the three message sizes every fixture must pass: the
// smallest (one alignment unit per chunk), 1 MiB, and an uneven one with
// 1003 alignment units per chunk, an odd count that splits unevenly across
// tbg_info groups and leaves a partial last pipeline window. Chunks stay
// equal in size: plans that move chunk i into chunk j need that, and
// upstream refuses sizes that do not divide into whole chunks.
func sizes(p *ir.Plan) []int64 {
	n := int64(len(p.GPUs))
	a := int64(p.BufferAlignment)
	ref := int64(1)
	for _, g := range p.GPUs {
		c := g.InputChunks
		if c == 0 {
			c = g.OutputChunks
		}
		ref = max(ref, int64(c))
	}
	unit := a * ref
	if p.Collective.Gathers() { // counted by the output: a piece per rank
		unit *= n
	}
	return []int64{unit, 1 << 20, unit * 1003}
}

// unevenChunks is a size whose alignment units do not divide into the
// chunk count, so chunk sizes differ by one unit (upstream refuses such
// sizes; ir.Layout defines them). Plans that move chunk i into chunk j of
// another size cannot be right at such sizes: needsEvenChunks names them.
func unevenChunks(p *ir.Plan) int64 {
	return sizes(p)[2] + int64(p.BufferAlignment)*int64(len(p.GPUs))*5
}

var needsEvenChunks = map[string]string{
	// ppkt sends input chunks 2-3 into the peer's scratch chunks 0-1:
	// with uneven chunks the scratch range is one unit longer and its
	// last packets are never written (a deadlock, rightly).
	"allreduce_packet.json": "chunk 2-3 → 0-1",
}

// eachOp calls visit for every op of p, pipeline bodies included: inner
// is the op's index in its pipeline's body, -1 for a top-level op.
func eachOp(p *ir.Plan, visit func(r, b, op, inner int, o *ir.Op)) {
	for r, g := range p.GPUs {
		for b, tb := range g.ThreadBlocks {
			for i := range tb.Ops {
				o := &tb.Ops[i]
				visit(r, b, i, -1, o)
				body := o.Ops()
				for j := range body {
					visit(r, b, i, j, &body[j])
				}
			}
		}
	}
}

// reduceFixtureWith is a copy of the upstream reduce.json whose reducing
// ops all name red as their reduce_op.
func reduceFixtureWith(t *testing.T, red ir.ReduceOp) *ir.Plan {
	t.Helper()
	p := clonePlan(fixtures(t)["reduce.json"])
	eachOp(p, func(_, _, _, _ int, o *ir.Op) {
		if o.Info().Reduces {
			o.SetReduceOp(red)
		}
	})
	return p
}
