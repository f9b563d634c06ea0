package cudaexec

import (
	"fmt"

	"github.com/msccl-go/msccl-go/internal/diag"
	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/runtime/cuda"
)

// Sizes outside the plan's size rule run through staging buffers of the
// next size the rule admits (ir/pieces.go has the geometry): each rank's
// input pieces are copied into the stage on the rank's own stream before
// its kernel, the plan runs on the stage at the admitted size (where it
// is proven), and the output pieces are copied back after the kernel.
// That is the proof's host model exactly: a rank's host writes its inputs
// before its kernel and reads its outputs after it.

// pieces is ir.Collective.Pieces of the plan.
func (e *Executor) pieces() (in, out int64) {
	return e.p.Collective.Pieces(int64(len(e.p.GPUs)))
}

// stageFor allocates the stage of a buffer set of size bytes.
func (e *Executor) stageFor(size int64) (*Buffers, error) {
	padded, ok := e.rule.Next(size)
	if !ok {
		return nil, diag.Errorc(diag.CodeSizeRefused, "cudaexec: message size %d bytes is above the largest size of the plan's rule (%s)", size, e.rule)
	}
	return e.alloc(padded)
}

// allocStaged allocates user-sized buffers and their stage.
func (e *Executor) allocStaged(size int64) (*Buffers, error) {
	st, err := e.stageFor(size)
	if err != nil {
		return nil, err
	}
	b, err := e.alloc(size)
	if err != nil {
		st.Free()
		return nil, err
	}
	b.stage = st
	return b, nil
}

// checkStaged refuses a staged call whose pieces are not whole elements
// of the call's type: the only sizes that cannot be served.
func (e *Executor) checkStaged(b *Buffers, dt ir.DType) error {
	pin, pout := e.pieces()
	es := int64(dt.Size())
	if (b.InBytes/pin)%es != 0 || (b.OutBytes/pout)%es != 0 {
		return diag.Errorc(diag.CodeSizeRefused, "cudaexec: message size %d bytes is not a whole number of %s elements (%d bytes) per rank's piece (input %d bytes in %d pieces, output %d in %d)",
			b.Size, dt, es, b.InBytes, pin, b.OutBytes, pout)
	}
	return nil
}

// copyPieces copies n pieces of size bytes from src (pieces srcStride
// apart) to dst (dstStride apart) on s.
func copyPieces(dst, src cuda.DevicePtr, n, size, dstStride, srcStride int64, s *cuda.Stream) error {
	for _, sp := range ir.StageSpans(n, size, dstStride, srcStride) {
		if err := cuda.MemcpyAsync(dst+cuda.DevicePtr(sp.Dst), src+cuda.DevicePtr(sp.Src), sp.N, s); err != nil {
			return fmt.Errorf("cudaexec: staging copy: %w", err)
		}
	}
	return nil
}

// copyIn copies rank r's input into its stage.
func (e *Executor) copyIn(r int, user, st *Buffers, s *cuda.Stream) error {
	pin, _ := e.pieces()
	return copyPieces(st.In[r], user.In[r], pin, user.InBytes/pin, st.InBytes/pin, user.InBytes/pin, s)
}

// copyOut copies rank r's output back from its stage.
func (e *Executor) copyOut(r int, user, st *Buffers, s *cuda.Stream) error {
	_, pout := e.pieces()
	return copyPieces(user.Out[r], st.Out[r], pout, user.OutBytes/pout, user.OutBytes/pout, st.OutBytes/pout, s)
}
