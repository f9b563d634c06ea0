package compiler

import (
	"bytes"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/internal/fulltest"
	"github.com/msccl-go/msccl-go/ir"
)

// TestParallelDeterminism compiles every library algorithm at 64 ranks
// (enough for several workers) on one core, two and four: plans and
// diagnostics must be byte for byte the same.
func TestParallelDeterminism(t *testing.T) {
	fulltest.Skip(t, "compiles every algorithm twice at 64 ranks")
	files := libraryFiles(t)
	compile := func(procs int, name string, src []byte, defs map[string]int64) (string, string) {
		return compileOn(t, procs, name, src, defs, Options{})
	}
	for _, f := range files {
		src := readFile(t, f)
		name := strings.TrimSuffix(filepath.Base(f), ".msccl")
		defs := libraryDefs(name, 64, 8)
		// Two workers walk with one shard, four with two.
		js1, ds1 := compile(1, name, src, defs)
		for _, procs := range []int{2, 4} {
			js, ds := compile(procs, name, src, defs)
			if !bytes.Equal([]byte(js1), []byte(js)) || ds1 != ds {
				t.Errorf("%s: plan or diagnostics differ between 1 and %d workers", name, procs)
			}
		}
	}
}

// TestParallelLoops runs loops that evaluate may spread over workers,
// including ones that fail part-way (which it reruns serially): plans and
// diagnostics must not depend on the worker count.
func TestParallelLoops(t *testing.T) {
	const head = "collective allgather chunks 1\nparam ranks = 64\n"
	ring := "for s in 0..ranks - 1 {\n  for r in 0..ranks {\n    let c = (r - s) % ranks\n    copy rank(r).output[c] -> rank((r + 1) % ranks).output[c] tb s / 8\n  }\n}\n"
	own := "for r in 0..ranks {\n  copy rank(r).input[0] -> rank(r).output[r] tb 0\n}\n"
	cases := []struct {
		name, src string
		maxOps    int
	}{
		{"ring", head + own + ring, 0},
		{"shadowing let", head + "let c = 3\n" + own + ring + "copy rank(0).output[c] -> rank(5).scratch[0]\n", 0},
		{"if and nested let", head + own + "for s in 0..ranks {\n  if s % 2 == 0 {\n    for r in 0..ranks {\n      let c = (r - s) % ranks\n      copy rank(r).output[c] -> rank((r + 1) % ranks).output[c] tb s / 8\n    }\n  } else {\n    let d = 1\n    for r in 0..ranks {\n      let c = (r - s) % ranks\n      copy rank(r).output[c] -> rank((r + d) % ranks).output[c] tb s / 8\n    }\n  }\n}\n", 0},
		{"error in one iteration", head + "for r in 0..ranks {\n  copy rank(r).input[0] -> rank(r + r / 60).output[r]\n}\n", 0},
		{"errors in many iterations", head + "for r in 0..ranks {\n  copy rank(r).input[r] -> rank(r).output[r / (r - 40)]\n}\n", 0},
		{"op limit", head + own + ring, 1000},
		{"nested param error", head + own + "for r in 0..ranks {\n  param x = 1\n  copy rank(r).output[r] -> rank((r + 1) % ranks).output[r]\n}\n", 0},
		{"fn and list", head + "let hop = [1, 2]\nfn next(r, s) = (r + hop[s % 2]) % ranks\n" + own + "for s in 0..ranks {\n  for r in 0..ranks {\n    copy rank(r).output[r] -> rank(next(r, s)).scratch[s] tb if s < 32 then 0 else 1\n  }\n}\n", 0},
		{"list index error in one iteration", head + "let ring = [0, 1, 2]\nfor r in 0..ranks {\n  copy rank(r).input[0] -> rank(r).output[ring[r / 20]]\n}\n", 0},
	}
	for _, c := range cases {
		compile := func(procs int) (string, string) {
			return compileOn(t, procs, c.name, []byte(c.src), nil, Options{MaxOps: c.maxOps})
		}
		js1, ds1 := compile(1)
		js4, ds4 := compile(4)
		if js1 != js4 || ds1 != ds4 {
			t.Errorf("%s: plan or diagnostics differ between 1 and 4 workers:\n%s\n---\n%s", c.name, ds1, ds4)
		}
		if wantErr := strings.Contains(c.name, "error") || c.maxOps > 0; wantErr != (js1 == "") {
			t.Errorf("%s: plan %v, diagnostics:\n%s", c.name, js1 != "", ds1)
		}
	}
}

// compileOn compiles src with GOMAXPROCS set to procs and returns the
// plan's JSON ("" when there is none) and the diagnostics' text, what the
// determinism tests compare across worker counts.
func compileOn(t *testing.T, procs int, name string, src []byte, defs map[string]int64, opts Options) (string, string) {
	t.Helper()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
	p, _, ds := CompileSource(name, src, defs, opts)
	var js []byte
	if p != nil {
		var err error
		if js, err = ir.Encode(p); err != nil {
			t.Fatal(err)
		}
	}
	return string(js), ds.String()
}
