// fused_allgather.cu: y = alpha * x + beta of this rank's input x (n
// floats), all-gathered, in one kernel: each block computes its part of
// y once and stores it straight into slot r of a peer's buffer (and, in
// the blocks of the first peer, of this rank's own), where the unfused
// way writes y to memory, reads it back and copies it. Channels and
// blocks as in allgather.cu; a slot is n floats.
#include <msccl/msccl.cuh>

extern "C" __global__ void fused_allgather(const msccl::MemoryChannel* ch, int rank, int perPeer, const float* x, u64 n,
                                           float alpha, float beta, float* local) {
  const msccl::MemoryChannel& c = ch[blockIdx.x];
  int j = blockIdx.x % perPeer;
  // Part j of the n elements, in multiples of 4 (float4 stores).
  u64 step = ((n + perPeer - 1) / perPeer + 3) & ~3ull;
  u64 begin = step * j < n ? step * j : n;
  u64 end = begin + step < n ? begin + step : n;
  bool own = blockIdx.x < (unsigned)perPeer;
  if (threadIdx.x == 0) {
    c.relaxedSignal();  // as allgather.cu: the peer has read its last output
    c.relaxedWait();
  }
  __syncthreads();
  u64 base = (u64)rank * n;
  float* peer = (float*)c.dst;
  // float4 where the slot, its part and the buffers allow it (n % 4 == 0
  // keeps every slot 16-byte aligned), then the tail element by element.
  u64 vend = (n % 4 == 0) ? begin + ((end - begin) & ~3ull) : begin;
  for (u64 i = begin + 4 * threadIdx.x; i < vend; i += 4 * blockDim.x) {
    float4 v = *(const float4*)(x + i);
    v.x = alpha * v.x + beta;
    v.y = alpha * v.y + beta;
    v.z = alpha * v.z + beta;
    v.w = alpha * v.w + beta;
    *(float4*)(peer + base + i) = v;
    if (own) *(float4*)(local + base + i) = v;
  }
  for (u64 i = vend + threadIdx.x; i < end; i += blockDim.x) {
    float v = alpha * x[i] + beta;
    c.write<float>(base + i, v);
    if (own) local[base + i] = v;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    c.signal();
    c.wait();
  }
  __syncthreads();
}
