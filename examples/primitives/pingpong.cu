// pingpong.cu: the round trip of a signal over a memory channel. Block b
// drives channel ch[b]; it starts (signals, then waits) when first ^ (b &
// 1) is 1, else it answers (waits, then signals), rounds times: one block
// per rank (first = 1 on one rank, 0 on the other), or both ends in one
// launch as blocks 0 and 1. out[b] receives the elapsed
// %globaltimer nanoseconds of the rounds (0 if a wait timed out:
// Handles.Check says which). One round trip before the clock starts
// waits for the peer's kernel: ranks in separate processes launch
// microseconds to milliseconds apart, which is not the round trip.
#include <msccl/msccl.cuh>

extern "C" __global__ void pingpong(const msccl::MemoryChannel* ch, int first, int rounds, u64* out) {
  if (threadIdx.x != 0) return;
  const msccl::MemoryChannel& c = ch[blockIdx.x];
  bool starts = (first ^ (int)(blockIdx.x & 1)) != 0;
  bool ok = true;
  u64 t0 = 0;
  for (int i = -1; i < rounds && ok; i++) {
    if (i == 0) t0 = globaltimer();
    if (starts) {
      c.signal();
      ok = c.wait();
    } else {
      ok = c.wait();
      c.signal();
    }
  }
  out[blockIdx.x] = ok ? globaltimer() - t0 : 0;
}
