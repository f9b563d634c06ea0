// bandwidth.cu: memory-channel bandwidth. Every block puts (or gets, or
// sends as LL16 packets) its share of bytes to the peer over ch[0], the
// blocks meet at a grid barrier, and block 0 signals the peer and waits
// for its signal, so that a launch ends when both sides' data has landed.
#include <msccl/msccl.cuh>

#define MODE_PUT 0
#define MODE_GET 1
#define MODE_PACKETS 2

extern "C" __global__ void bandwidth(const msccl::MemoryChannel* ch, msccl::DeviceSyncer* sync, msccl::Watch watch,
                                     int mode, u64 bytes, u32 flag) {
  const msccl::MemoryChannel& c = ch[0];
  u64 share = (bytes / gridDim.x) & ~15ull;
  u64 off = share * blockIdx.x;
  if (blockIdx.x == gridDim.x - 1) share = bytes - off;
  if (mode == MODE_PUT) {
    c.put(off, off, share);
  } else if (mode == MODE_GET) {
    c.get(off, off, share);
  } else {
    // Packets carry twice their payload: the peer's packet buffer (a
    // registration of its own, twice bytes, apart from the payload's)
    // holds them from offset 0.
    c.putPackets<msccl::LL16Packet>(2 * off, off, (u32)share, threadIdx.x, blockDim.x, flag);
    c.unpackPackets<msccl::LL16Packet>(2 * off, off, (u32)share, threadIdx.x, blockDim.x, flag);
  }
  __syncthreads();
  sync->sync(gridDim.x, watch);
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    c.signal();
    c.wait();
  }
}
