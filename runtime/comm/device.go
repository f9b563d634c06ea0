package comm

// Device is where a communicator's memory lives: the CPU (POSIX shared
// memory, runtime/cpudev) or a GPU (runtime/cudadev: legacy CUDA IPC
// handles for cuMemAlloc memory, POSIX file descriptors for cuMem*
// allocations). The
// communicator moves Handles between ranks and never looks inside them.
type Device interface {
	// Name is the device's kind ("cpu", "cuda") in messages.
	Name() string
	// Alloc returns size bytes, zeroed, that peers on this node can map.
	Alloc(size int64) (Memory, error)
	// Import maps a peer's exported memory. It owns h.FD from then on
	// (closes it, or keeps it until the Memory is closed), also on error.
	Import(h Handle) (Memory, error)
}

// Memory is one allocation: local (from Alloc) or a peer's (from Import).
type Memory interface {
	Size() int64
	// Export describes the memory for Import on a peer. The FD stays the
	// Memory's (the communicator sends a copy of it).
	Export() (Handle, error)
	// Close unmaps or frees the memory; closing twice is harmless.
	Close() error
}

// Handle is what a peer needs to map a Memory: opaque bytes (a CUDA IPC
// handle, the size) and, for memory shared through the kernel, a file
// descriptor (a memfd, a cuMem export), -1 when there is none. Descriptors
// travel over a Unix domain socket with SCM_RIGHTS, never as numbers.
type Handle struct {
	Data []byte
	FD   int
}
