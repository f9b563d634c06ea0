package compiler

import (
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/internal/golden"
	"github.com/msccl-go/msccl-go/ir"
)

// symbolicFixture names a plan of testdata/symbolic: ALGORITHM_rRANKS.json.
var symbolicFixture = regexp.MustCompile(`^([a-z_]+)_r([0-9]+)\.json$`)

// TestSymbolicFixturesFresh: testdata/symbolic holds library algorithms
// compiled without verification, on which executor/cpu (which may not
// import the compiler) checks the symbolic proof against the byte-level
// runs. They must be what the compiler writes today, or those tests
// check plans nobody runs (they had been compiled before uniform scratch
// and the size rule, and were). -update rewrites them.
func TestSymbolicFixturesFresh(t *testing.T) {
	paths := corpus(t, "../testdata/symbolic/*.json", 1)
	seen := map[string]bool{}
	for _, path := range paths {
		m := symbolicFixture.FindStringSubmatch(filepath.Base(path))
		if m == nil {
			t.Errorf("%s: want ALGORITHM_rRANKS.json", path)
			continue
		}
		algo, ranks := m[1], m[2]
		seen[algo] = true
		t.Run(strings.TrimSuffix(filepath.Base(path), ".json"), func(t *testing.T) {
			n, _ := strconv.ParseInt(ranks, 10, 64)
			defs := map[string]int64{"ranks": n}
			if strings.Contains(algo, "hierarchical") {
				defs["nodes"], defs["gpus_per_node"] = 2, n/2
			}
			file := filepath.Join("..", "algorithms", algo+".msccl")
			src := readFile(t, file)
			p, _, ds := CompileSource(algo+".msccl", src, defs, Options{})
			if ds.HasErrors() {
				t.Fatal(ds)
			}
			js, err := ir.Encode(p)
			if err != nil {
				t.Fatal(err)
			}
			golden.Check(t, path, js, *update)
		})
	}
	// Every library algorithm has at least one plan there.
	for _, f := range libraryFiles(t) {
		if algo := strings.TrimSuffix(filepath.Base(f), ".msccl"); !seen[algo] {
			t.Errorf("testdata/symbolic has no plan of %s: add %s_r4.json (go test ./compiler -run TestSymbolicFixturesFresh -update writes it once the file exists)", algo, algo)
		}
	}
}
