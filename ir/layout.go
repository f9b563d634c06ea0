package ir

import (
	"fmt"

	"github.com/msccl-go/msccl-go/internal/diag"
)

// BufferBytes returns the input and output buffer sizes of every rank for
// a message of msg bytes as nccl-tests counts it: by the larger buffer.
// Allgather and gather count output bytes (rank r's input is 1/n of it),
// reducescatter and scatter input bytes (each output is 1/n of it),
// every other collective input bytes, which equal its output bytes.
// Gather and scatter use the large buffer at the root only, but every
// rank of a plan has the same chunk counts, so every rank gets it (the
// other ranks' outputs, resp. inputs, are not part of the result).
func (p *Plan) BufferBytes(msg int64) (in, out int64, err error) {
	n := int64(len(p.GPUs))
	if n == 0 {
		return 0, 0, fmt.Errorf("plan has no gpus")
	}
	if msg <= 0 {
		return 0, 0, diag.Errorc(diag.CodeSizeRefused, "message size must be positive, got %d", msg)
	}
	switch {
	case p.Collective.Gathers():
		if msg%n != 0 {
			return 0, 0, diag.Errorc(diag.CodeSizeRefused, "%s size %d is not a multiple of the %d ranks", p.Collective, msg, n)
		}
		return msg / n, msg, nil
	case p.Collective.Scatters():
		if msg%n != 0 {
			return 0, 0, diag.Errorc(diag.CodeSizeRefused, "%s size %d is not a multiple of the %d ranks", p.Collective, msg, n)
		}
		return msg, msg / n, nil
	default:
		return msg, msg, nil
	}
}

// Layout is the byte geometry of one rank's buffers for given buffer sizes:
// every buffer is cut into chunks with the reference buffer's geometry
// (the input when it has chunks, else the output), as upstream does.
type Layout struct {
	Align     int64
	RefBytes  int64 // S: size of the reference buffer
	RefChunks int64 // N: its chunk count
	Input     int64
	Output    int64
	// Scratch is the payload bytes of one scratch half: scratch_chunks
	// times the largest chunk. Packet ops address twice their payload.
	Scratch      int64
	ScratchAlloc int64 // bytes allocated: ×2 for LL packets, ×2 again with double scratch
	// UniformScratch: scratch slots are MaxChunk bytes each (the plan's
	// uniform_scratch).
	UniformScratch bool
}

// Layout computes rank's geometry for the given buffer sizes. It fails
// when the sizes are not multiples of the plan's alignment or the
// reference buffer has fewer alignment units than chunks.
func (p *Plan) Layout(rank int, in, out int64) (*Layout, error) {
	if rank < 0 || rank >= len(p.GPUs) {
		return nil, fmt.Errorf("rank %d out of range (plan has %d gpus)", rank, len(p.GPUs))
	}
	g := &p.GPUs[rank]
	a := int64(p.BufferAlignment)
	if a <= 0 {
		return nil, fmt.Errorf("buffer_alignment must be positive, got %d", a)
	}
	if in%a != 0 || out%a != 0 {
		return nil, fmt.Errorf("buffer sizes (input %d, output %d bytes) must be multiples of the plan's %d-byte alignment", in, out, a)
	}
	l := &Layout{Align: a, Input: in, Output: out, UniformScratch: p.UniformScratch}
	switch {
	case g.InputChunks > 0:
		l.RefBytes, l.RefChunks = in, int64(g.InputChunks)
	case g.OutputChunks > 0:
		l.RefBytes, l.RefChunks = out, int64(g.OutputChunks)
	default:
		return nil, fmt.Errorf("gpus[%d]: input_chunks and output_chunks are both 0", rank)
	}
	if l.RefBytes/a < l.RefChunks {
		return nil, fmt.Errorf("size %d bytes cannot be split into %d chunks of at least %d bytes", l.RefBytes, l.RefChunks, a)
	}
	l.Scratch = int64(g.ScratchChunks) * l.MaxChunk()
	l.ScratchAlloc = l.Scratch
	if p.Protocol == LL {
		l.ScratchAlloc *= 2
	}
	if p.DoubleScratch {
		l.ScratchAlloc *= 2
	}
	return l, nil
}

// ChunkOffset is the byte offset where chunk c starts:
// (c*floor(u/N) + min(c, u mod N)) * A with u = S/A.
func (l *Layout) ChunkOffset(c int64) int64 {
	u := l.RefBytes / l.Align
	return (c*(u/l.RefChunks) + min(c, u%l.RefChunks)) * l.Align
}

// MaxChunk is the size of the largest chunk.
func (l *Layout) MaxChunk() int64 {
	u := l.RefBytes / l.Align
	return (u + l.RefChunks - 1) / l.RefChunks * l.Align
}

// Range returns the byte range [off, off+n) covered by chunks
// [index, index+size).
func (l *Layout) Range(index, size int) (off, n int64) {
	off = l.ChunkOffset(int64(index))
	return off, l.ChunkOffset(int64(index+size)) - off
}

// Ref returns the byte range of chunks [index, index+size) of buffer t:
// the reference geometry, except scratch slots of MaxChunk bytes each
// when the plan has uniform_scratch. Ops move the smallest count of their
// operands, so a chunk copied into a uniform slot fills its head and a
// reader that takes the chunk's own length reads exactly it back.
func (l *Layout) Ref(t BufferType, index, size int) (off, n int64) {
	if t == BufScratch && l.UniformScratch {
		m := l.MaxChunk()
		return int64(index) * m, int64(size) * m
	}
	return l.Range(index, size)
}

// TBGSlice narrows [off, off+n) to the part thread block tbID of a group
// of tbgSize handles, in alignment units, as upstream's calcOffset does.
func (l *Layout) TBGSlice(off, n int64, tbID, tbgSize int) (int64, int64) {
	if tbgSize <= 1 {
		return off, n
	}
	u := n / l.Align
	s, id := int64(tbgSize), int64(tbID)
	start := (id*(u/s) + min(id, u%s)) * l.Align
	end := ((id+1)*(u/s) + min(id+1, u%s)) * l.Align
	return off + start, end - start
}

// BufferSize is the payload size of buffer t (scratch: one half).
func (l *Layout) BufferSize(t BufferType) int64 {
	switch t {
	case BufInput:
		return l.Input
	case BufOutput:
		return l.Output
	case BufScratch:
		return l.Scratch
	}
	return 0
}
