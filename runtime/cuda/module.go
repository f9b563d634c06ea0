package cuda

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"unsafe"
)

// Module is a loaded PTX or cubin image.
type Module struct{ h C.uintptr_t }

// Function is a kernel entry point of a Module.
type Function struct {
	h    C.uintptr_t
	mod  *Module
	name string
}

const jitLogSize = 16 << 10

// LoadModule loads a PTX (text) or cubin/fatbin (ELF) image into the current
// context; PTX is JIT-compiled for the device. On failure the error's Msg
// holds the JIT error log, which names the offending PTX line.
func LoadModule(image []byte) (*Module, error) {
	if err := Init(); err != nil {
		return nil, err
	}
	if len(image) == 0 {
		return nil, errors.New("cuda: cuModuleLoadDataEx: empty image")
	}
	// The driver reads PTX up to a NUL; a copy in C memory with one appended
	// also keeps Go memory out of the driver's hands.
	buf := C.malloc(C.size_t(len(image) + 1))
	defer C.free(buf)
	copy(unsafe.Slice((*byte)(buf), len(image)+1), image)
	*(*byte)(unsafe.Add(buf, len(image))) = 0
	errLog := (*C.char)(C.calloc(jitLogSize, 1))
	infoLog := (*C.char)(C.calloc(jitLogSize, 1))
	defer C.free(unsafe.Pointer(errLog))
	defer C.free(unsafe.Pointer(infoLog))
	var h C.uintptr_t
	r := C.mc_cuModuleLoadDataEx(&h, buf, errLog, jitLogSize, infoLog, jitLogSize)
	if r != 0 {
		err := check("cuModuleLoadDataEx", r).(*Error)
		if log := strings.TrimSpace(C.GoString(errLog)); log != "" {
			err.Msg += "; JIT log: " + log
		}
		return nil, err
	}
	return &Module{h: h}, nil
}

func (m *Module) live(call string) error {
	return liveHandle(call, m == nil || m.h == 0, "unloaded module")
}

// Function looks up a kernel by its (extern "C" or mangled) name.
func (m *Module) Function(name string) (*Function, error) {
	if err := m.live("cuModuleGetFunction"); err != nil {
		return nil, err
	}
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	var h C.uintptr_t
	if err := check("cuModuleGetFunction", C.mc_cuModuleGetFunction(&h, m.h, cs)); err != nil {
		err.(*Error).Msg += fmt.Sprintf(" (kernel %q)", name)
		return nil, err
	}
	return &Function{h: h, mod: m, name: name}, nil
}

// Global returns the address and size of a module-scope __device__ variable.
func (m *Module) Global(name string) (DevicePtr, int64, error) {
	if err := m.live("cuModuleGetGlobal"); err != nil {
		return 0, 0, err
	}
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	var p C.uint64_t
	var n C.size_t
	if err := check("cuModuleGetGlobal", C.mc_cuModuleGetGlobal(&p, &n, m.h, cs)); err != nil {
		err.(*Error).Msg += fmt.Sprintf(" (global %q)", name)
		return 0, 0, err
	}
	return DevicePtr(p), int64(n), nil
}

// Unload unloads the module; its functions become invalid.
func (m *Module) Unload() error {
	return liveCall(m.live, "cuModuleUnload", func() C.int {
		r := C.mc_cuModuleUnload(m.h)
		m.h = 0
		return r
	})
}

// Name returns the kernel's name as looked up.
func (f *Function) Name() string { return f.name }

// MaxActiveBlocksPerSM is how many blocks of f, launched with threads
// threads and smem bytes of dynamic shared memory, one multiprocessor
// holds at once (cuOccupancyMaxActiveBlocksPerMultiprocessor).
func (f *Function) MaxActiveBlocksPerSM(threads, smem int) (int, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	if f == nil || f.h == 0 {
		return 0, errors.New("cuda: cuOccupancyMaxActiveBlocksPerMultiprocessor: nil function")
	}
	if threads <= 0 || smem < 0 {
		return 0, fmt.Errorf("cuda: cuOccupancyMaxActiveBlocksPerMultiprocessor: bad launch shape (%d threads, %d bytes)", threads, smem)
	}
	var n C.int
	if err := check("cuOccupancyMaxActiveBlocksPerMultiprocessor", C.mc_cuOccupancyMaxActiveBlocksPerMultiprocessor(&n, f.h, C.int(threads), C.size_t(smem))); err != nil {
		return 0, err
	}
	return int(n), nil
}

// SetMaxDynamicSharedMemory allows launches with more than 48 KiB of dynamic
// shared memory (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES).
func (f *Function) SetMaxDynamicSharedMemory(bytes int) error {
	if err := Init(); err != nil {
		return err
	}
	if f == nil || f.h == 0 {
		return errors.New("cuda: cuFuncSetAttribute: nil function")
	}
	if bytes < 0 {
		return fmt.Errorf("cuda: cuFuncSetAttribute: negative size %d", bytes)
	}
	return check("cuFuncSetAttribute", C.mc_cuFuncSetAttribute(f.h, 8, C.int(bytes)))
}

// maxLaunchArgs bounds the argument count; CUDA allows 32 KiB of parameters,
// and no kernel here takes more than a few.
const maxLaunchArgs = 256

// Launch enqueues the kernel on s. Each arg points to one argument's value,
// as in cuLaunchKernel's kernelParams: for a kernel (float *p, int n), pass
// unsafe.Pointer(&p), unsafe.Pointer(&n) with p a DevicePtr/uint64 and n an
// int32. The driver copies the values during the call, so they may be
// ordinary Go variables.
func (f *Function) Launch(grid, block [3]uint32, sharedMem uint32, s *Stream, args ...unsafe.Pointer) error {
	if err := Init(); err != nil {
		return err
	}
	if f == nil || f.h == 0 {
		return errors.New("cuda: cuLaunchKernel: nil function")
	}
	for i, d := range append(grid[:], block[:]...) {
		if d == 0 {
			return fmt.Errorf("cuda: cuLaunchKernel %s: grid/block dimension %d is zero", f.name, i)
		}
	}
	if len(args) > maxLaunchArgs {
		return fmt.Errorf("cuda: cuLaunchKernel %s: %d arguments, at most %d", f.name, len(args), maxLaunchArgs)
	}
	// cgo forbids passing C a Go array that holds unpinned Go pointers, so
	// each argument is pinned for the duration of the call.
	var pin runtime.Pinner
	defer pin.Unpin()
	var params *unsafe.Pointer
	if len(args) > 0 {
		arr := make([]unsafe.Pointer, len(args))
		for i, a := range args {
			if a == nil {
				return fmt.Errorf("cuda: cuLaunchKernel %s: argument %d is nil", f.name, i)
			}
			pin.Pin(a)
			arr[i] = a
		}
		params = &arr[0]
	}
	r := C.mc_cuLaunchKernel(f.h, C.uint(grid[0]), C.uint(grid[1]), C.uint(grid[2]),
		C.uint(block[0]), C.uint(block[1]), C.uint(block[2]), C.uint(sharedMem),
		s.handle(), params)
	if err := check("cuLaunchKernel", r); err != nil {
		err.(*Error).Msg += fmt.Sprintf(" (kernel %s)", f.name)
		return err
	}
	return nil
}

// LaunchPtr launches a kernel whose single parameter is a 64-bit value
// (the executor's kernels take one pointer to their arguments). Unlike
// Launch it allocates nothing: the parameter array is built in C, so the
// per-call host cost of a cached collective is the driver call itself.
func (f *Function) LaunchPtr(grid, block [3]uint32, sharedMem uint32, s *Stream, arg uint64) error {
	if err := Init(); err != nil {
		return err
	}
	if f == nil || f.h == 0 {
		return errors.New("cuda: cuLaunchKernel: nil function")
	}
	if grid[0] == 0 || grid[1] == 0 || grid[2] == 0 || block[0] == 0 || block[1] == 0 || block[2] == 0 {
		return fmt.Errorf("cuda: cuLaunchKernel %s: a grid or block dimension is zero (%v, %v)", f.name, grid, block)
	}
	r := C.mc_cuLaunchKernel1(f.h, C.uint(grid[0]), C.uint(grid[1]), C.uint(grid[2]),
		C.uint(block[0]), C.uint(block[1]), C.uint(block[2]), C.uint(sharedMem),
		s.handle(), C.uint64_t(arg))
	if err := check("cuLaunchKernel", r); err != nil {
		err.(*Error).Msg += fmt.Sprintf(" (kernel %s)", f.name)
		return err
	}
	return nil
}
