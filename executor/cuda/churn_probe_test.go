package cudaexec

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/runtime/cuda"
)

// TestGPUProbeStreamChurn is a probe for the port-channel hang (issue 13),
// run only with MSCCL_GPU_PROBE_CHURN=1: it logs rather than fails. The
// hypothesis: the driver deals new streams onto CUDA_DEVICE_MAX_CONNECTIONS
// hardware queues in creation order, counting streams already destroyed,
// so after enough streams came and went in a process (parallel tests), a
// port-channel executor's proxy stream can land on the queue of one of its
// own ranks' streams even though the live streams fit, and the proxy's
// copies then sit behind a kernel that spins waiting for them. For each
// number of streams created and destroyed first, it opens the 8-rank
// hierarchical allgather (port channels between two declared nodes) and
// runs 20 launches at 1 KiB.
func TestGPUProbeStreamChurn(t *testing.T) {
	if os.Getenv("MSCCL_GPU_PROBE_CHURN") == "" {
		t.Skip("probe: set MSCCL_GPU_PROBE_CHURN=1")
	}
	needGPU(t)
	p, err := compileWith(filepath.Join("../../algorithms", "allgather_hierarchical.msccl"), map[string]int64{"ranks": 8, "nodes": 2, "gpus_per_node": 4})
	if err != nil {
		t.Fatal(err)
	}
	for _, churn := range []int{0, 1, 2, 4, 8, 12, 16, 20, 24, 28, 32, 40, 48, 64} {
		for i := 0; i < churn; i++ {
			s, err := cuda.NewStream(true)
			if err != nil {
				t.Fatal(err)
			}
			s.Destroy()
		}
		e, err := Open(p, Options{Timeout: 2 * time.Second})
		if err != nil {
			t.Logf("churn %2d: open: %v", churn, err)
			continue
		}
		b, err := e.Alloc(1024)
		if err != nil {
			e.Close()
			t.Fatal(err)
		}
		var res error
		for l := 0; l < 20 && res == nil; l++ {
			if res = e.Run(Call{Buffers: b, DType: ir.F32}); res == nil {
				res = e.Wait(nil)
			}
		}
		if res != nil {
			t.Logf("churn %2d: HANG or error: %.200v", churn, res)
		} else {
			t.Logf("churn %2d: 20 launches ok", churn)
		}
		b.Free()
		e.Close()
	}
}

// TestGPUProbeBusyDevice: the same port-channel plan while another
// executor keeps the GPU's multiprocessors busy with big all-pairs
// allreduces on its own streams (what parallel tests do). Hypothesis: the
// port plan's blocks then start late, the first ones spin on peers not yet
// resident, and the watchdog fires although nothing is wrong.
func TestGPUProbeBusyDevice(t *testing.T) {
	if os.Getenv("MSCCL_GPU_PROBE_CHURN") == "" {
		t.Skip("probe: set MSCCL_GPU_PROBE_CHURN=1")
	}
	needGPU(t)
	busyPlan, err := compileWith(filepath.Join("../../algorithms", "allreduce_allpairs.msccl"), map[string]int64{"ranks": 8, "instances": 8})
	if err != nil {
		t.Fatal(err)
	}
	p, err := compileWith(filepath.Join("../../algorithms", "allgather_hierarchical.msccl"), map[string]int64{"ranks": 8, "nodes": 2, "gpus_per_node": 4})
	if err != nil {
		t.Fatal(err)
	}
	busy, bb, done := openAlloc(t, busyPlan, Options{}, 256<<20)
	defer done()
	e, err := Open(p, Options{Timeout: 2 * time.Second})
	if err != nil {
		t.Logf("port plan beside a busy executor: open refused: %v", err)
		return
	}
	defer e.Close()
	b, err := e.Alloc(1024)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free()
	for round := 0; round < 5; round++ {
		for i := 0; i < 10; i++ {
			if err := busy.Run(Call{Buffers: bb, DType: ir.F32}); err != nil {
				t.Fatal(err)
			}
		}
		var res error
		for l := 0; l < 10 && res == nil; l++ {
			res = e.Run(Call{Buffers: b, DType: ir.F32})
		}
		if res == nil {
			res = e.Wait(nil)
		}
		busyErr := busy.Wait(nil)
		t.Logf("round %d: port plan: %.300v; busy: %v", round, res, busyErr)
		if res != nil {
			return
		}
	}
}
