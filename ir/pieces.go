package ir

// Staging: a size outside a plan's size rule (a tensor of 1001 floats on
// 8 ranks) runs at the next size the rule admits, each per-rank piece of
// the caller's buffers copied to the start of the same piece of larger
// buffers and back. The pad at the end of each piece holds whatever the
// larger buffer held; every collective here combines an element only
// with the same element of other ranks' same piece, so pads never reach
// real elements. Both the communicator (the root package) and the
// single-process CUDA executor stage this way; this file is their one
// account of the geometry.

// Pieces is how many per-rank blocks each buffer of the collective holds
// on ranks ranks, laid out back to back: allgather's and gather's
// output, reducescatter's and scatter's input and both of alltoall's are
// one block per rank; every other buffer is one block.
func (c Collective) Pieces(ranks int64) (in, out int64) {
	in, out = 1, 1
	if c.Scatters() || c == AllToAll {
		in = ranks
	}
	if c.Gathers() || c == AllToAll {
		out = ranks
	}
	return in, out
}

// MessageSize is the size a call with in input and out output bytes
// means, as nccl-tests (and Plan.BufferBytes) count it: output bytes for
// allgather and gather, input bytes otherwise.
func (c Collective) MessageSize(in, out int64) int64 {
	if c.Gathers() {
		return out
	}
	return in
}

// Span is one copy of staging: N bytes from offset Src of the source to
// offset Dst of the destination.
type Span struct{ Dst, Src, N int64 }

// StageSpans lists the copies that move n pieces of size bytes lying
// srcStride apart in the source to dstStride apart in the destination.
// Without padding both strides are the piece size and the pieces one
// copy: on a GPU each copy is a driver call (a graph node in a capture).
func StageSpans(n, size, dstStride, srcStride int64) []Span {
	if size == 0 || n == 0 {
		return nil
	}
	if n == 1 || (dstStride == size && srcStride == size) {
		return []Span{{0, 0, n * size}}
	}
	out := make([]Span, n)
	for i := range out {
		out[i] = Span{int64(i) * dstStride, int64(i) * srcStride, size}
	}
	return out
}
