package main

/*
#include <stdint.h>
#include <stdlib.h>
*/
import "C"

import (
	"unsafe"
)

// msccl_include_path stores in *out the directory of this library's
// device headers (msccl/msccl.cuh), written out on first use: the -I
// for nvcc, CuPy's RawKernel options or NVRTC.
//
//export msccl_include_path
func msccl_include_path(out **C.char, errmsg **C.char) C.int {
	return infoExport("msccl_include_path", func(int64) ([]byte, error) {
		p, err := includePath()
		return []byte(p), err
	}, 0, out, errmsg)
}

// msccl_comm_alloc_buffer allocates size bytes, zeroed, that
// msccl_comm_register can share with the node's ranks: shared memory on
// the cpu device, exportable device memory on cuda. *buf receives its
// handle (msccl_release frees it), *addr its address in this process.
//
//export msccl_comm_alloc_buffer
func msccl_comm_alloc_buffer(comm C.int64_t, size C.int64_t, buf *C.int64_t, addr *C.uint64_t, errmsg **C.char) C.int {
	return handleExport("msccl_comm_alloc_buffer", "buf", buf, errmsg, func() (int64, error) {
		if addr == nil {
			return 0, invalid("msccl_comm_alloc_buffer: addr is NULL")
		}
		h, a, err := allocBuffer(int64(comm), int64(size))
		*addr = C.uint64_t(a)
		return h, err
	})
}

// msccl_comm_register shares the n bytes at p, which must be the whole
// of a buffer from msccl_comm_alloc_buffer, with every rank of the node;
// *reg receives the registration's handle. Collective: every rank calls
// it, and memory one rank cannot share (memory of its own process, part
// of a buffer) fails the call on every rank with that rank's reason.
//
//export msccl_comm_register
func msccl_comm_register(comm C.int64_t, p unsafe.Pointer, n C.size_t, reg *C.int64_t, errmsg **C.char) C.int {
	return handleExport("msccl_comm_register", "reg", reg, errmsg, func() (int64, error) {
		return register(int64(comm), p, int64(n))
	})
}

// msccl_comm_channels builds kind ("memory" or "port") channels to the
// npeers ranks at peers (a peer may appear several times; the k-th
// channel from A to B pairs with the k-th from B to A), reading from the
// registration local and writing into the peers' buffers of remote.
// Collective. *handles receives the array's handle and *info its JSON:
// {kind, ptr, count, handle_bytes, nbytes, device, watch: {records,
// timeout_ns, rank, nrecords}}; ptr is the array's device address on
// cuda and, on the cpu device, a host copy that lives until the handle
// is released. Port channels are served by a proxy of this process with
// the default copy and signal.
//
//export msccl_comm_channels
func msccl_comm_channels(comm C.int64_t, kind *C.char, peers *C.int64_t, npeers C.int64_t, local C.int64_t, remote C.int64_t, handles *C.int64_t, info **C.char, errmsg **C.char) C.int {
	return handleExport("msccl_comm_channels", "handles", handles, errmsg, func() (int64, error) {
		if info == nil {
			return 0, invalid("msccl_comm_channels: info is NULL")
		}
		if npeers < 0 || (peers == nil && npeers > 0) {
			return 0, invalid("msccl_comm_channels: %d peers at %p", int64(npeers), peers)
		}
		ps := make([]int, int(npeers))
		if npeers > 0 {
			for i, p := range unsafe.Slice((*int64)(unsafe.Pointer(peers)), int(npeers)) {
				ps[i] = int(p)
			}
		}
		h, js, err := buildChannels(int64(comm), goString(kind), ps, int64(local), int64(remote))
		if err == nil {
			setStr(info, string(js))
		}
		return h, err
	})
}

// msccl_handles_check reads the watchdog records of a handle array:
// MSCCL_ERR_RUN naming rank, block, channel, peer and counts of each wait
// a kernel's watchdog ended (and a failed port proxy), else MSCCL_OK.
//
//export msccl_handles_check
func msccl_handles_check(handles C.int64_t, errmsg **C.char) C.int {
	st, msg := guard(func() error { return checkChannels(int64(handles)) })
	return finish(errmsg, st, msg)
}

// msccl_kernel_compile compiles CUDA source src with NVRTC, this
// library's headers on the include path, for arch ("sm_90", "compute_90";
// NULL or "": device 0's, or compute_90 without a driver) with options,
// a JSON array of further NVRTC options (NULL or "" for none); *kernel
// receives a handle to entry point name (extern "C"). A compilation
// error returns MSCCL_ERR_INPUT with NVRTC's log.
//
//export msccl_kernel_compile
func msccl_kernel_compile(src *C.char, name *C.char, arch *C.char, options *C.char, kernel *C.int64_t, errmsg **C.char) C.int {
	return handleExport("msccl_kernel_compile", "kernel", kernel, errmsg, func() (int64, error) {
		if src == nil {
			return 0, invalid("msccl_kernel_compile: src is NULL")
		}
		return compileKernel(goString(src), goString(name), goString(arch), goString(options))
	})
}

// msccl_kernel_image stores a copy of what NVRTC produced (PTX text, or a
// cubin for an sm_ arch) in *out and its length in *n.
//
//export msccl_kernel_image
func msccl_kernel_image(kernel C.int64_t, out **C.char, n *C.size_t, errmsg **C.char) C.int {
	st, msg := guard(func() error {
		if out == nil || n == nil {
			return invalid("msccl_kernel_image: out or n is NULL")
		}
		img, err := kernelImage(int64(kernel))
		if err != nil {
			return err
		}
		*out, *n = (*C.char)(C.CBytes(img)), C.size_t(len(img))
		return nil
	})
	return finish(errmsg, st, msg)
}

// msccl_kernel_launch queues kernel on stream (a CUstream; 0 the legacy
// default stream) with grid and block (3 dimensions each) and nargs
// arguments passed by value: kinds has one letter per argument (i int32,
// I uint32, l int64, L uint64, f float32, d float64, b bool, p a device
// pointer, w the msccl::Watch of the handle array whose handle the word
// is) and words its value (a float's bits in the low bits). With comm 0
// it runs in the calling thread's current CUDA context (PyTorch's or
// CuPy's); with a cuda communicator, in that rank's context.
//
//export msccl_kernel_launch
func msccl_kernel_launch(kernel C.int64_t, comm C.int64_t, stream C.uint64_t, grid *C.uint32_t, block *C.uint32_t, kinds *C.char, words *C.uint64_t, nargs C.int64_t, errmsg **C.char) C.int {
	st, msg := guard(func() error {
		if grid == nil || block == nil {
			return invalid("msccl_kernel_launch: grid or block is NULL")
		}
		if nargs < 0 || (words == nil && nargs > 0) {
			return invalid("msccl_kernel_launch: %d arguments at %p", int64(nargs), words)
		}
		var g, b [3]uint32
		copy(g[:], unsafe.Slice((*uint32)(unsafe.Pointer(grid)), 3))
		copy(b[:], unsafe.Slice((*uint32)(unsafe.Pointer(block)), 3))
		var ws []uint64
		if nargs > 0 {
			ws = append(ws, unsafe.Slice((*uint64)(unsafe.Pointer(words)), int(nargs))...)
		}
		return launchKernel(int64(kernel), int64(comm), uint64(stream), g, b, goString(kinds), ws)
	})
	return finish(errmsg, st, msg)
}
