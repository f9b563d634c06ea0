package compiler

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/msccl-go/msccl-go/executor/cpu"
	"github.com/msccl-go/msccl-go/internal/fulltest"
)

// A shape is a world a library algorithm is compiled for; defs are a
// selection row's other defines, spelled "k=v,..." in key order.
type shape struct {
	ranks, nodes, gpn, instances int64
	defs                         string
}

func (s shape) String() string {
	out := fmt.Sprint(s.ranks)
	if s.nodes > 0 {
		out = fmt.Sprintf("%dx%d", s.nodes, s.gpn)
	}
	if s.instances > 1 {
		out += fmt.Sprintf("i%d", s.instances)
	}
	if s.defs != "" {
		out += " with " + s.defs
	}
	return out
}

func (s shape) defines() map[string]int64 {
	d := map[string]int64{"ranks": s.ranks}
	if s.nodes > 0 {
		d["nodes"], d["gpus_per_node"] = s.nodes, s.gpn
	}
	if s.instances > 1 {
		d["instances"] = s.instances
	}
	for _, kv := range strings.Split(s.defs, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			d[k], _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return d
}

// spellDefines is a row's defines as a shape's defs.
func spellDefines(d map[string]int64) string {
	var kvs []string
	for _, k := range slices.Sorted(maps.Keys(d)) {
		kvs = append(kvs, fmt.Sprintf("%s=%d", k, d[k]))
	}
	return strings.Join(kvs, ",")
}

// verdict is what proving one (algorithm, shape) found: whether the
// algorithm accepts the shape (it compiles: a `require` or an executor
// limit may refuse it, with a positioned error) and whether the plan is
// proven.
type verdict struct {
	accepted bool
	refusal  string
	proof    string // "" when proven
}

var (
	proofMu    sync.Mutex
	proofCache = map[string]verdict{}
)

// prove compiles and proves file at s once per test binary (the library
// test and the selection test share the work).
func prove(file string, s shape) verdict {
	key := file + "@" + s.String()
	proofMu.Lock()
	v, ok := proofCache[key]
	proofMu.Unlock()
	if ok {
		return v
	}
	src, err := os.ReadFile(file)
	if err != nil {
		return verdict{refusal: err.Error()}
	}
	p, sm, ds := CompileSource(filepath.Base(file), src, s.defines(), Options{})
	switch {
	case ds.HasErrors() || p == nil:
		v = verdict{refusal: ds.String()}
	default:
		v.accepted = true
		if vds := Verify(p, sm, nil, []cpu.DType{cpu.F32, cpu.BF16}); vds.HasErrors() {
			v.proof = vds.String()
		}
	}
	proofMu.Lock()
	proofCache[key] = v
	proofMu.Unlock()
	return v
}

// libraryShapes are the worlds every library algorithm is tried at:
// every size from 2 to 16, then 24, 32, 64 and 128 (the last two are the
// slow tail, left to the full run, MSCCL_FULL=1); hierarchical ones at 2-4 nodes of
// 2-8 GPUs, and 8 and 16 nodes of 8 in the full run; and 8 ranks with two
// instances.
func libraryShapes(file string, short bool) []shape {
	var out []shape
	if strings.Contains(file, "hierarchical") {
		for nodes := int64(2); nodes <= 4; nodes++ {
			for g := int64(2); g <= 8; g++ {
				out = append(out, shape{ranks: nodes * g, nodes: nodes, gpn: g})
			}
		}
		out = append(out, shape{ranks: 8, nodes: 2, gpn: 4, instances: 2})
		if !short {
			// 64 and 128 ranks at their usual shape: nodes of 8 GPUs.
			out = append(out, shape{ranks: 64, nodes: 8, gpn: 8}, shape{ranks: 128, nodes: 16, gpn: 8})
		}
		return out
	}
	for n := int64(2); n <= 16; n++ {
		out = append(out, shape{ranks: n})
	}
	out = append(out, shape{ranks: 24}, shape{ranks: 32}, shape{ranks: 8, instances: 2})
	if !short {
		out = append(out, shape{ranks: 64}, shape{ranks: 128})
	}
	return out
}

// sampleShape keeps, in the default run, the worlds up to 8 ranks and
// 16 (and every hierarchical one of up to 16 ranks): every algorithm and
// both instance counts, each at small, odd and power-of-two worlds. The
// full run (MSCCL_FULL=1) proves every shape up to 128 ranks.
func sampleShape(s shape) bool {
	return s.ranks <= 8 || s.ranks == 16 && s.nodes == 0 || s.nodes > 0 && s.ranks <= 16 && s.gpn < 8
}

// TestLibraryProven proves every library algorithm at every shape it
// accepts; a shape it refuses must be refused with a positioned error.
func TestLibraryProven(t *testing.T) {
	for _, f := range libraryFiles(t) {
		algo := strings.TrimSuffix(filepath.Base(f), ".msccl")
		for _, s := range libraryShapes(f, fulltest.Sample()) {
			if fulltest.Sample() && !sampleShape(s) {
				continue
			}
			t.Run(algo+"/"+s.String(), func(t *testing.T) {
				v := prove(f, s)
				if !v.accepted {
					if !strings.Contains(v.refusal, filepath.Base(f)+":") {
						t.Fatalf("refused without a source position: %s", v.refusal)
					}
					t.Skipf("refused: %s", firstLine(v.refusal))
				}
				if v.proof != "" {
					t.Fatalf("not proven correct:\n%s", v.proof)
				}
			})
		}
	}
}

// TestSelectionClaimsProven checks that every world a row of
// algorithms/selection.yaml claims is one where its algorithm is proven:
// rows claim only proven ranges, and the world sizes of a row are all
// proven one by one, so a row may not span more than the test can prove.
func TestSelectionClaimsProven(t *testing.T) {
	// MSCCL_SELECTION=/abs/path/tuned.yaml holds a table that is to
	// replace the shipped one (msccl-bench --tune's output) to the same
	// bar.
	table := "../algorithms/selection.yaml"
	if p := os.Getenv("MSCCL_SELECTION"); p != "" {
		table = p
	}
	rows, err := loadSelection(table)
	if err != nil {
		t.Fatal(err)
	}
	name := filepath.Base(table)
	for _, row := range rows {
		file := filepath.Join("../algorithms", row.Algorithm)
		defs := spellDefines(row.Defines)
		var shapes []shape
		if row.MultiNode {
			if row.Nodes == nil || row.RanksPerNode == nil {
				t.Errorf("%s:%d: a multi-node row must bound nodes and ranks_per_node", name, row.Line)
				continue
			}
			for nodes := row.Nodes[0]; nodes <= row.Nodes[1]; nodes++ {
				for g := row.RanksPerNode[0]; g <= row.RanksPerNode[1]; g++ {
					if inRange(row.Ranks, nodes*g) {
						shapes = append(shapes, shape{ranks: nodes * g, nodes: nodes, gpn: g})
					}
				}
			}
		} else {
			if row.Ranks == nil || row.Ranks[1]-row.Ranks[0] > 40 {
				t.Errorf("%s:%d: ranks %v: a row must name a range of at most 41 world sizes, each proven here", name, row.Line, row.Ranks)
				continue
			}
			for n := row.Ranks[0]; n <= row.Ranks[1]; n++ {
				if inRange(row.RanksPerNode, n) {
					shapes = append(shapes, shape{ranks: n})
				}
			}
		}
		for _, s := range shapes {
			if fulltest.Sample() && (s.ranks > 32 || len(shapes) > 2 && s != shapes[0] && s != shapes[len(shapes)-1]) {
				continue // the sample: a row's smallest and largest world
			}
			s.defs = defs
			v := prove(file, s)
			switch {
			case !v.accepted:
				t.Errorf("%s:%d claims %s at %s, which it refuses: %s", name, row.Line, row.Algorithm, s, firstLine(v.refusal))
			case v.proof != "":
				t.Errorf("%s:%d claims %s at %s, which is not proven:\n%s", name, row.Line, row.Algorithm, s, v.proof)
			}
		}
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
