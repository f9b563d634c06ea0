/*
 * hostbench: the host time of ncclAllReduce on the CPU device
 * (MSCCL_DEVICE=cpu), as rank RANK of WORLD processes: COUNT f32 summed
 * ITERS times after a warm-up, the mean printed as
 * "rank R: nccl X us/call". The Go benchmark in nccl_bench_test.go runs
 * it beside the same loop through msccl.RankComm.AllReduce and reports
 * both. Rank 0 writes the ncclUniqueId to IDFILE; the others wait for it.
 *
 *   hostbench RANK WORLD IDFILE ITERS COUNT
 *
 * It also prints the calling thread's voluntary context switches over
 * the timed loop ("rank R: V voluntary context switches in ITERS
 * calls"): each is a sleep of the thread, which a wait on the cpu device
 * should seldom need.
 */
#define _GNU_SOURCE /* RUSAGE_THREAD */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "nccl.h"

static int rank;

#include "check.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

int main(int argc, char **argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: hostbench RANK WORLD IDFILE ITERS COUNT\n");
    return 2;
  }
  rank = atoi(argv[1]);
  int world = atoi(argv[2]);
  long iters = atol(argv[4]);
  size_t count = (size_t)atol(argv[5]);
  if (world < 1 || rank < 0 || rank >= world || iters < 1 || count < 1) FAIL("bad arguments");

  ncclUniqueId id;
  share_id(argv[3], &id);
  ncclComm_t comm;
  CHECK(ncclCommInitRank(&comm, world, id, rank));

  float *in = malloc(count * sizeof(float)), *out = malloc(count * sizeof(float));
  for (size_t i = 0; i < count; i++) in[i] = (float)(rank + 1);
  long warm = iters / 10 + 10;
  for (long i = 0; i < warm; i++) CHECK(ncclAllReduce(in, out, count, ncclFloat32, ncclSum, comm, NULL));
  struct rusage ru0, ru1;
  if (getrusage(RUSAGE_THREAD, &ru0) != 0) FAIL("getrusage");
  double t0 = now();
  for (long i = 0; i < iters; i++) CHECK(ncclAllReduce(in, out, count, ncclFloat32, ncclSum, comm, NULL));
  double us = (now() - t0) / (double)iters;
  if (getrusage(RUSAGE_THREAD, &ru1) != 0) FAIL("getrusage");
  /* The sum of 1..world, so a call that did nothing cannot pass. */
  float want = (float)(world * (world + 1) / 2);
  for (size_t i = 0; i < count; i++)
    if (out[i] != want) FAIL("element %zu is %g, want %g", i, out[i], want);
  CHECK(ncclCommDestroy(comm));
  printf("rank %d: nccl %.3f us/call\n", rank, us);
  printf("rank %d: %ld voluntary context switches in %ld calls\n", rank, ru1.ru_nvcsw - ru0.ru_nvcsw, iters);
  free(in);
  free(out);
  return 0;
}
