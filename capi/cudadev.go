package main

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/msccl-go/msccl-go"
	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/runtime/cuda"
)

// parseDevice splits "cuda:N" (the GPU of ordinal N, as PyTorch names
// it) into "cuda" and "N"; other names pass through for msccl.OpenComm
// to judge.
func parseDevice(device string) (name, ordinal string, err error) {
	name, ordinal, ok := strings.Cut(device, ":")
	if !ok || name != "cuda" {
		return device, "", nil
	}
	if n, err := strconv.Atoi(ordinal); err != nil || n < 0 {
		return "", "", invalid("device %q: want cuda, or cuda:N with N a device ordinal", device)
	}
	return name, ordinal, nil
}

// cudaOptions sets the GPU a cuda communicator opens: ordinal, or ""
// for the runtime's choice (MSCCL_CUDA_DEVICE, else the local rank's).
func cudaOptions(opt msccl.CommOptions, ordinal string) msccl.CommOptions {
	opt.CUDADevice = ordinal
	return opt
}

// newCUDADevice is the cuda device of communicator c for runCUDA: its
// plans run by msccl.RankExec (executor/cuda's one-rank-per-process
// executor), its stream work by the driver.
func newCUDADevice(c *msccl.RankComm) (cudaDevice, error) {
	return rankDevice{c: c}, nil
}

type rankDevice struct {
	driverOps
	c *msccl.RankComm
}

func (d rankDevice) Open(ctx context.Context, p *ir.Plan, size int64) (cudaExec, error) {
	in, out, err := p.BufferBytes(size)
	if err != nil {
		return nil, err
	}
	ex, err := d.c.Open(ctx, p, msccl.Options{})
	if err != nil {
		return nil, err
	}
	b, err := ex.Alloc(ctx, size)
	if err != nil {
		ex.Close()
		return nil, err
	}
	return &rankExec{ex: ex, b: b, in: in, out: out}, nil
}

// rankExec adapts a RankExec and its buffers at one size to cudaExec:
// RankExec.Prepare binds, RankExec.Enqueue launches on the caller's
// stream without waiting.
type rankExec struct {
	ex      *msccl.RankExec
	b       *msccl.RankBuffers
	in, out int64
}

func (x *rankExec) Input() uint64   { return uint64(x.b.InputPtr()) }
func (x *rankExec) Output() uint64  { return uint64(x.b.OutputPtr()) }
func (x *rankExec) InBytes() int64  { return x.in }
func (x *rankExec) OutBytes() int64 { return x.out }

func (x *rankExec) Prepare(dt ir.DType, red ir.ReduceOp) error {
	return x.ex.Prepare(x.b, dt, red)
}

func (x *rankExec) Enqueue(dt ir.DType, red ir.ReduceOp, stream uintptr) error {
	return x.ex.Enqueue(x.b, dt, red, stream)
}

// Close frees the buffers and the plan's channels (both collective on
// the cuda device: every rank closes its plans in the same order).
func (x *rankExec) Close() error {
	return errors.Join(x.b.Free(), x.ex.Close())
}

// driverOps are the stream operations of the real device, on streams
// borrowed from the caller.
type driverOps struct{}

func (driverOps) CaptureStatus(stream uintptr) (int, error) {
	return cuda.StreamOf(stream).CaptureStatus()
}

func (driverOps) Copy(dst, src uint64, n int64, stream uintptr) error {
	return cuda.MemcpyAsync(cuda.DevicePtr(dst), cuda.DevicePtr(src), n, cuda.StreamOf(stream))
}
