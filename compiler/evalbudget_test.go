package compiler

import (
	"runtime"
	"strings"
	"testing"
)

// TestOpLimitCostsTheLimit: a program far past the op limit is refused
// after about the limit's worth of evaluation, not the limit once per
// parallel worker and then again serially (a 16384-rank ring took two
// minutes and 5 GB to be refused). Allocation counts the ops made: a
// program 1000 times over the limit may cost little more than one just
// over it.
func TestOpLimitCostsTheLimit(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("the loop runs serially on one processor")
	}
	const limit = 20000
	src := func(steps int) []byte {
		return []byte(`collective allgather chunks 1
param ranks = 256
param steps = 1
for r in 0..ranks {
  copy rank(r).input[0] -> rank(r).output[r] tb 0
}
for s in 0..steps {
  for r in 0..ranks {
    copy rank(r).output[r] -> rank((r + 1) % ranks).output[r] tb s
  }
}
`)
	}
	allocs := func(steps int64) uint64 {
		var a, b runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&a)
		_, _, ds := CompileSource("big.msccl", src(0), map[string]int64{"steps": steps}, Options{MaxOps: limit})
		runtime.ReadMemStats(&b)
		if !ds.HasErrors() || !strings.Contains(ds.String(), "the program produces more than 20000 ops") {
			t.Fatalf("steps %d: want the op limit, got %s", steps, ds)
		}
		return b.TotalAlloc - a.TotalAlloc
	}
	near, far := allocs(limit*12/10/256), allocs(1000*limit/256)
	if far > 2*near {
		t.Errorf("1000 times over the limit allocated %d bytes, 1.2 times over %d: the refusal costs more than the limit", far, near)
	}
}
