package cudaexec

import (
	"testing"

	"github.com/msccl-go/msccl-go/ir"
)

// rppktFanOutPlan is a 4-rank LL allgather in the shape of upstream's
// allgather_pkt_rppkt_4.json (not in this repo; executor/cpu's
// rppktAllGather is the same plan): rank r packs its input into scratch
// slot r (cpkt), then one rppkt forwards those packets from its single
// src_buff to slot r of every peer's scratch (upstream's
// handleReadPutPackets fan-out), and each rank unpacks the peers' slots.
func rppktFanOutPlan(ct ir.ChannelType) *ir.Plan {
	const n = 4
	p := &ir.Plan{Name: "allgather_pkt_rppkt_" + ct.String(), Collective: ir.AllGather, Protocol: ir.LL,
		DoubleScratch: true, BufferAlignment: 16, MaxMessageSize: ^uint64(0), NumThreadsPerBlock: 1024}
	loc := func(t ir.BufferType, i int) ir.BufRef {
		return ir.BufRef{Kind: ir.RefLocal, Type: t, Index: i, Size: 1}
	}
	for r := range n {
		var peers, ids []int
		g := ir.GPU{ID: r, InputChunks: 1, OutputChunks: n, ScratchChunks: n}
		fan := ir.Op{Code: ir.OpRppkt, ChannelType: ct, Src: []ir.BufRef{loc(ir.BufScratch, r)}}
		for q := range n {
			if q == r {
				continue
			}
			ids = append(ids, len(peers))
			peers = append(peers, q)
			g.RemoteBuffers = append(g.RemoteBuffers, ir.RemoteBuffer{Rank: q, Type: ir.BufScratch, AccessChannelTypes: []ir.ChannelType{ct}})
			fan.Dst = append(fan.Dst, ir.BufRef{Kind: ir.RefRemote, BufferID: len(ids) - 1, Index: r, Size: 1})
		}
		if ct == ir.ChanPort {
			fan.ChannelIDs = ids
		}
		g.Channels = []ir.Channel{{Type: ct, ConnectedTo: peers}}
		ops := []ir.Op{
			{Code: ir.OpCpkt, Src: []ir.BufRef{loc(ir.BufInput, 0)}, Dst: []ir.BufRef{loc(ir.BufScratch, r)}},
			fan,
			{Code: ir.OpCopy, Src: []ir.BufRef{loc(ir.BufInput, 0)}, Dst: []ir.BufRef{loc(ir.BufOutput, r)}},
		}
		for _, q := range peers {
			ops = append(ops, ir.Op{Code: ir.OpUpkt, Src: []ir.BufRef{loc(ir.BufScratch, q)}, Dst: []ir.BufRef{loc(ir.BufOutput, q)}})
		}
		g.ThreadBlocks = []ir.ThreadBlock{{ID: 0,
			Channels:         []ir.TBChannel{{Type: ct, ChannelIDs: ids}},
			RemoteBufferRefs: []ir.RemoteBufferRef{{AccessChannelType: ct, RemoteBufferIDs: ids}},
			Ops:              ops}}
		p.GPUs = append(p.GPUs, g)
	}
	return p
}

// TestRppktFanOutPlanValid needs no GPU: the plan the GPU test runs is
// valid and has the fan-out form.
func TestRppktFanOutPlanValid(t *testing.T) {
	for _, ct := range []ir.ChannelType{ir.ChanMemory, ir.ChanPort} {
		p := rppktFanOutPlan(ct)
		if ds := ir.Validate(p); len(ds) > 0 {
			t.Fatalf("%s:\n%s", ct, ds)
		}
		if op := p.GPUs[0].ThreadBlocks[0].Ops[1]; op.Code != ir.OpRppkt || len(op.Src) != 1 || len(op.Dst) != 3 {
			t.Fatalf("%s: op 1 is %s %d -> %d", ct, op.Code, len(op.Src), len(op.Dst))
		}
	}
}

// TestGPURppktFanOut runs the fan-out plan over memory channels (the
// kernel's op_unpack fan-out branch) and port channels (op_pkt_port's
// src[0] for every dst) against the CPU executor.
func TestGPURppktFanOut(t *testing.T) {
	needGPU(t)
	for _, ct := range []ir.ChannelType{ir.ChanMemory, ir.ChanPort} {
		p := rppktFanOutPlan(ct)
		t.Run(p.Name, func(t *testing.T) {
			checkCases(t, p.Name, p, matrix(p))
		})
	}
}
