// Package nvrtc compiles CUDA C++ to PTX or cubin at run time with NVRTC,
// loaded with dlopen so the project builds and its CPU tests pass without
// CUDA. It owns finding the library, compiling, and the on-disk cache of
// compiled images keyed by source, options and NVRTC version.
//
// It must not load modules or touch devices (that is runtime/cuda) and
// knows nothing about which kernels exist (that is kernels/).
//
// Sources compiled here must not include CUDA headers: Debian's
// libnvrtc11.2 package, which CI installs, ships none (no cuda_fp16.h), so
// kernels do their own half/bf16 conversions with inline PTX.
package nvrtc
