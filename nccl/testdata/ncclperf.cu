// ncclperf: an nccl-tests-style table of libmsccl_nccl on one GPU: NRANKS
// communicators of one process (ncclCommInitAll with every rank on device
// 0), each collective issued for all ranks in one ncclGroupStart/End from
// this thread, as nccl-tests' single-process mode does. Built with nvcc
// against this directory's nccl.h (scripts/gpu/nccl-torch.sh):
//
//   nvcc -I.gpu/lib -o ncclperf nccl/testdata/ncclperf.cu -L.gpu/lib -lmsccl_nccl -Xlinker -rpath=.gpu/lib
//   ./ncclperf [NRANKS]
//
// Columns as nccl-tests prints them (time per call in µs, algbw and busbw
// in GB/s, #wrong the elements that differ from the definition, counted
// on every rank after one checked call per size). Exit status 1 when any
// element was wrong or a call failed.
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "nccl.h"

#define CUDA(x)                                                                      \
  do {                                                                               \
    cudaError_t e_ = (x);                                                            \
    if (e_ != cudaSuccess) {                                                         \
      fprintf(stderr, "%s: %s (line %d)\n", #x, cudaGetErrorString(e_), __LINE__);   \
      exit(1);                                                                       \
    }                                                                                \
  } while (0)
#define NCCL(x)                                                                                   \
  do {                                                                                            \
    ncclResult_t r_ = (x);                                                                        \
    if (r_ != ncclSuccess) {                                                                      \
      fprintf(stderr, "%s: %s: %s (line %d)\n", #x, ncclGetErrorString(r_), ncclGetLastError(NULL), __LINE__); \
      exit(1);                                                                                    \
    }                                                                                             \
  } while (0)

enum Coll { AllReduce, AllGather, ReduceScatter, AlltoAll, Broadcast };
static const char *names[] = {"allreduce", "allgather", "reducescatter", "alltoall", "broadcast"};

static int n;
static std::vector<ncclComm_t> comms;
static std::vector<cudaStream_t> streams;

// Lengths in elements of each rank's send and receive buffer for count.
static void lengths(Coll c, size_t count, size_t *in, size_t *out) {
  *in = *out = count;
  if (c == AllGather) *out = count * n;
  if (c == ReduceScatter) *in = count * n;
  if (c == AlltoAll) *in = *out = count * n;
}

static float input(Coll c, int r, size_t i, size_t count) {
  if (c == AlltoAll) return (float)(r * 10 + (int)(i / count));
  if (c == Broadcast) return r == 0 ? 42.0f : -1.0f;
  return (float)(r + 1);
}

static float expected(Coll c, int r, size_t i, size_t count) {
  switch (c) {
  case AllReduce:
  case ReduceScatter: return (float)(n * (n + 1) / 2);
  case AllGather: return (float)(i / count + 1);
  case AlltoAll: return (float)((int)(i / count) * 10 + r);
  case Broadcast: return 42.0f;
  }
  return 0;
}

static void issue(Coll c, size_t count, std::vector<float *> &in, std::vector<float *> &out) {
  NCCL(ncclGroupStart());
  for (int r = 0; r < n; r++) {
    switch (c) {
    case AllReduce: NCCL(ncclAllReduce(in[r], out[r], count, ncclFloat32, ncclSum, comms[r], streams[r])); break;
    case AllGather: NCCL(ncclAllGather(in[r], out[r], count, ncclFloat32, comms[r], streams[r])); break;
    case ReduceScatter: NCCL(ncclReduceScatter(in[r], out[r], count, ncclFloat32, ncclSum, comms[r], streams[r])); break;
    case AlltoAll: NCCL(ncclAlltoAll(in[r], out[r], count, ncclFloat32, comms[r], streams[r])); break;
    case Broadcast: NCCL(ncclBroadcast(in[r], out[r], count, ncclFloat32, 0, comms[r], streams[r])); break;
    }
  }
  NCCL(ncclGroupEnd());
}

int main(int argc, char **argv) {
  n = argc > 1 ? atoi(argv[1]) : 4;
  CUDA(cudaSetDevice(0));
  comms.resize(n);
  streams.resize(n);
  std::vector<int> devs(n, 0);
  NCCL(ncclCommInitAll(comms.data(), n, devs.data()));
  for (int r = 0; r < n; r++) CUDA(cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking));
  int version;
  NCCL(ncclGetVersion(&version));
  printf("# libmsccl_nccl (NCCL API %d), %d ranks on GPU 0, one process\n", version, n);
  long wrongTotal = 0;
  cudaEvent_t start, stop;
  CUDA(cudaEventCreate(&start));
  CUDA(cudaEventCreate(&stop));
  for (int c = AllReduce; c <= Broadcast; c++) {
    Coll coll = (Coll)c;
    printf("#\n# %s\n#%12s %12s %6s %6s %10s %8s %8s %7s\n", names[c], "size(B)", "count", "type", "redop", "time(us)", "algbw", "busbw", "#wrong");
    for (size_t bytes = 1024; bytes <= (64u << 20); bytes *= 4) {
      size_t count = bytes / sizeof(float) / (coll == AllGather || coll == AlltoAll ? n : 1);
      if (coll == ReduceScatter) count = bytes / sizeof(float) / n;
      size_t inN, outN;
      lengths(coll, count, &inN, &outN);
      std::vector<float *> in(n), out(n);
      std::vector<float> host(inN > outN ? inN : outN);
      for (int r = 0; r < n; r++) {
        CUDA(cudaMalloc(&in[r], inN * sizeof(float)));
        CUDA(cudaMalloc(&out[r], outN * sizeof(float)));
        for (size_t i = 0; i < inN; i++) host[i] = input(coll, r, i, count);
        CUDA(cudaMemcpy(in[r], host.data(), inN * sizeof(float), cudaMemcpyHostToDevice));
        CUDA(cudaMemset(out[r], 0, outN * sizeof(float)));
      }
      // One checked call (it also opens the plan), then the timed ones.
      issue(coll, count, in, out);
      for (int r = 0; r < n; r++) CUDA(cudaStreamSynchronize(streams[r]));
      long wrong = 0;
      for (int r = 0; r < n; r++) {
        CUDA(cudaMemcpy(host.data(), out[r], outN * sizeof(float), cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < outN; i++)
          if (host[i] != expected(coll, r, i, count)) wrong++;
      }
      wrongTotal += wrong;
      const int warm = 5, iters = 20;
      for (int k = 0; k < warm; k++) issue(coll, count, in, out);
      for (int r = 0; r < n; r++) CUDA(cudaStreamSynchronize(streams[r]));
      CUDA(cudaEventRecord(start, streams[0]));
      for (int k = 0; k < iters; k++) issue(coll, count, in, out);
      for (int r = 1; r < n; r++) {
        cudaEvent_t e;
        CUDA(cudaEventCreate(&e));
        CUDA(cudaEventRecord(e, streams[r]));
        CUDA(cudaStreamWaitEvent(streams[0], e, 0));
        CUDA(cudaEventDestroy(e));
      }
      CUDA(cudaEventRecord(stop, streams[0]));
      CUDA(cudaEventSynchronize(stop));
      float ms;
      CUDA(cudaEventElapsedTime(&ms, start, stop));
      double us = ms * 1000.0 / iters;
      double size = (double)count * sizeof(float) * (coll == AllGather || coll == AlltoAll ? n : 1);
      if (coll == ReduceScatter) size = (double)count * sizeof(float) * n;
      double algbw = size / us / 1e3;
      double f = coll == AllReduce ? 2.0 * (n - 1) / n : coll == Broadcast ? 1.0 : (double)(n - 1) / n;
      printf(" %12zu %12zu %6s %6s %10.1f %8.2f %8.2f %7ld\n", (size_t)size, count, "float", coll == AllReduce || coll == ReduceScatter ? "sum" : "none",
             us, algbw, algbw * f, wrong);
      for (int r = 0; r < n; r++) {
        CUDA(cudaFree(in[r]));
        CUDA(cudaFree(out[r]));
      }
    }
  }
  for (int r = 0; r < n; r++) NCCL(ncclCommDestroy(comms[r]));
  printf("# Out of bounds values : %ld %s\n", wrongTotal, wrongTotal ? "FAILED" : "OK");
  return wrongTotal ? 1 : 0;
}
