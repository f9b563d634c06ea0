// Package comm is the communicator of one rank in a job of several
// processes: over a bootstrap (runtime/bootstrap) it connects the ranks
// that share a node with Unix domain sockets, exchanges the memory each
// rank registers (Exchange: a Device's Handles, file descriptors passed
// with SCM_RIGHTS), lays out the semaphore words of a plan's memory and
// port channels and pairs them by the plan's rules (Connect: the k-th
// channel from A to B with the k-th from B to A, ir.Plan.Partner), and
// watches the peers, so that a rank that dies turns every wait of the
// others into an error naming it (Err, Dead).
//
// What memory is, how it is mapped and how ops run on it belong to the
// Device (runtime/cpudev for the CPU, runtime/cudadev for GPUs) and to the
// executor that uses the communicator (executor/host, executor/cuda's
// OpenRank). comm knows plans
// only through their channel lists, and must not import an executor.
package comm
