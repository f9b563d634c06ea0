/*
 * handover: calls msccl-go does not run, handed to the real NCCL of
 * MSCCL_NCCL_LIB.
 *
 *   handover errors SELF       (cpu device, one process) every way the
 *                              hand-over is refused, each a positioned
 *                              ncclInvalidUsage naming why; SELF is the
 *                              path of libmsccl_nccl.so itself
 *   handover gpu RANK WORLD IDFILE
 *                              (built with nvcc -DWITH_CUDA; cuda device,
 *                              MSCCL_NCCL_LIB the real libnccl.so.2) the
 *                              calls handed over, each result checked
 *
 * The first mismatch or unexpected result prints a line naming it and
 * exits 1.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef WITH_CUDA
#include <cuda_runtime.h>
#endif

#include "nccl.h"

static int rank;

#include "check.h"

/* errors: a world of one rank on the cpu device; a PreMulSum over f64 is
 * not msccl-go's, so it goes to the hand-over, which MSCCL_NCCL_LIB (read
 * at each attempt until a library loads) refuses in turn. */
static int errors(const char *self) {
  ncclComm_t c;
  CHECK(ncclCommInitAll(&c, 1, NULL));
  double x[4] = {1, 2, 3, 4}, two = 2;
  ncclRedOp_t pm;
  CHECK(ncclRedOpCreatePreMulSum(&pm, &two, ncclFloat64, ncclScalarHostImmediate, c));
  unsetenv("MSCCL_NCCL_LIB");
  EXPECT(ncclAllReduce(x, x, 4, ncclFloat64, pm, c, NULL), ncclInvalidUsage, "MSCCL_NCCL_LIB is not set");
  if (!strstr(ncclGetLastError(c), "ncclAllReduce of ncclFloat64")) FAIL("the reason is not named: %s", ncclGetLastError(c));
  setenv("MSCCL_NCCL_LIB", "/nonexistent/libnccl.so.2", 1);
  EXPECT(ncclAllReduce(x, x, 4, ncclFloat64, pm, c, NULL), ncclInvalidUsage, "cannot be loaded: /nonexistent/libnccl.so.2: cannot open");
  setenv("MSCCL_NCCL_LIB", "libm.so.6", 1);
  EXPECT(ncclAllReduce(x, x, 4, ncclFloat64, pm, c, NULL), ncclInvalidUsage, "libm.so.6 is not an NCCL: it has no ncclGetUniqueId");
  setenv("MSCCL_NCCL_LIB", self, 1);
  EXPECT(ncclAllReduce(x, x, 4, ncclFloat64, pm, c, NULL), ncclInvalidUsage, "is libmsccl_nccl itself");
  /* Inside a group: the same refusal at ncclGroupEnd, nothing run. */
  unsetenv("MSCCL_NCCL_LIB");
  CHECK(ncclGroupStart());
  CHECK(ncclAllReduce(x, x, 4, ncclFloat64, pm, c, NULL));
  EXPECT(ncclGroupEnd(), ncclInvalidUsage, "MSCCL_NCCL_LIB is not set");
  if (x[0] != 1 || x[3] != 4) FAIL("a refused call changed its buffer: %g %g", x[0], x[3]);
  /* What msccl-go runs is untouched by the hand-over's state. */
  double y[4] = {1, 2, 3, 4};
  CHECK(ncclAllReduce(y, y, 4, ncclFloat64, ncclSum, c, NULL));
  if (y[2] != 3) FAIL("one-rank f64 sum: %g", y[2]);
  CHECK(ncclRedOpDestroy(pm, c));
  CHECK(ncclCommDestroy(c));
  printf("hand-over refusals checked\n");
  return 0;
}

#ifdef WITH_CUDA
#define CUDACHECK(call)                                                  \
  do {                                                                   \
    cudaError_t e_ = (call);                                             \
    if (e_ != cudaSuccess) FAIL("%s: %s", #call, cudaGetErrorString(e_)); \
  } while (0)

static int world;

/* v is rank q's element i, exact in every type used. */
static double v(int q, size_t i) { return (double)(q * 100 + (int)(i % 61) + 1); }

/* ranks runs one allreduce of n elements of type t (f32, f64, i64) with
 * op on the GPU and checks element by element against want(i). */
static void allreduce(ncclComm_t c, cudaStream_t s, const char *what, size_t n, ncclDataType_t t, ncclRedOp_t op, double (*want)(size_t)) {
  size_t es = t == ncclFloat32 ? 4 : 8;
  char *h = malloc(n * es), *g = malloc(n * es);
  for (size_t i = 0; i < n; i++) {
    double x = v(rank, i);
    if (t == ncclFloat32) ((float *)h)[i] = (float)x;
    else if (t == ncclFloat64) ((double *)h)[i] = x;
    else ((long long *)h)[i] = (long long)x;
  }
  void *d, *o;
  CUDACHECK(cudaMalloc(&d, n * es));
  CUDACHECK(cudaMalloc(&o, n * es));
  CUDACHECK(cudaMemcpy(d, h, n * es, cudaMemcpyHostToDevice));
  CHECK(ncclAllReduce(d, o, n, t, op, c, s));
  CUDACHECK(cudaStreamSynchronize(s));
  CUDACHECK(cudaMemcpy(g, o, n * es, cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < n; i++) {
    double got = t == ncclFloat32 ? ((float *)g)[i] : t == ncclFloat64 ? ((double *)g)[i] : (double)((long long *)g)[i];
    double w = want(i);
    if (fabs(got - w) > 1e-6 * fabs(w)) FAIL("%s: element %zu of %zu is %g, want %g", what, i, n, got, w);
  }
  printf("rank %d: %s, %zu elements: ok\n", rank, what, n);
  CUDACHECK(cudaFree(d));
  CUDACHECK(cudaFree(o));
  free(h);
  free(g);
}

static double sum(size_t i) {
  double s = 0;
  for (int q = 0; q < world; q++) s += v(q, i);
  return s;
}
static double avg(size_t i) { return sum(i) / world; }
static double half(size_t i) { return sum(i) * 0.5; }
static double twice(size_t i) { return sum(i) * 2; }
static double maxv(size_t i) { return v(world - 1, i); }

static int gpu(int argc, char **argv) {
  if (argc != 5) FAIL("usage: handover gpu RANK WORLD IDFILE");
  rank = atoi(argv[2]);
  world = atoi(argv[3]);
  CUDACHECK(cudaSetDevice(0));
  ncclUniqueId id;
  share_id(argv[4], &id);
  ncclComm_t c;
  CHECK(ncclCommInitRank(&c, world, id, rank));
  cudaStream_t s;
  CUDACHECK(cudaStreamCreate(&s));
  size_t sizes[] = {1, 1001, 1 << 20};
  for (int k = 0; k < 3; k++) {
    size_t n = sizes[k];
    float h = 0.5f;
    double two = 2;
    ncclRedOp_t pf, pd;
    CHECK(ncclRedOpCreatePreMulSum(&pf, &h, ncclFloat32, ncclScalarHostImmediate, c));
    h = 7; /* host immediate: the value at creation counts */
    CHECK(ncclRedOpCreatePreMulSum(&pd, &two, ncclFloat64, ncclScalarHostImmediate, c));
    allreduce(c, s, "f32 PreMulSum by 0.5", n, ncclFloat32, pf, half);
    allreduce(c, s, "f64 PreMulSum by 2", n, ncclFloat64, pd, twice);
    allreduce(c, s, "f32 ncclAvg", n, ncclFloat32, ncclAvg, avg);
    allreduce(c, s, "f64 ncclSum", n, ncclFloat64, ncclSum, sum);
    allreduce(c, s, "i64 ncclMax", n, ncclInt64, ncclMax, maxv);
    allreduce(c, s, "f32 ncclSum (msccl-go's own)", n, ncclFloat32, ncclSum, sum);
    CHECK(ncclRedOpDestroy(pf, c));
    CHECK(ncclRedOpDestroy(pd, c));
  }
  /* A group of one call msccl-go runs and one it hands over. */
  {
    size_t n = 4096;
    float *hf = malloc(n * 4), *gf = malloc(n * 4);
    double *hd = malloc(n * 8), *gd = malloc(n * 8);
    for (size_t i = 0; i < n; i++) hf[i] = (float)v(rank, i), hd[i] = v(rank, i);
    void *df, *dd;
    CUDACHECK(cudaMalloc(&df, n * 4));
    CUDACHECK(cudaMalloc(&dd, n * 8));
    CUDACHECK(cudaMemcpy(df, hf, n * 4, cudaMemcpyHostToDevice));
    CUDACHECK(cudaMemcpy(dd, hd, n * 8, cudaMemcpyHostToDevice));
    double one = 1; /* a PreMulSum: handed over on any number of ranks */
    ncclRedOp_t p1;
    CHECK(ncclRedOpCreatePreMulSum(&p1, &one, ncclFloat64, ncclScalarHostImmediate, c));
    CHECK(ncclGroupStart());
    CHECK(ncclAllReduce(df, df, n, ncclFloat32, ncclSum, c, s));
    CHECK(ncclAllReduce(dd, dd, n, ncclFloat64, p1, c, s));
    CHECK(ncclGroupEnd());
    CHECK(ncclRedOpDestroy(p1, c));
    CUDACHECK(cudaStreamSynchronize(s));
    CUDACHECK(cudaMemcpy(gf, df, n * 4, cudaMemcpyDeviceToHost));
    CUDACHECK(cudaMemcpy(gd, dd, n * 8, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++)
      if (gf[i] != (float)sum(i) || gd[i] != sum(i)) FAIL("grouped: element %zu is %g and %g, want %g", i, gf[i], gd[i], sum(i));
    printf("rank %d: a group of an f32 sum (msccl-go's) and an f64 PreMulSum by 1 (handed over): ok\n", rank);
    cudaFree(df), cudaFree(dd), free(hf), free(gf), free(hd), free(gd);
  }
  /* A split communicator gets its own real one. */
  {
    ncclComm_t sc;
    CHECK(ncclCommSplit(c, 0, rank, &sc, NULL));
    float h = 0.5f;
    ncclRedOp_t pf;
    CHECK(ncclRedOpCreatePreMulSum(&pf, &h, ncclFloat32, ncclScalarHostImmediate, sc));
    allreduce(sc, s, "split: f32 PreMulSum by 0.5", 1001, ncclFloat32, pf, half);
    CHECK(ncclRedOpDestroy(pf, sc));
    CHECK(ncclCommFinalize(sc));
    CHECK(ncclCommDestroy(sc));
  }
  CHECK(ncclCommFinalize(c));
  CHECK(ncclCommDestroy(c));
  printf("rank %d: hand-over to the real NCCL checked\n", rank);
  return 0;
}
#endif

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "errors")) return errors(argv[2]);
#ifdef WITH_CUDA
  if (argc >= 2 && !strcmp(argv[1], "gpu")) return gpu(argc, argv);
#endif
  fprintf(stderr, "usage: handover errors SELF | handover gpu RANK WORLD IDFILE (built with -DWITH_CUDA)\n");
  return 2;
}
