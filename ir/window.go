package ir

// How a pipeline's iterations narrow an op's references, for the executors
// that run plans on the host (the CPU executor and executor/host; the
// kernel does the same on the device): one copy, so that they cannot move
// different bytes in one window.

// Window is the part of a reference's payload bytes [off, off+n) that one
// window moves: the window starting w bytes into every reference of the
// op, unit bytes long (a pipeline's iteration; an op outside a pipeline is
// one window from 0 at least as long as its references). A reference's
// last window may be short, and past its end the op moves nothing (n 0).
func Window(off, n, w, unit int64) (int64, int64) {
	k := min(n-w, unit)
	if k <= 0 {
		return off, 0
	}
	return off + w, k
}

// WindowBytes is what an op moves in a window: the smallest Window of its
// source and destination references (which agree in every well-formed
// plan); size gives a reference's payload bytes.
func WindowBytes[R any](src, dst []R, size func(*R) int64, w, unit int64) int64 {
	n := int64(1 << 62)
	for _, refs := range [2][]R{src, dst} {
		for i := range refs {
			_, k := Window(0, size(&refs[i]), w, unit)
			n = min(n, k)
		}
	}
	return n
}

// PipelineIters is how many windows a pipeline with iter_context it runs
// on a rank laid out by l: enough unit_size windows to cover num_chunks
// of the largest chunk (the last may be short). it.UnitSize must be
// positive; the executors refuse a pipeline without one first.
func (l *Layout) PipelineIters(it *IterContext) int64 {
	unit := int64(it.UnitSize)
	return (int64(it.NumChunks)*l.MaxChunk() + unit - 1) / unit
}
