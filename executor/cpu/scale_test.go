package cpu_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/msccl-go/msccl-go/compiler"
	"github.com/msccl-go/msccl-go/executor/cpu"
	"github.com/msccl-go/msccl-go/internal/fulltest"
	"github.com/msccl-go/msccl-go/ir"
)

// This file is an external test package so that it may compile library
// algorithms (package cpu itself must not import the compiler).

func compileLibrary(tb testing.TB, name string, ranks int64) *ir.Plan {
	tb.Helper()
	path := filepath.Join("..", "..", "algorithms", name+".msccl")
	src, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	p, _, ds := compiler.CompileSource(filepath.Base(path), src, map[string]int64{"ranks": ranks}, compiler.Options{})
	if ds.HasErrors() || p == nil {
		tb.Fatalf("%s at %d ranks: %s", name, ranks, ds)
	}
	return p
}

// BenchmarkProofScale proves ring plans at growing rank counts, as the
// compiler's byte-level proof does (4 launches; 64 KiB of f32 here).
// Proof time and memory grew with the number of thread blocks (agents of
// the vector clocks); docs/BENCHMARKS.md has the figures. -short stops at
// 32 ranks; MSCCL_SCALE_RANKS=512 (say) runs that rank count instead.
func BenchmarkProofScale(b *testing.B) {
	counts := []int64{8, 32, 128}
	if env := os.Getenv("MSCCL_SCALE_RANKS"); env != "" {
		n, err := strconv.ParseInt(env, 10, 64)
		if err != nil || n < 2 {
			b.Fatalf("MSCCL_SCALE_RANKS=%q: want a rank count", env)
		}
		counts = []int64{n}
	}
	for _, name := range []string{"allgather_ring", "allreduce_ring"} {
		for _, ranks := range counts {
			if testing.Short() && ranks > 32 {
				continue
			}
			b.Run(fmt.Sprintf("%s/%d", name, ranks), func(b *testing.B) {
				p := compileLibrary(b, name, ranks)
				b.ReportAllocs()
				for b.Loop() {
					rep, err := cpu.Run(p, cpu.Options{Size: 64 << 10, DType: cpu.F32, Launches: 4})
					if err != nil {
						b.Fatal(err)
					}
					if !rep.OK() {
						b.Fatalf("not proven:\n%s", rep)
					}
				}
			})
		}
	}
}

// TestProofAt128Ranks proves a ring allreduce at 128 ranks (8192 thread
// blocks), which ran out of memory before the clocks were shared
// (clock.go). Only in the full run (MSCCL_FULL=1).
func TestProofAt128Ranks(t *testing.T) {
	fulltest.Skip(t, "the 128-rank proof takes seconds")
	p := compileLibrary(t, "allreduce_ring", 128)
	rep, err := cpu.Run(p, cpu.Options{Size: 64 << 10, DType: cpu.F32, Launches: 2})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("not proven:\n%s", rep)
	}
}
