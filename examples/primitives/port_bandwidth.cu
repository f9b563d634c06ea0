// port_bandwidth.cu: port-channel bandwidth. One thread asks the rank's
// host proxy to copy bytes from the start of this rank's buffer to the
// peer's at dstOff and then raise the peer's semaphore (putWithSignal),
// flushes (the proxy has done both), and waits for the peer's signal, so
// that a launch ends when both sides' data has landed.
#include <msccl/msccl.cuh>

extern "C" __global__ void port_bandwidth(const msccl::PortChannel* pc, u64 dstOff, u64 bytes) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  const msccl::PortChannel& c = pc[0];
  c.putWithSignal(dstOff, 0, bytes);
  if (c.flush()) c.wait();
}
