package cpu

import (
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/ir"
)

// portPpktAllGather is rppktAllGather with a ppkt instead of the rppkt:
// over a port channel the proxy copies ppkt's source bytes as they are,
// so they must already be packets (ir.OpInfo.PortSrcPacket), as in
// upstream's multi-node LL plans (cpkt into scratch, then a port ppkt of
// that slot). plain fills the slot with a copy instead, which a GPU peer
// would never see a flag in.
func portPpktAllGather(plain bool) *ir.Plan {
	p := rppktAllGather(ir.ChanPort)
	p.Name = "allgather_port_ppkt"
	for r := range p.GPUs {
		ops := p.GPUs[r].ThreadBlocks[0].Ops
		fan := &ops[1]
		fan.Code = ir.OpPpkt
		for len(fan.Src) < len(fan.Dst) {
			fan.Src = append(fan.Src, fan.Src[0])
		}
		if plain {
			ops[0].Code = ir.OpCopy
			p.GPUs[r].ThreadBlocks[0].Ops = append(ops[:1], append([]ir.Op{nop}, ops[1:]...)...)
		}
	}
	return p
}

// TestPortPpktReadsPackets: the CPU executor applies the port rule the
// op table and the CUDA table builder apply (ir.Op.IsPacketSrc): a port
// ppkt of packets a cpkt wrote is correct at every launch count, and one
// of a slot a plain copy filled is refused.
func TestPortPpktReadsPackets(t *testing.T) {
	p := portPpktAllGather(false)
	if ds := ir.Validate(p); len(ds) > 0 {
		t.Fatalf("hand-built plan does not validate:\n%s", ds)
	}
	for _, sym := range []bool{false, true} {
		rep, err := Run(p, Options{Size: 16 * 4 * 100, DType: F32, Launches: 4, Symbolic: sym})
		if err != nil {
			t.Fatal(err)
		}
		if !rep.OK() {
			t.Fatalf("port ppkt of packed scratch (symbolic %v):\n%s", sym, rep)
		}
	}
	p = portPpktAllGather(true)
	for _, sym := range []bool{false, true} {
		rep, err := Run(p, Options{Size: 16 * 4 * 100, DType: F32, Launches: 2, Symbolic: sym})
		if err != nil {
			t.Fatal(err)
		}
		if rep.OK() {
			t.Fatalf("port ppkt of a plainly copied slot (symbolic %v): want it refused\n%s", sym, rep)
		}
		if d := rep.Deadlocks; len(d) == 0 || !strings.Contains(d[0].Waiting, "must already be packets (a cpkt writes them)") {
			t.Errorf("the deadlock does not name the port rule:\n%s", rep)
		}
	}
}

// TestPortPpktAllReduce is the cross-node step of upstream's multi-node
// LL allreduce plans, one GPU per node: each rank packs its input into
// scratch slot 0 (cpkt), a port ppkt copies those packets into the peer's
// slot 1, and repkt reduces the input with the packets received. The CPU
// executor used to read the port ppkt's source as raw bytes and report
// the plan wrong.
func TestPortPpktAllReduce(t *testing.T) {
	p := direct(ir.AllReduce, ir.ChanPort, 2, 1, 1, 2, func(r int, peers []int) []ir.Op {
		return []ir.Op{
			{Code: ir.OpCpkt, Src: []ir.BufRef{loc(ir.BufInput, 0)}, Dst: []ir.BufRef{loc(ir.BufScratch, 0)}},
			{Code: ir.OpPpkt, ChannelType: ir.ChanPort, ChannelIDs: []int{0}, Src: []ir.BufRef{loc(ir.BufScratch, 0)}, Dst: []ir.BufRef{rem(2, 1)}},
			{Code: ir.OpRepkt, Src: []ir.BufRef{loc(ir.BufInput, 0), loc(ir.BufScratch, 1)}, Dst: []ir.BufRef{loc(ir.BufOutput, 0)}},
		}
	})
	p.Name, p.Protocol, p.DoubleScratch = "allreduce_port_ppkt", ir.LL, true
	for r := range p.GPUs {
		g := &p.GPUs[r]
		g.RemoteBuffers = append(g.RemoteBuffers, ir.RemoteBuffer{Rank: 1 - r, Type: ir.BufScratch, AccessChannelTypes: []ir.ChannelType{ir.ChanPort}})
		ids := &g.ThreadBlocks[0].RemoteBufferRefs[0].RemoteBufferIDs
		*ids = append(*ids, len(g.RemoteBuffers)-1)
	}
	if ds := ir.Validate(p); len(ds) > 0 {
		t.Fatalf("hand-built plan does not validate:\n%s", ds)
	}
	for _, opt := range []Options{{Size: 4096, DType: F32, Launches: 5}, {Size: 4096, DType: I32, Reduce: ir.ReduceMax, Launches: 3}, {Size: 4096, Symbolic: true, Launches: 4}} {
		rep, err := Run(p, opt)
		if err != nil {
			t.Fatal(err)
		}
		if !rep.OK() {
			t.Fatalf("%+v:\n%s", opt, rep)
		}
	}
}
