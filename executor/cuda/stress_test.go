package cudaexec

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/runtime/cuda"
)

// TestGPUPortStress hammers port channels: plans whose every inter-rank
// byte goes through the host proxy (an 8-"node" all-gather, each rank a
// node of its own, so every peer is a port channel; the 2×4 hierarchical
// allreduce, which mixes them with memory channels), with several
// instances (many blocks putting, signalling and flushing at once), at
// small sizes (many requests per byte), forked from and joined into a
// caller's stream as applications run them (the join is what a copy on a
// shared hardware queue deadlocked behind). Every launch's result is
// checked. Each step queues three launches back to back before it waits
// (as msccl-bench's timed loop does), so one launch's requests meet the
// next one's. It runs for MSCCL_GPU_STRESS (a duration, default 5s) per
// plan; scripts/gpu/port-stress.sh runs it for a minute, also under
// CUDA_DEVICE_MAX_CONNECTIONS=1.
func TestGPUPortStress(t *testing.T) {
	needGPU(t)
	d := 5 * time.Second
	if v := os.Getenv("MSCCL_GPU_STRESS"); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			t.Fatalf("MSCCL_GPU_STRESS=%q: %v", v, err)
		}
	}
	const n = 8
	for _, c := range []struct {
		algo string
		defs map[string]int64
		size int64
	}{
		// 16 blocks per rank: 128 of 132 SMs (every block must be resident).
		{"allgather_hierarchical", map[string]int64{"ranks": n, "nodes": n, "gpus_per_node": 1, "instances": 2}, n * 256},
		{"allreduce_hierarchical", map[string]int64{"ranks": n, "nodes": 2, "gpus_per_node": n / 2, "instances": 2}, 4096},
	} {
		t.Run(fmt.Sprintf("%s/%d", c.algo, c.size), func(t *testing.T) {
			e, b := openAlgo(t, c.algo, c.defs, c.size)
			s, err := cuda.NewStream(true)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Destroy()
			const dt = ir.F32
			es := int64(dt.Size())
			ins := make([][]float64, n)
			raw := make([]byte, b.InBytes)
			out := make([]byte, b.OutBytes)
			launches := 0 // steps of burst launches
			for start := time.Now(); time.Since(start) < d; launches++ {
				for r := range n {
					k := b.InBytes / es
					ins[r] = make([]float64, k)
					for i := range k {
						v := float64((int64(r)*7+i*3+int64(launches))%23 - 11)
						ins[r][i] = v
						putElem(raw[i*es:], dt, v)
					}
					if err := cuda.MemcpyHtoD(b.In[r], raw); err != nil {
						t.Fatal(err)
					}
				}
				const burst = 3
				for k := 0; k < burst; k++ {
					if err := e.Run(Call{Buffers: b, DType: dt, Stream: s}); err != nil {
						t.Fatalf("launch %d: %v", launches, err)
					}
				}
				if err := e.Wait(s); err != nil {
					t.Fatalf("launch %d: %v", launches, err)
				}
				// An in-place allreduce run again sums the sums: every rank
				// holds S after the first, n·S after the second.
				scale := 1.0
				if e.p.InPlace && e.p.Collective == ir.AllReduce {
					for k := 1; k < burst; k++ {
						scale *= n
					}
				}
				for r := range n {
					if err := cuda.MemcpyDtoH(out, b.Out[r]); err != nil {
						t.Fatal(err)
					}
					k := b.OutBytes / es
					for i := range k {
						if got, want := getElem(out[i*es:], dt), scale*expectedElem(e.p.Collective, ins, r, i, k); got != want {
							t.Fatalf("launch %d rank %d element %d: got %v, want %v", launches, r, i, got, want)
						}
					}
				}
			}
			if e.ranks[0].nchan[1] == 0 {
				t.Fatalf("%s has no port channels: the test stresses nothing", c.algo)
			}
			t.Logf("%s: %d×3 launches in %v, every result right (CUDA_DEVICE_MAX_CONNECTIONS=%q, port copies by %v)",
				c.algo, launches, d, os.Getenv("CUDA_DEVICE_MAX_CONNECTIONS"), e.PortCopy())
		})
	}
}
