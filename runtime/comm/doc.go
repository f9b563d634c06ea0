// Package comm is the communicator of one rank in a job of several
// processes: over a bootstrap (runtime/bootstrap) it connects the ranks
// that share a node with Unix domain sockets, exchanges the memory each
// rank registers (Exchange: a Device's Handles, file descriptors passed
// with SCM_RIGHTS), lays out the semaphore words of memory and port
// channels and pairs them (Connect: the k-th channel from A to B with the
// k-th from B to A), and watches the peers, so that a rank that dies
// turns every wait of the others into an error naming it (Err, Dead).
//
// What memory is, how it is mapped and how ops run on it belong to the
// Device (runtime/cpudev for the CPU, runtime/cudadev for GPUs) and to the
// executor that uses the communicator (executor/host, executor/cuda's
// OpenRank). comm reads no plans: Connect takes a Wiring, a plain list of
// every rank's channel peers and the memory it reaches, which the
// executors derive from their plan (executor/wiring). It must not import
// ir or an executor.
package comm
