package compiler

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/ir"
)

// TestParallelDeterminism compiles every library algorithm at 64 ranks
// (enough for several workers) on one core and on four: plans and
// diagnostics must be byte for byte the same.
func TestParallelDeterminism(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles every algorithm twice at 64 ranks")
	}
	files, err := filepath.Glob("../algorithms/*.msccl")
	if err != nil || len(files) == 0 {
		t.Fatal("no algorithms", err)
	}
	compile := func(procs int, name string, src []byte, defs map[string]int64) (string, string) {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		p, _, ds := CompileSource(name, src, defs, Options{})
		var js []byte
		if p != nil {
			if js, err = ir.Encode(p); err != nil {
				t.Fatal(err)
			}
		}
		return string(js), ds.String()
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimSuffix(filepath.Base(f), ".msccl")
		defs := map[string]int64{"ranks": 64}
		if strings.Contains(name, "hierarchical") {
			defs = map[string]int64{"nodes": 8, "gpus_per_node": 8, "ranks": 64}
		}
		js1, ds1 := compile(1, name, src, defs)
		js4, ds4 := compile(4, name, src, defs)
		if !bytes.Equal([]byte(js1), []byte(js4)) || ds1 != ds4 {
			t.Errorf("%s: plan or diagnostics differ between 1 and 4 workers", name)
		}
	}
}
