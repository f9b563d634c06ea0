// Package cudaexec runs an ir.Plan on NVIDIA GPUs through the generic
// executor kernel of kernels/: it sizes and allocates scratch from
// ir.Layout, builds the memory and port channels and semaphores between
// ranks, encodes and uploads every block's op table once per (buffers,
// size, data type, reduction), launches one kernel per rank per collective,
// serves port channels from a host proxy goroutine, and turns the kernel's
// watchdog records into an error that lists every stuck block.
//
// All ranks live in this process, each with its own stream, several per
// GPU allowed: every rank on device 0 by default, in runtime/cuda's
// fallback context; peers on one GPU use each other's device pointers
// directly. Options.Devices places rank r on device Devices[r]
// (devices.go): each device's primary context is retained once, every
// driver call of a rank runs in its device's context (cuda.Context.Do,
// on a locked OS thread), kernels are loaded per device, and device pairs
// that a channel crosses get peer access, or Open refuses the plan naming
// the ranks and devices (PeerAccess reports the matrix). Graphs, the port
// proxy, Reference and Trace stay on one device. Plans with switch channels (NVLink
// multicast) are refused unless Options.AllowMulticast is set, and even
// then this package does not create multicast objects: it never enables
// them on shared machines.
//
// OpenRank runs one rank instead, in a job of one process per rank
// (rankexec.go): the same op-table builder and kernel, over the peers'
// buffers and semaphore words that the communicator (runtime/comm on the
// runtime/cudadev device) mapped into this process through CUDA IPC; its
// port channels are copied by the kernel's threads (PortCopySM). With
// Options.StageInKernel its kernel also copies a collective's staging
// between the caller's buffers and the rank's (EnqueueStaged, kstage.go).
//
// cudaexec builds on runtime/cuda and runtime/nvrtc and the kernels
// package (OpenRank also on runtime/comm and runtime/cudadev); it must not import the CPU executor outside tests (that is the
// oracle its tests compare with, bit for bit).
package cudaexec
