package cuda

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"
)

// ErrNoDriver is wrapped by every error caused by a missing CUDA driver:
// libcuda.so.1 cannot be loaded, or cuInit reports no usable device.
var ErrNoDriver = errors.New("cuda: no CUDA driver or device")

// CUresult codes that callers test for.
const (
	Success                   = 0
	ErrorInvalidValue         = 1
	ErrorOutOfMemory          = 2
	ErrorNotInitialized       = 3
	ErrorNoDevice             = 100
	ErrorInvalidDevice        = 101
	ErrorInvalidImage         = 200
	ErrorInvalidContext       = 201
	ErrorInvalidHandle        = 400
	ErrorNotFound             = 500
	ErrorNotReady             = 600
	ErrorPeerAccessEnabled    = 704
	ErrorNotSupported         = 801
	ErrorStreamCaptureInvalid = 901
	// CodeMissingSymbol is this package's own code: the loaded driver does
	// not export the entry point the call needs.
	CodeMissingSymbol = -1
)

// Error is a failed driver call.
type Error struct {
	Call string // driver entry point, e.g. "cuMemAlloc"
	Code int    // CUresult
	Name string // e.g. "CUDA_ERROR_INVALID_VALUE", from cuGetErrorName
	Msg  string // cuGetErrorString's text, or extra detail (a JIT log)
}

func (e *Error) Error() string {
	s := fmt.Sprintf("cuda: %s: %s (%d)", e.Call, e.Name, e.Code)
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	return s
}

// Unwrap lets errors.Is(err, ErrNoDriver) hold for "no device" results.
func (e *Error) Unwrap() error {
	if e.Code == ErrorNoDevice {
		return ErrNoDriver
	}
	return nil
}

// IsCode reports whether err is a driver *Error with the given CUresult.
func IsCode(err error, code int) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// knownNames covers the codes tests and callers look at, for when
// cuGetErrorName itself cannot answer (no driver, or a code it rejects).
var knownNames = map[int]string{
	Success: "CUDA_SUCCESS", ErrorInvalidValue: "CUDA_ERROR_INVALID_VALUE",
	ErrorOutOfMemory: "CUDA_ERROR_OUT_OF_MEMORY", ErrorNotInitialized: "CUDA_ERROR_NOT_INITIALIZED",
	ErrorNoDevice: "CUDA_ERROR_NO_DEVICE", ErrorInvalidDevice: "CUDA_ERROR_INVALID_DEVICE",
	ErrorInvalidImage: "CUDA_ERROR_INVALID_IMAGE", ErrorInvalidContext: "CUDA_ERROR_INVALID_CONTEXT",
	ErrorInvalidHandle: "CUDA_ERROR_INVALID_HANDLE", ErrorNotFound: "CUDA_ERROR_NOT_FOUND",
	ErrorNotReady: "CUDA_ERROR_NOT_READY", ErrorPeerAccessEnabled: "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED",
	ErrorNotSupported: "CUDA_ERROR_NOT_SUPPORTED", ErrorStreamCaptureInvalid: "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
	CodeMissingSymbol: "MSCCL_CUDA_SYMBOL_MISSING",
}

// ErrorName returns the CUDA name of a CUresult code.
func ErrorName(code int) string {
	if code != CodeMissingSymbol && loaded {
		var s *C.char
		if C.mc_cuGetErrorName(C.int(code), &s) == 0 && s != nil {
			return C.GoString(s)
		}
	}
	if n, ok := knownNames[code]; ok {
		return n
	}
	return fmt.Sprintf("CUDA_ERROR_UNKNOWN_%d", code)
}

func errorString(code int) string {
	if code == CodeMissingSymbol {
		return "the loaded libcuda does not export this entry point"
	}
	var s *C.char
	if loaded && C.mc_cuGetErrorString(C.int(code), &s) == 0 && s != nil {
		return C.GoString(s)
	}
	return ""
}

// check turns a CUresult into nil or *Error.
func check(call string, r C.int) error {
	if r == 0 {
		return nil
	}
	c := int(r)
	return &Error{Call: call, Code: c, Name: ErrorName(c), Msg: errorString(c)}
}

var (
	initOnce sync.Once
	initErr  error
	loaded   bool // libcuda symbols resolved; set once inside initOnce
)

// Init loads libcuda and calls cuInit(0). It is idempotent and safe for
// concurrent use; every other function calls it, so calling it first is
// only needed to learn early whether CUDA is usable.
func Init() error {
	initOnce.Do(func() {
		if msg := C.mc_load(); msg != nil {
			initErr = fmt.Errorf("%w: dlopen libcuda.so.1: %s", ErrNoDriver, C.GoString(msg))
			return
		}
		loaded = true
		if err := check("cuInit", C.mc_cuInit(0)); err != nil {
			// cuInit fails with NO_DEVICE (or INSUFFICIENT_DRIVER etc.) on
			// machines with a driver library but no usable GPU.
			initErr = fmt.Errorf("%w: %w", ErrNoDriver, err)
		}
	})
	return initErr
}

// out is a driver call that returns one value through a pointer: f makes
// the call with a pointer to the value, checked under the name call; the
// zero value (0, nil context) comes back with an error.
func out[T any](call string, f func(*T) C.int) (T, error) {
	var v T
	if err := check(call, f(&v)); err != nil {
		var zero T
		return zero, err
	}
	return v, nil
}

// initOut is out after Init, for a call that needs no handle first.
func initOut[T any](call string, f func(*T) C.int) (T, error) {
	if err := Init(); err != nil {
		var zero T
		return zero, err
	}
	return out(call, f)
}

// deviceOut is out for a call on device d's handle (cuDeviceGet, after
// Init), which f is given with the pointer.
func deviceOut[T any](d Device, call string, f func(v *T, h C.int) C.int) (T, error) {
	h, err := d.handle()
	if err != nil {
		var zero T
		return zero, err
	}
	return out(call, func(v *T) C.int { return f(v, h) })
}

// DriverVersion returns the driver's CUDA version as 1000*major + 10*minor.
func DriverVersion() (int, error) {
	v, err := initOut("cuDriverGetVersion", func(v *C.int) C.int { return C.mc_cuDriverGetVersion(v) })
	return int(v), err
}

// HasSymbol reports whether the loaded driver exports a symbol (by its
// exact versioned name, e.g. "cuStreamWriteValue64_v2").
func HasSymbol(name string) bool {
	if Init() != nil {
		return false
	}
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	return C.mc_have(cs) != 0
}

// DeviceCount returns the number of visible CUDA devices.
func DeviceCount() (int, error) {
	n, err := initOut("cuDeviceGetCount", func(n *C.int) C.int { return C.mc_cuDeviceGetCount(n) })
	return int(n), err
}

// Device is a device ordinal (0 .. DeviceCount()-1).
type Device int

// Device attributes (CUdevice_attribute) used by this project.
const (
	AttrMaxThreadsPerBlock          = 1
	AttrMaxSharedMemoryPerBlock     = 8
	AttrMultiprocessorCount         = 16
	AttrPCIBusID                    = 33
	AttrPCIDeviceID                 = 34
	AttrMaxThreadsPerMultiprocessor = 39
	AttrUnifiedAddressing           = 41
	AttrComputeCapabilityMajor      = 75
	AttrComputeCapabilityMinor      = 76
	AttrMaxSharedMemoryPerBlockOpt  = 97
	AttrMaxBlocksPerMultiprocessor  = 106
)

func (d Device) handle() (C.int, error) {
	return initOut("cuDeviceGet", func(h *C.int) C.int { return C.mc_cuDeviceGet(h, C.int(d)) })
}

// Name returns the device's marketing name ("NVIDIA H200").
func (d Device) Name() (string, error) {
	h, err := d.handle()
	if err != nil {
		return "", err
	}
	buf := make([]byte, 256)
	if err := check("cuDeviceGetName", C.mc_cuDeviceGetName((*C.char)(unsafe.Pointer(&buf[0])), C.int(len(buf)), h)); err != nil {
		return "", err
	}
	for i, b := range buf {
		if b == 0 {
			return string(buf[:i]), nil
		}
	}
	return string(buf), nil
}

// Attribute returns a CUdevice_attribute value (see the Attr constants).
func (d Device) Attribute(attr int) (int, error) {
	v, err := deviceOut(d, "cuDeviceGetAttribute", func(v *C.int, h C.int) C.int {
		return C.mc_cuDeviceGetAttribute(v, C.int(attr), h)
	})
	return int(v), err
}

// ComputeCapability returns (9, 0) for an H100/H200.
func (d Device) ComputeCapability() (major, minor int, err error) {
	if major, err = d.Attribute(AttrComputeCapabilityMajor); err != nil {
		return 0, 0, err
	}
	if minor, err = d.Attribute(AttrComputeCapabilityMinor); err != nil {
		return 0, 0, err
	}
	return major, minor, nil
}

// Context is a retained primary context of one device.
type Context struct {
	dev      Device
	h        C.uintptr_t
	released bool
	owned    bool // made by NewContext: Destroy, not Release
	mu       sync.Mutex
}

// NewContext creates a context of the device's own, separate from the
// primary context, and makes it current on the calling OS thread (lock
// the thread first); it never becomes the fallback context. The port
// proxy issues its copies there: a context's streams share its
// CUDA_DEVICE_MAX_CONNECTIONS hardware queues, and only another context's
// queue can never sit behind a wait for the ranks' kernels
// (docs/rationale.md, "Why does the port proxy have a context of its
// own?"). Costs device memory (a context's reserve) and Destroy.
func (d Device) NewContext() (*Context, error) {
	ctx, err := deviceOut(d, "cuCtxCreate", func(ctx *C.uintptr_t, h C.int) C.int {
		return C.mc_cuCtxCreate(ctx, h)
	})
	if err != nil {
		return nil, err
	}
	return &Context{dev: d, h: ctx, owned: true}, nil
}

// MakeCurrent makes c current on the calling OS thread without making it
// the fallback context (SetCurrent does both).
func (c *Context) MakeCurrent() error {
	if c == nil || c.h == 0 {
		return errors.New("cuda: MakeCurrent on a nil or released context")
	}
	return check("cuCtxSetCurrent", C.mc_cuCtxSetCurrent(c.h))
}

// Destroy destroys a context made by NewContext, with its streams and
// memory. The calling thread is left without a current context if c was
// current there.
func (c *Context) Destroy() error {
	if c == nil || !c.owned {
		return errors.New("cuda: Destroy of a context NewContext did not make (Release a primary context)")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.released {
		return errors.New("cuda: context destroyed twice")
	}
	if err := check("cuCtxDestroy", C.mc_cuCtxDestroy(c.h)); err != nil {
		return err
	}
	c.released = true
	return nil
}

var fallbackSet sync.Once

// PrimaryContext retains the device's primary context (shared with the CUDA
// runtime and with PyTorch in the same process). The first one retained in
// the process becomes the fallback context (see the package doc).
func (d Device) PrimaryContext() (*Context, error) {
	ctx, err := deviceOut(d, "cuDevicePrimaryCtxRetain", func(ctx *C.uintptr_t, h C.int) C.int {
		return C.mc_cuDevicePrimaryCtxRetain(ctx, h)
	})
	if err != nil {
		return nil, err
	}
	fallbackSet.Do(func() { C.mc_set_fallback_ctx(ctx) })
	return &Context{dev: d, h: ctx}, nil
}

// Device returns the context's device.
func (c *Context) Device() Device { return c.dev }

// SetCurrent makes c current on the calling OS thread and the package's
// fallback context. Call runtime.LockOSThread first when the goroutine must
// keep using c (several devices in one process).
func (c *Context) SetCurrent() error {
	if c == nil || c.h == 0 {
		return errors.New("cuda: SetCurrent on a nil or released context")
	}
	if err := check("cuCtxSetCurrent", C.mc_cuCtxSetCurrent(c.h)); err != nil {
		return err
	}
	C.mc_set_fallback_ctx(c.h)
	return nil
}

// Release drops the retain taken by PrimaryContext. Releasing twice is an
// error, not a double release in the driver.
func (c *Context) Release() error {
	if c == nil {
		return errors.New("cuda: Release on a nil context")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.owned {
		return errors.New("cuda: Release of a context made by NewContext (Destroy it)")
	}
	if c.released {
		return errors.New("cuda: context released twice")
	}
	h, err := c.dev.handle()
	if err != nil {
		return err
	}
	if err := check("cuDevicePrimaryCtxRelease", C.mc_cuDevicePrimaryCtxRelease(h)); err != nil {
		return err
	}
	c.released = true
	return nil
}

// detachCurrent leaves the calling OS thread with no current context; tests
// use it to exercise the fallback context.
func detachCurrent() error {
	if err := Init(); err != nil {
		return err
	}
	return check("cuCtxSetCurrent", C.mc_cuCtxSetCurrent(0))
}

// Do runs f with c current on the calling goroutine's OS thread, locked
// for the duration, and then puts back whatever was current there before
// (no context at all included, so that later calls on that thread find
// the fallback again). c does not become the fallback context. This is
// how one goroutine drives ranks on several devices: every driver call
// that makes or uses a device's streams, events, memory, modules or
// launches runs inside that device's Do, because a goroutine may move to
// another thread between two calls, and a call made outside any Do would
// go to the fallback context, which belongs to one device only.
func (c *Context) Do(f func() error) error {
	if c == nil || c.h == 0 {
		return errors.New("cuda: Do on a nil or released context")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var prev C.uintptr_t
	if err := check("cuCtxGetCurrent", C.mc_cuCtxGetCurrent(&prev)); err != nil {
		return err
	}
	if prev != c.h {
		if err := check("cuCtxSetCurrent", C.mc_cuCtxSetCurrent(c.h)); err != nil {
			return err
		}
		// Restored even when f fails or panics: the thread goes back to
		// the pool with the context it came with.
		defer C.mc_cuCtxSetCurrent(prev)
	}
	return f()
}

// currentContext is the calling OS thread's current context handle, 0 for
// none; tests use it to see what Do leaves behind.
func currentContext() (uintptr, error) {
	h, err := initOut("cuCtxGetCurrent", func(h *C.uintptr_t) C.int { return C.mc_cuCtxGetCurrent(h) })
	return uintptr(h), err
}
