// Package cpudev is the CPU device of the communicator (runtime/comm):
// memory that ranks in different processes of one node share, as POSIX
// shared memory. An allocation is a memfd (memfd_create; where the kernel
// lacks it, a file in /dev/shm unlinked as soon as it is opened), mapped
// with mmap; a peer maps the same pages from the descriptor, which
// the communicator passes over a Unix domain socket with SCM_RIGHTS. No
// name ever exists in a file system (or only for the instant between
// open and unlink), so a process that dies leaks nothing: the pages go
// when the last descriptor and mapping do.
//
// It also paces the threads that poll the memory for words other
// processes write (Backoff): spin, sched_yield, nanosleep, never a park
// in the Go scheduler.
//
// cpudev owns allocation, mapping and that pacing only; what runs on the
// memory is executor/host's, how handles travel is runtime/comm's.
package cpudev
