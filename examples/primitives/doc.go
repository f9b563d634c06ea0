// Command primitives runs the device primitives from kernels of its own
// between two ranks of a job (one process per rank, e.g. two processes
// sharing a GPU under MPS, or torchrun --nproc-per-node 2 on one node),
// each part printed as a table by rank 0:
//
//   - a ping-pong: the round trip of a signal over a memory channel;
//   - bandwidth from 1 KiB to 256 MiB: put, get and LL16 packets over a
//     memory channel, a device copy within the rank's own memory by the
//     same kernel (put and get as fractions of it) and by the driver
//     (cuMemcpyAsync), and putWithSignal over a port channel ("-", with
//     the reason, where PortChannels is refused);
//   - overlap: a put to the peer and an elementwise loop over local data
//     fused in one kernel, against the two as kernels one after the other.
//
// Every part checks on the receiving rank that the data arrived (and the
// loop's results); a wrong word, or a wait the handles' watchdog ended,
// fails the rank with the reason, and the peer fails quoting it.
//
//	MSCCL_RANK=0 MSCCL_WORLD_SIZE=2 go run ./examples/primitives &
//	MSCCL_RANK=1 MSCCL_WORLD_SIZE=2 go run ./examples/primitives
//
// scripts/gpu/primitives.sh runs it so under MPS, beside the executor's
// ping-pong plan. Its kernels (*.cu) include <msccl/msccl.cuh> and are
// compiled at start by msccl.CompileKernel; they compile to PTX in CI
// (TestKernelsCompile, NVRTC without a GPU); the runs need a GPU.
package main
