package ir

// Limits of the upstream MSCCL++ executor (src/include/execution_common.hpp
// and execution_kernel.hpp). A plan that exceeds one loads there but
// overflows a fixed-size array in the per-block op table, so the validator
// reports every excess as an error: a plan we accept must run upstream too.
const (
	// MaxOpsPerBlock bounds the ops of one thread block, counting each
	// pipeline and every op of its body (upstream flattens bodies into the
	// block's op array; MAX_OPERATION).
	MaxOpsPerBlock = 64
	// MaxChannelsPerBlock bounds a block's channel table per channel type
	// (MAX_CHANNEL).
	MaxChannelsPerBlock = 16
	// MaxRemoteBuffersPerBlock bounds a block's remote buffer table per
	// access channel type (the RemoteBuffers arrays are MAX_CHANNEL long).
	MaxRemoteBuffersPerBlock = 16
	// MaxChannelsPerOp bounds channel_ids of one op
	// (MAX_CHANNEL_PER_OPERATION).
	MaxChannelsPerOp = 8
	// MaxRefsPerOp bounds src_buff and dst_buff of one op, each.
	MaxRefsPerOp = 10
	// MaxBarriers bounds barrier_id (MAX_DEVICE_SYNCERS).
	MaxBarriers = 16
	// MaxSemaphoresPerOp bounds semaphore_ids of one op
	// (MAX_DEVICE_SEMAPHORES).
	MaxSemaphoresPerOp = 16
	// MaxThreadsPerBlock is CUDA's limit on num_threads_per_block.
	MaxThreadsPerBlock = 1024
)

// Bounds of our own, not upstream's: they keep a plan from costing more
// memory than its reader can give before anything notices.
const (
	// MaxRanks bounds a plan's gpus (and the compiler's ranks
	// parameter). Validate refuses a larger plan before it allocates
	// anything per gpu.
	MaxRanks = 1 << 14
	// DefaultMaxPlanBytes is the largest plan file ReadPlanFile, ReadPlan
	// and Load accept unless told otherwise. Decoding holds about 20
	// bytes of memory per byte of JSON (the generic JSON tree, then the
	// plan), so this cap is about 5 GiB of memory. The library's
	// 512-rank ring allreduce is about 250 MB of JSON; a 1024-rank plan
	// needs a raised cap (msccl-compile --max-plan-size).
	DefaultMaxPlanBytes = 256 << 20
	// DecodeBytesPerByte is that memory per byte of JSON, for messages.
	DecodeBytesPerByte = 20
)
