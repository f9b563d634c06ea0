package cpu

import (
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/ir"
)

// rppktAllGather is a 4-rank LL allgather in the shape of upstream's
// allgather_pkt_rppkt_4.json (not in this repo): each rank packs its
// input into its own scratch slot (cpkt), forwards those packets with one
// rppkt whose single src_buff feeds a dst_buff on every peer (upstream's
// handleReadPutPackets fan-out), and unpacks the peers' slots into its
// output. Over port channels the proxy copies the packets, one
// channel_ids entry per dst. Remote buffers 2n-2.. are the peers'
// scratch.
func rppktAllGather(ct ir.ChannelType) *ir.Plan {
	const n = 4
	p := direct(ir.AllGather, ct, n, 1, n, n, func(r int, peers []int) []ir.Op {
		ops := []ir.Op{{Code: ir.OpCpkt, Src: []ir.BufRef{loc(ir.BufInput, 0)}, Dst: []ir.BufRef{loc(ir.BufScratch, r)}}}
		fan := ir.Op{Code: ir.OpRppkt, ChannelType: ct, Src: []ir.BufRef{loc(ir.BufScratch, r)}}
		for i := range peers {
			fan.Dst = append(fan.Dst, rem(2*len(peers)+i, r))
		}
		if ct == ir.ChanPort {
			fan.ChannelIDs = allIDs(peers)
		}
		ops = append(ops, fan, ir.Op{Code: ir.OpCopy, Src: []ir.BufRef{loc(ir.BufInput, 0)}, Dst: []ir.BufRef{loc(ir.BufOutput, r)}})
		for _, q := range peers {
			ops = append(ops, ir.Op{Code: ir.OpUpkt, Src: []ir.BufRef{loc(ir.BufScratch, q)}, Dst: []ir.BufRef{loc(ir.BufOutput, q)}})
		}
		return ops
	})
	p.Name = "allgather_pkt_rppkt_" + ct.String()
	p.Protocol, p.DoubleScratch = ir.LL, true
	for r := range p.GPUs {
		g := &p.GPUs[r]
		for _, q := range g.Channels[0].ConnectedTo {
			g.RemoteBuffers = append(g.RemoteBuffers, ir.RemoteBuffer{Rank: q, Type: ir.BufScratch, AccessChannelTypes: []ir.ChannelType{ct}})
			ids := &g.ThreadBlocks[0].RemoteBufferRefs[0].RemoteBufferIDs
			*ids = append(*ids, len(g.RemoteBuffers)-1)
		}
	}
	return p
}

// TestRppktFanOut: one rppkt with 1 src_buff and 3 dst_buff refs
// validates (through the JSON codec too) and delivers every rank's
// input to every peer, over memory and port channels, in every launch.
func TestRppktFanOut(t *testing.T) {
	for _, ct := range []ir.ChannelType{ir.ChanMemory, ir.ChanPort} {
		t.Run(ct.String(), func(t *testing.T) {
			p := rppktAllGather(ct)
			if ds := ir.Validate(p); len(ds) > 0 {
				t.Fatalf("hand-built plan does not validate:\n%s", ds)
			}
			js, err := ir.Encode(p)
			if err != nil {
				t.Fatal(err)
			}
			q, ds, err := ir.Load(js)
			if err != nil || len(ds) > 0 {
				t.Fatalf("Load: %v\n%s", err, ds)
			}
			fan := q.GPUs[1].ThreadBlocks[0].Ops[1]
			if fan.Code != ir.OpRppkt || len(fan.Src) != 1 || len(fan.Dst) != 3 {
				t.Fatalf("decoded op 1 is %s with %d src and %d dst, want rppkt 1 -> 3", fan.Code, len(fan.Src), len(fan.Dst))
			}
			for _, dt := range []DType{F32, BF16, U8} {
				rep, err := Run(q, Options{Size: 16 * 4 * 100, DType: dt, Launches: 4})
				if err != nil {
					t.Fatal(err)
				}
				if !rep.OK() {
					t.Fatalf("%s:\n%s", dt, rep)
				}
			}
			rep, err := Run(q, Options{Size: 16 * 4 * 100, Launches: 4, Symbolic: true})
			if err != nil {
				t.Fatal(err)
			}
			if !rep.OK() {
				t.Fatalf("symbolic:\n%s", rep)
			}
		})
	}
}

// TestRppktFanOutOnlyFromOne: the fan-out form is one src for every dst;
// two srcs for three dsts is still an error, and put (not FanOut) still
// needs equal counts.
func TestRppktFanOutOnlyFromOne(t *testing.T) {
	p := rppktAllGather(ir.ChanMemory)
	fan := &p.GPUs[0].ThreadBlocks[0].Ops[1]
	fan.Src = append(fan.Src, loc(ir.BufScratch, 0))
	want := "error: gpus[0].threadblocks[0].ops[1].dst_buff: rppkt copies src_buff[k] to dst_buff[k] (or its one src_buff to every dst_buff), but has 2 src_buff and 3 dst_buff refs"
	if ds := ir.Validate(p); !strings.Contains(ds.String(), want) {
		t.Errorf("want %q in\n%s", want, ds)
	}
	q := collectivePlans()["allgather"]
	put := &q.GPUs[0].ThreadBlocks[0].Ops[4]
	put.Src = put.Src[:1]
	want = "error: gpus[0].threadblocks[0].ops[4].dst_buff: put copies src_buff[k] to dst_buff[k], but has 1 src_buff and 3 dst_buff refs"
	if ds := ir.Validate(q); !strings.Contains(ds.String(), want) {
		t.Errorf("want %q in\n%s", want, ds)
	}
}
