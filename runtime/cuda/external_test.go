package cuda

import (
	"bytes"
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
	got := make([]byte, n)
	if err := MemcpyDtoH(got, dst); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the replayed graph did not copy")
	}
	if st, err := StreamOf(0).CaptureStatus(); err != nil || st != CaptureNone {
		t.Fatalf("legacy stream: status %d, %v", st, err)
	}
}
