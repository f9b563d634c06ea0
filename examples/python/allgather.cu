// allgather.cu: an allgather written by hand over memory channels.
// Every rank's registered buffer holds world slots of slotBytes, and rank
// r's input is already in its slot r. Channel b (block b) goes to the
// peer of that entry of the peer list (each peer perPeer times in a row)
// and carries part b % perPeer of slot r: the block puts that part into
// the same place of the peer's buffer, signals, and waits for the peer's
// matching part of its own slot to arrive here.
#include <msccl/msccl.cuh>

// slot_part is the byte range [*begin, *end) of part j of n bytes cut in
// parts of equal, 16-byte aligned size (the copies move 16 bytes a
// thread where both ends are aligned).
__device__ __forceinline__ void slot_part(u64 n, int parts, int j, u64* begin, u64* end) {
  u64 step = ((n + parts - 1) / parts + 15) & ~15ull;
  u64 b = step * j;
  *begin = b < n ? b : n;
  *end = b + step < n ? b + step : n;
}

extern "C" __global__ void allgather(const msccl::MemoryChannel* ch, int rank, int perPeer, u64 slotBytes) {
  const msccl::MemoryChannel& c = ch[blockIdx.x];
  u64 begin, end;
  slot_part(slotBytes, perPeer, blockIdx.x % perPeer, &begin, &end);
  // The peer's host reads its output before it launches again, and its
  // kernel says so first: a relaxed pair orders this launch's writes
  // after that read without publishing data (docs/model.md).
  if (threadIdx.x == 0) {
    c.relaxedSignal();
    c.relaxedWait();
  }
  __syncthreads();
  u64 off = (u64)rank * slotBytes + begin;
  c.put(off, off, end - begin);
  // All threads' stores, then one release signal; the peer's part is
  // readable once this end's wait has acquired it.
  __syncthreads();
  if (threadIdx.x == 0) {
    c.signal();
    c.wait();
  }
  __syncthreads();
}
