package cudaexec

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// The executors' code (this package's and capi's, which drives
// RankExecutor for PyTorch) never calls cuda.CtxSynchronize: ranks that
// are threads of one process capture their streams at the same time, and
// the driver refuses a context synchronization while any stream of the
// context captures, invalidating that capture (the GPU run of capi's
// TestCUDACommGPU: one rank's Close spoiled the others' captures).
// Each waits for its own streams and events instead (RankExecutor.drain).
// Tests may call it.
func TestNoContextSynchronize(t *testing.T) {
	for _, dir := range []string{".", "../../capi"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		if len(files) == 0 {
			t.Fatalf("no Go files in %s", dir)
		}
		fset := token.NewFileSet()
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			af, err := parser.ParseFile(fset, f, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(af, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "CtxSynchronize" {
					t.Errorf("%s: CtxSynchronize: it invalidates the captures of the process's other threads; wait for this rank's own streams or events", fset.Position(sel.Pos()))
				}
				return true
			})
		}
	}
}
