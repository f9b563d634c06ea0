// port_unflushed: a wrong kernel and its fix (portcuda_test.go). With
// put set, thread 0 of block b puts 64 bytes on port channel b (from
// offset 0 of this rank's buffer to offset 4096 of the peer's) and the
// kernel ends without a flush, which Handles.Check reports; with flush
// set it flushes channel b, which clears the report.
#include <msccl/msccl.cuh>

extern "C" __global__ void port_unflushed(msccl::PortChannel* ch, int put, int flush) {
  if (threadIdx.x != 0) return;
  if (put) ch[blockIdx.x].put(4096, 0, 64);
  if (flush) ch[blockIdx.x].flush();
}
