// Package cudadev is the CUDA device of the communicator (runtime/comm):
// device memory that ranks in different processes of one node share.
// Open picks this process's GPU (Select: the local rank's, or several
// ranks per GPU when asked) and retains its primary context. An
// allocation is either a virtual-memory allocation (cuMemCreate) whose
// POSIX file descriptor the communicator passes to peers over its Unix
// sockets with SCM_RIGHTS, or cuMemAlloc memory whose legacy 64-byte IPC
// handle travels as bytes; a peer maps it with cuMemImportFromShareableHandle
// and cuMemMap, or cuIpcOpenMemHandle. The semaphore words of a plan's
// channels (comm.Connect) are such memory too, so kernels signal peers in
// device memory. A peer in the exporter's own process (ranks as
// goroutines) is given the owner's allocation at the owner's address
// instead of a second mapping, found by the tag every handle carries, so
// that no kernel reaches one location through two virtual addresses.
//
// cudadev owns choosing the device, allocating, exporting, importing and
// unmapping; how handles travel is runtime/comm's, what runs on the
// memory is executor/cuda's (OpenRank). It never creates multicast
// objects.
package cudadev
