package msccl

import (
	"context"
	"fmt"

	cudaexec "github.com/msccl-go/msccl-go/executor/cuda"
	"github.com/msccl-go/msccl-go/executor/host"
	"github.com/msccl-go/msccl-go/internal/diag"
	"github.com/msccl-go/msccl-go/runtime/cuda"
)

// rankExecutor is one rank's executor of one plan on its device: the
// host executor on the cpu device (hostRank), the CUDA rank executor on
// the cuda device (cudaRank). Each takes only buffers it allocated and
// refuses the other device's with an error naming both.
type rankExecutor interface {
	alloc(ctx context.Context, size int64) (rankBuffers, error)
	run(ctx context.Context, b rankBuffers, dt DType, red ReduceOp) error
	start(ctx context.Context, b rankBuffers, dt DType, red ReduceOp) error
	prepare(b rankBuffers, dt DType, red ReduceOp) error
	enqueue(b rankBuffers, dt DType, red ReduceOp, stream uintptr) error
	wait() error
	close() error
}

// rankBuffers are one rank's buffers on its device. Host memory is the
// cpu device's (input/output; nil on cuda), device pointers the cuda
// device's (0 on cpu).
type rankBuffers interface {
	input() []byte
	output() []byte
	inputPtr() cuda.DevicePtr
	outputPtr() cuda.DevicePtr
	setInput(data []byte) error
	outputOf(r int) ([]byte, error)
	size() int64
	free() error
}

// hostRank is a RankExec on the cpu device: executor/host runs the
// rank's blocks on CPU threads over shared memory, synchronously.
type hostRank struct{ ex *host.Executor }

// hostBufs are a hostRank's buffers: shared memory the caller reads and
// writes in place.
type hostBufs struct{ *host.Buffers }

// cudaRank is a RankExec on the cuda device; ll is the LL packet width
// of every launch (fixed at Open, as the host executor's is).
type cudaRank struct {
	ex *cudaexec.RankExecutor
	ll int
}

// cudaBufs are a cudaRank's buffers: device memory behind pointers.
type cudaBufs struct{ *cudaexec.RankBuffers }

// wrongDevice refuses buffers allocated by the other device's executor.
func wrongDevice(what, dev, other string) error {
	return fmt.Errorf("msccl: %s on the %s device with buffers of the %s device", what, dev, other)
}

func (x hostRank) alloc(ctx context.Context, size int64) (rankBuffers, error) {
	b, err := x.ex.Alloc(ctx, size)
	if err != nil {
		return nil, err
	}
	return hostBufs{b}, nil
}

func (x hostRank) run(ctx context.Context, b rankBuffers, dt DType, red ReduceOp) error {
	h, ok := b.(hostBufs)
	if !ok {
		return wrongDevice("Run", "cpu", "cuda")
	}
	return x.ex.Run(ctx, h.Buffers, dt, red)
}

// start is run: the cpu device has no queue to leave the work on.
func (x hostRank) start(ctx context.Context, b rankBuffers, dt DType, red ReduceOp) error {
	return x.run(ctx, b, dt, red)
}

func (hostRank) prepare(rankBuffers, DType, ReduceOp) error { return nil }

func (hostRank) enqueue(rankBuffers, DType, ReduceOp, uintptr) error {
	return diag.Errorc(diag.CodeUnsupported, "msccl: Enqueue on a stream needs the cuda device; the cpu device runs collectives with Run")
}

func (hostRank) wait() error    { return nil }
func (x hostRank) close() error { return x.ex.Close() }

func (b hostBufs) input() []byte                  { return b.Input() }
func (b hostBufs) output() []byte                 { return b.Output() }
func (hostBufs) inputPtr() cuda.DevicePtr         { return 0 }
func (hostBufs) outputPtr() cuda.DevicePtr        { return 0 }
func (b hostBufs) outputOf(r int) ([]byte, error) { return b.OutputOf(r) }
func (b hostBufs) size() int64                    { return b.Size() }
func (b hostBufs) free() error                    { return b.Free() }

func (b hostBufs) setInput(data []byte) error {
	in := b.Input()
	if len(data) != len(in) {
		return diag.Errorc(diag.CodeSizeRefused, "msccl: input of %d bytes, the buffers hold %d", len(data), len(in))
	}
	copy(in, data)
	return nil
}

func (x cudaRank) alloc(ctx context.Context, size int64) (rankBuffers, error) {
	b, err := x.ex.Alloc(ctx, size)
	if err != nil {
		return nil, err
	}
	return cudaBufs{b}, nil
}

// gpuBufs is b as the cuda device's buffers, or an error for what.
func gpuBufs(what string, b rankBuffers) (*cudaexec.RankBuffers, error) {
	g, ok := b.(cudaBufs)
	if !ok {
		return nil, wrongDevice(what, "cuda", "cpu")
	}
	return g.RankBuffers, nil
}

func (x cudaRank) run(ctx context.Context, b rankBuffers, dt DType, red ReduceOp) error {
	g, err := gpuBufs("Run", b)
	if err != nil {
		return err
	}
	return x.ex.Run(ctx, g, dt, red, x.ll)
}

func (x cudaRank) start(ctx context.Context, b rankBuffers, dt DType, red ReduceOp) error {
	g, err := gpuBufs("Start", b)
	if err != nil {
		return err
	}
	return x.ex.Start(ctx, g, dt, red, x.ll)
}

func (x cudaRank) prepare(b rankBuffers, dt DType, red ReduceOp) error {
	g, err := gpuBufs("Prepare", b)
	if err != nil {
		return err
	}
	return x.ex.Prepare(g, dt, red, x.ll)
}

func (x cudaRank) enqueue(b rankBuffers, dt DType, red ReduceOp, stream uintptr) error {
	g, err := gpuBufs("Enqueue", b)
	if err != nil {
		return err
	}
	return x.ex.Enqueue(g, dt, red, x.ll, cuda.StreamOf(stream))
}

func (x cudaRank) wait() error  { return x.ex.Wait() }
func (x cudaRank) close() error { return x.ex.Close() }

func (cudaBufs) input() []byte                    { return nil }
func (cudaBufs) output() []byte                   { return nil }
func (b cudaBufs) inputPtr() cuda.DevicePtr       { return b.Input() }
func (b cudaBufs) outputPtr() cuda.DevicePtr      { return b.Output() }
func (b cudaBufs) setInput(data []byte) error     { return b.SetInput(data) }
func (b cudaBufs) outputOf(r int) ([]byte, error) { return b.OutputOf(r) }
func (b cudaBufs) size() int64                    { return b.Size() }
func (b cudaBufs) free() error                    { return b.Free() }
