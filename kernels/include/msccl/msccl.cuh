// msccl.cuh: the device API of msccl-go for kernels of one's own: memory
// and port channels, semaphores, the grid barrier and LL packets
// (docs/primitives.md). Include it with the include path that
// `msccl-compile env` prints (msccl.CompileKernel passes it to NVRTC).
// It needs no CUDA header, so NVRTC compiles it without a toolkit.
#pragma once
#include "abi.cuh"
#include "common.cuh"
#include "semaphore.cuh"
#include "packet.cuh"
#include "device_syncer.cuh"
#include "port_channel.cuh"
#include "memory_channel.cuh"
#include "handles_check.cuh"
