package main

/*
#include <stdlib.h>
*/
import "C"

import (
	"unsafe"

	"github.com/msccl-go/msccl-go/runtime/cuda"
)

// memAlloc is ncclMemAlloc: host memory on the cpu device (the device's
// buffers are host pointers), device memory of the current context on
// the cuda device.
func memAlloc(device string, n int64) (unsafe.Pointer, error) {
	if device == "cpu" {
		p := C.calloc(1, C.size_t(n))
		if p == nil {
			return nil, errorf(ncclSystemError, "ncclMemAlloc: %d bytes: out of memory", n)
		}
		return p, nil
	}
	d, err := cuda.Malloc(n)
	if err != nil {
		return nil, err
	}
	return *(*unsafe.Pointer)(unsafe.Pointer(&d)), nil
}

func memFree(device string, p unsafe.Pointer) error {
	if p == nil {
		return nil
	}
	if device == "cpu" {
		C.free(p)
		return nil
	}
	return cuda.Free(*(*cuda.DevicePtr)(unsafe.Pointer(&p)))
}
