package cuda

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// TestDrainingCallsBesideSpinningKernel records which driver calls wait
// for a kernel of their context that spins until the host releases it
// (through mapped memory, no driver call): the shape of ranks that are
// goroutines of one process, where a peer's kernel spins on this rank
// until this rank launches. A call that waits may not come between a
// peer's launch of a collective and this rank's own (executor/cuda's
// rankload.go builds bindings in a step of every rank for that reason:
// loading a module was the suspect). Each call gets 1 s; then the kernel
// is released. It logs one line per call and fails only on a driver
// error, or when a call is still blocked 10 s after the release.
func TestDrainingCallsBesideSpinningKernel(t *testing.T) {
	ctx := setup(t)
	spin := loadSpin(t)
	probe := func(what string, call func() error) {
		t.Helper()
		flag := testHostMem(t, 8)
		k := testStream(t)
		release := func() { atomic.StoreUint64(flag.Word(0), 1) }
		defer release()
		arg := uint64(flag.Dev)
		if err := spin.Launch([3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0, k, unsafe.Pointer(&arg)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond) // the kernel is running, not queued
		done := make(chan error, 1)
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			ctx.SetCurrent()
			done <- call()
		}()
		start := time.Now()
		var err error
		waited := false
		select {
		case err = <-done:
		case <-time.After(time.Second):
			waited = true
			release()
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				t.Fatalf("%s: still blocked 10 s after the spinning kernel was released", what)
			}
		}
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		release()
		if err := k.Synchronize(); err != nil {
			t.Fatal(err)
		}
		if waited {
			t.Logf("%s: WAITED for the spinning kernel (returned %v after it was released at 1 s)", what, time.Since(start).Round(time.Millisecond)-time.Second)
		} else {
			t.Logf("%s: returned in %v beside the spinning kernel", what, time.Since(start).Round(time.Microsecond))
		}
	}
	var m *Module
	probe("cuModuleLoadDataEx + cuModuleGetFunction", func() error {
		var err error
		if m, err = LoadModule([]byte(spinPTX)); err != nil {
			return err
		}
		_, err = m.Function("spin")
		return err
	})
	if m != nil {
		m.Unload()
	}
	var p DevicePtr
	probe("cuMemAlloc (64 KiB)", func() error {
		var err error
		p, err = Malloc(64 << 10)
		return err
	})
	probe("cuMemcpyHtoD (then the legacy stream's sync)", func() error {
		return MemcpyHtoD(p, make([]byte, 4096))
	})
	probe("cuMemsetD8 (then the legacy stream's sync)", func() error { return Memset8(p, 0, 4096) })
	probe("cuMemFree", func() error { return Free(p) })
	var h *HostMem
	probe("cuMemHostAlloc", func() error {
		var err error
		h, err = HostAllocMapped(4096)
		return err
	})
	if h != nil {
		h.Free()
	}
	probe("cuStreamCreate", func() error {
		s, err := NewStream(true)
		if err == nil {
			s.Destroy()
		}
		return err
	})
}
