package cpu

import (
	"testing"

	"github.com/msccl-go/msccl-go/ir"
)

// llAllReduce is a 2-rank out-of-place LL allreduce: each rank sends its
// input as packets into the peer's scratch chunk 0, then reduces it with
// its own input; the recpkt variant also keeps a packet copy of the sum in
// scratch chunk 1 and unpacks it again.
func llAllReduce(copyVariant bool) *ir.Plan {
	p := direct(ir.AllReduce, ir.ChanMemory, 2, 1, 1, 2, func(r int, peers []int) []ir.Op {
		ops := []ir.Op{{Code: ir.OpPpkt, ChannelType: ir.ChanMemory, Src: []ir.BufRef{loc(ir.BufInput, 0)}, Dst: []ir.BufRef{rem(2, 0)}}}
		if !copyVariant {
			return append(ops, ir.Op{Code: ir.OpRepkt, Src: []ir.BufRef{loc(ir.BufInput, 0), loc(ir.BufScratch, 0)}, Dst: []ir.BufRef{loc(ir.BufOutput, 0)}})
		}
		return append(ops,
			ir.Op{Code: ir.OpRecpkt, Src: []ir.BufRef{loc(ir.BufInput, 0), loc(ir.BufScratch, 0)}, Dst: []ir.BufRef{loc(ir.BufOutput, 0), loc(ir.BufScratch, 1)}},
			nop,
			ir.Op{Code: ir.OpUpkt, Src: []ir.BufRef{loc(ir.BufScratch, 1)}, Dst: []ir.BufRef{loc(ir.BufOutput, 0)}})
	})
	p.Protocol, p.DoubleScratch = ir.LL, true
	for r := range p.GPUs {
		// Remote buffer 2 is the peer's scratch.
		p.GPUs[r].RemoteBuffers = append(p.GPUs[r].RemoteBuffers, ir.RemoteBuffer{Rank: 1 - r, Type: ir.BufScratch, AccessChannelTypes: []ir.ChannelType{ir.ChanMemory}})
		tb := &p.GPUs[r].ThreadBlocks[0]
		tb.RemoteBufferRefs[0].RemoteBufferIDs = append(tb.RemoteBufferRefs[0].RemoteBufferIDs, 2)
	}
	return p
}

func TestPacketReductions(t *testing.T) {
	for _, variant := range []bool{false, true} {
		p := llAllReduce(variant)
		for _, red := range []ir.ReduceOp{ir.ReduceSum, ir.ReduceMax} {
			rep, err := Run(p, Options{Size: 16 * 100, DType: BF16, Reduce: red, Launches: 4})
			if err != nil {
				t.Fatal(err)
			}
			if !rep.OK() {
				t.Fatalf("recpkt=%v %s:\n%s", variant, red, rep)
			}
		}
	}
	// Without the nop, upkt rewrites what recpkt wrote by other threads.
	p := llAllReduce(true)
	for r := range p.GPUs {
		ops := &p.GPUs[r].ThreadBlocks[0].Ops
		*ops = append((*ops)[:2], (*ops)[3:]...)
	}
	rep, err := Run(p, Options{Size: 16 * 100, DType: BF16})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Verdict != Race {
		t.Fatalf("want a race:\n%s", rep)
	}
}
