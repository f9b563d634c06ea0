package compiler

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/msccl-go/msccl-go/dsl"
	"github.com/msccl-go/msccl-go/executor/cpu"
)

// BenchmarkCompile compiles every library algorithm at 8 ranks
// (hierarchical: 2 nodes x 4 GPUs).
func BenchmarkCompile(b *testing.B) {
	for _, f := range libraryFiles(b) {
		src := readFile(b, f)
		name := strings.TrimSuffix(filepath.Base(f), ".msccl")
		b.Run(name, func(b *testing.B) {
			defs := libraryDefs(name, 8, 4)
			for i := 0; i < b.N; i++ {
				if _, _, ds := CompileSource(name, src, defs, Options{}); ds.HasErrors() {
					b.Fatal(ds)
				}
			}
		})
	}
}

// BenchmarkCompileVerifyAllReduce8 is the headline goal: an 8-rank
// allreduce compiled and proven correct (f32, two launches) well under
// 50 ms. Simulation time grows with the message, so two sizes are shown.
func BenchmarkCompileVerifyAllReduce8(b *testing.B) {
	for _, name := range []string{"allreduce_allpairs_packet", "allreduce_twoshot"} {
		src := readFile(b, "../algorithms/"+name+".msccl")
		for _, size := range []int64{64 << 10, 1 << 20} {
			b.Run(fmt.Sprintf("%s/%dKiB", name, size>>10), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					p, sm, ds := CompileSource(name, src, map[string]int64{"ranks": 8}, Options{})
					if ds.HasErrors() {
						b.Fatal(ds)
					}
					if vs := Verify(p, sm, []int64{size}, []cpu.DType{cpu.F32}); len(vs) > 0 {
						b.Fatal(vs)
					}
				}
			})
		}
	}
}

// BenchmarkRingAllGather1024 compiles the ring allgather at 1024 ranks
// (about a million chunk moves); the goal is under 2 s.
func BenchmarkRingAllGather1024(b *testing.B) {
	src := readFile(b, "../algorithms/allgather_ring.msccl")
	f, ds := dsl.Parse("allgather_ring.msccl", src)
	if ds.HasErrors() {
		b.Fatal(ds)
	}
	for i := 0; i < b.N; i++ {
		p, _, ds := Compile(f, map[string]int64{"ranks": 1024}, Options{Timing: func(pass string, d time.Duration) {
			b.ReportMetric(d.Seconds(), pass+"-s")
		}})
		if ds.HasErrors() {
			b.Fatal(ds)
		}
		if len(p.GPUs) != 1024 {
			b.Fatal("wrong plan")
		}
	}
}
