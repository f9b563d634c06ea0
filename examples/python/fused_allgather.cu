// fused_allgather.cu: y = alpha * x + beta of this rank's input x (n
// floats), all-gathered, in one kernel: each block computes its part of
// y once and stores it straight into slot r of a peer's buffer, where the
// unfused way writes y to memory, reads it back and copies it. Channels
// and blocks as in allgather.cu (block b < nch carries part b % perPeer
// to the peer of channel b); the perPeer blocks after them store the
// same parts into this rank's own slot, so that every block writes one
// part once and the local copy costs no channel block twice the work. A
// slot is n floats. Launch with nch + perPeer blocks.
#include <msccl/msccl.cuh>

extern "C" __global__ void fused_allgather(const msccl::MemoryChannel* ch, int rank, int perPeer, const float* x, u64 n,
                                           float alpha, float beta, float* local) {
  int nch = (int)gridDim.x - perPeer;
  bool own = (int)blockIdx.x >= nch;
  int j = own ? (int)blockIdx.x - nch : (int)blockIdx.x % perPeer;
  // Part j of the n elements, in multiples of 4 (float4 stores).
  u64 step = ((n + perPeer - 1) / perPeer + 3) & ~3ull;
  u64 begin = step * j < n ? step * j : n;
  u64 end = begin + step < n ? begin + step : n;
  u64 base = (u64)rank * n;
  if (!own && threadIdx.x == 0) {
    const msccl::MemoryChannel& c = ch[blockIdx.x];
    c.relaxedSignal();  // as allgather.cu: the peer has read its last output
    c.relaxedWait();
  }
  __syncthreads();
  float* dst = own ? local : (float*)ch[blockIdx.x].dst;
  // float4 where the slot, its part and the buffers allow it (n % 4 == 0
  // keeps every slot 16-byte aligned), then the tail element by element.
  u64 vend = (n % 4 == 0) ? begin + ((end - begin) & ~3ull) : begin;
  for (u64 i = begin + 4 * threadIdx.x; i < vend; i += 4 * blockDim.x) {
    float4 v = *(const float4*)(x + i);
    v.x = alpha * v.x + beta;
    v.y = alpha * v.y + beta;
    v.z = alpha * v.z + beta;
    v.w = alpha * v.w + beta;
    *(float4*)(dst + base + i) = v;
  }
  for (u64 i = vend + threadIdx.x; i < end; i += blockDim.x) {
    float v = alpha * x[i] + beta;
    if (own) {
      local[base + i] = v;
    } else {
      ch[blockIdx.x].write<float>(base + i, v);
    }
  }
  if (own) return;  // this rank's own slot: read by its host after the kernel
  __syncthreads();
  if (threadIdx.x == 0) {
    const msccl::MemoryChannel& c = ch[blockIdx.x];
    c.signal();
    c.wait();
  }
  __syncthreads();
}
