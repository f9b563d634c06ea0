package cuda

/*
#include "shim.h"
*/
import "C"

import "fmt"

// StreamOf wraps a stream another library made, such as PyTorch's
// torch.cuda.current_stream().cuda_stream, so that work is queued behind
// (and ahead of) that library's work on it. h 0 is the legacy default
// stream, which is what a nil *Stream means everywhere. The stream is
// borrowed: its owner destroys it, never Destroy on it here.
func StreamOf(h uintptr) *Stream {
	if h == 0 {
		return nil
	}
	return &Stream{h: C.uintptr_t(h)}
}

// Capture states of a stream (CUstreamCaptureStatus).
const (
	CaptureNone        = 0
	CaptureActive      = 1
	CaptureInvalidated = 2
)

// CaptureStatus reports whether s (nil: the legacy default stream) is
// being captured into a CUDA graph. It is one of the few calls legal
// during capture, which is why callers ask it rather than probing with a
// query or a synchronisation: those would invalidate the capture.
func (s *Stream) CaptureStatus() (int, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	// The status comes back by value (no C.int whose address escapes to
	// the heap): executor/cuda asks on every Run on a caller's stream,
	// which must not allocate.
	st := C.mc_cuStreamCaptureStatus(s.handle())
	if st&3 == 3 {
		return 0, check("cuStreamIsCapturing", st>>2)
	}
	switch st {
	case CaptureNone, CaptureActive, CaptureInvalidated:
		return int(st), nil
	}
	return 0, fmt.Errorf("cuda: cuStreamIsCapturing: unknown status %d", int(st))
}

// RelaxCaptureMode sets the calling OS thread's stream capture mode to
// relaxed (CU_STREAM_CAPTURE_MODE_RELAXED): its calls, such as a query of
// a stream of its own, neither fail nor invalidate a capture another
// thread runs in global mode (PyTorch's default for torch.cuda.graph),
// which they would otherwise do. For helper threads that never capture
// (the executors' liveness pulse); lock the goroutine to its thread
// first, since the mode is the thread's, and call restore (which puts
// the thread's previous mode back) before unlocking it.
func RelaxCaptureMode() (restore func(), err error) {
	if err := Init(); err != nil {
		return func() {}, err
	}
	mode := C.int(2) // CU_STREAM_CAPTURE_MODE_RELAXED; the previous mode comes back in it
	if err := check("cuThreadExchangeStreamCaptureMode", C.mc_cuThreadExchangeStreamCaptureMode(&mode)); err != nil {
		return func() {}, err
	}
	return func() { C.mc_cuThreadExchangeStreamCaptureMode(&mode) }, nil
}

// beginCaptureGlobal starts a capture on s in global mode, as
// torch.cuda.graph does by default (BeginCapture is thread-local): for
// the test that a relaxed helper thread leaves such a capture valid.
func (s *Stream) beginCaptureGlobal() error {
	return liveCall(s.live, "cuStreamBeginCapture", func() C.int { return C.mc_cuStreamBeginCapture(s.h, 0) })
}

// Handle is the CUstream s stands for (0 for nil, the legacy default
// stream): what a C caller passes as a stream.
func (s *Stream) Handle() uintptr {
	if s == nil {
		return 0
	}
	return uintptr(s.h)
}
