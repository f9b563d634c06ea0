// port_rounds: two ranks trade `words` 32-bit words over one port channel
// for `rounds` rounds (portcuda_test.go). The channel's src and dst are
// the same registered buffer on each rank: words [0, words) are what a
// rank sends, [words, 2*words) where the peer's land. Each round every
// thread writes its share of the source, one thread puts it with a
// signal and waits for the peer's, every thread checks what arrived,
// and a second signal/wait pair (the peer has read its destination)
// plus a flush (this rank's put has left its source) let the next round
// overwrite both. Mismatches are counted into bad[0]; bad[1] counts
// waits and flushes the watchdog ended.
#include <msccl/msccl.cuh>

extern "C" __global__ void port_rounds(msccl::PortChannel* ch, u32* buf, u64 words, int rank, int rounds, u32* bad) {
  u32* src = buf;
  const volatile u32* dst = buf + words;  // written by the copy engine, read after each round's wait
  int peer = 1 - rank;
  for (int k = 0; k < rounds; k++) {
    for (u64 i = threadIdx.x; i < words; i += blockDim.x) src[i] = (u32)(rank + 1) << 24 | (u32)k << 16 | (u32)(i & 0xffff);
    __syncthreads();
    if (threadIdx.x == 0) {
      ch->putWithSignal(4 * words, 0, 4 * words);
      if (!ch->wait()) atomicAdd(&bad[1], 1);
    }
    __syncthreads();
    u32 miss = 0;
    for (u64 i = threadIdx.x; i < words; i += blockDim.x) {
      if (dst[i] != ((u32)(peer + 1) << 24 | (u32)k << 16 | (u32)(i & 0xffff))) miss++;
    }
    if (miss) atomicAdd(&bad[0], miss);
    __syncthreads();
    if (threadIdx.x == 0) {
      ch->signal();
      if (!ch->wait()) atomicAdd(&bad[1], 1);
      if (!ch->flush()) atomicAdd(&bad[1], 1);
    }
    __syncthreads();
  }
}
