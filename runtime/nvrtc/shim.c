// shim.c: libnvrtc through dlopen, and the size-then-copy pairs of the NVRTC
// API folded into single calls that return malloc'd buffers.
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"

typedef void *nvrtcProgram;

static int (*p_nvrtcVersion)(int *, int *);
static const char *(*p_nvrtcGetErrorString)(int);
static int (*p_nvrtcCreateProgram)(nvrtcProgram *, const char *, const char *, int,
                                   const char *const *, const char *const *);
static int (*p_nvrtcCompileProgram)(nvrtcProgram, int, const char *const *);
static int (*p_nvrtcGetProgramLogSize)(nvrtcProgram, size_t *);
static int (*p_nvrtcGetProgramLog)(nvrtcProgram, char *);
static int (*p_nvrtcGetPTXSize)(nvrtcProgram, size_t *);
static int (*p_nvrtcGetPTX)(nvrtcProgram, char *);
static int (*p_nvrtcGetCUBINSize)(nvrtcProgram, size_t *);
static int (*p_nvrtcGetCUBIN)(nvrtcProgram, char *);
static int (*p_nvrtcDestroyProgram)(nvrtcProgram *);

static void *lib;

#define SYM(name) *(void **)&p_##name = dlsym(h, #name)

const char *nv_load(const char *path) {
  if (lib) return NULL;
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *e = dlerror();
    return e ? e : "dlopen failed";
  }
  SYM(nvrtcVersion);
  SYM(nvrtcGetErrorString);
  SYM(nvrtcCreateProgram);
  SYM(nvrtcCompileProgram);
  SYM(nvrtcGetProgramLogSize);
  SYM(nvrtcGetProgramLog);
  SYM(nvrtcGetPTXSize);
  SYM(nvrtcGetPTX);
  SYM(nvrtcGetCUBINSize); // NVRTC 11.1+
  SYM(nvrtcGetCUBIN);
  SYM(nvrtcDestroyProgram);
  if (!p_nvrtcVersion || !p_nvrtcCreateProgram || !p_nvrtcCompileProgram ||
      !p_nvrtcGetProgramLogSize || !p_nvrtcGetProgramLog || !p_nvrtcGetPTXSize ||
      !p_nvrtcGetPTX || !p_nvrtcDestroyProgram) {
    dlclose(h);
    return "library lacks the NVRTC entry points";
  }
  lib = h;
  return NULL;
}

const char *nv_error_string(int r) {
  if (r == NV_MISSING) return "NVRTC_ERROR_SYMBOL_MISSING";
  if (!p_nvrtcGetErrorString) return NULL;
  return p_nvrtcGetErrorString(r);
}

int nv_version(int *major, int *minor) { return p_nvrtcVersion(major, minor); }

int nv_create(uintptr_t *prog, const char *src, const char *name) {
  return p_nvrtcCreateProgram((nvrtcProgram *)prog, src, name, 0, NULL, NULL);
}

int nv_compile(uintptr_t prog, int n, const char **opts) {
  return p_nvrtcCompileProgram((nvrtcProgram)prog, n, (const char *const *)opts);
}

static int fetch(uintptr_t prog, int (*size)(nvrtcProgram, size_t *),
                 int (*get)(nvrtcProgram, char *), char **out, size_t *n) {
  *out = NULL;
  *n = 0;
  if (!size || !get) return NV_MISSING;
  size_t sz = 0;
  int r = size((nvrtcProgram)prog, &sz);
  if (r) return r;
  char *buf = malloc(sz + 1);
  if (!buf) return 1; // NVRTC_ERROR_OUT_OF_MEMORY
  r = get((nvrtcProgram)prog, buf);
  if (r) {
    free(buf);
    return r;
  }
  buf[sz] = 0;
  *out = buf;
  *n = sz;
  return 0;
}

int nv_log(uintptr_t prog, char **out, size_t *n) {
  return fetch(prog, p_nvrtcGetProgramLogSize, p_nvrtcGetProgramLog, out, n);
}
int nv_ptx(uintptr_t prog, char **out, size_t *n) {
  return fetch(prog, p_nvrtcGetPTXSize, p_nvrtcGetPTX, out, n);
}
int nv_cubin(uintptr_t prog, char **out, size_t *n) {
  return fetch(prog, p_nvrtcGetCUBINSize, p_nvrtcGetCUBIN, out, n);
}

int nv_destroy(uintptr_t prog) { return p_nvrtcDestroyProgram((nvrtcProgram *)&prog); }
