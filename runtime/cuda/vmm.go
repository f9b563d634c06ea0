package cuda

/*
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"
)

// Device attributes of virtual memory management.
const (
	AttrVirtualMemoryManagement = 102 // cuMemCreate, cuMemMap, ... work
	AttrHandleTypePosixFD       = 103 // cuMemExportToShareableHandle to a POSIX fd works
)

// vmmCheck turns a helper's result into nil or an *Error naming the
// driver call that failed.
func vmmCheck(call *C.char, r C.int) error {
	if r == 0 {
		return nil
	}
	name := "cuMem (VMM)"
	if call != nil {
		name = C.GoString(call)
	}
	return check(name, r)
}

// VMMSupported reports whether device d can make virtual-memory
// allocations that other processes import from a POSIX file descriptor,
// and if not, why (a missing entry point or a device attribute).
func VMMSupported(d Device) (bool, string, error) {
	if err := Init(); err != nil {
		return false, "", err
	}
	for _, s := range []string{"cuMemCreate", "cuMemExportToShareableHandle", "cuMemImportFromShareableHandle",
		"cuMemAddressReserve", "cuMemMap", "cuMemSetAccess", "cuMemUnmap", "cuMemAddressFree", "cuMemRelease",
		"cuMemGetAllocationGranularity"} {
		if !HasSymbol(s) {
			return false, "the loaded libcuda does not export " + s, nil
		}
	}
	for _, a := range []struct {
		attr int
		what string
	}{{AttrVirtualMemoryManagement, "virtual memory management"}, {AttrHandleTypePosixFD, "POSIX file descriptor handles"}} {
		v, err := d.Attribute(a.attr)
		if err != nil {
			return false, "", err
		}
		if v == 0 {
			return false, fmt.Sprintf("device %d does not support %s", int(d), a.what), nil
		}
	}
	return true, "", nil
}

// VMM is a virtual-memory allocation mapped into this process: one this
// process created (VMMCreate) or one another process exported as a file
// descriptor (VMMImport). The physical memory lives until every process
// that holds a handle to it has released it, so an importer's mapping
// stays valid when the exporter frees its own or dies.
type VMM struct {
	dev    Device
	handle uint64
	ptr    DevicePtr
	size   int64 // mapped bytes, a multiple of the granularity

	mu    sync.Mutex
	freed bool
}

// VMMGranularity is the size every VMM allocation on d is rounded up to.
func VMMGranularity(d Device) (int64, error) {
	h, err := d.handle()
	if err != nil {
		return 0, err
	}
	var g C.size_t
	var call *C.char
	r := C.mc_vmm_granularity(h, &g, &call)
	if err := vmmCheck(call, r); err != nil {
		return 0, err
	}
	if g == 0 {
		return 0, errors.New("cuda: cuMemGetAllocationGranularity: granularity 0")
	}
	return int64(g), nil
}

// VMMCreate allocates at least n bytes of device memory on d that can be
// exported as a POSIX file descriptor, maps it and gives d read/write
// access. The size is rounded up to VMMGranularity. The memory is not
// zeroed.
func VMMCreate(d Device, n int64) (*VMM, error) {
	if n <= 0 {
		return nil, fmt.Errorf("cuda: cuMemCreate: size %d must be positive", n)
	}
	g, err := VMMGranularity(d)
	if err != nil {
		return nil, err
	}
	h, _ := d.handle()
	size := (n + g - 1) / g * g
	var handle, ptr C.uint64_t
	var call *C.char
	r := C.mc_vmm_create(h, C.size_t(size), C.size_t(g), &handle, &ptr, &call)
	if err := vmmCheck(call, r); err != nil {
		return nil, fmt.Errorf("%w (%d bytes on device %d)", err, size, int(d))
	}
	return &VMM{dev: d, handle: uint64(handle), ptr: DevicePtr(ptr), size: size}, nil
}

// ExportFD returns a new POSIX file descriptor for the allocation, to pass
// to another process (over a Unix socket with SCM_RIGHTS); the caller
// closes it.
func (v *VMM) ExportFD() (int, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.freed {
		return -1, errors.New("cuda: cuMemExportToShareableHandle: allocation already freed")
	}
	var fd C.int
	var call *C.char
	r := C.mc_vmm_export(C.uint64_t(v.handle), &fd, &call)
	if err := vmmCheck(call, r); err != nil {
		return -1, err
	}
	return int(fd), nil
}

// VMMImport maps an allocation of size bytes (as its exporter's Size
// says) from a descriptor another process exported, with read/write
// access for d. The descriptor stays the caller's: it may be closed as
// soon as VMMImport returns.
func VMMImport(d Device, fd int, size int64) (*VMM, error) {
	if fd < 0 {
		return nil, fmt.Errorf("cuda: cuMemImportFromShareableHandle: descriptor %d", fd)
	}
	g, err := VMMGranularity(d)
	if err != nil {
		return nil, err
	}
	if size <= 0 || size%g != 0 {
		return nil, fmt.Errorf("cuda: cuMemImportFromShareableHandle: size %d is not a positive multiple of the granularity %d", size, g)
	}
	h, _ := d.handle()
	var handle, ptr C.uint64_t
	var call *C.char
	r := C.mc_vmm_import(h, C.int(fd), C.size_t(size), C.size_t(g), &handle, &ptr, &call)
	if err := vmmCheck(call, r); err != nil {
		return nil, fmt.Errorf("%w (%d bytes on device %d)", err, size, int(d))
	}
	return &VMM{dev: d, handle: uint64(handle), ptr: DevicePtr(ptr), size: size}, nil
}

// Ptr is the allocation's address in this process.
func (v *VMM) Ptr() DevicePtr { return v.ptr }

// Size is the mapped size (a multiple of the granularity).
func (v *VMM) Size() int64 { return v.size }

// Free unmaps the allocation, frees its address range and releases this
// process's handle. Freeing twice is an error, not a double release.
func (v *VMM) Free() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.freed {
		return errors.New("cuda: VMM allocation freed twice")
	}
	v.freed = true
	var call *C.char
	r := C.mc_vmm_free(C.uint64_t(v.handle), C.uint64_t(v.ptr), C.size_t(v.size), &call)
	return vmmCheck(call, r)
}
