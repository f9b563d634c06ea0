package main

/*
#cgo LDFLAGS: -ldl
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <stdlib.h>

// The real NCCL's functions, called through the pointers dlsym gave.
// Its names are ours too, so it is never linked: nothing here may name
// an nccl* symbol, or the dynamic linker would bind it to this library.
typedef struct { char internal[128]; } msccl_real_id;

// RTLD_DEEPBIND: the real library's calls to its own exported names
// reach itself, not this library's functions of the same names (which
// would receive a real communicator and refuse it).
static void *msccl_real_open(const char *path, const char **err) {
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
  if (!h) *err = dlerror();
  return h;
}
static void *msccl_real_sym(void *h, const char *name) { return dlsym(h, name); }
// msccl_real_is_self: p lies in this library (MSCCL_NCCL_LIB named it).
static int msccl_real_is_self(void *p) {
  Dl_info them, us;
  if (!dladdr(p, &them) || !dladdr((void *)msccl_real_open, &us)) return 0;
  return them.dli_fbase == us.dli_fbase;
}

static int msccl_real_void(void *f) { return ((int (*)(void))f)(); }
static int msccl_real_comm(void *f, void *comm) { return ((int (*)(void *))f)(comm); }
static int msccl_real_getid(void *f, msccl_real_id *id) { return ((int (*)(msccl_real_id *))f)(id); }
static int msccl_real_init(void *f, void **comm, int n, msccl_real_id *id, int rank) {
  return ((int (*)(void **, int, msccl_real_id, int))f)(comm, n, *id, rank);
}
static const char *msccl_real_str(void *f, int r) { return ((const char *(*)(int))f)(r); }
static const char *msccl_real_last(void *f, void *comm) { return ((const char *(*)(void *))f)(comm); }
// ncclAllReduce, ncclReduceScatter.
static int msccl_real_red(void *f, const void *s, void *r, size_t n, int dt, int op, void *comm, void *st) {
  return ((int (*)(const void *, void *, size_t, int, int, void *, void *))f)(s, r, n, dt, op, comm, st);
}
// ncclReduce.
static int msccl_real_redroot(void *f, const void *s, void *r, size_t n, int dt, int op, int root, void *comm, void *st) {
  return ((int (*)(const void *, void *, size_t, int, int, int, void *, void *))f)(s, r, n, dt, op, root, comm, st);
}
// ncclAllGather, ncclAlltoAll.
static int msccl_real_move(void *f, const void *s, void *r, size_t n, int dt, void *comm, void *st) {
  return ((int (*)(const void *, void *, size_t, int, void *, void *))f)(s, r, n, dt, comm, st);
}
static int msccl_real_premul(void *f, int *op, void *scalar, int dt, int residence, void *comm) {
  return ((int (*)(int *, void *, int, int, void *))f)(op, scalar, dt, residence, comm);
}
static int msccl_real_opfree(void *f, int op, void *comm) { return ((int (*)(int, void *))f)(op, comm); }
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/msccl-go/msccl-go/ir"
)

// realLib is the real NCCL of MSCCL_NCCL_LIB, opened on the first call
// handed to it and kept for the life of the process; a failed open is
// not kept, so a later call (after the program fixed the variable) tries
// again.
var realLib struct {
	mu   sync.Mutex
	h    unsafe.Pointer
	path string
	syms map[string]unsafe.Pointer
}

// realNeeded are the functions every hand-over may use; a library
// without one of them is not an NCCL this can drive.
var realNeeded = []string{"ncclGetUniqueId", "ncclCommInitRank", "ncclCommDestroy", "ncclCommAbort", "ncclGroupStart", "ncclGroupEnd", "ncclGetErrorString"}

// openReal opens the real NCCL. MSCCL_NCCL_LIB is read with C's getenv,
// not Go's environment (a copy made when the library loaded), so a
// program that sets it after loading this library (Python's os.environ
// under LD_PRELOAD) is heard.
func openReal() error {
	realLib.mu.Lock()
	defer realLib.mu.Unlock()
	if realLib.h != nil {
		return nil
	}
	name := C.CString("MSCCL_NCCL_LIB")
	defer C.free(unsafe.Pointer(name))
	v := C.getenv(name)
	if v == nil || *v == 0 {
		return fmt.Errorf("MSCCL_NCCL_LIB is not set: set it to the path of the real NCCL (libnccl.so.2) to hand such calls to it")
	}
	path := C.GoString(v)
	var cerr *C.char
	h := C.msccl_real_open(v, &cerr)
	if h == nil {
		return fmt.Errorf("MSCCL_NCCL_LIB=%s cannot be loaded: %s", path, C.GoString(cerr))
	}
	syms := map[string]unsafe.Pointer{}
	for _, s := range realNeeded {
		cs := C.CString(s)
		p := C.msccl_real_sym(h, cs)
		C.free(unsafe.Pointer(cs))
		if p == nil {
			C.dlclose(h)
			return fmt.Errorf("MSCCL_NCCL_LIB=%s is not an NCCL: it has no %s", path, s)
		}
		syms[s] = p
	}
	// This library itself (named directly, or found first by a bare
	// name under LD_PRELOAD) would take its own calls back in a loop.
	if C.msccl_real_is_self(syms["ncclGetErrorString"]) != 0 {
		C.dlclose(h)
		return fmt.Errorf("MSCCL_NCCL_LIB=%s is libmsccl_nccl itself, not the real NCCL", path)
	}
	realLib.h, realLib.path, realLib.syms = h, path, syms
	return nil
}

// realSym is the real NCCL's function name, or an error naming what is
// missing (an older NCCL lacks ncclAlltoAll, for one).
func realSym(name string) (unsafe.Pointer, error) {
	realLib.mu.Lock()
	defer realLib.mu.Unlock()
	if p, ok := realLib.syms[name]; ok {
		return p, nil
	}
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	p := C.msccl_real_sym(realLib.h, cs)
	if p == nil {
		return nil, errorf(ncclInvalidUsage, "the real NCCL at MSCCL_NCCL_LIB=%s has no %s", realLib.path, name)
	}
	realLib.syms[name] = p
	return p, nil
}

// realResult turns a result of the real NCCL into an error carrying its
// code and its own last error.
func realResult(what string, r C.int, comm unsafe.Pointer) error {
	if r == ncclSuccess {
		return nil
	}
	msg := fmt.Sprintf("result %d", int(r))
	if f, err := realSym("ncclGetErrorString"); err == nil {
		msg = C.GoString(C.msccl_real_str(f, r))
	}
	if f, err := realSym("ncclGetLastError"); err == nil {
		if last := C.GoString(C.msccl_real_last(f, comm)); last != "" {
			msg += ": " + last
		}
	}
	return errorf(int(r), "the real NCCL (MSCCL_NCCL_LIB=%s): %s: %s", realLib.path, what, msg)
}

// realCall calls the real NCCL's function name through call, which
// casts the pointer to its signature.
func realCall(name string, comm unsafe.Pointer, call func(f unsafe.Pointer) C.int) error {
	f, err := realSym(name)
	if err != nil {
		return err
	}
	return realResult(name, call(f), comm)
}

func realGroupStart() error {
	return realCall("ncclGroupStart", nil, func(f unsafe.Pointer) C.int { return C.msccl_real_void(f) })
}

func realGroupEnd() error {
	return realCall("ncclGroupEnd", nil, func(f unsafe.Pointer) C.int { return C.msccl_real_void(f) })
}

// realCommCall runs ncclCommDestroy, ncclCommAbort or ncclCommFinalize
// of the real NCCL on its communicator comm.
func realCommCall(name string, comm unsafe.Pointer) error {
	return realCall(name, comm, func(f unsafe.Pointer) C.int { return C.msccl_real_comm(f, comm) })
}

func realUniqueID() ([128]byte, error) {
	var id C.msccl_real_id
	err := realCall("ncclGetUniqueId", nil, func(f unsafe.Pointer) C.int { return C.msccl_real_getid(f, &id) })
	return *(*[128]byte)(unsafe.Pointer(&id)), err
}

// realInit is the real ncclCommInitRank, writing the real library's
// opaque communicator to out: C memory that must outlive the real group
// the call is made in (NCCL completes the init at ncclGroupEnd).
func realInit(out *unsafe.Pointer, id [128]byte, n, rank int) error {
	*out = nil
	cid := (*C.msccl_real_id)(C.malloc(C.size_t(len(id))))
	defer C.free(unsafe.Pointer(cid))
	*(*[128]byte)(unsafe.Pointer(cid)) = id
	return realCall("ncclCommInitRank", nil, func(f unsafe.Pointer) C.int {
		return C.msccl_real_init(f, out, C.int(n), cid, C.int(rank))
	})
}

// cPointers is n pointers in C memory, and the function that frees them.
func cPointers(n int) ([]unsafe.Pointer, func()) {
	p := C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(unsafe.Pointer(nil))))
	return unsafe.Slice((*unsafe.Pointer)(p), n), func() { C.free(p) }
}

// realPreMulSum creates the real NCCL's PreMulSum operator for pm on
// the real communicator comm.
func realPreMulSum(pm *preMulSum, comm unsafe.Pointer) (int, error) {
	var op C.int
	scalar := pm.scalar
	if pm.atCreate {
		scalar = unsafe.Pointer(&pm.copy[0]) // the value as it was when the user created the operator
	}
	err := realCall("ncclRedOpCreatePreMulSum", comm, func(f unsafe.Pointer) C.int {
		return C.msccl_real_premul(f, &op, scalar, C.int(pm.dt), C.int(pm.residence), comm)
	})
	return int(op), err
}

func realRedOpDestroy(op int, comm unsafe.Pointer) error {
	return realCall("ncclRedOpDestroy", comm, func(f unsafe.Pointer) C.int { return C.msccl_real_opfree(f, C.int(op), comm) })
}

// realForward issues k on the real communicator comm with the real
// operator op, on the user's stream.
func realForward(k *call, comm unsafe.Pointer, op int) error {
	es := dataTypes[k.dtype].size
	dt, st := C.int(k.dtype), k.stream
	switch k.coll {
	case ir.AllReduce:
		return realCall("ncclAllReduce", comm, func(f unsafe.Pointer) C.int {
			return C.msccl_real_red(f, k.send, k.recv, C.size_t(k.recvN/es), dt, C.int(op), comm, st)
		})
	case ir.ReduceScatter:
		return realCall("ncclReduceScatter", comm, func(f unsafe.Pointer) C.int {
			return C.msccl_real_red(f, k.send, k.recv, C.size_t(k.recvN/es), dt, C.int(op), comm, st)
		})
	case ir.Reduce:
		return realCall("ncclReduce", comm, func(f unsafe.Pointer) C.int {
			return C.msccl_real_redroot(f, k.send, k.recv, C.size_t(k.sendN/es), dt, C.int(op), C.int(k.root), comm, st)
		})
	case ir.AllGather:
		return realCall("ncclAllGather", comm, func(f unsafe.Pointer) C.int {
			return C.msccl_real_move(f, k.send, k.recv, C.size_t(k.sendN/es), dt, comm, st)
		})
	case ir.AllToAll:
		n := int64(k.c.rc.Size())
		return realCall("ncclAlltoAll", comm, func(f unsafe.Pointer) C.int {
			return C.msccl_real_move(f, k.send, k.recv, C.size_t(k.sendN/es/n), dt, comm, st)
		})
	}
	return errorf(ncclInternalError, "%s: no hand-over to the real NCCL for %s (a bug: handOverReason chose it)", k.name, k.coll)
}
