package nvrtc

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"unsafe"
)

// ErrNoNVRTC is wrapped by every error caused by NVRTC not being installed.
var ErrNoNVRTC = errors.New("nvrtc: NVRTC library not found")

// Error is a failed NVRTC call. For a compilation error Log holds the
// compiler's diagnostics.
type Error struct {
	Call string // e.g. "nvrtcCompileProgram"
	Code int    // nvrtcResult
	Name string // e.g. "NVRTC_ERROR_COMPILATION"
	Log  string
}

func (e *Error) Error() string {
	s := fmt.Sprintf("nvrtc: %s: %s (%d)", e.Call, e.Name, e.Code)
	if e.Log != "" {
		s += "\n" + e.Log
	}
	return s
}

func check(call string, r C.int) error {
	if r == 0 {
		return nil
	}
	name := fmt.Sprintf("NVRTC_ERROR_%d", int(r))
	if s := C.nv_error_string(r); s != nil {
		name = C.GoString(s)
	}
	return &Error{Call: call, Code: int(r), Name: name}
}

// candidates lists the libraries to try, most specific first: an explicit
// MSCCL_NVRTC_LIBRARY, the unversioned name (a development install), the
// sonames of CUDA 13, 12 and 11.2+ (Debian's libnvrtc11.2), then toolkit
// directories that are often not on the loader path.
func candidates() []string {
	var c []string
	if p := os.Getenv("MSCCL_NVRTC_LIBRARY"); p != "" {
		c = append(c, p)
	}
	c = append(c, "libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2")
	var dirs []string
	for _, env := range []string{"CUDA_HOME", "CUDA_PATH"} {
		if d := os.Getenv(env); d != "" {
			dirs = append(dirs, filepath.Join(d, "lib64"))
		}
	}
	globbed, _ := filepath.Glob("/usr/local/cuda*/lib64")
	sort.Sort(sort.Reverse(sort.StringSlice(globbed))) // newest toolkit first
	dirs = append(dirs, globbed...)
	for _, d := range dirs {
		libs, _ := filepath.Glob(filepath.Join(d, "libnvrtc.so*"))
		sort.Strings(libs)
		for _, l := range libs {
			if !strings.Contains(filepath.Base(l), "builtins") {
				c = append(c, l)
			}
		}
	}
	return c
}

var (
	loadOnce sync.Once
	loadErr  error
	// mu serializes compilation: NVRTC's thread safety varies by version,
	// and kernels compile once per process and arch anyway.
	mu sync.Mutex
)

func load() error {
	loadOnce.Do(func() {
		var tried []string
		for _, p := range candidates() {
			cp := C.CString(p)
			msg := C.nv_load(cp)
			C.free(unsafe.Pointer(cp))
			if msg == nil {
				return
			}
			tried = append(tried, C.GoString(msg))
		}
		loadErr = fmt.Errorf("%w (install libnvrtc11.2 or a CUDA toolkit, or set MSCCL_NVRTC_LIBRARY); tried: %s",
			ErrNoNVRTC, strings.Join(tried, "; "))
	})
	return loadErr
}

// Version returns the NVRTC version, e.g. (13, 0).
func Version() (major, minor int, err error) {
	if err := load(); err != nil {
		return 0, 0, err
	}
	var ma, mi C.int
	if err := check("nvrtcVersion", C.nv_version(&ma, &mi)); err != nil {
		return 0, 0, err
	}
	return int(ma), int(mi), nil
}

// wantsCubin reports whether the options name a real architecture (sm_XX),
// for which NVRTC produces a cubin, rather than a virtual one (compute_XX).
func wantsCubin(opts []string) bool {
	for i, o := range opts {
		v := ""
		switch {
		case strings.HasPrefix(o, "--gpu-architecture="):
			v = strings.TrimPrefix(o, "--gpu-architecture=")
		case strings.HasPrefix(o, "-arch="):
			v = strings.TrimPrefix(o, "-arch=")
		case (o == "-arch" || o == "--gpu-architecture") && i+1 < len(opts):
			v = opts[i+1]
		}
		if strings.HasPrefix(v, "sm_") {
			return true
		}
	}
	return false
}

// Compile compiles CUDA C++ source. With "--gpu-architecture=compute_90"
// the image is PTX text (loadable on any newer GPU through the driver JIT);
// with "--gpu-architecture=sm_90" it is a cubin for exactly that
// architecture. log holds the compiler's warnings on success and its
// diagnostics on failure (also in the returned *Error).
func Compile(src, name string, opts []string) (image []byte, log string, err error) {
	if err := load(); err != nil {
		return nil, "", err
	}
	if name == "" {
		name = "kernel.cu"
	}
	cs, cn := C.CString(src), C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	defer C.free(unsafe.Pointer(cn))
	copts := make([]*C.char, len(opts)+1) // +1: never pass a zero-length array
	for i, o := range opts {
		copts[i] = C.CString(o)
	}
	defer func() {
		for _, p := range copts {
			C.free(unsafe.Pointer(p))
		}
	}()

	mu.Lock()
	defer mu.Unlock()
	var prog C.uintptr_t
	if err := check("nvrtcCreateProgram", C.nv_create(&prog, cs, cn)); err != nil {
		return nil, "", err
	}
	defer C.nv_destroy(prog)
	// copts is Go memory holding C pointers only, which cgo allows.
	cerr := check("nvrtcCompileProgram", C.nv_compile(prog, C.int(len(opts)), &copts[0]))
	log = fetchLog(prog)
	if cerr != nil {
		cerr.(*Error).Log = log
		return nil, log, cerr
	}
	if wantsCubin(opts) {
		image, err = fetch("nvrtcGetCUBIN", func(p **C.char, n *C.size_t) C.int { return C.nv_cubin(prog, p, n) })
	} else {
		image, err = fetch("nvrtcGetPTX", func(p **C.char, n *C.size_t) C.int { return C.nv_ptx(prog, p, n) })
		// The PTX size counts the terminating NUL; callers get text.
		for len(image) > 0 && image[len(image)-1] == 0 {
			image = image[:len(image)-1]
		}
	}
	return image, log, err
}

func fetchLog(prog C.uintptr_t) string {
	b, err := fetch("nvrtcGetProgramLog", func(p **C.char, n *C.size_t) C.int { return C.nv_log(prog, p, n) })
	if err != nil {
		return ""
	}
	return strings.TrimRight(string(b), "\x00\n ")
}

func fetch(call string, f func(**C.char, *C.size_t) C.int) ([]byte, error) {
	var p *C.char
	var n C.size_t
	if r := f(&p, &n); r != 0 {
		if r == C.NV_MISSING {
			return nil, &Error{Call: call, Code: -1, Name: "NVRTC_ERROR_SYMBOL_MISSING",
				Log: "this NVRTC predates " + call}
		}
		return nil, check(call, r)
	}
	defer C.free(unsafe.Pointer(p))
	return C.GoBytes(unsafe.Pointer(p), C.int(n)), nil
}
