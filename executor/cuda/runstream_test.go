package cudaexec

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/runtime/cuda"
)

// TestGPURunStreamOrder: Run on a caller's stream is a graph launch
// (runstream.go), yet collectives of one executor still run one after
// another whichever streams they are ordered on, and Wait(nil) still
// waits for all of them. An in-place allreduce of ones repeated k times
// holds n^k only if no run overlapped the one before (they share
// scratch, semaphores and the buffers themselves); the sequence switches
// between two caller's streams (graph launches) and the ranks' own
// streams (fanOut) with no wait in between, and is read after Wait(nil)
// alone.
func TestGPURunStreamOrder(t *testing.T) {
	needGPU(t)
	const n = 4
	p, err := compileWith("../../algorithms/allreduce_allpairs_packet.msccl", map[string]int64{"ranks": n})
	if err != nil {
		t.Fatal(err)
	}
	if !p.InPlace {
		t.Fatalf("%s is not in place; the test counts on runs compounding", p.Name)
	}
	gpuMu.Lock()
	defer gpuMu.Unlock()
	const size = 4096
	e, bufs, done := openAlloc(t, p, Options{}, size)
	defer done()
	var s [2]*cuda.Stream
	for i := range s {
		if s[i], err = cuda.NewStream(true); err != nil {
			t.Fatal(err)
		}
		defer s[i].Destroy()
	}
	ones := make([]byte, size)
	for i := 0; i < size; i += 4 {
		binary.LittleEndian.PutUint32(ones[i:], math.Float32bits(1))
	}
	for r := range n {
		if err := cuda.MemcpyHtoD(bufs.In[r], ones); err != nil {
			t.Fatal(err)
		}
	}
	call := func(st *cuda.Stream) Call {
		return Call{Buffers: bufs, DType: ir.F32, Reduce: ir.ReduceSum, Stream: st}
	}
	// Stream 0's graph is captured by Prepare, stream 1 uses the same
	// binding's graph on first Run.
	if err := e.Prepare(call(s[0])); err != nil {
		t.Fatal(err)
	}
	seq := []*cuda.Stream{s[0], s[0], nil, s[1], s[0], nil, nil, s[1], s[1], s[0]}
	for i, st := range seq {
		if err := e.Run(call(st)); err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
	}
	if err := e.Wait(nil); err != nil {
		t.Fatal(err)
	}
	want := math.Pow(n, float64(len(seq)))
	got := make([]byte, size)
	for r := range n {
		if err := cuda.MemcpyDtoH(got, bufs.Out[r]); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < size; i += 4 {
			if v := float64(math.Float32frombits(binary.LittleEndian.Uint32(got[i:]))); v != want {
				t.Fatalf("rank %d element %d: %v after %d runs, want %v (a run overlapped another, or Wait(nil) returned early)", r, i/4, v, len(seq), want)
			}
		}
	}
	// A captured Run (the caller's graph) still captures the fork and
	// join, not a launch of the executor's own graph.
	g, err := e.Capture(call(s[1]))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Destroy()
	if err := g.Launch(); err != nil {
		t.Fatal(err)
	}
	if err := e.Wait(s[1]); err != nil {
		t.Fatal(err)
	}
	if err := cuda.MemcpyDtoH(got[:4], bufs.Out[0]); err != nil {
		t.Fatal(err)
	}
	if v := float64(math.Float32frombits(binary.LittleEndian.Uint32(got))); v != want*n {
		t.Fatalf("after the captured run: %v, want %v", v, want*n)
	}
}
