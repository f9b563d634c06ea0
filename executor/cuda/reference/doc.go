// Package reference owns hand-written, specialised CUDA kernels for three
// collectives of the algorithm library: the LL one-shot allreduce
// (allreduce_allpairs_packet), the two-shot allreduce (allreduce_twoshot)
// and the direct allgather (allgather_direct). They are the yardstick of
// the generic executor kernel: executor/cuda runs one on the
// executor's own streams, grid and buffers, and msccl-bench --reference
// times it beside the plan and prints the ratio.
//
// Like package kernels it holds sources and byte layouts only: it imports
// no executor and no runtime outside tests. Its sources start with
// kernels.Primitives (the device headers and reduce.cuh), so the
// reductions round exactly as the executor's and the CPU executor's do.
package reference
