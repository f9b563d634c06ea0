// Command nccl is libmsccl_nccl.so, a drop-in NCCL: programs written for
// NCCL's host API (PyTorch's ProcessGroupNCCL, nccl-tests, a C program
// built against nccl.h) run their collectives on msccl-go's proven plans,
// unchanged, by linking against it or preloading it:
//
//	go build -buildmode=c-shared -o libmsccl_nccl.so ./nccl
//	LD_PRELOAD=$PWD/libmsccl_nccl.so torchrun --nproc-per-node 4 train.py
//
// (scripts/build-nccl does the same and copies nccl/nccl.h beside the
// library). nccl.h here is NCCL 2.28's public interface: its names, enum
// values and signatures.
//
// Each ncclComm_t is one msccl.RankComm (the root package's communicator);
// this package converts NCCL's arguments into msccl.Call and results into
// ncclResult_t, and adds what NCCL defines beyond one call: group
// aggregation (ncclGroupStart/End, per thread), communicator splitting,
// abort, the last error, the reductions msccl-go lacks (average and
// PreMulSum on the cpu device are a sum plus a local scaling).
//
// Environment:
//
//	MSCCL_DEVICE=cpu|cuda     cpu: host pointers, shared memory between the
//	                          node's processes (CI and machines without a
//	                          GPU); cuda (default): device pointers and
//	                          streams, the GPU of MSCCL_CUDA_DEVICE or the
//	                          local rank's
//	MSCCL_NCCL_FALLBACK=0     the error of a call msccl-go does not run
//	                          (an int64 sum) says falling back is
//	                          forbidden; either way it is ncclInvalidUsage
//	                          naming the reason (handing such calls to a
//	                          real NCCL is not implemented yet)
//	MSCCL_DEBUG=INFO          one line on stderr per distinct reason
//
// Nothing here aborts the host process: a Go panic inside a call is
// recovered and becomes ncclInternalError with the panic in
// ncclGetLastError.
package main
