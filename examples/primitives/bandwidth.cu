// bandwidth.cu: memory-channel bandwidth, and a device copy to compare it
// with. The rank's buffer holds the data it sends in [0, dstBase) and
// what it receives from dstBase on. Every block puts (or gets, or sends
// as LL16 packets) its share of bytes to the peer over ch[0], or copies
// it within this rank's own buffer (MODE_COPY, the same copy loop as a
// put, reading and writing local memory); the blocks meet at a grid
// barrier, and block 0 signals the peer and waits for its signal, so that
// a launch ends when both sides' data has landed.
#include <msccl/msccl.cuh>

#define MODE_PUT 0
#define MODE_GET 1
#define MODE_PACKETS 2
#define MODE_COPY 3

extern "C" __global__ void bandwidth(const msccl::MemoryChannel* ch, msccl::DeviceSyncer* sync, msccl::Watch watch,
                                     int mode, u64 bytes, u64 dstBase, u32 flag) {
  const msccl::MemoryChannel& c = ch[0];
  u64 share = (bytes / gridDim.x) & ~15ull;
  u64 off = share * blockIdx.x;
  if (blockIdx.x == gridDim.x - 1) share = bytes - off;
  if (mode == MODE_PUT) {
    c.put(dstBase + off, off, share);
  } else if (mode == MODE_GET) {
    c.get(off, dstBase + off, share);
  } else if (mode == MODE_PACKETS) {
    // Packets carry twice their payload: the peer's packet buffer (a
    // registration of its own, twice bytes, apart from the payload's)
    // holds them from offset 0.
    c.putPackets<msccl::LL16Packet>(2 * off, off, (u32)share, threadIdx.x, blockDim.x, flag);
    c.unpackPackets<msccl::LL16Packet>(2 * off, dstBase + off, (u32)share, threadIdx.x, blockDim.x, flag);
  } else {
    msccl::copy_big(c.src + dstBase + off, c.src + off, share, threadIdx.x, blockDim.x);
  }
  __syncthreads();
  sync->sync(gridDim.x, watch);
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    c.signal();
    c.wait();
  }
}
