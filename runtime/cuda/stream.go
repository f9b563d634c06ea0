package cuda

/*
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"
)

// Stream is a CUDA stream. A nil *Stream means the legacy default stream
// wherever a stream is an argument.
type Stream struct {
	h  C.uintptr_t
	mu sync.Mutex // guards wv, the lazily loaded WriteValue64 fallback
	wv *Function
}

func (s *Stream) handle() C.uintptr_t {
	if s == nil {
		return 0
	}
	return s.h
}

func (s *Stream) live(call string) error {
	return liveHandle(call, s == nil || s.h == 0, "destroyed stream")
}

// liveHandle is the check before every call on a handle (stream, event,
// module): the driver is loaded, and the handle is not gone (nil or
// released; what says which, as in "destroyed stream"), so a use after
// Destroy is an error naming the call instead of a driver crash.
func liveHandle(call string, gone bool, what string) error {
	if err := Init(); err != nil {
		return err
	}
	if gone {
		return fmt.Errorf("cuda: %s: nil or %s", call, what)
	}
	return nil
}

// liveCall is a driver call on a handle: live's check first (liveHandle),
// then the call f makes, both under the one name call, so that an error
// names the same call whichever of them fails.
func liveCall(live func(call string) error, call string, f func() C.int) error {
	if err := live(call); err != nil {
		return err
	}
	return check(call, f())
}

// NewStream creates a stream. A non-blocking stream (CU_STREAM_NON_BLOCKING)
// does not synchronize with the legacy default stream, which is what
// concurrently running ranks on one GPU need.
func NewStream(nonBlocking bool) (*Stream, error) {
	if err := Init(); err != nil {
		return nil, err
	}
	flags := C.uint(0)
	if nonBlocking {
		flags = 1
	}
	var h C.uintptr_t
	if err := check("cuStreamCreate", C.mc_cuStreamCreate(&h, flags)); err != nil {
		return nil, err
	}
	return &Stream{h: h}, nil
}

// Synchronize waits until all work on s is done.
func (s *Stream) Synchronize() error {
	if err := Init(); err != nil {
		return err
	}
	return check("cuStreamSynchronize", C.mc_cuStreamSynchronize(s.handle()))
}

// Query reports whether all work on s is done, without blocking.
func (s *Stream) Query() (done bool, err error) {
	if err := Init(); err != nil {
		return false, err
	}
	r := C.mc_cuStreamQuery(s.handle())
	if r == ErrorNotReady {
		return false, nil
	}
	if err := check("cuStreamQuery", r); err != nil {
		return false, err
	}
	return true, nil
}

// Destroy releases the stream; work already queued still completes.
func (s *Stream) Destroy() error {
	if err := s.live("cuStreamDestroy"); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.h == 0 { // destroyed by a concurrent call since live
		return errors.New("cuda: cuStreamDestroy: nil or destroyed stream")
	}
	if s.wv != nil {
		s.wv.mod.Unload()
		s.wv = nil
	}
	err := check("cuStreamDestroy", C.mc_cuStreamDestroy(s.h))
	s.h = 0
	return err
}

// MemcpyAsync copies n bytes between any two addresses of the unified
// address space (device, mapped host, peer, IPC-opened) on stream s.
func MemcpyAsync(dst, src DevicePtr, n int64, s *Stream) error {
	if err := Init(); err != nil {
		return err
	}
	if err := badSize("cuMemcpyAsync", n); err != nil || n == 0 {
		return err
	}
	return check("cuMemcpyAsync", C.mc_cuMemcpyAsync(C.uint64_t(dst), C.uint64_t(src), C.size_t(n), s.handle()))
}

// MemcpyHtoDAsync copies n bytes from host memory at src. src must stay
// valid until the copy has run; for asynchrony it must be pinned (HostMem),
// otherwise the driver stages it and the call returns only once it is read.
// Go memory must not be passed here: the garbage collector may move or free
// it while the copy is queued.
func MemcpyHtoDAsync(dst DevicePtr, src unsafe.Pointer, n int64, s *Stream) error {
	if err := Init(); err != nil {
		return err
	}
	if err := badSize("cuMemcpyHtoDAsync", n); err != nil || n == 0 {
		return err
	}
	if src == nil {
		return errors.New("cuda: cuMemcpyHtoDAsync: nil source")
	}
	return check("cuMemcpyHtoDAsync", C.mc_cuMemcpyHtoDAsync(C.uint64_t(dst), src, C.size_t(n), s.handle()))
}

// WaitValue64 makes s wait until the 64-bit word at addr (device memory
// or mapped host memory, 8-byte aligned) is at least v
// (cuStreamWaitValue64 with CU_STREAM_WAIT_VALUE_GEQ).
func (s *Stream) WaitValue64(addr DevicePtr, v uint64) error {
	if err := Init(); err != nil {
		return err
	}
	if addr%8 != 0 {
		return fmt.Errorf("cuda: WaitValue64: address %#x is not 8-byte aligned", uint64(addr))
	}
	return check("cuStreamWaitValue64", C.mc_cuStreamWaitValue64(s.handle(), C.uint64_t(addr), C.uint64_t(v)))
}

// WriteValue64 enqueues a 64-bit store of v to addr (8-byte aligned) on s,
// ordered after earlier work on s: the host proxy uses it to publish a
// token to a kernel waiting on it. It uses cuStreamWriteValue64; where the
// driver lacks or refuses stream memory operations it launches a one-thread
// kernel that does the store, which keeps the same ordering and needs no
// host buffer that must outlive the call.
func (s *Stream) WriteValue64(addr DevicePtr, v uint64) error {
	if err := Init(); err != nil {
		return err
	}
	if addr%8 != 0 {
		return fmt.Errorf("cuda: WriteValue64: address %#x is not 8-byte aligned", uint64(addr))
	}
	r := C.mc_cuStreamWriteValue64(s.handle(), C.uint64_t(addr), C.uint64_t(v))
	if r != CodeMissingSymbol && r != ErrorNotSupported {
		return check("cuStreamWriteValue64", r)
	}
	f, err := s.writeValueKernel()
	if err != nil {
		return err
	}
	a, val := uint64(addr), v
	return f.Launch([3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0, s, unsafe.Pointer(&a), unsafe.Pointer(&val))
}

// writeValuePTX stores one u64 with release semantics at system scope, as
// a stream memory operation would.
const writeValuePTX = `.version 7.0
.target sm_70
.address_size 64
.visible .entry msccl_write_value64(.param .u64 addr, .param .u64 val)
{
	.reg .b64 %rd<3>;
	ld.param.u64 %rd1, [addr];
	ld.param.u64 %rd2, [val];
	fence.sc.sys;
	st.volatile.u64 [%rd1], %rd2;
	ret;
}
`

func (s *Stream) writeValueKernel() (*Function, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.wv != nil {
		return s.wv, nil
	}
	m, err := LoadModule([]byte(writeValuePTX))
	if err != nil {
		return nil, err
	}
	f, err := m.Function("msccl_write_value64")
	if err != nil {
		m.Unload()
		return nil, err
	}
	s.wv = f
	return f, nil
}

// WaitEvent makes later work on s wait until e has completed.
func (s *Stream) WaitEvent(e *Event) error {
	return liveCall(e.live, "cuStreamWaitEvent", func() C.int { return C.mc_cuStreamWaitEvent(s.handle(), e.h) })
}

// Event is a CUDA event.
type Event struct{ h C.uintptr_t }

func (e *Event) live(call string) error {
	return liveHandle(call, e == nil || e.h == 0, "destroyed event")
}

// NewEvent creates an event; timing=false (CU_EVENT_DISABLE_TIMING) makes
// record and wait cheaper when only ordering is wanted.
func NewEvent(timing bool) (*Event, error) {
	if err := Init(); err != nil {
		return nil, err
	}
	flags := C.uint(0)
	if !timing {
		flags = 2
	}
	var h C.uintptr_t
	if err := check("cuEventCreate", C.mc_cuEventCreate(&h, flags)); err != nil {
		return nil, err
	}
	return &Event{h: h}, nil
}

// Record captures the work queued on s so far.
func (e *Event) Record(s *Stream) error {
	return liveCall(e.live, "cuEventRecord", func() C.int { return C.mc_cuEventRecord(e.h, s.handle()) })
}

// Query reports whether the recorded work is done, without waiting.
func (e *Event) Query() (bool, error) {
	if err := e.live("cuEventQuery"); err != nil {
		return false, err
	}
	r := C.mc_cuEventQuery(e.h)
	if r == ErrorNotReady {
		return false, nil
	}
	return r == 0, check("cuEventQuery", r)
}

// Synchronize waits until the recorded work is done.
func (e *Event) Synchronize() error {
	return liveCall(e.live, "cuEventSynchronize", func() C.int { return C.mc_cuEventSynchronize(e.h) })
}

// Elapsed returns the time between two completed, timing-enabled events.
func Elapsed(start, end *Event) (ms float32, err error) {
	if err := start.live("cuEventElapsedTime"); err != nil {
		return 0, err
	}
	if err := end.live("cuEventElapsedTime"); err != nil {
		return 0, err
	}
	var v C.float
	if err := check("cuEventElapsedTime", C.mc_cuEventElapsedTime(&v, start.h, end.h)); err != nil {
		return 0, err
	}
	return float32(v), nil
}

// Destroy releases the event.
func (e *Event) Destroy() error {
	return liveCall(e.live, "cuEventDestroy", func() C.int {
		r := C.mc_cuEventDestroy(e.h)
		e.h = 0
		return r
	})
}

// Graph is a captured CUDA graph; GraphExec its instantiated, launchable form.
type Graph struct{ h C.uintptr_t }

// GraphExec is an instantiated graph.
type GraphExec struct{ h C.uintptr_t }

// BeginCapture starts capturing work queued on s into a graph. The mode is
// CU_STREAM_CAPTURE_MODE_THREAD_LOCAL: only this OS thread's unsafe calls
// (synchronous copies, ...) are refused during capture, so other goroutines
// using CUDA on other threads are unaffected. Lock the OS thread between
// BeginCapture and EndCapture.
func (s *Stream) BeginCapture() error {
	return liveCall(s.live, "cuStreamBeginCapture", func() C.int { return C.mc_cuStreamBeginCapture(s.h, 1) })
}

// EndCapture ends the capture and returns the graph.
func (s *Stream) EndCapture() (*Graph, error) {
	var g C.uintptr_t
	if err := liveCall(s.live, "cuStreamEndCapture", func() C.int { return C.mc_cuStreamEndCapture(s.h, &g) }); err != nil {
		return nil, err
	}
	return &Graph{h: g}, nil
}

func (g *Graph) live(call string) error {
	return liveHandle(call, g == nil || g.h == 0, "destroyed graph")
}

func (ge *GraphExec) live(call string) error {
	return liveHandle(call, ge == nil || ge.h == 0, "destroyed graph exec")
}

// Instantiate builds an executable graph.
func (g *Graph) Instantiate() (*GraphExec, error) {
	var ge C.uintptr_t
	if err := liveCall(g.live, "cuGraphInstantiate", func() C.int { return C.mc_cuGraphInstantiate(&ge, g.h) }); err != nil {
		return nil, err
	}
	return &GraphExec{h: ge}, nil
}

// Launch replays the graph on s.
func (ge *GraphExec) Launch(s *Stream) error {
	return liveCall(ge.live, "cuGraphLaunch", func() C.int { return C.mc_cuGraphLaunch(ge.h, s.handle()) })
}

// Destroy releases the graph (instantiated forms stay valid).
func (g *Graph) Destroy() error {
	return liveCall(g.live, "cuGraphDestroy", func() C.int {
		r := C.mc_cuGraphDestroy(g.h)
		g.h = 0
		return r
	})
}

// Destroy releases the executable graph.
func (ge *GraphExec) Destroy() error {
	return liveCall(ge.live, "cuGraphExecDestroy", func() C.int {
		r := C.mc_cuGraphExecDestroy(ge.h)
		ge.h = 0
		return r
	})
}
