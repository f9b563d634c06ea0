// every_call.cu: one kernel that calls every device primitive of
// kernels/include/msccl, so that TestUserHeaders compiles (and NVRTC
// type-checks) each template and overload a user can reach.
#include <msccl/msccl.cuh>

extern "C" __global__ void every_call(msccl::MemoryChannel* mem, msccl::PortChannel* port, msccl::DeviceSyncer* sync,
                                      msccl::Watch watch, u32 flag, int* out) {
  const msccl::MemoryChannel& m = mem[blockIdx.x];
  m.put(0, 0, 4096);
  m.put(0, 0, 4096, threadIdx.x, blockDim.x);
  m.get(0, 0, 4096);
  m.get(0, 0, 4096, threadIdx.x, blockDim.x);
  m.putPackets<msccl::LL16Packet>(0, 0, 4096, threadIdx.x, blockDim.x, flag);
  m.putPackets<msccl::LL8Packet>(0, 0, 4096, threadIdx.x, blockDim.x, flag);
  bool ok = m.unpackPackets<msccl::LL16Packet>(0, 0, 4096, threadIdx.x, blockDim.x, flag);
  ok &= m.unpackPackets<msccl::LL8Packet>(0, 0, 4096, threadIdx.x, blockDim.x, flag);
  m.write<int>(threadIdx.x, m.read<int>(threadIdx.x) + 1);
  __syncthreads();
  if (threadIdx.x == 0) {
    m.signal();
    m.relaxedSignal();
    ok &= m.wait();
    ok &= m.relaxedWait();
    ok &= m.poll();
    const msccl::PortChannel& p = port[blockIdx.x];
    p.put(0, 0, 4096);
    p.signal();
    p.putWithSignal(0, 0, 4096);
    p.putWithSignalAndFlush(0, 0, 4096);
    ok &= p.flush();
    ok &= p.wait();
    ok &= p.poll();
  }
  sync->sync(gridDim.x, watch);
  out[blockIdx.x * blockDim.x + threadIdx.x] = ok;
}
