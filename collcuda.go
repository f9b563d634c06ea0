package msccl

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"

	cudaexec "github.com/msccl-go/msccl-go/executor/cuda"
	"github.com/msccl-go/msccl-go/internal/diag"
	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/runtime/cuda"
)

// The cuda device's collectives. The caller's buffers are device memory
// (PyTorch's tensors) and its stream is where everything goes. The
// caller's buffers are staged into the rank's registered ones by
// stream-ordered device-to-device copies ahead of the launch (output:
// behind it). With MSCCL_STAGE=kernel the rank's kernel stages them
// itself (executor/cuda kstage.go): it copies the input into the rank's
// registered input before the plan's ops and the output back after them,
// with the copies passed as a kernel parameter, so a call is one launch;
// an input that a peer's kernel may reach before this rank's has copied
// it, and more spans than the parameter holds, still go by copies.
// Nothing waits on the host, so
// the call is ordered with the caller's other work as a kernel of its
// own would be, and a CUDA graph capture of the stream records it.
//
// Capture forbids allocation, synchronisation and module loading; so
// does a prepared run: buffers, op tables and the kernel are made by
// Prepare or by the first run of a (plan, size, type, reduction) outside
// capture. A capture that reaches an unprepared one is refused with an
// error saying so, before anything is queued.

// gpuOps is what the cuda device needs of the driver and of executor/cuda
// for one rank: the real one is rankGPU; the staging tests substitute host
// memory (collcuda_test.go).
type gpuOps interface {
	// open opens plan p at message size bytes on this rank (collective).
	open(ctx context.Context, p *Plan, size int64) (gpuExec, error)
	// captureStatus is cuda.Stream.CaptureStatus of stream.
	captureStatus(stream uintptr) (int, error)
	// copy queues an n-byte device copy on stream.
	copy(dst, src uint64, n int64, stream uintptr) error
}

// gpuExec is one plan opened at one size on a cuda rank.
type gpuExec interface {
	// input and output are the registered buffers' device addresses,
	// inBytes and outBytes their lengths.
	input() uint64
	output() uint64
	inBytes() int64
	outBytes() int64
	// prepare makes what a launch of (dt, red) needs without launching.
	prepare(dt DType, red ReduceOp) error
	// kernelStage says which staging copies the kernel can make itself:
	// the input's (cudaexec.InputInKernel) and the output's; neither
	// with MSCCL_STAGE=copy.
	kernelStage() (in, out bool)
	// enqueue launches the collective on stream, behind the work queued
	// on it, without waiting, the kernel making st's copies: once
	// prepared, capturable.
	enqueue(dt DType, red ReduceOp, stream uintptr, st cudaexec.Staging) error
	close() error
}

// stageInKernel is the cuda device's staging when MSCCL_STAGE is unset:
// true stages in the kernel, false with copy-engine copies around the
// launch. The kernel's staging has not run on a GPU yet (its oracle test
// is TestGPURankStaged): until it has, the default is the copies, which
// every GPU run so far has checked.
const stageInKernel = false

// stageMode reads MSCCL_STAGE: "kernel" or "copy", or unset for
// stageInKernel.
func stageMode() (kernel bool, err error) {
	switch v := os.Getenv("MSCCL_STAGE"); v {
	case "":
		return stageInKernel, nil
	case "kernel":
		return true, nil
	case "copy":
		return false, nil
	default:
		return false, diag.Errorc(diag.CodeBadOptions, "msccl: MSCCL_STAGE=%q: want kernel (the rank's kernel copies the caller's buffers) or copy (copy-engine copies around the launch)", v)
	}
}

// gpuDevice is the cuda device of a communicator.
type gpuDevice struct{ ops gpuOps }

func (gpuDevice) name() string { return "cuda" }

// capturing asks whether stream is being captured; an invalidated
// capture is refused (whatever broke it, queuing more work would hide it).
func (d gpuDevice) capturing(stream uintptr) (bool, error) {
	st, err := d.ops.captureStatus(stream)
	if err != nil {
		return false, diag.Errorc(diag.CodeBadOptions, "msccl: stream %#x: %v (is it a stream of this process's current CUDA device?)", stream, err)
	}
	switch st {
	case cuda.CaptureActive:
		return true, nil
	case cuda.CaptureInvalidated:
		return false, diag.Errorc(diag.CodeBadOptions, "msccl: stream %#x: its graph capture was invalidated by an earlier call; end the capture", stream)
	}
	return false, nil
}

func (d gpuDevice) copy(dst, src Mem, stream uintptr) error {
	if dst.dev == src.dev {
		return nil
	}
	return d.ops.copy(uint64(dst.dev), uint64(src.dev), src.n, stream)
}

// setup runs f with the calling OS thread in relaxed capture mode
// (cuda.RelaxCaptureMode), the executor's driver calls off the capture
// path: ranks that are threads of one process each capture their own
// stream, and a call of one rank's thread that the driver deems unsafe
// during another thread's global-mode capture (torch.cuda.graph's
// default) would fail and invalidate that capture. The calls that
// conflict with any capture whatever (cuCtxSynchronize) the executor
// does not make. Without the driver call f runs as it is.
func (gpuDevice) setup(f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if restore, err := cuda.RelaxCaptureMode(); err == nil {
		defer restore()
	}
	return f()
}

func (d gpuDevice) open(ctx context.Context, p *Plan, size int64) (collExec, error) {
	x, err := d.ops.open(ctx, p, size)
	if err != nil {
		return nil, err
	}
	return gpuColl{x: x, ops: d.ops}, nil
}

// gpuColl is a gpuExec with the staging copies around its launch.
type gpuColl struct {
	x   gpuExec
	ops gpuOps
}

func (c gpuColl) bytes() (int64, int64)                { return c.x.inBytes(), c.x.outBytes() }
func (c gpuColl) prepare(dt DType, red ReduceOp) error { return c.x.prepare(dt, red) }
func (c gpuColl) close() error                         { return c.x.close() }

func (c gpuColl) run(_ context.Context, dt DType, red ReduceOp, in Mem, ins []ir.Span, out Mem, outs []ir.Span, stream uintptr) error {
	kin, kout := c.x.kernelStage()
	st, before, after := cudaexec.SplitStaging(absSpans(ins, c.x.input(), uint64(in.dev)), absSpans(outs, uint64(out.dev), c.x.output()), kin, kout)
	if err := c.copies(before, stream); err != nil {
		return fmt.Errorf("msccl: staging the input: %w", err)
	}
	if err := c.x.enqueue(dt, red, stream, st); err != nil {
		return err
	}
	if err := c.copies(after, stream); err != nil {
		return fmt.Errorf("msccl: staging the output: %w", err)
	}
	return nil
}

// absSpans are spans between buffers at dst and src, as device addresses.
func absSpans(spans []ir.Span, dst, src uint64) []cudaexec.Span {
	out := make([]cudaexec.Span, len(spans))
	for i, s := range spans {
		out[i] = cudaexec.Span{Dst: dst + uint64(s.Dst), Src: src + uint64(s.Src), N: uint64(s.N)}
	}
	return out
}

// copies queues spans as copy-engine copies on stream.
func (c gpuColl) copies(spans []cudaexec.Span, stream uintptr) error {
	for _, s := range spans {
		if err := c.ops.copy(s.Dst, s.Src, int64(s.N), stream); err != nil {
			return err
		}
	}
	return nil
}

// rankGPU is the real gpuOps: plans run by RankExec (executor/cuda's
// one-rank-per-process executor), stream work by the driver, on streams
// borrowed from the caller.
type rankGPU struct{ rc *RankComm }

func (g rankGPU) open(ctx context.Context, p *Plan, size int64) (gpuExec, error) {
	in, out, err := p.BufferBytes(size)
	if err != nil {
		return nil, err
	}
	kernel, err := stageMode()
	if err != nil {
		return nil, err
	}
	// With kernel staging every launch of the plan runs the kernel's
	// _stage instance; with copies, the plain one RankExec runs.
	ex, err := cudaexec.OpenRank(ctx, g.rc.c, p, cudaexec.Options{StageInKernel: kernel})
	if err != nil {
		return nil, err
	}
	b, err := ex.Alloc(ctx, size)
	if err != nil {
		ex.Close()
		return nil, err
	}
	return &rankGPUExec{ex: ex, b: b, in: in, out: out, kernel: kernel}, nil
}

func (rankGPU) captureStatus(stream uintptr) (int, error) {
	return cuda.StreamOf(stream).CaptureStatus()
}

func (rankGPU) copy(dst, src uint64, n int64, stream uintptr) error {
	return cuda.MemcpyAsync(cuda.DevicePtr(dst), cuda.DevicePtr(src), n, cuda.StreamOf(stream))
}

// rankGPUExec is a rank executor and its buffers at one size: Prepare
// binds, Enqueue or EnqueueStaged launches on the caller's stream without
// waiting. kernel: opened with StageInKernel.
type rankGPUExec struct {
	ex      *cudaexec.RankExecutor
	b       *cudaexec.RankBuffers
	in, out int64
	kernel  bool
}

func (x *rankGPUExec) input() uint64   { return uint64(x.b.Input()) }
func (x *rankGPUExec) output() uint64  { return uint64(x.b.Output()) }
func (x *rankGPUExec) inBytes() int64  { return x.in }
func (x *rankGPUExec) outBytes() int64 { return x.out }

func (x *rankGPUExec) kernelStage() (bool, bool) { return x.ex.InputInKernel(), x.kernel }

// The LL packet width is the executor's default (0), as RankComm.Open's.
func (x *rankGPUExec) prepare(dt DType, red ReduceOp) error { return x.ex.Prepare(x.b, dt, red, 0) }

func (x *rankGPUExec) enqueue(dt DType, red ReduceOp, stream uintptr, st cudaexec.Staging) error {
	if x.kernel {
		return x.ex.EnqueueStaged(x.b, dt, red, 0, cuda.StreamOf(stream), st)
	}
	return x.ex.Enqueue(x.b, dt, red, 0, cuda.StreamOf(stream))
}

// close frees the buffers and the plan's channels (both collective on
// the cuda device).
func (x *rankGPUExec) close() error { return errors.Join(x.b.Free(), x.ex.Close()) }
