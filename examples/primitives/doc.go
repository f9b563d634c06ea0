// Command primitives runs the device primitives from a kernel of its own
// between two ranks of a job (one process per rank, e.g. msccl-bench
// --procs style or torchrun --nproc-per-node 2 on one node): a
// memory-channel ping-pong and put/get/packet bandwidth, each printed as a
// table. Its kernels (pingpong.cu, bandwidth.cu) include
// <msccl/msccl.cuh> and are compiled at start by msccl.CompileKernel.
//
//	MSCCL_RANK=0 MSCCL_WORLD_SIZE=2 go run ./examples/primitives &
//	MSCCL_RANK=1 MSCCL_WORLD_SIZE=2 go run ./examples/primitives
//
// Its kernels compile to PTX in CI (TestKernelsCompile, NVRTC without a
// GPU); the runs need a GPU.
package main
