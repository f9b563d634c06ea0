package compiler

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/ir"
)

// libraryConfigs are the world shapes every library algorithm is proven
// correct for: ranks 2, 4, 8, 16, and for hierarchical ones 2x4, 2x8, 4x8;
// plus 8 ranks with two instances.
func libraryConfigs(path string) []map[string]int64 {
	if strings.Contains(path, "hierarchical") {
		return []map[string]int64{
			{"nodes": 2, "gpus_per_node": 4, "ranks": 8},
			{"nodes": 2, "gpus_per_node": 8, "ranks": 16},
			{"nodes": 4, "gpus_per_node": 8, "ranks": 32},
			{"nodes": 2, "gpus_per_node": 4, "ranks": 8, "instances": 2},
		}
	}
	return []map[string]int64{{"ranks": 2}, {"ranks": 4}, {"ranks": 8}, {"ranks": 16}, {"ranks": 8, "instances": 2}}
}

// librarySizes are two message sizes that split evenly into the plan's
// chunks: a power of two and an odd multiple of the alignment. (At sizes
// that do not split evenly, scratch slots take the uneven chunk geometry
// of the reference buffer, as upstream; docs/dsl.md says so.)
func librarySizes(p *ir.Plan) []int64 {
	n := int64(len(p.GPUs))
	c := int64(p.GPUs[0].InputChunks)
	if p.Collective.Gathers() {
		c = int64(p.GPUs[0].OutputChunks)
	}
	return []int64{max(n, c) * 4096, c * 16 * 3}
}

func libraryFiles(t testing.TB) []string {
	t.Helper()
	return corpus(t, "../algorithms/*.msccl", 1)
}

// corpus lists the files matching pattern (relative to the package) and
// fails t when fewer than min match: a moved or emptied folder must fail
// the test that walks it, not pass it on nothing.
func corpus(t testing.TB, pattern string, min int) []string {
	t.Helper()
	files, err := filepath.Glob(pattern)
	if err != nil || len(files) < min {
		t.Fatalf("%s: want at least %d files, have %d (%v)", pattern, min, len(files), err)
	}
	return files
}

func compileFile(t testing.TB, path string, defines map[string]int64, opts Options) (*ir.Plan, *SourceMap) {
	t.Helper()
	src := readFile(t, path)
	p, sm, ds := CompileSource(filepath.Base(path), src, defines, opts)
	if ds.HasErrors() || p == nil {
		t.Fatalf("%s %v: %s", path, defines, ds)
	}
	return p, sm
}

func TestDeterministic(t *testing.T) {
	for _, f := range libraryFiles(t) {
		d := libraryConfigs(f)[1]
		p1, _ := compileFile(t, f, d, Options{})
		p2, _ := compileFile(t, f, d, Options{Check: true})
		j1, err1 := ir.Encode(p1)
		j2, err2 := ir.Encode(p2)
		if err1 != nil || err2 != nil || string(j1) != string(j2) {
			t.Errorf("%s: two compilations differ (%v %v)", f, err1, err2)
		}
		// The plan survives the strict decoder and validator.
		if _, ds, err := ir.Load(j1); err != nil {
			t.Errorf("%s: %v\n%s", f, err, ds)
		}
	}
}

func TestPassDumps(t *testing.T) {
	f := "../algorithms/allreduce_twoshot.msccl"
	got := map[string]string{}
	compileFile(t, f, map[string]int64{"ranks": 4}, Options{Check: true, DumpAfter: "all", Dump: func(p, s string) { got[p] = s }})
	for _, name := range PassNames() {
		if got[name] == "" {
			t.Errorf("no dump after pass %s", name)
		}
	}
	if !strings.Contains(got["fuse"], " res ") || !strings.Contains(got["limits"], "tb 0") {
		t.Errorf("dumps do not show fusion or the plan:\nfuse:\n%s\nlimits:\n%s", got["fuse"], got["limits"])
	}
	_, _, ds := CompileSource("x.msccl", []byte("collective allreduce\nparam ranks = 2\ncopy rank(0).input[0] -> rank(1).output[0]\n"), nil, Options{DumpAfter: "fuze"})
	if !strings.Contains(ds.String(), `did you mean "fuse"?`) {
		t.Errorf("unknown pass name: %s", ds)
	}
}

// libraryDefs are the defines a library algorithm compiles with at ranks
// ranks: the hierarchical ones also take the machine's shape, nodes of
// gpusPerNode GPUs.
func libraryDefs(name string, ranks, gpusPerNode int64) map[string]int64 {
	if strings.Contains(name, "hierarchical") {
		return map[string]int64{"nodes": ranks / gpusPerNode, "gpus_per_node": gpusPerNode, "ranks": ranks}
	}
	return map[string]int64{"ranks": ranks}
}

// readFile returns the file's bytes and fails t when it cannot be read.
func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
