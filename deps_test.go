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

// The layering the data flow fixes (docs/architecture.md): the language
// and the plan know nothing of what runs them; the CPU executor judges
// plans and must not depend on the compiler that makes them or the GPU
// that runs them; nothing below the root package reaches up to it.
// allowed maps a package (relative to the module) to the module packages
// it may import; internal/... are open to all but the sealed packages.
// Packages not listed (the commands, examples, internal packages other
// than the leaves) may import anything.
var allowed = map[string][]string{
	"ir":                    {},
	"dsl":                   {},
	"executor/cpu":          {"ir"},
	"compiler":              {"dsl", "ir", "executor/cpu", "internal/hostmem"},
	"kernels":               {"ir"},
	"runtime/cuda":          {},
	"runtime/topo/topotest": {},
	"runtime/topo":          {"ir"},
	"runtime/bootstrap":     {"internal/hostid"},
	"executor/cuda":         {"ir", "kernels", "internal/reference", "runtime/comm", "runtime/cuda", "internal/cudadev", "internal/nvrtc", "internal/socket"},
	"algorithms":            {"compiler"},
	// Not runtime/topo: comm is linked into libmsccl (capi), and go-nvml's
	// cgo leaves NVML symbols undefined in a c-shared library, so a C
	// program could no longer link against it (capi/testdata/smoke.c).
	"runtime/comm":     {"ir", "runtime/bootstrap", "internal/socket"},
	"internal/cudadev": {"runtime/comm", "runtime/cuda"},
	// The CPU device, opened only by the root package (msccl.OpenComm).
	"internal/cpudev": {"runtime/comm"},
	// NVRTC, the CUDA compiler: executor/cuda's alone (and the kernels'
	// tests'). It imports nothing of the module, but it is no helper open
	// to all (layered): the compiler and the CPU executor must not reach
	// CUDA through it.
	"internal/nvrtc": {},
	// The hand-written reference kernels (sources and byte layouts, like
	// kernels): executor/cuda runs them, msccl-bench --reference times
	// them.
	"internal/reference": {"ir", "kernels"},
	// The per-rank executor of the cpu device, reached only through the
	// root package (msccl.OpenComm): internal, but held to an executor's
	// layer all the same.
	"internal/host": {"ir", "executor/cpu", "runtime/comm", "internal/socket"},
	// The leaves under internal/ that ir and dsl import stay leaves
	// (imports of internal/... only): were one to import ir, dsl would
	// reach the plan through it.
	"internal/diag":     {"internal/textdist"},
	"internal/intset":   {},
	"internal/textdist": {},
	"internal/par":      {},
	"internal/size":     {},
	// The socket transport knows nothing of plans or devices.
	"internal/socket": {},
	".":               {"algorithms", "compiler", "dsl", "executor/cpu", "executor/cuda", "internal/host", "internal/cpudev", "ir", "kernels", "runtime/bootstrap", "runtime/comm", "runtime/cuda", "internal/cudadev", "internal/nvrtc", "internal/hostmem"},
	// Test helpers (like httptest): what the kernel tests use of NVRTC,
	// and a job's ranks as goroutines for the communicator's users.
	"internal/nvrtc/nvrtctest": {"internal/nvrtc"},
	"internal/commtest":        {"runtime/bootstrap", "runtime/comm"},
	// libmsccl converts C arguments and calls the root package: running
	// collectives (choosing plans, staging, caching opened plans) is the
	// communicator's (msccl.RankComm.Collective), compiling and proving
	// are msccl.CompileSource, VerifyPlan and SimulatePlan, so neither the
	// compiler nor an executor is in reach. TestCAPIConvertsOnly holds the
	// rest.
	"capi": {".", "ir"},
	// libmsccl_nccl converts NCCL's arguments into msccl.Call: the
	// bootstrap's error types become NCCL's codes, runtime/cuda serves
	// ncclMemAlloc; no executor, no compiler.
	"nccl": {".", "ir", "runtime/bootstrap", "runtime/cuda"},
}

// layered internal packages are held to their rules although they import
// nothing outside internal/: what they wrap (the GPU) belongs to a layer.
var layered = map[string]bool{
	"internal/nvrtc": true,
}

// sealed packages say in their doc.go that they import nothing of the
// module beyond their allowed list, internal packages included: the
// transport and the bootstrap sit below everything that knows plans or
// devices, and the diagnostics, set and worker-pool leaves below ir.
var sealed = map[string]bool{
	"internal/socket":   true,
	"runtime/bootstrap": true,
	"internal/diag":     true,
	"internal/intset":   true,
	"internal/par":      true,
}

// layerViolations lists the imports of graph (package -> module packages
// it imports, both relative to the module) that the rules forbid. An
// internal package is open to every unsealed package only while it
// reaches nothing outside internal/ (a helper below every layer); one
// that does, such as internal/host (an executor), is ruled like any
// other and must be in its importers' lists, or it would be a way
// around them.
func layerViolations(graph map[string][]string) []string {
	var out []string
	for pkg, imps := range graph {
		ok, ruled := allowed[pkg]
		if !ruled {
			continue
		}
		for _, imp := range imps {
			if (!sealed[pkg] && internalLeaf(graph, imp, map[string]bool{})) || contains(ok, imp) {
				continue
			}
			out = append(out, fmt.Sprintf("%s imports %s", pkg, imp))
		}
	}
	sort.Strings(out)
	return out
}

// internalLeaf reports whether pkg is under internal/ and imports,
// directly or not, only packages under internal/, none of them layered.
func internalLeaf(graph map[string][]string, pkg string, seen map[string]bool) bool {
	if !strings.HasPrefix(pkg, "internal/") || layered[pkg] {
		return false
	}
	if seen[pkg] {
		return true
	}
	seen[pkg] = true
	for _, imp := range graph[pkg] {
		if !internalLeaf(graph, imp, seen) {
			return false
		}
	}
	return true
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
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
	for pkg := range allowed {
		if _, ok := g[pkg]; !ok {
			t.Errorf("rule for %s, which is not a package any more", pkg)
		}
	}
	for _, v := range layerViolations(g) {
		t.Errorf("layering: %s (see allowed in deps_test.go and docs/architecture.md)", v)
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

// The rules catch a planted bad import.
func TestLayeringCatchesBadImports(t *testing.T) {
	g := map[string][]string{
		"ir":           {"internal/par", "compiler"},
		"executor/cpu": {"ir", "runtime/cuda"},
		"compiler":     {"ir", "executor/cuda", "internal/host", "internal/size", "internal/nvrtc", "internal/nvrtcwrap"},
		"cmd/x":        {"executor/cuda"},
		// An internal package that reaches outside internal/ is no
		// helper open to all: the compiler would reach the runtime
		// through the host executor.
		"internal/host": {"ir", "executor/cpu", "runtime/comm"},
		"internal/size": {},
		// A leaf that reaches up: ir would import the plan's users
		// through internal/diag.
		"internal/diag": {"internal/textdist", "ir", "internal/par"},
		// A layered leaf is no helper: the compiler would reach CUDA,
		// directly or through a helper that imports it.
		"internal/nvrtc":     {},
		"internal/nvrtcwrap": {"internal/nvrtc"},
		"internal/hostmem":   {"ir"},
		// Sealed: no internal package beyond the list either.
		"internal/socket":   {"internal/par"},
		"runtime/bootstrap": {"internal/hostid", "internal/diag"},
	}
	want := []string{"compiler imports executor/cuda", "compiler imports internal/host", "compiler imports internal/nvrtc", "compiler imports internal/nvrtcwrap", "executor/cpu imports runtime/cuda", "internal/diag imports internal/par", "internal/diag imports ir",
		"internal/socket imports internal/par", "ir imports compiler", "runtime/bootstrap imports internal/diag"}
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
	got := layerViolations(moduleGraph(t, overlay))
	if strings.Join(got, "; ") != "executor/cpu imports runtime/cuda" {
		t.Fatalf("with the planted import: %q, want exactly executor/cpu imports runtime/cuda", got)
	}
}
