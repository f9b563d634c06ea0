/*
 * allcalls: every exported call of libmsccl_nccl on the CPU device
 * (MSCCL_DEVICE=cpu, host pointers), as rank RANK of WORLD processes.
 * Rank 0 writes the ncclUniqueId to IDFILE; the others wait for it.
 * Every result is checked element by element; the first mismatch or
 * unexpected result code prints a line naming it and exits 1.
 *
 *   allcalls RANK WORLD IDFILE
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nccl.h"

static int rank, world;

#include "check.h"

/* val is rank q's element i: distinct per rank and element, exact in f32. */
static float val(int q, size_t i) { return (float)(q * 1000 + (int)(i % 997) + 1); }

static float *fill(size_t n, int q) {
  float *b = malloc(n * sizeof(float) + 1);
  for (size_t i = 0; i < n; i++) b[i] = val(q, i);
  return b;
}

static void expect(const char *what, const float *got, size_t n, float (*want)(size_t, void *), void *arg) {
  for (size_t i = 0; i < n; i++) {
    float w = want(i, arg);
    if (got[i] != w) FAIL("%s: element %zu of %zu is %g, want %g", what, i, n, got[i], w);
  }
}

static int W;
static float sum_at(size_t i, void *arg) {
  float s = 0;
  for (int q = 0; q < W; q++) s += val(q, i + (size_t)(arg ? *(size_t *)arg : 0));
  return s;
}
static float max_at(size_t i, void *arg) { return val(W - 1, i); }
static float min_at(size_t i, void *arg) { return val(0, i); }
static float rank_at(size_t i, void *arg) { return val(*(int *)arg, i); }
static size_t gcount;
static float gather_at(size_t i, void *arg) { return val((int)(i / gcount), i % gcount); }
static float a2a_at(size_t i, void *arg) { return val((int)(i / gcount), (size_t)rank * gcount + i % gcount); }
static float scatter_at(size_t i, void *arg) { return val(*(int *)arg, (size_t)rank * gcount + i); }
static float avg_at(size_t i, void *arg) { return sum_at(i, NULL) / (float)W; }
static float pms_at(size_t i, void *arg) { return sum_at(i, NULL) * 0.5f; }

static ncclComm_t comm;

static void collectives(ncclComm_t c, int n, size_t count) {
  int me;
  CHECK(ncclCommUserRank(c, &me));
  int saved = rank;
  rank = me;
  W = n;
  gcount = count;
  float *in = fill(count * n, me), *out = calloc(count * n + 1, sizeof(float));

  CHECK(ncclAllReduce(in, out, count, ncclFloat32, ncclSum, c, NULL));
  expect("allreduce sum", out, count, sum_at, NULL);
  CHECK(ncclAllReduce(in, out, count, ncclFloat32, ncclMax, c, NULL));
  expect("allreduce max", out, count, max_at, NULL);
  CHECK(ncclAllReduce(in, out, count, ncclFloat, ncclMin, c, NULL));
  expect("allreduce min", out, count, min_at, NULL);
  CHECK(ncclAllReduce(in, out, count, ncclFloat32, ncclAvg, c, NULL));
  expect("allreduce avg", out, count, avg_at, NULL);
  /* In place. */
  memcpy(out, in, count * sizeof(float));
  CHECK(ncclAllReduce(out, out, count, ncclFloat32, ncclSum, c, NULL));
  expect("allreduce in place", out, count, sum_at, NULL);
  /* Integers: product of (rank+2). */
  int *ii = malloc(count * sizeof(int) + 1), *io = malloc(count * sizeof(int) + 1);
  for (size_t i = 0; i < count; i++) ii[i] = me + 2;
  CHECK(ncclAllReduce(ii, io, count, ncclInt32, ncclProd, c, NULL));
  int prod = 1;
  for (int q = 0; q < n; q++) prod *= q + 2;
  for (size_t i = 0; i < count; i++)
    if (io[i] != prod) FAIL("allreduce int32 prod: element %zu is %d, want %d", i, io[i], prod);
  /* PreMulSum by 0.5, the scalar read at creation. */
  float half = 0.5f;
  ncclRedOp_t pms;
  CHECK(ncclRedOpCreatePreMulSum(&pms, &half, ncclFloat32, ncclScalarHostImmediate, c));
  CHECK(ncclAllReduce(in, out, count, ncclFloat32, pms, c, NULL));
  expect("allreduce premulsum", out, count, pms_at, NULL);
  CHECK(ncclRedOpDestroy(pms, c));

  CHECK(ncclAllGather(in, out, count, ncclFloat32, c, NULL));
  expect("allgather", out, count * n, gather_at, NULL);
  CHECK(ncclReduceScatter(in, out, count, ncclFloat32, ncclSum, c, NULL));
  size_t off = (size_t)me * count;
  expect("reducescatter", out, count, sum_at, &off);
  CHECK(ncclAlltoAll(in, out, count, ncclFloat32, c, NULL));
  expect("alltoall", out, count * n, a2a_at, NULL);
  int root = 1 % n;
  memset(out, 0, count * sizeof(float));
  CHECK(ncclBroadcast(in, out, count, ncclFloat32, root, c, NULL));
  expect("broadcast", out, count, rank_at, &root);
  /* The older in-place form. */
  if (me == root) memcpy(out, in, count * sizeof(float));
  CHECK(ncclBcast(out, count, ncclFloat32, root, c, NULL));
  expect("bcast", out, count, rank_at, &root);
  root = 2 % n;
  memset(out, 0, count * sizeof(float));
  CHECK(ncclReduce(in, me == root ? out : NULL, count, ncclFloat32, ncclSum, root, c, NULL));
  if (me == root) expect("reduce", out, count, sum_at, NULL);
  root = (n - 1);
  CHECK(ncclGather(in, me == root ? out : NULL, count, ncclFloat32, root, c, NULL));
  if (me == root) expect("gather", out, count * n, gather_at, NULL);
  root = 0;
  CHECK(ncclScatter(me == root ? in : NULL, out, count, ncclFloat32, root, c, NULL));
  expect("scatter", out, count, scatter_at, &root);
  /* Movement of a type msccl-go does not reduce: int64 allgather as bytes. */
  long long *li = malloc(count * sizeof(long long) + 1), *lo = malloc(count * n * sizeof(long long) + 1);
  for (size_t i = 0; i < count; i++) li[i] = ((long long)me << 40) + (long long)i;
  CHECK(ncclAllGather(li, lo, count, ncclInt64, c, NULL));
  for (size_t i = 0; i < count * n; i++)
    if (lo[i] != ((long long)(i / count) << 40) + (long long)(i % count)) FAIL("int64 allgather: element %zu is %lld", i, lo[i]);
  free(li);
  free(lo);
  free(ii);
  free(io);
  free(in);
  free(out);
  rank = saved;
}

/* A ring of sends and receives: each rank sends to the next and receives
 * from the one before, inside a group (the receive is issued first, which
 * only a group makes legal) and outside one. */
static void ring(ncclComm_t c, int n, int me, size_t count) {
  float *in = fill(count, me), *out = calloc(count + 1, sizeof(float));
  int prev = (me + n - 1) % n;
  CHECK(ncclGroupStart());
  CHECK(ncclRecv(out, count, ncclFloat32, prev, c, NULL));
  CHECK(ncclSend(in, count, ncclFloat32, (me + 1) % n, c, NULL));
  CHECK(ncclGroupEnd());
  expect("ring in a group", out, count, rank_at, &prev);
  memset(out, 0, count * sizeof(float));
  CHECK(ncclSend(in, count, ncclFloat32, (me + 1) % n, c, NULL));
  CHECK(ncclRecv(out, count, ncclFloat32, prev, c, NULL));
  expect("ring", out, count, rank_at, &prev);
  free(in);
  free(out);
}

static void errors(void) {
  float b[4] = {0};
  EXPECT(ncclAllReduce(b, b, 4, ncclFloat32, ncclSum, NULL, NULL), ncclInvalidArgument, "NULL");
  EXPECT(ncclAllReduce(b, b, 4, ncclFloat32, ncclSum, (ncclComm_t)b, NULL), ncclInvalidArgument, "not a communicator");
  EXPECT(ncclAllReduce(b, b, 4, (ncclDataType_t)99, ncclSum, comm, NULL), ncclInvalidArgument, "datatype 99");
  EXPECT(ncclAllReduce(b, b, 4, ncclFloat32, (ncclRedOp_t)77, comm, NULL), ncclInvalidArgument, "op 77");
  EXPECT(ncclAllReduce(NULL, b, 4, ncclFloat32, ncclSum, comm, NULL), ncclInvalidArgument, "NULL");
  EXPECT(ncclBroadcast(b, b, 4, ncclFloat32, world, comm, NULL), ncclInvalidArgument, "root");
  EXPECT(ncclSend(b, 4, ncclFloat32, -1, comm, NULL), ncclInvalidArgument, "peer -1");
  /* int64 sums are not msccl-go's, and MSCCL_NCCL_FALLBACK=0 forbids NCCL. */
  long long l[4] = {0};
  EXPECT(ncclAllReduce(l, l, 4, ncclInt64, ncclSum, comm, NULL), ncclInvalidUsage, "ncclInt64");
  EXPECT(ncclAllReduce(l, l, 4, ncclInt64, ncclSum, comm, NULL), ncclInvalidUsage, "ncclInt64"); /* one INFO line for both */
  EXPECT(ncclAllReduce(b, b, 4, ncclFloat16, ncclAvg, comm, NULL), ncclInvalidUsage, "ncclAvg");
  if (!strstr(ncclGetLastError(comm), "MSCCL_NCCL_FALLBACK=0")) FAIL("the comm's last error is %s", ncclGetLastError(comm));
  EXPECT(ncclGroupEnd(), ncclInvalidUsage, "without ncclGroupStart");
  EXPECT(ncclRedOpDestroy((ncclRedOp_t)42, comm), ncclInvalidArgument, "op 42");
  EXPECT(ncclCommDeregister(comm, b), ncclInvalidArgument, "not a handle");
  EXPECT(ncclCommCount(comm, NULL), ncclInvalidArgument, "NULL");
  EXPECT(ncclGetVersion(NULL), ncclInvalidArgument, "NULL");
  ncclUniqueId bad;
  memset(&bad, 'x', sizeof bad);
  ncclComm_t c2;
  EXPECT(ncclCommInitRank(&c2, 2, bad, 0), ncclInvalidArgument, "ncclUniqueId");
  EXPECT(ncclCommInitRank(&c2, 2, bad, 5), ncclInvalidArgument, "");
  for (int r = 0; r <= ncclInProgress; r++)
    if (!ncclGetErrorString((ncclResult_t)r) || !*ncclGetErrorString((ncclResult_t)r)) FAIL("no string for result %d", r);
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: allcalls RANK WORLD IDFILE\n");
    return 2;
  }
  rank = atoi(argv[1]);
  world = atoi(argv[2]);
  int v;
  CHECK(ncclGetVersion(&v));
  if (v != NCCL_VERSION_CODE) FAIL("version %d, want %d", v, NCCL_VERSION_CODE);

  ncclUniqueId id;
  share_id(argv[3], &id);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 1;
  if (world > 1 && rank == 1) { /* one rank through the scalable form */
    CHECK(ncclCommInitRankScalable(&comm, world, rank, 1, &id, &config));
  } else {
    CHECK(ncclCommInitRankConfig(&comm, world, id, rank, &config));
  }
  int n, me, dev;
  CHECK(ncclCommCount(comm, &n));
  CHECK(ncclCommUserRank(comm, &me));
  CHECK(ncclCommCuDevice(comm, &dev));
  if (n != world || me != rank || dev != -1) FAIL("count %d, rank %d, device %d", n, me, dev);

  size_t counts[] = {1, 1001, 16384};
  for (int i = 0; i < 3; i++) collectives(comm, world, counts[i]);
  ring(comm, world, rank, 1001);

  /* Group aggregation: two collectives and a ring in one group. */
  {
    float *a = fill(1000, rank), *b = fill(3000, rank), *ra = calloc(1000, 4), *rb = calloc(3000, 4);
    float *rr = calloc(10, 4), *ss = fill(10, rank);
    int prev = (rank + world - 1) % world;
    CHECK(ncclGroupStart());
    CHECK(ncclGroupStart()); /* nested: only the outer end runs them */
    CHECK(ncclAllReduce(a, ra, 1000, ncclFloat32, ncclSum, comm, NULL));
    CHECK(ncclGroupEnd());
    CHECK(ncclRecv(rr, 10, ncclFloat32, prev, comm, NULL));
    CHECK(ncclAllReduce(b, rb, 3000, ncclFloat32, ncclSum, comm, NULL));
    CHECK(ncclSend(ss, 10, ncclFloat32, (rank + 1) % world, comm, NULL));
    if (ra[0] != 0) FAIL("a grouped collective ran before ncclGroupEnd");
    CHECK(ncclGroupEnd());
    W = world;
    expect("grouped allreduce 1", ra, 1000, sum_at, NULL);
    expect("grouped allreduce 2", rb, 3000, sum_at, NULL);
    expect("grouped ring", rr, 10, rank_at, &prev);
    free(a), free(b), free(ra), free(rb), free(rr), free(ss);
  }

  /* Split: two halves ordered by descending rank, then everyone but the
   * last rank (NCCL_SPLIT_NOCOLOR). */
  {
    ncclComm_t half, most;
    CHECK(ncclCommSplit(comm, rank % 2, -rank, &half, NULL));
    int hn, hr;
    CHECK(ncclCommCount(half, &hn));
    CHECK(ncclCommUserRank(half, &hr));
    int want = (world - 1 - rank) / 2; /* rank among its color, descending */
    if (hn != (world + 1 - rank % 2) / 2 || hr != want) FAIL("split: %d ranks, rank %d; want rank %d", hn, hr, want);
    collectives(half, hn, 1001);
    ring(half, hn, hr, 100);
    CHECK(ncclCommSplit(comm, rank == world - 1 ? NCCL_SPLIT_NOCOLOR : 7, 0, &most, NULL));
    if (rank == world - 1) {
      if (most != NULL) FAIL("NCCL_SPLIT_NOCOLOR gave a communicator");
    } else {
      CHECK(ncclCommCount(most, &hn));
      if (hn != world - 1) FAIL("split without the last rank: %d ranks", hn);
      collectives(most, hn, 1001);
      CHECK(ncclCommDestroy(most));
    }
    CHECK(ncclCommDestroy(half));
    /* Shrink: everyone but rank 0, in the parent's order. */
    ncclComm_t shrunk;
    int ex = 0;
    CHECK(ncclCommShrink(comm, &ex, 1, &shrunk, NULL, NCCL_SHRINK_DEFAULT));
    if (rank == 0) {
      if (shrunk != NULL) FAIL("ncclCommShrink gave the excluded rank a communicator");
    } else {
      CHECK(ncclCommCount(shrunk, &hn));
      CHECK(ncclCommUserRank(shrunk, &hr));
      if (hn != world - 1 || hr != rank - 1) FAIL("shrink: %d ranks, rank %d", hn, hr);
      collectives(shrunk, hn, 1001);
      CHECK(ncclCommDestroy(shrunk));
    }
  }

  /* ncclCommInitAll: two ranks of a job of this process alone, driven
   * from this thread in a group. */
  {
    ncclComm_t two[2];
    CHECK(ncclCommInitAll(two, 2, NULL));
    float *x0 = fill(500, 0), *x1 = fill(500, 1);
    CHECK(ncclGroupStart());
    CHECK(ncclAllReduce(x0, x0, 500, ncclFloat32, ncclSum, two[0], NULL));
    CHECK(ncclAllReduce(x1, x1, 500, ncclFloat32, ncclSum, two[1], NULL));
    CHECK(ncclGroupEnd());
    W = 2;
    expect("initall rank 0", x0, 500, sum_at, NULL);
    expect("initall rank 1", x1, 500, sum_at, NULL);
    CHECK(ncclCommDestroy(two[0]));
    CHECK(ncclCommDestroy(two[1]));
    /* A world of one rank: every collective is a copy, whatever the type
     * (an int64 sum too, which more ranks could not run). */
    ncclComm_t solo;
    CHECK(ncclCommInitAll(&solo, 1, NULL));
    long long s1[3] = {1, -2, 3}, s2[3] = {0};
    CHECK(ncclAllReduce(s1, s2, 3, ncclInt64, ncclSum, solo, NULL));
    if (s2[0] != 1 || s2[1] != -2 || s2[2] != 3) FAIL("one-rank int64 allreduce: %lld %lld %lld", s2[0], s2[1], s2[2]);
    memset(s2, 0, sizeof s2);
    CHECK(ncclAllGather(s1, s2, 3, ncclInt64, solo, NULL));
    if (s2[1] != -2) FAIL("one-rank allgather");
    CHECK(ncclCommDestroy(solo));
    /* The same job made by ncclCommInitRank calls in one group. */
    ncclUniqueId id2;
    CHECK(ncclGetUniqueId(&id2));
    CHECK(ncclGroupStart());
    CHECK(ncclCommInitRank(&two[0], 2, id2, 0));
    CHECK(ncclCommInitRank(&two[1], 2, id2, 1));
    CHECK(ncclGroupEnd());
    int r0, r1;
    CHECK(ncclCommUserRank(two[0], &r0));
    CHECK(ncclCommUserRank(two[1], &r1));
    if (r0 != 0 || r1 != 1) FAIL("grouped inits: ranks %d and %d", r0, r1);
    free(x0), free(x1);
    x0 = fill(700, 0), x1 = fill(700, 1);
    float *g0 = calloc(1400, 4), *g1 = calloc(1400, 4);
    CHECK(ncclGroupStart());
    CHECK(ncclAllGather(x0, g0, 700, ncclFloat32, two[0], NULL));
    CHECK(ncclAllGather(x1, g1, 700, ncclFloat32, two[1], NULL));
    CHECK(ncclGroupEnd());
    gcount = 700;
    expect("grouped-init allgather rank 0", g0, 1400, gather_at, NULL);
    expect("grouped-init allgather rank 1", g1, 1400, gather_at, NULL);
    CHECK(ncclCommFinalize(two[0]));
    CHECK(ncclCommFinalize(two[1]));
    CHECK(ncclCommDestroy(two[0]));
    CHECK(ncclCommDestroy(two[1]));
    free(x0), free(x1), free(g0), free(g1);
  }

  /* Memory and registration. */
  {
    void *p, *h;
    CHECK(ncclMemAlloc(&p, 4096));
    memset(p, 1, 4096);
    CHECK(ncclCommRegister(comm, p, 4096, &h));
    CHECK(ncclCommDeregister(comm, h));
    ncclWindow_t w;
    CHECK(ncclCommWindowRegister(comm, p, 4096, &w, 0));
    CHECK(ncclCommWindowDeregister(comm, w));
    CHECK(ncclMemFree(p));
    ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
    float fb[4] = {0};
    CHECK(ncclGroupStart());
    CHECK(ncclAllReduce(fb, fb, 4, ncclFloat32, ncclSum, comm, NULL));
    EXPECT(ncclGroupSimulateEnd(&sim), ncclInvalidUsage, "nothing ran");
    EXPECT(ncclDevCommCreate(comm, NULL, NULL), ncclInvalidUsage, "device API");
  }

  errors();
  ncclResult_t async;
  CHECK(ncclCommGetAsyncError(comm, &async));
  if (async != ncclSuccess) FAIL("async error %d before the abort", async);

  /* Abort while a peer is blocked: rank 1 aborts; the others are in an
   * allreduce (of a size run before: its plan is open, the ranks wait in
   * the executor) waiting for it, and must come back with an error, not
   * hang; the error is the peer's (ncclRemoteError). */
  float *x = fill(16384, rank);
  time_t t0 = time(NULL);
  if (rank == 1) {
    sleep(1);
    CHECK(ncclCommAbort(comm));
    EXPECT(ncclCommCount(comm, &n), ncclInvalidArgument, "");
  } else {
    ncclResult_t r = ncclAllReduce(x, x, 16384, ncclFloat32, ncclSum, comm, NULL);
    if (r != ncclRemoteError) FAIL("an allreduce with an aborted peer returned %d, want ncclRemoteError (%s)", r, ncclGetLastError(comm));
    CHECK(ncclCommGetAsyncError(comm, &async));
    if (async != ncclRemoteError) FAIL("async error %d after the peer aborted, want ncclRemoteError", async);
    fprintf(stderr, "rank %d: allreduce with rank 1 aborted: %s after %ld s (async %d): %s\n", rank, ncclGetErrorString(r),
            (long)(time(NULL) - t0), async, ncclGetLastError(comm));
    CHECK(ncclCommAbort(comm));
  }
  free(x);
  printf("rank %d: all calls checked\n", rank);
  return 0;
}
