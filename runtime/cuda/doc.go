// Package cuda is the CUDA driver API, loaded at run time with dlopen
// ("libcuda.so.1") from cgo, so that everything builds and every CPU test
// passes on machines without CUDA. It owns device discovery, primary
// contexts, device and mapped host memory, streams, events, module loading,
// kernel launch, graph capture and replay, peer access and IPC handles.
//
// It must not know about plans, channels or kernels: those belong to
// kernels/ and executor/cuda, which build on this package. It never creates
// NVLink multicast objects (they can take a shared host's GPUs down).
//
// Errors: a failing driver call returns *Error carrying the call and the
// CUDA error name (CUDA_ERROR_INVALID_VALUE, ...). When the driver cannot be
// loaded, or cuInit finds no device, errors wrap ErrNoDriver; tests skip on
// errors.Is(err, ErrNoDriver).
//
// Contexts and OS threads: the CUDA "current context" is a property of the
// OS thread, and goroutines move between threads. Code that drives several
// devices calls runtime.LockOSThread and then Context.SetCurrent before its
// CUDA calls. For the common one-device case the package keeps a fallback
// context (the last one passed to SetCurrent, else the first primary context
// retained): any call made on a thread with no current context first makes
// the fallback current, inside the same cgo call, so it cannot migrate in
// between. Streams, events, modules and graphs belong to the context that
// was current when they were created. Context.Do(f) is the explicit form
// for several devices: it locks the OS thread, makes the context current
// (not the fallback), runs f and puts back whatever was current before;
// executor/cuda runs every driver call of a rank placed on a device
// (Options.Devices) inside it.
package cuda
