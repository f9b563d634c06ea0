// Package host runs one rank's share of a plan in this process, on CPU
// threads, over memory the rank shares with the other ranks' processes
// (runtime/comm with the CPU device, runtime/cpudev). It is a real
// interpreter of real plans across real processes: the thread blocks of
// a small launch are coroutines on the caller's thread (a wait that is
// not met yields to the next block; a round of waiting blocks backs off
// with cpudev.Backoff, so the thread never parks: a C caller's thread
// would be handed off), those of a large one each a goroutine;
// semaphores, signals and LL packet flags are sync/atomic operations on
// the shared words (sequentially consistent, which is stronger than the
// release/acquire docs/model.md asks for), port channels go through a
// per-rank proxy goroutine that serves requests in order (a put's copy
// before the signal that follows it; flush waits for the copies issued
// before it), and reductions and element types are
// executor/cpu's (cpu.Reducer), so results are bit-identical to the
// reference executor's.
//
// Ops run as executor/cpu documents them (our reading of upstream, with
// its known defects fixed): a block is one thread here, so a nop only
// marks a place; an LL packet is 8 bytes, 4 of payload and a 4-byte flag
// written and read as one atomic word (LL16 is two such packets, so
// LLWidth only rounds byte counts); the flag is the launch number, so
// stale packets of an earlier launch never match; double scratch
// alternates halves by launch. Every wait has a watchdog: past
// Options.Timeout, or as soon as the communicator reports a failed peer,
// Run returns an error that names every stuck block, its op and what it
// waited for.
//
// host must not import the compiler or the CUDA executor; it reads plans
// and never changes them. No program names it: collectives on the cpu
// device run through the root package (msccl.OpenComm).
package host
