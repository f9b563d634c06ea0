// shim.h declares the thin C layer between Go and libcuda.so.1.
//
// No CUDA header is included: the few types the driver API needs are
// declared here so the package builds on machines without the CUDA toolkit.
// Every handle crosses into Go as a uintptr_t so that cgo's pointer rules
// never see driver memory as Go pointers.
#ifndef MSCCL_CUDA_SHIM_H
#define MSCCL_CUDA_SHIM_H

#include <stddef.h>
#include <stdint.h>

// MC_MISSING is returned by a wrapper whose symbol the loaded driver does not
// export (older or newer driver than the one this code was written against).
#define MC_MISSING (-1)

// mc_load dlopens libcuda and resolves every symbol. It returns NULL on
// success or a static message naming what failed.
const char *mc_load(void);
int mc_have(const char *sym);

// The fallback context: a thread with no current context gets this one
// before any context-dependent call (see the package doc).
void mc_set_fallback_ctx(uintptr_t ctx);

int mc_cuInit(unsigned flags);
int mc_cuDriverGetVersion(int *v);
int mc_cuGetErrorName(int code, const char **s);
int mc_cuGetErrorString(int code, const char **s);
int mc_cuDeviceGetCount(int *n);
int mc_cuDeviceGet(int *dev, int ordinal);
int mc_cuDeviceGetName(char *buf, int len, int dev);
int mc_cuDeviceGetAttribute(int *v, int attr, int dev);
int mc_cuDeviceCanAccessPeer(int *can, int dev, int peer);

int mc_cuDevicePrimaryCtxRetain(uintptr_t *ctx, int dev);
int mc_cuDevicePrimaryCtxRelease(int dev);
int mc_cuCtxSetCurrent(uintptr_t ctx);
int mc_cuCtxGetCurrent(uintptr_t *ctx);
int mc_cuCtxSynchronize(void);
int mc_enablePeer(uintptr_t self, uintptr_t peer);
int mc_cuCtxCreate(uintptr_t *ctx, int dev);
int mc_cuCtxDestroy(uintptr_t ctx);
int mc_cuMemcpyPeerAsync(uint64_t dst, uintptr_t dctx, uint64_t src, uintptr_t sctx, size_t n, uintptr_t s);

int mc_cuMemAlloc(uint64_t *p, size_t n);
int mc_cuMemFree(uint64_t p);
int mc_cuMemcpyHtoD(uint64_t dst, const void *src, size_t n);
int mc_cuMemcpyDtoH(void *dst, uint64_t src, size_t n);
int mc_cuMemcpyDtoD(uint64_t dst, uint64_t src, size_t n);
int mc_cuMemsetD8(uint64_t p, unsigned char v, size_t n);
int mc_cuMemHostAlloc(void **p, size_t n, unsigned flags);
int mc_cuMemFreeHost(void *p);
int mc_cuMemHostGetDevicePointer(uint64_t *d, void *p);
int mc_cuMemcpyAsync(uint64_t dst, uint64_t src, size_t n, uintptr_t s);
int mc_cuMemcpyHtoDAsync(uint64_t dst, const void *src, size_t n, uintptr_t s);

int mc_cuStreamCreate(uintptr_t *s, unsigned flags);
int mc_cuStreamSynchronize(uintptr_t s);
int mc_cuStreamQuery(uintptr_t s);
int mc_cuStreamDestroy(uintptr_t s);
int mc_cuStreamWriteValue64(uintptr_t s, uint64_t addr, uint64_t v);
int mc_cuStreamWaitEvent(uintptr_t s, uintptr_t e);
int mc_cuStreamWaitValue64(uintptr_t s, uint64_t addr, uint64_t v);

int mc_cuEventCreate(uintptr_t *e, unsigned flags);
int mc_cuEventRecord(uintptr_t e, uintptr_t s);
int mc_cuEventSynchronize(uintptr_t e);
int mc_cuEventQuery(uintptr_t e);
int mc_cuEventElapsedTime(float *ms, uintptr_t a, uintptr_t b);
int mc_cuEventDestroy(uintptr_t e);

int mc_cuModuleLoadDataEx(uintptr_t *m, const void *image, char *errlog,
                          size_t errlen, char *infolog, size_t infolen);
int mc_cuModuleGetFunction(uintptr_t *f, uintptr_t m, const char *name);
int mc_cuModuleGetGlobal(uint64_t *p, size_t *n, uintptr_t m, const char *name);
int mc_cuModuleUnload(uintptr_t m);
int mc_cuFuncSetAttribute(uintptr_t f, int attr, int v);
int mc_cuOccupancyMaxActiveBlocksPerMultiprocessor(int *n, uintptr_t f, int threads, size_t smem);
int mc_cuLaunchKernel(uintptr_t f, unsigned gx, unsigned gy, unsigned gz,
                      unsigned bx, unsigned by, unsigned bz, unsigned shmem,
                      uintptr_t s, void **params);

int mc_cuLaunchKernel1(uintptr_t f, unsigned gx, unsigned gy, unsigned gz,
                       unsigned bx, unsigned by, unsigned bz, unsigned shmem,
                       uintptr_t s, uint64_t arg);

int mc_cuStreamBeginCapture(uintptr_t s, int mode);
int mc_cuStreamEndCapture(uintptr_t s, uintptr_t *g);
int mc_cuStreamIsCapturing(uintptr_t s, int *status);
int mc_cuStreamCaptureStatus(uintptr_t s);
int mc_cuThreadExchangeStreamCaptureMode(int *mode);
int mc_cuGraphInstantiate(uintptr_t *ge, uintptr_t g);
int mc_cuGraphLaunch(uintptr_t ge, uintptr_t s);
int mc_cuGraphDestroy(uintptr_t g);
int mc_cuGraphExecDestroy(uintptr_t ge);

int mc_cuIpcGetMemHandle(unsigned char *h64, uint64_t p);
int mc_cuIpcOpenMemHandle(uint64_t *p, const unsigned char *h64, unsigned flags);
int mc_cuIpcCloseMemHandle(uint64_t p);

// Virtual-memory allocations exported as POSIX file descriptors; *call
// names the driver call that failed.
int mc_vmm_granularity(int dev, size_t *g, const char **call);
int mc_vmm_create(int dev, size_t size, size_t align, uint64_t *handle, uint64_t *ptr, const char **call);
int mc_vmm_export(uint64_t handle, int *fd, const char **call);
int mc_vmm_import(int dev, int fd, size_t size, size_t align, uint64_t *handle, uint64_t *ptr, const char **call);
int mc_vmm_free(uint64_t handle, uint64_t ptr, size_t size, const char **call);

#endif
