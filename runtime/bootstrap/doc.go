// Package bootstrap is the rendezvous of a multi-process job: the ranks
// find each other over TCP, prove they belong to the same job, and then
// exchange small byte blobs (all-gather), synchronise (barrier) and send
// each other ordered messages by (peer, tag). The communicator uses it to
// trade IPC handles, shared-memory names and socket addresses; it is not a
// data path for tensors.
//
// Rank 0 runs the root, a star every rank connects to (docs/architecture.md
// describes the wire format, the roles and the timeouts). A rendezvous is
// named by a UniqueID (root address + 128-bit secret) or read from the
// launcher's environment by FromEnv: torchrun, Open MPI and Slurm, with
// MSCCL_* overrides. Spawn starts N local processes of a program with that
// environment set, the way msccl-bench --procs does.
//
// Every blocking step has a timeout, and failures are decided at the root
// and sent to every rank, so all ranks fail with the same error naming the
// same ranks: *TimeoutError (who did not arrive), *PeerError (who died or
// closed), *ProtocolError (who sent something malformed). Such a failure
// is final: Failed() is closed, Err() says why, and every later call
// returns it. Only a Recv that got nothing in time leaves the bootstrap
// usable.
//
// It owns its sockets and child processes only: it must not touch CUDA,
// devices, shared memory or plans (that is the communicator's job, above
// it), and it imports nothing from this module but internal/hostid (the
// node identity runtime/topo reports too).
package bootstrap
