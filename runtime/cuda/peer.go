package cuda

/*
#include "shim.h"
*/
import "C"

import (
	"errors"
	"unsafe"
)

// CanAccessPeer reports whether device a can map device b's memory (NVLink
// or PCIe P2P). A device can always access itself.
func CanAccessPeer(a, b Device) (bool, error) {
	ha, err := a.handle()
	if err != nil {
		return false, err
	}
	hb, err := b.handle()
	if err != nil {
		return false, err
	}
	if ha == hb {
		return true, nil
	}
	var can C.int
	if err := check("cuDeviceCanAccessPeer", C.mc_cuDeviceCanAccessPeer(&can, ha, hb)); err != nil {
		return false, err
	}
	return can != 0, nil
}

// EnablePeerAccess lets kernels in c access memory allocated in peer. It is
// a no-op for the same context and when access is already enabled. The
// calling thread's current context is unchanged afterwards.
func (c *Context) EnablePeerAccess(peer *Context) error {
	if err := Init(); err != nil {
		return err
	}
	if c == nil || peer == nil || c.h == 0 || peer.h == 0 {
		return errors.New("cuda: cuCtxEnablePeerAccess: nil context")
	}
	if c.h == peer.h {
		return nil
	}
	r := C.mc_enablePeer(c.h, peer.h)
	if r == ErrorPeerAccessEnabled {
		return nil
	}
	return check("cuCtxEnablePeerAccess", r)
}

// IpcMemHandle is cuIpcGetMemHandle's opaque 64-byte handle, safe to send
// to another process.
type IpcMemHandle [64]byte

// IpcGetMemHandle exports an allocation from Malloc for other processes.
func IpcGetMemHandle(p DevicePtr) (IpcMemHandle, error) {
	var h IpcMemHandle
	if err := Init(); err != nil {
		return h, err
	}
	err := check("cuIpcGetMemHandle", C.mc_cuIpcGetMemHandle((*C.uchar)(unsafe.Pointer(&h[0])), C.uint64_t(p)))
	return h, err
}

// IpcOpenMemHandle maps another process's allocation into this one, with
// CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS so a handle from another GPU works.
// The driver refuses to open a handle exported by the same process:
// CUDA_ERROR_INVALID_CONTEXT on driver 580 / CUDA 13 (H200). In-process
// ranks share pointers directly instead.
func IpcOpenMemHandle(h IpcMemHandle) (DevicePtr, error) {
	p, err := initOut("cuIpcOpenMemHandle", func(p *C.uint64_t) C.int {
		return C.mc_cuIpcOpenMemHandle(p, (*C.uchar)(unsafe.Pointer(&h[0])), 1)
	})
	return DevicePtr(p), err
}

// IpcCloseMemHandle unmaps memory from IpcOpenMemHandle.
func IpcCloseMemHandle(p DevicePtr) error {
	if err := Init(); err != nil {
		return err
	}
	return check("cuIpcCloseMemHandle", C.mc_cuIpcCloseMemHandle(C.uint64_t(p)))
}
