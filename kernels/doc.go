// Package kernels owns the CUDA C++ sources of the generic executor kernel
// and the byte layout of what the host hands it: per-block op tables, the
// launch arguments, channel ends and watchdog records.
//
// The sources are embedded and compiled at run time with NVRTC by
// executor/cuda; they use no CUDA header (half and bfloat16 conversions and
// memory-ordering primitives are inline PTX), so NVRTC 11.8 without the
// toolkit and NVRTC 13 both build them. The op enum of the kernel is
// generated from the ir op table (Source prepends it), so the device and
// the plan format cannot drift apart.
//
// kernels knows nothing about plans beyond the op codes and nothing about
// the driver: it must not import executor/ or runtime/ outside tests.
package kernels
