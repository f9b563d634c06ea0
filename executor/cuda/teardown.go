package cudaexec

import "github.com/msccl-go/msccl-go/runtime/cuda"

// firstErr is for teardown that goes on past a failure, so that
// everything it can free is freed, and reports the first error (the
// later ones are usually its consequences).
type firstErr struct{ err error }

// keep records err unless it is nil or an error came before.
func (f *firstErr) keep(err error) {
	if err != nil && f.err == nil {
		f.err = err
	}
}

// free releases what a rank's state holds, whichever of it was made (a
// RankExecutor makes no done event, FIFO or port semaphores), passing
// each error to keep. A nil rs (Open failed before it) holds nothing.
func (rs *rankRes) free(keep func(error)) {
	if rs == nil {
		return
	}
	if rs.stream != nil {
		keep(rs.stream.Destroy())
	}
	if rs.done != nil {
		keep(rs.done.Destroy())
	}
	if rs.watch != nil {
		keep(rs.watch.Free())
	}
	if rs.fifo != nil {
		keep(rs.fifo.Free())
	}
	if rs.portIn != nil {
		keep(rs.portIn.Free())
	}
	if rs.static != 0 {
		keep(cuda.Free(rs.static))
	}
}

// doIn runs f in ctx, or directly (in the fallback context, the default
// path's) when ctx is nil: how the executor reaches a rank's device.
func doIn(ctx *cuda.Context, f func() error) error {
	if ctx == nil {
		return f()
	}
	return ctx.Do(f)
}

// freeOn frees p in ctx, the context it was allocated in.
func freeOn(ctx *cuda.Context, p cuda.DevicePtr) error {
	return doIn(ctx, func() error { return cuda.Free(p) })
}
