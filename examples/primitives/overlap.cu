// overlap.cu: communication and independent computation in one kernel.
// Blocks [0, commBlocks) put their share of commBytes from the start of
// this rank's buffer to the peer's at dstOff, meet at a barrier of their
// own, and block 0 signals the peer and waits for its signal. Blocks
// [commBlocks, gridDim.x) run an elementwise loop over n words of local
// data: out[i] is in[i] after iters rounds of x = x * 1664525 +
// 1013904223, a chain of dependent multiply-adds standing in for the
// inner loop of a matmul. The same kernel launched with commBlocks =
// gridDim.x does the communication alone, with commBlocks = 0 the
// computation alone: the example times the fused launch against those
// two one after the other.
#include <msccl/msccl.cuh>

extern "C" __global__ void overlap(const msccl::MemoryChannel* ch, msccl::DeviceSyncer* sync, msccl::Watch watch,
                                   u32 commBlocks, u64 commBytes, u64 dstOff, const u32* in, u32* out, u64 n,
                                   int iters) {
  if (blockIdx.x < commBlocks) {
    const msccl::MemoryChannel& c = ch[0];
    u64 share = (commBytes / commBlocks) & ~15ull;
    u64 off = share * blockIdx.x;
    if (blockIdx.x == commBlocks - 1) share = commBytes - off;
    c.put(dstOff + off, off, share);
    __syncthreads();
    sync->sync(commBlocks, watch);
    if (blockIdx.x == 0 && threadIdx.x == 0) {
      c.signal();
      c.wait();
    }
    return;
  }
  u64 stride = (u64)(gridDim.x - commBlocks) * blockDim.x;
  for (u64 i = (u64)(blockIdx.x - commBlocks) * blockDim.x + threadIdx.x; i < n; i += stride) {
    u32 x = in[i];
    // Not unrolled: the compiler would fold unrolled rounds into one
    // multiply-add (the composition of affine maps is one), doing a
    // fraction of the work the loop's length says.
#pragma unroll 1
    for (int k = 0; k < iters; k++) x = x * 1664525u + 1013904223u;
    out[i] = x;
  }
}
