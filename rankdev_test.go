package msccl

import (
	"context"
	"strings"
	"testing"
)

// Each rank executor takes only its own device's buffers: the other
// device's are refused by name before any executor call (so the zero
// executors here are never reached), and the cpu device answers the
// cuda-only and no-op calls without an executor.
func TestRankExecutorRefusesOtherDevice(t *testing.T) {
	ctx := context.Background()
	cpuX, gpuX := hostRank{}, cudaRank{}
	var cpuB, gpuB rankBuffers = hostBufs{}, cudaBufs{}
	calls := []struct {
		name string
		err  error
		want string
	}{
		{"cpu run", cpuX.run(ctx, gpuB, F32, Sum), "Run on the cpu device with buffers of the cuda device"},
		{"cpu start", cpuX.start(ctx, gpuB, F32, Sum), "Run on the cpu device with buffers of the cuda device"},
		{"cpu enqueue", cpuX.enqueue(cpuB, F32, Sum, 0), "Enqueue on a stream needs the cuda device"},
		{"cuda run", gpuX.run(ctx, cpuB, F32, Sum), "Run on the cuda device with buffers of the cpu device"},
		{"cuda start", gpuX.start(ctx, cpuB, F32, Sum), "Start on the cuda device with buffers of the cpu device"},
		{"cuda prepare", gpuX.prepare(cpuB, F32, Sum), "Prepare on the cuda device with buffers of the cpu device"},
		{"cuda enqueue", gpuX.enqueue(cpuB, F32, Sum, 0), "Enqueue on the cuda device with buffers of the cpu device"},
	}
	for _, c := range calls {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, c.err, c.want)
		}
	}
	if err := cpuX.prepare(cpuB, F32, Sum); err != nil {
		t.Errorf("cpu prepare: %v, want nil (nothing to build)", err)
	}
	if err := cpuX.wait(); err != nil {
		t.Errorf("cpu wait: %v, want nil (Start ran to the end)", err)
	}
	if p := cpuB.inputPtr(); p != 0 {
		t.Errorf("cpu inputPtr = %#x, want 0", p)
	}
	if b := gpuB.input(); b != nil {
		t.Errorf("cuda input = %v, want nil", b)
	}
}
