// shim.h: NVRTC loaded with dlopen. No CUDA header is needed: nvrtcProgram
// is an opaque pointer and nvrtcResult an int.
#ifndef MSCCL_NVRTC_SHIM_H
#define MSCCL_NVRTC_SHIM_H

#include <stddef.h>
#include <stdint.h>

#define NV_MISSING (-1)

// nv_load tries path; NULL on success (or if already loaded), else dlerror.
const char *nv_load(const char *path);
const char *nv_error_string(int r);
int nv_version(int *major, int *minor);
int nv_create(uintptr_t *prog, const char *src, const char *name);
int nv_compile(uintptr_t prog, int n, const char **opts);
int nv_log(uintptr_t prog, char **out, size_t *n);
int nv_ptx(uintptr_t prog, char **out, size_t *n);
int nv_cubin(uintptr_t prog, char **out, size_t *n);
int nv_destroy(uintptr_t prog);

#endif
