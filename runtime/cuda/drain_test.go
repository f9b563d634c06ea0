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
		k, release := spinning(t, spin)
		defer release()
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

// TestStreamCreateBesideSpinningKernel makes streams one by one, up to
// 48 live, while a kernel of the context spins, and logs the first
// creation that waited for it (and when it returned after the release):
// the GPU run of s20run6 had executor/cuda's in-process oracle one
// rank's launch short exactly where each rank made a stream beside its
// peers' running kernels, while the probe above, with few streams live,
// saw cuStreamCreate return at once. It also times a destroy. It fails
// only on a driver error or a creation still blocked 10 s after the
// release.
func TestStreamCreateBesideSpinningKernel(t *testing.T) {
	ctx := setup(t)
	spin := loadSpin(t)
	k, release := spinning(t, spin)
	defer release()
	const most = 48
	type step struct {
		i    int
		took time.Duration
		err  error
	}
	steps := make(chan step, 2*most+1)
	var made []*Stream
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		ctx.SetCurrent()
		for i := 0; i < most; i++ {
			start := time.Now()
			s, err := NewStream(true)
			steps <- step{i, time.Since(start), err}
			if err != nil {
				close(steps)
				return
			}
			made = append(made, s)
		}
		// And one destroy (the oldest), beside the same kernel.
		start := time.Now()
		err := made[0].Destroy()
		made = made[1:]
		steps <- step{-1, time.Since(start), err}
		close(steps)
	}()
	released := time.Time{}
	deadline := time.After(time.Second)
	var blockedAt = -2
	for done := false; !done; {
		select {
		case st, ok := <-steps:
			if !ok {
				done = true
				break
			}
			if st.err != nil {
				t.Fatalf("stream %d: %v", st.i, st.err)
			}
			if st.took > 500*time.Millisecond && blockedAt == -2 {
				blockedAt = st.i
			}
		case <-deadline:
			if released.IsZero() {
				released = time.Now()
				release()
				deadline = time.After(10 * time.Second)
				continue
			}
			t.Fatal("stream creation still blocked 10 s after the spinning kernel was released")
		}
	}
	for _, s := range made {
		s.Destroy()
	}
	if err := k.Synchronize(); err != nil {
		t.Fatal(err)
	}
	switch {
	case blockedAt == -1:
		t.Logf("cuStreamDestroy WAITED for the spinning kernel (%d streams made beside it returned at once)", most)
	case blockedAt >= 0:
		t.Logf("cuStreamCreate of stream %d WAITED for the spinning kernel (streams 0-%d returned at once)", blockedAt, blockedAt-1)
	default:
		t.Logf("%d cuStreamCreate and a cuStreamDestroy returned at once beside the spinning kernel", most)
	}
}

// spinning launches spin on a stream of its own, spinning on a word of
// mapped host memory, and returns once the kernel runs rather than waits
// in the queue (50 ms later). release ends the kernel by writing the word
// (no driver call, so it works while calls wait for the kernel); calling
// it again is harmless.
func spinning(t *testing.T, spin *Function) (k *Stream, release func()) {
	t.Helper()
	flag := testHostMem(t, 8)
	k = testStream(t)
	release = func() { atomic.StoreUint64(flag.Word(0), 1) }
	arg := uint64(flag.Dev)
	if err := spin.Launch([3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0, k, unsafe.Pointer(&arg)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the kernel is running, not queued
	return k, release
}
