package cuda

import (
	"bytes"
	"runtime"
	"testing"
)

// TestBorrowedStreamCapture: work queued on a borrowed stream (as
// PyTorch's current stream is borrowed) is captured into a graph, and
// CaptureStatus, the one probe legal during capture, sees the capture
// begin and end without invalidating it.
func TestBorrowedStreamCapture(t *testing.T) {
	if StreamOf(0) != nil {
		t.Fatal("StreamOf(0) is not the legacy default stream (nil)")
	}
	setup(t)
	own := testStream(t)
	s := StreamOf(uintptr(own.h))
	const n = 4096
	src, dst := testMalloc(t, n), testMalloc(t, n)
	want := bytes.Repeat([]byte{7}, n)
	if err := MemcpyHtoD(src, want); err != nil {
		t.Fatal(err)
	}
	if st, err := s.CaptureStatus(); err != nil || st != CaptureNone {
		t.Fatalf("before capture: status %d, %v", st, err)
	}
	if err := s.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	st, err := s.CaptureStatus()
	if err != nil || st != CaptureActive {
		s.EndCapture()
		t.Fatalf("during capture: status %d, %v", st, err)
	}
	if err := MemcpyAsync(dst, src, n, s); err != nil {
		s.EndCapture()
		t.Fatal(err)
	}
	g, err := s.EndCapture()
	if err != nil {
		t.Fatalf("the capture was invalidated: %v", err)
	}
	defer g.Destroy()
	if st, err := s.CaptureStatus(); err != nil || st != CaptureNone {
		t.Fatalf("after capture: status %d, %v", st, err)
	}
	ge, err := g.Instantiate()
	if err != nil {
		t.Fatal(err)
	}
	defer ge.Destroy()
	if err := ge.Launch(s); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	got := readDevice(t, dst, n)
	if !bytes.Equal(got, want) {
		t.Fatal("the replayed graph did not copy")
	}
	if st, err := StreamOf(0).CaptureStatus(); err != nil || st != CaptureNone {
		t.Fatalf("legacy stream: status %d, %v", st, err)
	}
}

// A helper thread in relaxed capture mode (the executors' pulse) may
// query a stream of its own while another thread captures in global
// mode, torch.cuda.graph's default, and the capture stays valid. The
// same query from a thread left in global mode is logged with what it
// did to the capture: run6's torchrun graph check is where that mattered.
func TestRelaxedThreadKeepsGlobalCapture(t *testing.T) {
	setup(t)
	for _, relaxed := range []bool{true, false} {
		s, q := testStream(t), testStream(t)
		if err := s.beginCaptureGlobal(); err != nil {
			t.Fatal(err)
		}
		qerr := make(chan error, 1)
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			if relaxed {
				restore, err := RelaxCaptureMode()
				if err != nil {
					qerr <- err
					return
				}
				defer restore()
			}
			_, err := q.Query()
			qerr <- err
		}()
		err := <-qerr
		g, endErr := s.EndCapture()
		if g != nil {
			g.Destroy()
		}
		if relaxed {
			if err != nil {
				t.Errorf("relaxed thread's query during a global capture: %v", err)
			}
			if endErr != nil {
				t.Errorf("a relaxed thread's query invalidated the global capture: %v", endErr)
			}
			continue
		}
		t.Logf("a thread in global mode queried its own stream during another's global capture: query %v; capture end %v", err, endErr)
	}
}
