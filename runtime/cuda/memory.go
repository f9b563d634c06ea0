package cuda

/*
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"
)

// DevicePtr is a device (or mapped host, or IPC-opened) address in the
// unified virtual address space.
type DevicePtr uint64

// Host allocation flags (CU_MEMHOSTALLOC_*).
const (
	hostAllocPortable  = 1
	hostAllocDeviceMap = 2
)

func badSize(call string, n int64) error {
	if n < 0 {
		return fmt.Errorf("cuda: %s: negative size %d", call, n)
	}
	return nil
}

// Malloc allocates n bytes of device memory in the current (or fallback)
// context. n == 0 is rejected, as the driver does.
func Malloc(n int64) (DevicePtr, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	if n <= 0 {
		return 0, fmt.Errorf("cuda: cuMemAlloc: size %d must be positive", n)
	}
	var p C.uint64_t
	if err := check("cuMemAlloc", C.mc_cuMemAlloc(&p, C.size_t(n))); err != nil {
		return 0, err
	}
	return DevicePtr(p), nil
}

// Free releases memory from Malloc.
func Free(p DevicePtr) error {
	if err := Init(); err != nil {
		return err
	}
	return check("cuMemFree", C.mc_cuMemFree(C.uint64_t(p)))
}

// MemcpyHtoD copies src to device memory. Like MemcpyDtoD and Memset8 it
// returns only once the data is in place (it waits for the legacy default
// stream), so work queued afterwards on any stream sees it. It is not
// allowed while this thread captures a graph.
func MemcpyHtoD(dst DevicePtr, src []byte) error {
	if err := Init(); err != nil {
		return err
	}
	if len(src) == 0 {
		return nil
	}
	return check("cuMemcpyHtoD", C.mc_cuMemcpyHtoD(C.uint64_t(dst), unsafe.Pointer(&src[0]), C.size_t(len(src))))
}

// MemcpyDtoH copies len(dst) bytes from device memory (synchronous).
func MemcpyDtoH(dst []byte, src DevicePtr) error {
	if err := Init(); err != nil {
		return err
	}
	if len(dst) == 0 {
		return nil
	}
	return check("cuMemcpyDtoH", C.mc_cuMemcpyDtoH(unsafe.Pointer(&dst[0]), C.uint64_t(src), C.size_t(len(dst))))
}

// MemcpyDtoD copies n bytes between device addresses and waits for it.
func MemcpyDtoD(dst, src DevicePtr, n int64) error {
	if err := Init(); err != nil {
		return err
	}
	if err := badSize("cuMemcpyDtoD", n); err != nil || n == 0 {
		return err
	}
	return check("cuMemcpyDtoD", C.mc_cuMemcpyDtoD(C.uint64_t(dst), C.uint64_t(src), C.size_t(n)))
}

// Memset8 sets n bytes at p to v and waits for it.
func Memset8(p DevicePtr, v byte, n int64) error {
	if err := Init(); err != nil {
		return err
	}
	if err := badSize("cuMemsetD8", n); err != nil || n == 0 {
		return err
	}
	return check("cuMemsetD8", C.mc_cuMemsetD8(C.uint64_t(p), C.uchar(v), C.size_t(n)))
}

// HostMem is pinned host memory mapped into every context's address space
// (cuMemHostAlloc with DEVICEMAP|PORTABLE). Bytes is the host view; Dev is
// the address kernels use. The host side sees device writes only after the
// kernel's stores are fenced at system scope (or the stream is synchronized);
// Go code that polls it should read with sync/atomic on aligned words.
type HostMem struct {
	Bytes []byte
	Dev   DevicePtr

	mu   sync.Mutex
	host unsafe.Pointer
}

// HostAllocMapped allocates n bytes of pinned, mapped host memory, zeroed.
func HostAllocMapped(n int64) (*HostMem, error) {
	if err := Init(); err != nil {
		return nil, err
	}
	if n <= 0 {
		return nil, fmt.Errorf("cuda: cuMemHostAlloc: size %d must be positive", n)
	}
	var p unsafe.Pointer
	if err := check("cuMemHostAlloc", C.mc_cuMemHostAlloc(&p, C.size_t(n), hostAllocPortable|hostAllocDeviceMap)); err != nil {
		return nil, err
	}
	var d C.uint64_t
	if err := check("cuMemHostGetDevicePointer", C.mc_cuMemHostGetDevicePointer(&d, p)); err != nil {
		C.mc_cuMemFreeHost(p)
		return nil, err
	}
	b := unsafe.Slice((*byte)(p), n)
	clear(b)
	return &HostMem{Bytes: b, Dev: DevicePtr(d), host: p}, nil
}

// Word is the 8-byte-aligned 64-bit word at byte offset off, for atomic
// access from the host while a kernel reads or writes it through Dev.
func (h *HostMem) Word(off int64) *uint64 {
	if off < 0 || off%8 != 0 || off+8 > int64(len(h.Bytes)) {
		panic(fmt.Sprintf("cuda: HostMem.Word(%d) outside %d bytes or unaligned", off, len(h.Bytes)))
	}
	return (*uint64)(unsafe.Pointer(&h.Bytes[off]))
}

// Free releases the allocation; Bytes becomes nil. Freeing twice is an error.
func (h *HostMem) Free() error {
	if h == nil {
		return errors.New("cuda: Free on a nil HostMem")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.host == nil {
		return errors.New("cuda: HostMem freed twice")
	}
	if err := check("cuMemFreeHost", C.mc_cuMemFreeHost(h.host)); err != nil {
		return err
	}
	h.host, h.Bytes, h.Dev = nil, nil, 0
	return nil
}
