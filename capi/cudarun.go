package main

import (
	"context"
	"fmt"
	"runtime"

	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/runtime/cuda"
)

// The cuda device's branch of msccl_comm_run. The caller's tensors are
// device memory (PyTorch's), and its stream is where everything goes:
// stream-ordered device-to-device copies stage the input into the rank's
// registered buffers, the rank's kernel is launched behind them, and the
// output is copied back behind the kernel. Nothing waits on the host, so
// the call is ordered with the caller's other work as any kernel of its
// own would be, and a CUDA graph capture of the stream records it.
//
// Capture forbids allocation, synchronisation and module loading; so
// does a prepared run: buffers, op tables and the kernel are made by
// msccl_comm_prepare or by the first run of a (plan, size, type,
// reduction) outside capture. A capture that reaches an unprepared one is
// refused with an error saying so, before anything is queued.

// cudaExec is one plan opened at one message size on this rank of the
// cuda device: its registered buffers and its launches.
type cudaExec interface {
	// Input and Output are the registered buffers' device addresses,
	// InBytes and OutBytes their lengths (at the size opened).
	Input() uint64
	Output() uint64
	InBytes() int64
	OutBytes() int64
	// Prepare makes what a launch of (dt, red) needs without launching.
	Prepare(dt ir.DType, red ir.ReduceOp) error
	// Enqueue launches the collective on stream, behind the work queued
	// on it, without waiting: with Prepare done, capturable.
	Enqueue(dt ir.DType, red ir.ReduceOp, stream uintptr) error
	Close() error
}

// cudaDevice is what runCUDA needs of this rank's GPU besides the
// executors. The real one is runtime/cuda and executor/cuda's; tests
// substitute host memory.
type cudaDevice interface {
	// Open opens plan p at message size bytes on this rank (collective:
	// every rank opens the same plans at the same sizes in one order).
	Open(ctx context.Context, p *ir.Plan, size int64) (cudaExec, error)
	// CaptureStatus is cuda.Stream.CaptureStatus of stream.
	CaptureStatus(stream uintptr) (int, error)
	// Copy queues an n-byte copy on stream.
	Copy(dst, src uint64, n int64, stream uintptr) error
}

// cudaState is a cuda communicator's opened plans, as commEntry.execs
// is the cpu device's.
type cudaState struct {
	dev   cudaDevice
	execs map[execKey]*cudaEntry
	order []execKey
}

type cudaEntry struct {
	ex    cudaExec
	ready map[readyKey]bool
}

type readyKey struct {
	dt  ir.DType
	red ir.ReduceOp
}

// streamState asks whether stream is being captured; an invalidated
// capture is refused (whatever broke it, queuing more work would hide it).
func (s *cudaState) capturing(stream uintptr) (bool, error) {
	st, err := s.dev.CaptureStatus(stream)
	if err != nil {
		return false, invalid("stream %#x: %v (is it a stream of this process's current CUDA device?)", stream, err)
	}
	switch st {
	case cuda.CaptureActive:
		return true, nil
	case cuda.CaptureInvalidated:
		return false, invalid("stream %#x: its graph capture was invalidated by an earlier call; end the capture", stream)
	}
	return false, nil
}

// entry returns cl's opened plan with (dt, red) prepared, opening and
// preparing on first use unless capturing, when that is refused: the
// capture would record nothing of the allocation and fail on the
// synchronisation.
func (c *commEntry) entry(cl *call, capturing bool) (*cudaEntry, error) {
	s := c.cuda
	rk := readyKey{cl.dt, cl.red}
	x := s.execs[cl.key]
	if x != nil && x.ready[rk] {
		return x, nil
	}
	if capturing {
		return nil, invalid("plan %q (%s) at %d bytes (runs at %d) with %s/%s is not prepared, and CUDA graph capture cannot allocate its buffers or load its kernel: run the collective once, or call prepare with the same tensors, before capturing",
			cl.p.Name, cl.p.Collective, messageSize(cl.p, cl.inBytes, cl.outBytes), cl.key.size, cl.dt, cl.red)
	}
	// Opening and preparing allocate, load and synchronize: relaxed, so
	// that another thread's capture in global mode (torch.cuda.graph's
	// default) is neither refused them nor invalidated by them.
	var x2 *cudaEntry
	err := relaxed(func() error {
		var err error
		x2, err = c.openPrepared(cl, x, rk)
		return err
	})
	return x2, err
}

// openPrepared opens cl's plan when x is nil and prepares (dt, red).
func (c *commEntry) openPrepared(cl *call, x *cudaEntry, rk readyKey) (*cudaEntry, error) {
	s := c.cuda
	if x == nil {
		ex, err := s.dev.Open(context.Background(), cl.p, cl.key.size)
		if err != nil {
			return nil, err
		}
		if ex.InBytes()%cl.pin != 0 || ex.OutBytes()%cl.pout != 0 || ex.InBytes() < cl.inBytes || ex.OutBytes() < cl.outBytes {
			ex.Close()
			return nil, fmt.Errorf("the executor's buffers (%d input, %d output bytes) do not hold %d pieces of %d and %d of %d", ex.InBytes(), ex.OutBytes(), cl.pin, cl.inBytes/cl.pin, cl.pout, cl.outBytes/cl.pout)
		}
		x = &cudaEntry{ex: ex, ready: map[readyKey]bool{}}
		s.execs[cl.key] = x
		s.order = append(s.order, cl.key)
	}
	if err := x.ex.Prepare(cl.dt, cl.red); err != nil {
		return nil, err
	}
	x.ready[rk] = true
	return x, nil
}

func (c *commEntry) prepareCUDA(cl *call) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, err := c.entry(cl, false)
	return err
}

// runCUDA queues cl on stream: copies in, the collective, copies out.
// in and out are the caller's device addresses.
func (c *commEntry) runCUDA(cl *call, in, out uint64, stream uintptr) error {
	s := c.cuda
	c.mu.Lock()
	defer c.mu.Unlock()
	capturing, err := s.capturing(stream)
	if err != nil {
		return err
	}
	x, err := c.entry(cl, capturing)
	if err != nil {
		return err
	}
	for _, sp := range cl.stageIn(x.ex.InBytes()) {
		if err := s.dev.Copy(x.ex.Input()+uint64(sp.dst), in+uint64(sp.src), sp.n, stream); err != nil {
			return fmt.Errorf("staging the input: %w", err)
		}
	}
	if err := x.ex.Enqueue(cl.dt, cl.red, stream); err != nil {
		return err
	}
	for _, sp := range cl.stageOut(x.ex.OutBytes()) {
		if err := s.dev.Copy(out+uint64(sp.dst), x.ex.Output()+uint64(sp.src), sp.n, stream); err != nil {
			return fmt.Errorf("staging the output: %w", err)
		}
	}
	return nil
}

// closeCUDA closes the opened plans, newest first.
func (s *cudaState) close() []string {
	var errs []string
	relaxed(func() error {
		for i := len(s.order) - 1; i >= 0; i-- {
			if err := s.execs[s.order[i]].ex.Close(); err != nil {
				errs = append(errs, err.Error())
			}
		}
		return nil
	})
	s.execs, s.order = nil, nil
	return errs
}

// relaxed runs f with the calling OS thread in relaxed capture mode
// (cuda.RelaxCaptureMode), the executor's driver calls off the capture
// path: ranks that are threads of one process each capture their own
// stream, and a call of one rank's thread that the driver deems unsafe
// during another thread's global-mode capture would fail and invalidate
// that capture. The calls that conflict with any capture whatever
// (cuCtxSynchronize) the executor does not make. Without the driver call
// (or without a driver: the tests' fake device) f runs as it is.
func relaxed(f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if restore, err := cuda.RelaxCaptureMode(); err == nil {
		defer restore()
	}
	return f()
}
