// Package cpu is the CPU reference executor: it runs any valid ir.Plan for
// a message size, data type and reduction on the CPU and proves it correct
// or explains why not (deadlock, data race, unbalanced signals, wrong
// result), and can draw the run as a Chrome trace.
//
// The simulation is a deterministic cooperative scheduler rather than one
// goroutine per thread block: every (rank, block) is a small state machine
// that runs ops until one of them must wait (a channel token, a packet flag,
// a semaphore, a barrier, the end of its rank's launch). Determinism makes
// reports reproducible and golden-testable, and it avoids goroutine and lock
// overhead on machines with few cores. Ops execute atomically; whether the
// plan is actually free of races is decided separately by happens-before
// (vector clocks), so the verdict does not depend on the interleaving that
// happened to run.
//
// Memory-ordering model (docs/model.md): each block carries two vector clocks,
// E (execution order) and V (visibility). Release signal/wait, barriers,
// semaphores, flushes and kernel boundaries carry both; relaxed signal/wait
// and LL packet arrivals carry only E. A read followed by a conflicting
// write needs E ordering; a write followed by anything needs V ordering.
// Whatever a block acquires (wait, flush, semaphore, packet) reaches the
// rest of the block only at its next nop; ops of one block between two
// nops are mutually unordered. Every op execution is its own epoch of its
// block's clock component; a nop completes all earlier ones. An LL packet
// carries its writer's epoch, so the reader (and what the reader computes
// from it: a data dependency) is ordered after that write.
//
// A run first checks races on sparse clocks (sparseclock.go): per agent
// held, an entry and how many joins it travelled, dropped past three;
// at each kernel end a rank's host keeps its whole clock as a snapshot
// and hands its blocks its own entry, which stands for the snapshot. Their
// entries are never above the exact ones, so an access they order is
// ordered; one they do not may be a path they dropped, so the run stops
// there and Run repeats it on the exact clocks, whose report is the
// verdict. The sparse pass costs the same per op at any rank count.
//
// The exact clocks have an entry per agent (every block, and a proxy and
// a host per rank: 8448 for a 128-rank ring allreduce), so they are
// persistent trees shared copy-on-write (clock.go): a token's or
// packet's snapshot is a pointer, and a join visits only the subtrees
// the two clocks do not share and that the receiver is not already known
// to dominate (each node remembers the last two it absorbed). Their memory
// then grows with what the clocks learn, not with agents × snapshots.
//
// Kernel boundaries: a launch's end orders everything its blocks did
// before the host reads the outputs and writes the next inputs (our model
// of the application's producer and consumer kernels on the same stream).
// A kernel's end fences the rank's own blocks: the host, and the rank's
// next kernel, see their writes and whatever the blocks acquired. It
// publishes the rank's writes to anyone execution-ordered after that end,
// so a relaxed handshake at the start of a launch suffices to read a
// peer's freshly written input, as upstream plans assume. A peer's write
// the rank only knows through relaxed edges is not visible at the rank's
// own kernel end: the host reads outputs then, before the peer's kernel
// has necessarily ended. Port channels run through one in-order proxy
// agent per rank.
//
// Where we differ from upstream MSCCL++ on purpose: reduce_op is honoured
// ("sum" or absent takes the run's reduction, min/max/prod in a plan are
// applied as written); flush waits for the proxy; get copies from its
// source to its destination; packet ops inside a pipeline follow the
// pipeline's windows; the double-scratch half offset applies to every
// scratch access, local or remote. Sizes that do not split evenly into
// chunks are accepted (ir.Layout); an op whose buffer references cover
// different byte counts moves the smallest count. With reuse_resources the
// scratch geometry is the plain chunk geometry: upstream only wraps scratch
// offsets when a chunk exceeds its 64 MiB predefined scratch share, which
// sizes simulated here never reach (Run refuses larger ones).
//
// Collective definitions: allreduce, allgather, reducescatter and alltoall
// as in NCCL (alltoall: block j of rank r's output is block r of rank j's
// input). The upstream fixtures include no sendrecv or broadcast plan, and
// upstream has no reduce, gather or scatter, so these conventions are ours
// (and the compiler's), NCCL's where it has one: the plan's root
// (ir.Plan.Root, 0 when absent) is the root of broadcast (every output is
// the root's input), reduce (the root's output is the reduction of every
// input), gather (the root's output is the inputs in rank order) and
// scatter (rank r's output is the r-th n-th of the root's input); sendrecv
// sends rank r's input to ir.Plan.Peer(r), by default (r+1) mod n. The
// non-root outputs of reduce and gather are undefined (a plan may use them
// as temporary space), except that in place they hold the rank's own
// input, which must survive (collective.go's expected).
//
// Results are checked two ways. The byte-level run feeds small integers
// in the chosen type and reduction over zeroed scratch, which is exact
// (so a right launch is confirmed by integer arithmetic on the inputs'
// recipe, fastcheck.go, without rebuilding the definition) but
// blind to what that one reduction hides (x + 0 = x when an unwritten
// scratch slot is added, max(x, x) = x when a contribution is doubled).
// Options.Symbolic (symbolic.go) instead makes every 8-byte element a
// fingerprint: inputs are keyed hashes of (rank, launch, element),
// scratch and unwritten output start as poison, and every reduction adds
// modulo 2^64 whatever reduce_op says, so an output equals the definition
// only if it holds each expected contribution exactly once (collision odds
// about 2^-64), which implies correctness for sum, min, max and prod in
// every type. That is the per-element mode (Options.PerElement), whose
// cost grows with the message size; by default a symbolic run holds the
// same proof on byte ranges instead (symrange.go): runs of affine
// fingerprints V·g^x over the prime field 2^61−1, one run per input,
// output and scratch array to begin with, split only where ops touch, so
// its cost grows with the ops. It agrees with the per-element mode on
// every finding, words included (differential tests). Wrong elements
// are decoded back into terms (missing, doubled, wrong chunk, stale
// launch, poison read) and words
// (Mismatch.Terms and Explain, folded into Report.Findings), each with
// the op that last wrote the element (Mismatch.Writer) so the compiler can
// point at the source. In both modes an out-of-place collective must leave
// its input unchanged at the end of every launch (Report.Clobbered, with
// the op that wrote it).
//
// This package reads plans and never changes them; it must not import the
// compiler, the CUDA executor or the runtime.
package cpu
