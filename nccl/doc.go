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
// abort, the last error, average and PreMulSum on the cpu device (a sum
// plus a local scaling of f32).
//
// A call msccl-go does not run (a type it does not reduce, such as int64
// or f64; ncclAvg or PreMulSum on the cuda device; ncclProd on floats; a
// collective with no proven plan for its size and ranks) goes, per call,
// to the real NCCL named by MSCCL_NCCL_LIB (handover.go, realnccl.go). It
// is opened with dlopen, never linked, since its names are ours. Each of
// our communicators that hands a call over gets a communicator of the
// real NCCL's own, made on that first call by every rank (rank 0's real
// ncclUniqueId travels over our bootstrap; every rank reaches the same
// decision, which depends only on what NCCL requires ranks to pass
// alike); the call runs on it with the caller's stream. In a group, the
// calls msccl-go runs run first and the handed-over ones after them,
// inside one real ncclGroupStart/End. Destroy, abort and finalize end
// the real communicator too; a split communicator gets its own. None of
// our communicators ever reaches the real NCCL.
//
// Environment:
//
//	MSCCL_DEVICE=cpu|cuda     cpu: host pointers, shared memory between the
//	                          node's processes (CI and machines without a
//	                          GPU); cuda (default): device pointers and
//	                          streams, the GPU of MSCCL_CUDA_DEVICE or the
//	                          local rank's
//	MSCCL_NCCL_LIB=PATH       the real NCCL (libnccl.so.2) for the calls
//	                          msccl-go does not run; read when a call first
//	                          needs it. Unset, unloadable, not an NCCL or
//	                          this library itself: such calls return
//	                          ncclInvalidUsage naming the reason and the
//	                          cause. The cpu device never hands over (the
//	                          real NCCL runs on GPUs) and says so
//	MSCCL_NCCL_FALLBACK=0     never hand over: such calls return
//	                          ncclInvalidUsage naming the reason
//	MSCCL_DEBUG=INFO          one line on stderr per distinct reason a call
//	                          is not run by msccl-go
//
// Nothing here aborts the host process: a Go panic inside a call is
// recovered and becomes ncclInternalError with the panic in
// ncclGetLastError.
package main
