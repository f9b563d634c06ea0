package cudaexec

import (
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/kernels"
)

// fakeBufs places every rank's buffers at distinct fake addresses, so that
// table building can be checked without a GPU.
func fakeBufs(p *ir.Plan, size int64) ([]bufSet, []*ir.Layout, error) {
	in, out, err := p.BufferBytes(size)
	if err != nil {
		return nil, nil, err
	}
	bs := make([]bufSet, len(p.GPUs))
	ls := make([]*ir.Layout, len(p.GPUs))
	for r := range p.GPUs {
		l, err := p.Layout(r, in, out)
		if err != nil {
			return nil, nil, err
		}
		ls[r] = l
		base := uint64(r+1) << 36
		bs[r] = bufSet{in: base, out: base + 1<<34, scratch: base + 2<<34, inN: in, outN: out, scratchN: l.ScratchAlloc}
	}
	return bs, ls, nil
}

func TestTablesForFixtures(t *testing.T) {
	for _, f := range planFiles(t) {
		p := loadPlan(t, f)
		err := checkPlan(p, false)
		if strings.Contains(f, "pipeline") || strings.Contains(f, "nvls") {
			if err == nil || !strings.Contains(err.Error(), "multicast") || ir.ErrorCode(err) != ir.CodeUnsupported {
				t.Errorf("%s: want a multicast refusal, got %v", f, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		bs, ls, err := fakeBufs(p, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		for r := range p.GPUs {
			tb := &tableBuilder{p: p, rank: r, lay: ls[r], bufs: bs, reduce: ir.ReduceMax}
			tables, err := tb.build()
			if err != nil {
				t.Errorf("%s rank %d: %v", f, r, err)
				continue
			}
			if len(tables) != len(p.GPUs[r].ThreadBlocks) {
				t.Errorf("%s rank %d: %d tables for %d blocks", f, r, len(tables), len(p.GPUs[r].ThreadBlocks))
			}
			for bi, tab := range tables {
				for _, op := range tab.Ops {
					if ir.OpCode(op.Code).Info().Reduces && op.Reduce != 2 {
						t.Errorf("%s rank %d block %d: a sum op did not take the run's max", f, r, bi)
					}
				}
				for _, ref := range tab.Refs {
					owner := int(ref.Peer)
					if owner < 0 {
						owner = r
					}
					b := bs[owner]
					end := ref.Ptr + uint64(ref.Size)
					if ref.Flags&kernels.RefPacket != 0 {
						end = ref.Ptr + 2*uint64(ref.Size)
					}
					ok := (ref.Ptr >= b.in && end <= b.in+uint64(b.inN)) ||
						(ref.Ptr >= b.out && end <= b.out+uint64(b.outN)) ||
						(ref.Ptr >= b.scratch && end <= b.scratch+uint64(b.scratchN))
					if !ok {
						t.Errorf("%s rank %d block %d: ref %+v outside rank %d's buffers", f, r, bi, ref, owner)
					}
				}
				if _, err := tab.Encode(); err != nil {
					t.Error(err)
				}
			}
		}
	}
}

func TestTableErrors(t *testing.T) {
	base := func() *ir.Plan { return loadPlan(t, "../../testdata/peer-plans/allreduce_packet.json") }
	cases := []struct {
		name   string
		mutate func(p *ir.Plan)
		want   string
	}{
		{"remote buffer id", func(p *ir.Plan) { p.GPUs[0].ThreadBlocks[0].Ops[0].Dst[0].BufferID = 7 }, "buffer_id 7"},
		{"chunk out of range", func(p *ir.Plan) { p.GPUs[0].ThreadBlocks[0].Ops[0].Src[0].Index = 40 }, "exceed"},
		{"block ids", func(p *ir.Plan) { p.GPUs[0].ThreadBlocks[1].ID = 5 }, "thread block ids"},
		{"reduce op", func(p *ir.Plan) { p.GPUs[0].ThreadBlocks[0].Ops[1].SetReduceOp("avg") }, "avg"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := base()
			c.mutate(p)
			bs, ls, err := fakeBufs(p, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			_, err = (&tableBuilder{p: p, rank: 0, lay: ls[0], bufs: bs}).build()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("want an error containing %q, got %v", c.want, err)
			}
		})
	}
}

func TestCheckPlanLimits(t *testing.T) {
	p := loadPlan(t, "../../testdata/peer-plans/allreduce.json")
	p.NumThreadsPerBlock = 2048
	if err := checkPlan(p, false); err == nil {
		t.Error("2048 threads per block accepted")
	}
	p = loadPlan(t, "../../testdata/peer-plans/allreduce.json")
	p.BufferAlignment = 6
	if err := checkPlan(p, false); err == nil {
		t.Error("alignment 6 accepted")
	}
}

// TestRemoteTableEntriesConcatenate: a block whose remote_buffer_refs
// list one channel type twice addresses the concatenation of the
// entries, as the validator and the CPU executor read it: the tables are
// the same as with one entry listing every id.
func TestRemoteTableEntriesConcatenate(t *testing.T) {
	one := rppktFanOutPlan(ir.ChanMemory)
	split := rppktFanOutPlan(ir.ChanMemory)
	for r := range split.GPUs {
		tb := &split.GPUs[r].ThreadBlocks[0]
		ids := tb.RemoteBufferRefs[0].RemoteBufferIDs
		tb.RemoteBufferRefs = []ir.RemoteBufferRef{
			{AccessChannelType: ir.ChanMemory, RemoteBufferIDs: ids[:1]},
			{AccessChannelType: ir.ChanMemory, RemoteBufferIDs: ids[1:]},
		}
	}
	if ds := ir.Validate(split); len(ds) > 0 {
		t.Fatal(ds)
	}
	build := func(p *ir.Plan, r int) []byte {
		bs, ls, err := fakeBufs(p, 1<<12)
		if err != nil {
			t.Fatal(err)
		}
		tables, err := (&tableBuilder{p: p, rank: r, lay: ls[r], bufs: bs, reduce: ir.ReduceSum}).build()
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
		var out []byte
		for _, tab := range tables {
			b, err := tab.Encode()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, b...)
		}
		return out
	}
	for r := range one.GPUs {
		if string(build(one, r)) != string(build(split, r)) {
			t.Errorf("rank %d: two remote_buffer_refs entries of one type build other tables than one entry with every id", r)
		}
	}
}
