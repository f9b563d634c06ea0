package main

import (
	"strconv"
	"strings"

	"github.com/msccl-go/msccl-go"
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
	_ = ordinal // CommOptions has no GPU choice yet (the cuda device is not in this build).
	return opt
}

// newCUDADevice is the cuda device of communicator c for runCUDA.
func newCUDADevice(c *msccl.RankComm) (cudaDevice, error) {
	return nil, invalid("device cuda: this build of libmsccl has no executor for one rank per process on a GPU")
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
