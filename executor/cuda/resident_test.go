package cudaexec

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/kernels"
)

func TestResidentError(t *testing.T) {
	if err := residentError("p", 8, 132, 1024, 4096, 1, 132); err != nil {
		t.Errorf("132 blocks fit 132 SMs: %v", err)
	}
	err := residentError("alltoall_ring", 8, 256, 1024, 4096, 1, 132)
	if err == nil || !strings.Contains(err.Error(), "needs all 256 thread blocks of its 8 ranks resident at once") ||
		!strings.Contains(err.Error(), "at most 132 blocks of 1024 threads") {
		t.Fatalf("got %v", err)
	}
}

// TestGPURefusesNonResident compiles a plan with more blocks than the GPU
// holds at once (8 ranks × 8 instances of all-gather's 8 blocks, 1024
// threads each) and expects a refusal before anything launches, not a
// watchdog hang.
func TestGPURefusesNonResident(t *testing.T) {
	needGPU(t)
	p, err := compileWith(filepath.Join("../../algorithms", "allgather_direct.msccl"), map[string]int64{"ranks": 8, "instances": 16})
	if err != nil {
		t.Fatal(err)
	}
	e, err := Open(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	b, err := e.Alloc(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free()
	err = e.Run(Call{Buffers: b, DType: kernels.F32})
	if err == nil || !strings.Contains(err.Error(), "resident at once") {
		t.Fatalf("got %v, want a co-residency refusal", err)
	}
	t.Log(err)
}

// TestGPURefusesSizeOutsideRule: Alloc and Wrap refuse a message size the
// plan's rule does not admit, naming the rule, before anything runs.
func TestGPURefusesSizeOutsideRule(t *testing.T) {
	needGPU(t)
	p, err := compileWith(filepath.Join("../../algorithms", "allreduce_allpairs_packet.msccl"), map[string]int64{"ranks": 8})
	if err != nil {
		t.Fatal(err)
	}
	e, err := Open(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for _, size := range []int64{4004, 64} {
		if b, err := e.Alloc(size); err == nil {
			b.Free()
			t.Errorf("Alloc(%d) accepted", size)
		} else if !strings.Contains(err.Error(), "outside the plan's size rule: multiples of 16 bytes from 128 bytes") {
			t.Errorf("Alloc(%d): %v", size, err)
		}
	}
	b, err := e.Alloc(4000) // 1000 floats: in the rule
	if err != nil {
		t.Fatal(err)
	}
	b.Free()
}
