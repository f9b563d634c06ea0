package cudaexec

import (
	"testing"

	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/runtime/cuda"
)

// BenchmarkHostCost measures what one Run of a cached plan costs the host
// (issue 17's goal: at most 2 µs above bare cuLaunchKernel calls, and no
// allocations). "run" times Run on a prepared call; "bare" launches the
// same kernels with the same arguments on the same streams directly, the
// floor any executor pays. Only the enqueueing is timed: the GPU drains
// the streams every 64 calls with the timer stopped, so a full launch
// queue never turns host time into GPU time. Compare the two µs/call
// figures of one run (bash .gpu/run -test.run XXX -test.bench HostCost
// -test.benchmem).
func BenchmarkHostCost(b *testing.B) {
	if err := cuda.Init(); err != nil {
		b.Skipf("no CUDA: %v", err)
	}
	p, err := compileWith("../../algorithms/allreduce_allpairs_packet.msccl", map[string]int64{"ranks": 8})
	if err != nil {
		b.Fatal(err)
	}
	gpuMu.Lock()
	defer gpuMu.Unlock()
	e, bufs, done := openAlloc(b, p, Options{}, 1024)
	defer done()
	call := Call{Buffers: bufs, DType: ir.F16, Reduce: ir.ReduceSum}
	if err := e.Prepare(call); err != nil {
		b.Fatal(err)
	}
	bd, err := e.bind(&call)
	if err != nil {
		b.Fatal(err)
	}
	drain := func(b *testing.B, i int) {
		if i%64 != 63 {
			return
		}
		b.StopTimer()
		if err := e.Wait(nil); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	perCall := func(b *testing.B) {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1e3/float64(b.N), "µs/call")
	}
	b.Run("run", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if err := e.Run(call); err != nil {
				b.Fatal(err)
			}
			drain(b, i)
		}
		perCall(b)
	})
	b.Run("bare", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			for r, rs := range e.ranks {
				if err := bd.fn.fn.LaunchPtr([3]uint32{uint32(rs.nblocks), 1, 1}, [3]uint32{bd.threads, 1, 1}, bd.smem, rs.stream, uint64(bd.args[r])); err != nil {
					b.Fatal(err)
				}
			}
			drain(b, i)
		}
		perCall(b)
	})
	if err := e.Wait(nil); err != nil {
		b.Fatal(err)
	}
}
