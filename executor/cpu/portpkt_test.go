package cpu

import (
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
		t.Logf("plain copy then port ppkt (symbolic %v): %s", sym, rep.Verdict)
	}
}
