// shim.c: libcuda.so.1 loaded with dlopen, one wrapper per driver call.
//
// Symbols are looked up by their versioned names first (cuMemAlloc_v2, ...):
// the unversioned names are the CUDA 3.x ABI kept for old binaries, and
// calling them with 64-bit sizes is wrong. Each entry lists the names to try
// in order; a call whose symbol was not found returns MC_MISSING.
#include <dlfcn.h>
#include <stdint.h>
#include <stddef.h>
#include <string.h>

#include "shim.h"

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef void *CUstream;
typedef void *CUevent;
typedef void *CUmodule;
typedef void *CUfunction;
typedef void *CUgraph;
typedef void *CUgraphExec;
typedef unsigned long long CUdeviceptr;
typedef struct { char reserved[64]; } CUipcMemHandle;

// Virtual memory management (CUDA 10.2+), as cuda.h lays it out.
typedef unsigned long long CUmemGenericAllocationHandle;
typedef struct {
  int type;  // CUmemLocationType: 1 = device
  int id;
} CUmemLocation;
typedef struct {
  int type;                  // CUmemAllocationType: 1 = pinned
  int requestedHandleTypes;  // CUmemAllocationHandleType: 1 = POSIX fd
  CUmemLocation location;
  void *win32HandleMetaData;
  struct {
    unsigned char compressionType;
    unsigned char gpuDirectRDMACapable;
    unsigned short usage;
    unsigned char reserved[4];
  } allocFlags;
} CUmemAllocationProp;
typedef struct {
  CUmemLocation location;
  int flags;  // CUmemAccess_flags: 3 = read and write
} CUmemAccessDesc;

// CUjit_option values from cuda.h.
enum {
  CU_JIT_INFO_LOG_BUFFER = 3,
  CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4,
  CU_JIT_ERROR_LOG_BUFFER = 5,
  CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
};

#define DECL(name, ret, args) \
  typedef ret(*name##_fn) args;  \
  static name##_fn p_##name;

DECL(cuInit, CUresult, (unsigned))
DECL(cuDriverGetVersion, CUresult, (int *))
DECL(cuGetErrorName, CUresult, (CUresult, const char **))
DECL(cuGetErrorString, CUresult, (CUresult, const char **))
DECL(cuDeviceGetCount, CUresult, (int *))
DECL(cuDeviceGet, CUresult, (CUdevice *, int))
DECL(cuDeviceGetName, CUresult, (char *, int, CUdevice))
DECL(cuDeviceGetAttribute, CUresult, (int *, int, CUdevice))
DECL(cuDeviceCanAccessPeer, CUresult, (int *, CUdevice, CUdevice))
DECL(cuDevicePrimaryCtxRetain, CUresult, (CUcontext *, CUdevice))
DECL(cuDevicePrimaryCtxRelease, CUresult, (CUdevice))
DECL(cuCtxSetCurrent, CUresult, (CUcontext))
DECL(cuCtxGetCurrent, CUresult, (CUcontext *))
DECL(cuCtxSynchronize, CUresult, (void))
DECL(cuCtxEnablePeerAccess, CUresult, (CUcontext, unsigned))
DECL(cuCtxCreate, CUresult, (CUcontext *, unsigned, CUdevice))
DECL(cuCtxCreate4, CUresult, (CUcontext *, void *, unsigned, CUdevice))
DECL(cuCtxDestroy, CUresult, (CUcontext))
DECL(cuMemcpyPeerAsync, CUresult, (CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t, CUstream))
DECL(cuMemAlloc, CUresult, (CUdeviceptr *, size_t))
DECL(cuMemFree, CUresult, (CUdeviceptr))
DECL(cuMemcpyHtoD, CUresult, (CUdeviceptr, const void *, size_t))
DECL(cuMemcpyDtoH, CUresult, (void *, CUdeviceptr, size_t))
DECL(cuMemcpyDtoD, CUresult, (CUdeviceptr, CUdeviceptr, size_t))
DECL(cuMemsetD8, CUresult, (CUdeviceptr, unsigned char, size_t))
DECL(cuMemHostAlloc, CUresult, (void **, size_t, unsigned))
DECL(cuMemFreeHost, CUresult, (void *))
DECL(cuMemHostGetDevicePointer, CUresult, (CUdeviceptr *, void *, unsigned))
DECL(cuMemcpyAsync, CUresult, (CUdeviceptr, CUdeviceptr, size_t, CUstream))
DECL(cuMemcpyHtoDAsync, CUresult, (CUdeviceptr, const void *, size_t, CUstream))
DECL(cuStreamCreate, CUresult, (CUstream *, unsigned))
DECL(cuStreamSynchronize, CUresult, (CUstream))
DECL(cuStreamQuery, CUresult, (CUstream))
DECL(cuStreamDestroy, CUresult, (CUstream))
DECL(cuStreamWriteValue64, CUresult, (CUstream, CUdeviceptr, uint64_t, unsigned))
DECL(cuStreamWaitEvent, CUresult, (CUstream, CUevent, unsigned))
DECL(cuStreamWaitValue64, CUresult, (CUstream, CUdeviceptr, uint64_t, unsigned))
DECL(cuEventCreate, CUresult, (CUevent *, unsigned))
DECL(cuEventRecord, CUresult, (CUevent, CUstream))
DECL(cuEventSynchronize, CUresult, (CUevent))
DECL(cuEventQuery, CUresult, (CUevent))
DECL(cuEventElapsedTime, CUresult, (float *, CUevent, CUevent))
DECL(cuEventDestroy, CUresult, (CUevent))
DECL(cuModuleLoadDataEx, CUresult, (CUmodule *, const void *, unsigned, int *, void **))
DECL(cuModuleGetFunction, CUresult, (CUfunction *, CUmodule, const char *))
DECL(cuModuleGetGlobal, CUresult, (CUdeviceptr *, size_t *, CUmodule, const char *))
DECL(cuModuleUnload, CUresult, (CUmodule))
DECL(cuFuncSetAttribute, CUresult, (CUfunction, int, int))
DECL(cuOccupancyMaxActiveBlocksPerMultiprocessor, CUresult, (int *, CUfunction, int, size_t))
DECL(cuLaunchKernel, CUresult, (CUfunction, unsigned, unsigned, unsigned, unsigned,
                                unsigned, unsigned, unsigned, CUstream, void **, void **))
DECL(cuStreamBeginCapture, CUresult, (CUstream, int))
DECL(cuStreamEndCapture, CUresult, (CUstream, CUgraph *))
DECL(cuStreamIsCapturing, CUresult, (CUstream, int *))
DECL(cuThreadExchangeStreamCaptureMode, CUresult, (int *))
DECL(cuGraphInstantiateWithFlags, CUresult, (CUgraphExec *, CUgraph, unsigned long long))
DECL(cuGraphLaunch, CUresult, (CUgraphExec, CUstream))
DECL(cuGraphDestroy, CUresult, (CUgraph))
DECL(cuGraphExecDestroy, CUresult, (CUgraphExec))
DECL(cuIpcGetMemHandle, CUresult, (CUipcMemHandle *, CUdeviceptr))
DECL(cuIpcOpenMemHandle, CUresult, (CUdeviceptr *, CUipcMemHandle, unsigned))
DECL(cuIpcCloseMemHandle, CUresult, (CUdeviceptr))
DECL(cuMemGetAllocationGranularity, CUresult, (size_t *, const CUmemAllocationProp *, int))
DECL(cuMemCreate, CUresult, (CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long))
DECL(cuMemRelease, CUresult, (CUmemGenericAllocationHandle))
DECL(cuMemExportToShareableHandle, CUresult, (void *, CUmemGenericAllocationHandle, int, unsigned long long))
DECL(cuMemImportFromShareableHandle, CUresult, (CUmemGenericAllocationHandle *, void *, int))
DECL(cuMemAddressReserve, CUresult, (CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long))
DECL(cuMemAddressFree, CUresult, (CUdeviceptr, size_t))
DECL(cuMemMap, CUresult, (CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long))
DECL(cuMemUnmap, CUresult, (CUdeviceptr, size_t))
DECL(cuMemSetAccess, CUresult, (CUdeviceptr, size_t, const CUmemAccessDesc *, size_t))

struct sym {
  void **slot;
  const char *names[4];
};

#define S(name, ...) {(void **)&p_##name, {__VA_ARGS__, NULL}}

static struct sym syms[] = {
    S(cuInit, "cuInit"),
    S(cuDriverGetVersion, "cuDriverGetVersion"),
    S(cuGetErrorName, "cuGetErrorName"),
    S(cuGetErrorString, "cuGetErrorString"),
    S(cuDeviceGetCount, "cuDeviceGetCount"),
    S(cuDeviceGet, "cuDeviceGet"),
    S(cuDeviceGetName, "cuDeviceGetName"),
    S(cuDeviceGetAttribute, "cuDeviceGetAttribute"),
    S(cuDeviceCanAccessPeer, "cuDeviceCanAccessPeer"),
    S(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"),
    S(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"),
    S(cuCtxSetCurrent, "cuCtxSetCurrent"),
    S(cuCtxGetCurrent, "cuCtxGetCurrent"),
    S(cuCtxSynchronize, "cuCtxSynchronize"),
    S(cuCtxEnablePeerAccess, "cuCtxEnablePeerAccess"),
    S(cuCtxCreate, "cuCtxCreate_v2"),
    // CUDA 13 spells cuCtxCreate with a parameter block (NULL: none).
    S(cuCtxCreate4, "cuCtxCreate_v4"),
    S(cuCtxDestroy, "cuCtxDestroy_v2", "cuCtxDestroy"),
    S(cuMemcpyPeerAsync, "cuMemcpyPeerAsync"),
    S(cuMemAlloc, "cuMemAlloc_v2"),
    S(cuMemFree, "cuMemFree_v2"),
    S(cuMemcpyHtoD, "cuMemcpyHtoD_v2"),
    S(cuMemcpyDtoH, "cuMemcpyDtoH_v2"),
    S(cuMemcpyDtoD, "cuMemcpyDtoD_v2"),
    S(cuMemsetD8, "cuMemsetD8_v2"),
    S(cuMemHostAlloc, "cuMemHostAlloc"),
    S(cuMemFreeHost, "cuMemFreeHost"),
    S(cuMemHostGetDevicePointer, "cuMemHostGetDevicePointer_v2"),
    S(cuMemcpyAsync, "cuMemcpyAsync"),
    S(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"),
    S(cuStreamCreate, "cuStreamCreate"),
    S(cuStreamSynchronize, "cuStreamSynchronize"),
    S(cuStreamQuery, "cuStreamQuery"),
    S(cuStreamDestroy, "cuStreamDestroy_v2", "cuStreamDestroy"),
    S(cuStreamWriteValue64, "cuStreamWriteValue64_v2", "cuStreamWriteValue64"),
    S(cuStreamWaitEvent, "cuStreamWaitEvent"),
    S(cuStreamWaitValue64, "cuStreamWaitValue64_v2", "cuStreamWaitValue64"),
    S(cuEventCreate, "cuEventCreate"),
    S(cuEventRecord, "cuEventRecord"),
    S(cuEventSynchronize, "cuEventSynchronize"),
    S(cuEventQuery, "cuEventQuery"),
    S(cuEventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime"),
    S(cuEventDestroy, "cuEventDestroy_v2", "cuEventDestroy"),
    S(cuModuleLoadDataEx, "cuModuleLoadDataEx"),
    S(cuModuleGetFunction, "cuModuleGetFunction"),
    S(cuModuleGetGlobal, "cuModuleGetGlobal_v2"),
    S(cuModuleUnload, "cuModuleUnload"),
    S(cuFuncSetAttribute, "cuFuncSetAttribute"),
    S(cuOccupancyMaxActiveBlocksPerMultiprocessor, "cuOccupancyMaxActiveBlocksPerMultiprocessor"),
    S(cuLaunchKernel, "cuLaunchKernel"),
    S(cuStreamBeginCapture, "cuStreamBeginCapture_v2", "cuStreamBeginCapture"),
    S(cuStreamEndCapture, "cuStreamEndCapture"),
    S(cuStreamIsCapturing, "cuStreamIsCapturing"),
    S(cuThreadExchangeStreamCaptureMode, "cuThreadExchangeStreamCaptureMode"),
    S(cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags"),
    S(cuGraphLaunch, "cuGraphLaunch"),
    S(cuGraphDestroy, "cuGraphDestroy"),
    S(cuGraphExecDestroy, "cuGraphExecDestroy"),
    S(cuIpcGetMemHandle, "cuIpcGetMemHandle"),
    S(cuIpcOpenMemHandle, "cuIpcOpenMemHandle_v2", "cuIpcOpenMemHandle"),
    S(cuIpcCloseMemHandle, "cuIpcCloseMemHandle"),
    S(cuMemGetAllocationGranularity, "cuMemGetAllocationGranularity"),
    S(cuMemCreate, "cuMemCreate"),
    S(cuMemRelease, "cuMemRelease"),
    S(cuMemExportToShareableHandle, "cuMemExportToShareableHandle"),
    S(cuMemImportFromShareableHandle, "cuMemImportFromShareableHandle"),
    S(cuMemAddressReserve, "cuMemAddressReserve"),
    S(cuMemAddressFree, "cuMemAddressFree"),
    S(cuMemMap, "cuMemMap"),
    S(cuMemUnmap, "cuMemUnmap"),
    S(cuMemSetAccess, "cuMemSetAccess"),
};

static void *lib;
static char loaderr[512];

const char *mc_load(void) {
  if (lib) return NULL;
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    // Report why the real soname failed, not the development symlink.
    const char *e = dlerror();
    strncpy(loaderr, e ? e : "dlopen libcuda.so.1 failed", sizeof loaderr - 1);
    h = dlopen("libcuda.so", RTLD_NOW | RTLD_LOCAL);
    if (!h) return loaderr;
  }
  for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
    for (int j = 0; syms[i].names[j]; j++) {
      void *f = dlsym(h, syms[i].names[j]);
      if (f) {
        *syms[i].slot = f;
        break;
      }
    }
  }
  // Without these three nothing else can work or report errors.
  if (!p_cuInit || !p_cuGetErrorName || !p_cuDeviceGetCount) {
    strncpy(loaderr, "libcuda lacks cuInit/cuGetErrorName/cuDeviceGetCount", sizeof loaderr - 1);
    dlclose(h);
    return loaderr;
  }
  lib = h;
  return NULL;
}

int mc_have(const char *sym) {
  for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++)
    for (int j = 0; syms[i].names[j]; j++)
      if (strcmp(syms[i].names[j], sym) == 0) return *syms[i].slot != NULL;
  return 0;
}

static uintptr_t fallback_ctx;

void mc_set_fallback_ctx(uintptr_t ctx) { __atomic_store_n(&fallback_ctx, ctx, __ATOMIC_RELEASE); }

// ensure_ctx makes the fallback context current on this OS thread when the
// thread has none. It runs inside the same cgo call as the driver call that
// needs it, so the goroutine cannot migrate in between.
static void ensure_ctx(void) {
  uintptr_t fb = __atomic_load_n(&fallback_ctx, __ATOMIC_ACQUIRE);
  if (!fb || !p_cuCtxGetCurrent || !p_cuCtxSetCurrent) return;
  CUcontext cur = NULL;
  if (p_cuCtxGetCurrent(&cur) == 0 && cur == NULL) p_cuCtxSetCurrent((CUcontext)fb);
}

#define CALL(name, ...)            \
  do {                             \
    if (!p_##name) return MC_MISSING; \
    return p_##name(__VA_ARGS__);  \
  } while (0)

#define CALLCTX(name, ...)         \
  do {                             \
    if (!p_##name) return MC_MISSING; \
    ensure_ctx();                  \
    return p_##name(__VA_ARGS__);  \
  } while (0)

#define H(x) ((void *)(x))

int mc_cuInit(unsigned flags) { CALL(cuInit, flags); }
int mc_cuDriverGetVersion(int *v) { CALL(cuDriverGetVersion, v); }
int mc_cuGetErrorName(int code, const char **s) { CALL(cuGetErrorName, code, s); }
int mc_cuGetErrorString(int code, const char **s) { CALL(cuGetErrorString, code, s); }
int mc_cuDeviceGetCount(int *n) { CALL(cuDeviceGetCount, n); }
int mc_cuDeviceGet(int *dev, int ordinal) { CALL(cuDeviceGet, dev, ordinal); }
int mc_cuDeviceGetName(char *buf, int len, int dev) { CALL(cuDeviceGetName, buf, len, dev); }
int mc_cuDeviceGetAttribute(int *v, int attr, int dev) { CALL(cuDeviceGetAttribute, v, attr, dev); }
int mc_cuDeviceCanAccessPeer(int *can, int dev, int peer) { CALL(cuDeviceCanAccessPeer, can, dev, peer); }

int mc_cuDevicePrimaryCtxRetain(uintptr_t *ctx, int dev) {
  CALL(cuDevicePrimaryCtxRetain, (CUcontext *)ctx, dev);
}
int mc_cuDevicePrimaryCtxRelease(int dev) { CALL(cuDevicePrimaryCtxRelease, dev); }
int mc_cuCtxSetCurrent(uintptr_t ctx) { CALL(cuCtxSetCurrent, H(ctx)); }
int mc_cuCtxGetCurrent(uintptr_t *ctx) { CALL(cuCtxGetCurrent, (CUcontext *)ctx); }
int mc_cuCtxSynchronize(void) { CALLCTX(cuCtxSynchronize); }

// mc_enablePeer lets context self reach peer's memory. The driver call acts
// on the current context, so self is made current for the call and the
// thread's previous context is restored afterwards.
int mc_enablePeer(uintptr_t self, uintptr_t peer) {
  if (!p_cuCtxEnablePeerAccess || !p_cuCtxGetCurrent || !p_cuCtxSetCurrent) return MC_MISSING;
  CUcontext prev = NULL;
  int r = p_cuCtxGetCurrent(&prev);
  if (r) return r;
  r = p_cuCtxSetCurrent(H(self));
  if (r) return r;
  r = p_cuCtxEnablePeerAccess(H(peer), 0);
  p_cuCtxSetCurrent(prev);
  return r;
}

// mc_cuCtxCreate creates a context of its own on dev and makes it current
// on the calling thread.
int mc_cuCtxCreate(uintptr_t *ctx, int dev) {
  if (p_cuCtxCreate) return p_cuCtxCreate((CUcontext *)ctx, 0, dev);
  if (p_cuCtxCreate4) return p_cuCtxCreate4((CUcontext *)ctx, NULL, 0, dev);
  return MC_MISSING;
}
int mc_cuCtxDestroy(uintptr_t ctx) { CALL(cuCtxDestroy, H(ctx)); }
// No ensure_ctx: the proxy's thread has its own context current.
int mc_cuMemcpyPeerAsync(uint64_t dst, uintptr_t dctx, uint64_t src, uintptr_t sctx, size_t n, uintptr_t s) {
  CALL(cuMemcpyPeerAsync, dst, H(dctx), src, H(sctx), n, H(s));
}

int mc_cuMemAlloc(uint64_t *p, size_t n) { CALLCTX(cuMemAlloc, (CUdeviceptr *)p, n); }
int mc_cuMemFree(uint64_t p) { CALLCTX(cuMemFree, p); }
// The driver's "synchronous" HtoD (from pageable memory), DtoD and memset
// may return before the data has landed, which would race with work that
// later goes to a non-blocking stream. These wrappers finish the legacy
// default stream, where those calls run, so they are synchronous in fact.
static int settle(int r) {
  if (r || !p_cuStreamSynchronize) return r;
  return p_cuStreamSynchronize(NULL);
}
int mc_cuMemcpyHtoD(uint64_t dst, const void *src, size_t n) {
  if (!p_cuMemcpyHtoD) return MC_MISSING;
  ensure_ctx();
  return settle(p_cuMemcpyHtoD(dst, src, n));
}
int mc_cuMemcpyDtoH(void *dst, uint64_t src, size_t n) { CALLCTX(cuMemcpyDtoH, dst, src, n); }
int mc_cuMemcpyDtoD(uint64_t dst, uint64_t src, size_t n) {
  if (!p_cuMemcpyDtoD) return MC_MISSING;
  ensure_ctx();
  return settle(p_cuMemcpyDtoD(dst, src, n));
}
int mc_cuMemsetD8(uint64_t p, unsigned char v, size_t n) {
  if (!p_cuMemsetD8) return MC_MISSING;
  ensure_ctx();
  return settle(p_cuMemsetD8(p, v, n));
}
int mc_cuMemHostAlloc(void **p, size_t n, unsigned flags) { CALLCTX(cuMemHostAlloc, p, n, flags); }
int mc_cuMemFreeHost(void *p) { CALLCTX(cuMemFreeHost, p); }
int mc_cuMemHostGetDevicePointer(uint64_t *d, void *p) {
  CALLCTX(cuMemHostGetDevicePointer, (CUdeviceptr *)d, p, 0);
}
int mc_cuMemcpyAsync(uint64_t dst, uint64_t src, size_t n, uintptr_t s) {
  CALLCTX(cuMemcpyAsync, dst, src, n, H(s));
}
int mc_cuMemcpyHtoDAsync(uint64_t dst, const void *src, size_t n, uintptr_t s) {
  CALLCTX(cuMemcpyHtoDAsync, dst, src, n, H(s));
}

int mc_cuStreamCreate(uintptr_t *s, unsigned flags) { CALLCTX(cuStreamCreate, (CUstream *)s, flags); }
int mc_cuStreamSynchronize(uintptr_t s) { CALLCTX(cuStreamSynchronize, H(s)); }
int mc_cuStreamQuery(uintptr_t s) { CALLCTX(cuStreamQuery, H(s)); }
int mc_cuStreamDestroy(uintptr_t s) { CALLCTX(cuStreamDestroy, H(s)); }
int mc_cuStreamWriteValue64(uintptr_t s, uint64_t addr, uint64_t v) {
  CALLCTX(cuStreamWriteValue64, H(s), addr, v, 0);
}
int mc_cuStreamWaitEvent(uintptr_t s, uintptr_t e) { CALLCTX(cuStreamWaitEvent, H(s), H(e), 0); }
int mc_cuStreamWaitValue64(uintptr_t s, uint64_t addr, uint64_t v) {
  CALLCTX(cuStreamWaitValue64, H(s), addr, v, 0 /* CU_STREAM_WAIT_VALUE_GEQ */);
}

int mc_cuEventCreate(uintptr_t *e, unsigned flags) { CALLCTX(cuEventCreate, (CUevent *)e, flags); }
int mc_cuEventRecord(uintptr_t e, uintptr_t s) { CALLCTX(cuEventRecord, H(e), H(s)); }
int mc_cuEventSynchronize(uintptr_t e) { CALLCTX(cuEventSynchronize, H(e)); }
int mc_cuEventQuery(uintptr_t e) { CALLCTX(cuEventQuery, H(e)); }
int mc_cuEventElapsedTime(float *ms, uintptr_t a, uintptr_t b) {
  CALLCTX(cuEventElapsedTime, ms, H(a), H(b));
}
int mc_cuEventDestroy(uintptr_t e) { CALLCTX(cuEventDestroy, H(e)); }

int mc_cuModuleLoadDataEx(uintptr_t *m, const void *image, char *errlog,
                          size_t errlen, char *infolog, size_t infolen) {
  if (!p_cuModuleLoadDataEx) return MC_MISSING;
  ensure_ctx();
  int opts[4] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                 CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES};
  // Scalar JIT option values travel in the pointer slot itself.
  void *vals[4] = {errlog, (void *)(uintptr_t)errlen, infolog, (void *)(uintptr_t)infolen};
  return p_cuModuleLoadDataEx((CUmodule *)m, image, 4, opts, vals);
}
int mc_cuModuleGetFunction(uintptr_t *f, uintptr_t m, const char *name) {
  CALLCTX(cuModuleGetFunction, (CUfunction *)f, H(m), name);
}
int mc_cuModuleGetGlobal(uint64_t *p, size_t *n, uintptr_t m, const char *name) {
  CALLCTX(cuModuleGetGlobal, (CUdeviceptr *)p, n, H(m), name);
}
int mc_cuModuleUnload(uintptr_t m) { CALLCTX(cuModuleUnload, H(m)); }
int mc_cuFuncSetAttribute(uintptr_t f, int attr, int v) { CALLCTX(cuFuncSetAttribute, H(f), attr, v); }
int mc_cuOccupancyMaxActiveBlocksPerMultiprocessor(int *n, uintptr_t f, int threads, size_t smem) {
  CALLCTX(cuOccupancyMaxActiveBlocksPerMultiprocessor, n, H(f), threads, smem);
}
int mc_cuLaunchKernel(uintptr_t f, unsigned gx, unsigned gy, unsigned gz,
                      unsigned bx, unsigned by, unsigned bz, unsigned shmem,
                      uintptr_t s, void **params) {
  CALLCTX(cuLaunchKernel, H(f), gx, gy, gz, bx, by, bz, shmem, H(s), params, NULL);
}

// mc_cuLaunchKernel1: a kernel whose one parameter is a 64-bit value (a
// device pointer): the parameter array lives on this C stack, so the Go
// side passes no Go memory and allocates nothing per launch.
int mc_cuLaunchKernel1(uintptr_t f, unsigned gx, unsigned gy, unsigned gz,
                       unsigned bx, unsigned by, unsigned bz, unsigned shmem,
                       uintptr_t s, uint64_t arg) {
  void *params[1] = {&arg};
  CALLCTX(cuLaunchKernel, H(f), gx, gy, gz, bx, by, bz, shmem, H(s), params, NULL);
}

int mc_cuStreamBeginCapture(uintptr_t s, int mode) { CALLCTX(cuStreamBeginCapture, H(s), mode); }
int mc_cuStreamEndCapture(uintptr_t s, uintptr_t *g) { CALLCTX(cuStreamEndCapture, H(s), (CUgraph *)g); }
int mc_cuStreamIsCapturing(uintptr_t s, int *status) { CALLCTX(cuStreamIsCapturing, H(s), status); }
// mc_cuStreamCaptureStatus returns the capture status (0-2) on success and
// the driver's result r as r*4+3 otherwise (MC_MISSING stays -1): the
// status comes back by value, so the Go caller passes no pointer and a
// Run on a cached plan allocates nothing.
int mc_cuStreamCaptureStatus(uintptr_t s) {
  int st = 0;
  int r = mc_cuStreamIsCapturing(s, &st);
  return r ? r * 4 + 3 : st;
}
int mc_cuThreadExchangeStreamCaptureMode(int *mode) { CALL(cuThreadExchangeStreamCaptureMode, mode); }
int mc_cuGraphInstantiate(uintptr_t *ge, uintptr_t g) {
  CALLCTX(cuGraphInstantiateWithFlags, (CUgraphExec *)ge, H(g), 0);
}
int mc_cuGraphLaunch(uintptr_t ge, uintptr_t s) { CALLCTX(cuGraphLaunch, H(ge), H(s)); }
int mc_cuGraphDestroy(uintptr_t g) { CALLCTX(cuGraphDestroy, H(g)); }
int mc_cuGraphExecDestroy(uintptr_t ge) { CALLCTX(cuGraphExecDestroy, H(ge)); }

int mc_cuIpcGetMemHandle(unsigned char *h64, uint64_t p) {
  if (!p_cuIpcGetMemHandle) return MC_MISSING;
  ensure_ctx();
  CUipcMemHandle h;
  int r = p_cuIpcGetMemHandle(&h, p);
  if (r == 0) memcpy(h64, h.reserved, 64);
  return r;
}
int mc_cuIpcOpenMemHandle(uint64_t *p, const unsigned char *h64, unsigned flags) {
  if (!p_cuIpcOpenMemHandle) return MC_MISSING;
  ensure_ctx();
  CUipcMemHandle h;
  memcpy(h.reserved, h64, 64);
  return p_cuIpcOpenMemHandle((CUdeviceptr *)p, h, flags);
}
int mc_cuIpcCloseMemHandle(uint64_t p) { CALLCTX(cuIpcCloseMemHandle, p); }

// Virtual-memory allocations shareable as POSIX file descriptors. Each
// helper makes the whole sequence of driver calls, undoes what it did on
// failure and names the failing call in *call (a static string), so Go
// makes one cgo call per operation.
enum { VMM_PINNED = 1, VMM_POSIX_FD = 1, VMM_LOC_DEVICE = 1, VMM_RW = 3 };

static void vmm_prop(CUmemAllocationProp *prop, int dev) {
  memset(prop, 0, sizeof *prop);
  prop->type = VMM_PINNED;
  prop->requestedHandleTypes = VMM_POSIX_FD;
  prop->location.type = VMM_LOC_DEVICE;
  prop->location.id = dev;
}

int mc_vmm_granularity(int dev, size_t *g, const char **call) {
  *call = "cuMemGetAllocationGranularity";
  if (!p_cuMemGetAllocationGranularity) return MC_MISSING;
  ensure_ctx();
  CUmemAllocationProp prop;
  vmm_prop(&prop, dev);
  return p_cuMemGetAllocationGranularity(g, &prop, 0 /* CU_MEM_ALLOC_GRANULARITY_MINIMUM */);
}

// vmm_map reserves an address range for handle h (size bytes, a multiple
// of the granularity), maps it and gives dev read/write access to it.
static int vmm_map(int dev, uint64_t h, size_t size, size_t align, uint64_t *ptr, const char **call) {
  *call = "cuMemAddressReserve";
  if (!p_cuMemAddressReserve || !p_cuMemAddressFree || !p_cuMemMap || !p_cuMemUnmap || !p_cuMemSetAccess) return MC_MISSING;
  CUdeviceptr p = 0;
  int r = p_cuMemAddressReserve(&p, size, align, 0, 0);
  if (r) return r;
  *call = "cuMemMap";
  r = p_cuMemMap(p, size, 0, h, 0);
  if (r) {
    p_cuMemAddressFree(p, size);
    return r;
  }
  CUmemAccessDesc acc;
  memset(&acc, 0, sizeof acc);
  acc.location.type = VMM_LOC_DEVICE;
  acc.location.id = dev;
  acc.flags = VMM_RW;
  *call = "cuMemSetAccess";
  r = p_cuMemSetAccess(p, size, &acc, 1);
  if (r) {
    p_cuMemUnmap(p, size);
    p_cuMemAddressFree(p, size);
    return r;
  }
  *ptr = p;
  return 0;
}

// vmm_map_handle maps a new handle h and hands it out, or releases it.
static int vmm_map_handle(int dev, CUmemGenericAllocationHandle h, size_t size, size_t align, uint64_t *handle,
                          uint64_t *ptr, const char **call) {
  int r = vmm_map(dev, h, size, align, ptr, call);
  if (r) {
    p_cuMemRelease(h);
    return r;
  }
  *handle = h;
  return 0;
}

int mc_vmm_create(int dev, size_t size, size_t align, uint64_t *handle, uint64_t *ptr, const char **call) {
  *call = "cuMemCreate";
  if (!p_cuMemCreate || !p_cuMemRelease) return MC_MISSING;
  ensure_ctx();
  CUmemAllocationProp prop;
  vmm_prop(&prop, dev);
  CUmemGenericAllocationHandle h = 0;
  int r = p_cuMemCreate(&h, size, &prop, 0);
  if (r) return r;
  return vmm_map_handle(dev, h, size, align, handle, ptr, call);
}

int mc_vmm_export(uint64_t handle, int *fd, const char **call) {
  *call = "cuMemExportToShareableHandle";
  if (!p_cuMemExportToShareableHandle) return MC_MISSING;
  ensure_ctx();
  return p_cuMemExportToShareableHandle(fd, handle, VMM_POSIX_FD, 0);
}

int mc_vmm_import(int dev, int fd, size_t size, size_t align, uint64_t *handle, uint64_t *ptr, const char **call) {
  *call = "cuMemImportFromShareableHandle";
  if (!p_cuMemImportFromShareableHandle || !p_cuMemRelease) return MC_MISSING;
  ensure_ctx();
  CUmemGenericAllocationHandle h = 0;
  // The descriptor travels in the pointer argument itself.
  int r = p_cuMemImportFromShareableHandle(&h, (void *)(uintptr_t)fd, VMM_POSIX_FD);
  if (r) return r;
  return vmm_map_handle(dev, h, size, align, handle, ptr, call);
}

// mc_vmm_free unmaps, frees the address range and releases the handle:
// all three are attempted, the first failure is reported.
int mc_vmm_free(uint64_t handle, uint64_t ptr, size_t size, const char **call) {
  *call = "cuMemUnmap";
  if (!p_cuMemUnmap || !p_cuMemAddressFree || !p_cuMemRelease) return MC_MISSING;
  ensure_ctx();
  int first = 0;
  int r = p_cuMemUnmap(ptr, size);
  if (r) first = r;
  r = p_cuMemAddressFree(ptr, size);
  if (r && !first) {
    first = r;
    *call = "cuMemAddressFree";
  }
  r = p_cuMemRelease(handle);
  if (r && !first) {
    first = r;
    *call = "cuMemRelease";
  }
  return first;
}
