package cpu

import (
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/ir"
)

// switchAllGather is an allgather over one multicast group: every rank
// stores its input into chunk r of every rank's output (gstore), or packs
// it into its scratch chunk n and stores those packets into chunk r of
// every rank's scratch (gstorepkt reads its source as packets, as
// upstream does), which each rank then unpacks.
func switchAllGather(packets bool) *ir.Plan {
	const n = 4
	proto, buf := ir.Simple, ir.BufOutput
	if packets {
		proto, buf = ir.LL, ir.BufScratch
	}
	p := direct(ir.AllGather, ir.ChanMemory, n, 1, n, n+1, func(r int, peers []int) []ir.Op {
		sw := ir.BufRef{Kind: ir.RefSwitch, SwitchID: 0, Index: r, Size: 1}
		var ops []ir.Op
		if !packets {
			ops = handshake(peers)
			ops = append(ops, ir.Op{Code: ir.OpGstore, ChannelType: ir.ChanSwitch, Src: []ir.BufRef{loc(ir.BufInput, 0)}, Dst: []ir.BufRef{sw}})
			return append(ops, finale(ir.ChanMemory, peers)...)
		}
		ops = append(ops, ir.Op{Code: ir.OpCpkt, Src: []ir.BufRef{loc(ir.BufInput, 0)}, Dst: []ir.BufRef{loc(ir.BufScratch, n)}},
			ir.Op{Code: ir.OpGstorepkt, ChannelType: ir.ChanSwitch, Src: []ir.BufRef{loc(ir.BufScratch, n)}, Dst: []ir.BufRef{sw}})
		for q := range n {
			ops = append(ops, ir.Op{Code: ir.OpUpkt, Src: []ir.BufRef{loc(ir.BufScratch, q)}, Dst: []ir.BufRef{loc(ir.BufOutput, q)}})
		}
		return ops
	})
	p.Protocol = proto
	p.DoubleScratch = packets
	all := []int{0, 1, 2, 3}
	for r := range p.GPUs {
		g := &p.GPUs[r]
		g.Channels = append(g.Channels, ir.Channel{Type: ir.ChanSwitch, BufferType: buf, RankGroups: []ir.RankGroup{{Size: n, Ranks: all}}})
		tb := &g.ThreadBlocks[0]
		tb.Channels = append(tb.Channels, ir.TBChannel{Type: ir.ChanSwitch, ChannelIDs: []int{0}})
	}
	return p
}

func TestSwitchStores(t *testing.T) {
	for _, packets := range []bool{false, true} {
		p := switchAllGather(packets)
		for _, dt := range []DType{F16, I32} {
			rep, err := Run(p, Options{Size: 4 * 16 * 64, DType: dt, Launches: 3})
			if err != nil {
				t.Fatal(err)
			}
			if !rep.OK() {
				t.Fatalf("packets=%v %s:\n%s", packets, dt, rep)
			}
		}
	}
	// Without double scratch, launch l+1's packets overwrite slots that a
	// slow rank may still be reading in launch l.
	p := switchAllGather(true)
	p.DoubleScratch = false
	rep, err := Run(p, Options{Size: 4 * 16 * 64, DType: I32})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Verdict != Race {
		t.Fatalf("single scratch: want a race\n%s", rep)
	}
}

// TestGstorepktReadsPackets: gstorepkt's source is packets. A plan that
// stores raw input is refused where packets are resolved, and one whose
// source slot a plain copy filled never sees a flag there.
func TestGstorepktReadsPackets(t *testing.T) {
	p := switchAllGather(true)
	for r := range p.GPUs {
		ops := p.GPUs[r].ThreadBlocks[0].Ops
		ops[1].Src = []ir.BufRef{loc(ir.BufInput, 0)}
	}
	if _, err := Run(p, Options{Size: 4 * 16 * 64, DType: I32}); err == nil || !strings.Contains(err.Error(), "packets live in scratch") {
		t.Fatalf("gstorepkt from input: want a refusal naming packets in scratch, got %v", err)
	}
	p = switchAllGather(true)
	for r := range p.GPUs {
		ops := p.GPUs[r].ThreadBlocks[0].Ops
		ops[0].Code = ir.OpCopy
		ops = append(ops[:1], append([]ir.Op{{Code: ir.OpNop}}, ops[1:]...)...)
		p.GPUs[r].ThreadBlocks[0].Ops = ops
	}
	rep, err := Run(p, Options{Size: 4 * 16 * 64, DType: I32})
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK() {
		t.Fatalf("gstorepkt from a plainly copied slot: want it refused\n%s", rep)
	}
}

func TestLLWidthDropsPartialPackets(t *testing.T) {
	p := clonePlan(fixtures(t)["transfer_pack.json"])
	p.BufferAlignment = 4
	// 4-byte alignment: 20-byte chunks are two and a half LL16 payloads;
	// upstream moves whole packets only, so the tail is lost. LL8 carries
	// 4-byte payloads and moves everything.
	opt := Options{Size: 40, DType: I32}
	rep, err := Run(p, opt)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Verdict != WrongResult {
		t.Fatalf("LL16: want a wrong result\n%s", rep)
	}
	opt.LLWidth = 8
	if rep, err = Run(p, opt); err != nil || !rep.OK() {
		t.Fatalf("LL8: %v\n%s", err, rep)
	}
}
