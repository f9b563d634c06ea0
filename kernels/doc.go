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
// kernels knows nothing about plans beyond the op codes and nothing about
// the driver: it must not import executor/ or runtime/ outside tests.
package kernels
