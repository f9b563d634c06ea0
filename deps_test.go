package msccl

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// The package graph stands in floors, each a set of folders; a package
// imports only packages on its own floor or below, never one above
// (docs/architecture.md draws the floors). internal/ holds the leaves
// every floor may use: an internal package imports only internal ones.
// A package of the module that matches no floor is an error, so a new
// folder is placed before it is used.
var floors = [][]string{
	{"internal"},
	{"ir", "dsl"},
	{"kernels", "runtime"},
	{"executor"},
	{"compiler"},
	{"algorithms"},
	{"."},
	{"capi", "nccl", "cmd", "examples"},
}

// never lists what the floors allow but the design forbids: from a
// package (or folder) to a package (or folder), and why.
var never = []struct{ from, to, why string }{
	{"dsl", "ir", "the language knows nothing of the plan"},
	{"ir", "dsl", "the plan knows nothing of the language"},
	{"kernels", "runtime", "the kernels are sources and layouts, run by the executor"},
	{"executor/cpu", "runtime", "the CPU proof runs no device"},
	{"executor/cpu", "kernels", "the CPU proof runs no device"},
	{"executor/cpu", "executor/cuda", "the CPU proof runs no device"},
	{"executor/cpu", "executor/host", "the proof judges the host executor, not the other way"},
	{"executor/host", "executor/cuda", "the host executor runs no GPU"},
	{"compiler", "runtime", "compiling needs no device"},
	{"compiler", "kernels", "compiling needs no device"},
	{"compiler", "executor/cuda", "compiling needs no device"},
	{"compiler", "executor/host", "compiling needs no device"},
	// comm is linked into libmsccl (capi), and go-nvml's cgo leaves NVML
	// symbols undefined in a c-shared library, so a C program could no
	// longer link against it (capi/testdata/smoke.c).
	{"runtime/comm", "runtime/topo", "go-nvml would break libmsccl's link"},
	{"runtime/bootstrap", "ir", "the bootstrap knows no plans"},
	// The executors derive what to connect from a plan (executor/wiring);
	// the communicator takes that plain description.
	{"runtime/comm", "ir", "the runtime reads no plans"},
	// The front ends convert arguments and call the root package:
	// choosing plans, staging and caching are msccl.RankComm's
	// (TestCAPIConvertsOnly holds the rest).
	{"capi", "compiler", "libmsccl converts only"},
	{"capi", "executor", "libmsccl converts only"},
	{"capi", "runtime", "libmsccl converts only"},
	{"nccl", "compiler", "libmsccl_nccl converts only"},
	{"nccl", "executor", "libmsccl_nccl converts only"},
}

// under reports whether pkg is folder dir or inside it ("." holds only
// the root package).
func under(pkg, dir string) bool {
	return pkg == dir || (dir != "." && strings.HasPrefix(pkg, dir+"/"))
}

// floorOf is the index of pkg's floor, by the longest folder that holds
// it; -1 where none does.
func floorOf(pkg string) int {
	best, at := -1, -1
	for i, dirs := range floors {
		for _, d := range dirs {
			if under(pkg, d) && len(d) > best {
				best, at = len(d), i
			}
		}
	}
	return at
}

// layerViolations lists the imports of graph (package -> module packages
// it imports, both relative to the module) that run up a floor or break
// a never, and the packages that stand on no floor.
func layerViolations(graph map[string][]string) []string {
	var out []string
	for pkg, imps := range graph {
		from := floorOf(pkg)
		if from < 0 {
			out = append(out, pkg+" is on no floor")
			continue
		}
		for _, imp := range imps {
			if to := floorOf(imp); to > from || to < 0 {
				out = append(out, fmt.Sprintf("%s imports %s (up a floor)", pkg, imp))
			}
			for _, n := range never {
				if under(pkg, n.from) && under(imp, n.to) {
					out = append(out, fmt.Sprintf("%s imports %s (%s)", pkg, imp, n.why))
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// moduleGraph asks the go tool for the non-test imports of every package,
// with the files of overlay (go list -overlay: path -> replacement file)
// if it is not "".
func moduleGraph(t *testing.T, overlay string) map[string][]string {
	t.Helper()
	args := []string{"list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}"}
	if overlay != "" {
		args = append(args, "-overlay", overlay)
	}
	out, err := exec.Command("go", append(args, "./...")...).Output()
	if err != nil && overlay == "" {
		t.Skipf("go list: %v", err)
	}
	if err != nil {
		t.Fatalf("go list with the overlay: %v", err)
	}
	const mod = "github.com/msccl-go/msccl-go"
	rel := func(p string) (string, bool) {
		switch {
		case p == mod:
			return ".", true
		case strings.HasPrefix(p, mod+"/"):
			return strings.TrimPrefix(p, mod+"/"), true
		}
		return "", false
	}
	g := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		pkg, _ := rel(f[0])
		g[pkg] = nil
		for _, imp := range f[1:] {
			if r, ok := rel(imp); ok {
				g[pkg] = append(g[pkg], r)
			}
		}
	}
	return g
}

func TestLayering(t *testing.T) {
	g := moduleGraph(t, "")
	if _, ok := g["executor/host"]; !ok {
		t.Fatalf("go list did not list executor/host: %d packages", len(g))
	}
	for _, v := range layerViolations(g) {
		t.Errorf("layering: %s (see floors and never in deps_test.go)", v)
	}
}

// capi and nccl hold no selection, staging or caching of their own: the
// names that do those are the root package's and ir's, and a front end's
// file that uses them has grown logic a Go caller would miss.
func TestCAPIConvertsOnly(t *testing.T) {
	files, err := filepath.Glob("capi/*.go")
	nc, err2 := filepath.Glob("nccl/*.go")
	files = append(files, nc...)
	if err != nil || err2 != nil || len(nc) == 0 || len(files) == len(nc) {
		t.Fatalf("capi and nccl sources: %v %v %v", files, err, err2)
	}
	forbidden := []string{"StageSpans", ".Pieces(", ".Next(", "compiler.Plans", "BufferBytes(", ".Open(", ".Alloc(", "RankExec", "sha256"}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range forbidden {
			if bytes.Contains(data, []byte(w)) {
				t.Errorf("%s uses %s: staging, selection and caching belong to msccl.RankComm (collexec.go)", f, w)
			}
		}
	}
}

// The rules catch an import up a floor, into internal/ from a leaf's
// point of view the other way (a leaf that imports ir), a never, and a
// package placed on no floor.
func TestLayeringCatchesBadImports(t *testing.T) {
	g := map[string][]string{
		"ir":              {"internal/par", "compiler"},
		"internal/diag":   {"internal/textdist", "ir"},
		"executor/cpu":    {"ir", "runtime/cuda"},
		"executor/host":   {"ir", "executor/cpu", "runtime/comm"},
		"compiler":        {"ir", "executor/cpu", "executor/host"},
		"runtime/comm":    {"ir", "runtime/bootstrap", "runtime/topo"},
		"kernels":         {"ir"},
		"cmd/x":           {"executor/cuda", "."},
		"capi":            {".", "ir"},
		"tools/stray":     {"ir"},
		"runtime/cudadev": {"runtime/comm", "runtime/cuda", "internal/closeonce"},
	}
	want := []string{
		"compiler imports executor/host (compiling needs no device)",
		"executor/cpu imports runtime/cuda (the CPU proof runs no device)",
		"internal/diag imports ir (up a floor)",
		"ir imports compiler (up a floor)",
		"runtime/comm imports ir (the runtime reads no plans)",
		"runtime/comm imports runtime/topo (go-nvml would break libmsccl's link)",
		"tools/stray is on no floor",
	}
	if got := layerViolations(g); strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// The whole check, go list included, fails on a bad import planted in the
// tree: a file added to executor/cpu (through an overlay, so the tree is
// untouched) that imports the CUDA runtime.
func TestLayeringCatchesPlantedImport(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list over the module")
	}
	dir := t.TempDir()
	planted := filepath.Join(dir, "planted.go")
	src := "package cpu\n\nimport _ \"github.com/msccl-go/msccl-go/runtime/cuda\"\n"
	if err := os.WriteFile(planted, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	at, err := filepath.Abs(filepath.Join("executor", "cpu", "zz_planted.go"))
	if err != nil {
		t.Fatal(err)
	}
	ov, _ := json.Marshal(map[string]map[string]string{"Replace": {at: planted}})
	overlay := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(overlay, ov, 0o644); err != nil {
		t.Fatal(err)
	}
	const want = "executor/cpu imports runtime/cuda (the CPU proof runs no device)"
	got := layerViolations(moduleGraph(t, overlay))
	if strings.Join(got, "; ") != want {
		t.Fatalf("with the planted import: %q, want exactly %s", got, want)
	}
}
