// Package kernels owns the CUDA C++ sources of the generic executor kernel
// and the byte layout of what the host hands it: per-block op tables, the
// launch arguments, channel ends and watchdog records.
//
// The sources are embedded and compiled at run time with NVRTC by
// executor/cuda; they use no CUDA header (half and bfloat16 conversions and
// memory-ordering primitives are inline PTX), so NVRTC 11.8 without the
// toolkit and NVRTC 13 both build them. Every code and layout the host and
// the kernel share (op codes from the ir op table, channel and data types
// from ir, reductions, reference flags, FIFO kinds and tag bits, watchdog
// kinds, limits, and the structs' field offsets) is written once in Go
// (abi.go, layout.go) and rendered by `go generate ./kernels` into
// abi.cuh, abi_check.cuh and runtime/cuda/abi.h, so the device, the plan
// format and the proxy cannot drift apart.
//
// The primitives themselves (signal, wait, the port-channel FIFO, LL
// packets, the block copy, the grid barrier) live in the device headers
// of include/msccl, which users' kernels include as well
// (docs/primitives.md): the executor is built on them, TestPTXGolden
// holds its PTX still across changes to them, and the handles a user's
// kernel receives are mirrored in handles.go and asserted by the
// generated handles_check.cuh. fifo.go reads and writes the FIFO from Go.
//
// kernels knows nothing about plans beyond the op codes and nothing about
// the driver: it must not import executor/ or runtime/ outside tests.
package kernels
