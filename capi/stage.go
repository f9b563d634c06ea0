package main

import (
	"github.com/msccl-go/msccl-go/ir"
)

// call is one collective call resolved against its plan, before any
// device is touched: every argument checked, the size it runs at chosen
// and the pieces its buffers hold. Both devices run from it.
type call struct {
	p                 *ir.Plan
	key               execKey // the plan's content and the size it runs at
	dt                ir.DType
	red               ir.ReduceOp
	inBytes, outBytes int64 // the caller's buffers
	pin, pout         int64 // per-rank pieces of input and output
}

// resolve checks a call of plan pe on a communicator of world ranks with the caller's
// inBytes and outBytes of dtype reduced by op, and picks the size it
// runs at. A size outside the plan's rule (a tensor of 1001 floats) runs
// at the next size the rule admits, each rank's pieces padded at their
// ends, as executor/cuda stages it: collectives combine an element only
// with the same element of other ranks' same piece, so the pads never
// reach real elements.
func resolve(world int, pe *planEntry, inBytes, outBytes int64, dtype, op string) (*call, error) {
	p := pe.plan
	if len(p.GPUs) != world {
		return nil, invalid("plan %q is for %d ranks; this communicator has %d", p.Name, len(p.GPUs), world)
	}
	dt, err := ir.ParseDType(dtype)
	if err != nil {
		return nil, invalid("dtype: %v", err)
	}
	red := ir.ReduceOp(op)
	switch red {
	case "":
		red = ir.ReduceSum
	case ir.ReduceSum, ir.ReduceMin, ir.ReduceMax, ir.ReduceProd:
	default:
		return nil, invalid("op: unknown reduction %q (want sum, min, max or prod)", op)
	}
	if inBytes < 0 || outBytes < 0 {
		return nil, invalid("input (%d bytes) or output (%d bytes) is negative", inBytes, outBytes)
	}
	size := messageSize(p, inBytes, outBytes)
	wantIn, wantOut, err := p.BufferBytes(size)
	if err != nil {
		return nil, invalid("plan %q: %v", p.Name, err)
	}
	if wantIn != inBytes || wantOut != outBytes {
		return nil, invalid("plan %q (%s) at %d bytes takes %d input and %d output bytes; got %d and %d", p.Name, p.Collective, size, wantIn, wantOut, inBytes, outBytes)
	}
	pin, pout := pieces(p)
	es := int64(dt.Size())
	if (inBytes/pin)%es != 0 || (outBytes/pout)%es != 0 {
		return nil, invalid("%d bytes is not a whole number of %s elements per rank's piece (input %d bytes in %d pieces, output %d in %d)", size, dt, inBytes, pin, outBytes, pout)
	}
	rule, err := p.SizeRule()
	if err != nil {
		return nil, err
	}
	run := size
	if !rule.Admits(size) {
		next, ok := rule.Next(size)
		if !ok {
			return nil, invalid("plan %q does not serve %d bytes: its sizes are %s", p.Name, size, rule)
		}
		run = next
	}
	k, err := pe.key()
	if err != nil {
		return nil, err
	}
	return &call{p: p, key: execKey{k, run}, dt: dt, red: red, inBytes: inBytes, outBytes: outBytes, pin: pin, pout: pout}, nil
}

// span is one copy of staging: n bytes from offset src of the source to
// offset dst of the destination.
type span struct{ dst, src, n int64 }

// spans lists the copies that move n pieces of size bytes lying
// srcStride apart in the source to dstStride apart in the destination.
// Without padding both strides are the piece size and the pieces one
// copy: on a GPU each copy is a driver call (a graph node in a capture).
func spans(n, size, dstStride, srcStride int64) []span {
	if size == 0 {
		return nil
	}
	if n == 1 || (dstStride == size && srcStride == size) {
		return []span{{0, 0, n * size}}
	}
	out := make([]span, n)
	for i := range out {
		out[i] = span{int64(i) * dstStride, int64(i) * srcStride, size}
	}
	return out
}

// stageIn lists the copies from the caller's input into the rank's
// registered input of regIn bytes; stageOut those from the registered
// output of regOut bytes to the caller's output.
func (cl *call) stageIn(regIn int64) []span {
	return spans(cl.pin, cl.inBytes/cl.pin, regIn/cl.pin, cl.inBytes/cl.pin)
}

func (cl *call) stageOut(regOut int64) []span {
	return spans(cl.pout, cl.outBytes/cl.pout, cl.outBytes/cl.pout, regOut/cl.pout)
}
