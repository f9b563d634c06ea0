package cudaexec

import (
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/ir"
)

// A net address carries the buffer set, type and offset through the
// kernel's address arithmetic to the proxy; device addresses (bit 63
// clear) are never taken for one.
func TestNetAddr(t *testing.T) {
	for _, set := range []uint16{0, 1, 77, netSetMask} {
		for _, typ := range []ir.BufferType{ir.BufInput, ir.BufOutput, ir.BufScratch} {
			for _, off := range []uint64{0, 16, 1<<40 + 12, netOffMask} {
				buf, got, ok := netDecode(netAddr(set, int(typ)) + off)
				if !ok || buf != set<<2|uint16(typ) || got != off {
					t.Errorf("set %d %s +%d: decoded buf %#x off %d ok %v", set, typ.Long(), off, buf, got, ok)
				}
			}
		}
	}
	for _, a := range []uint64{0, 0x7f00_0000_1000, 1<<63 - 1} {
		if _, _, ok := netDecode(a); ok {
			t.Errorf("%#x decoded as a net address", a)
		}
	}
}

// Two nodes of two ranks: each rank's tables address the other node's
// buffers only in the destinations of port puts, as net addresses within
// the peer's buffers (the proxy sends those over the socket), and the
// node's own ranks at device addresses, as before. A plan whose memory
// channels reach the other node cannot be built.
func TestNetTables(t *testing.T) {
	hier := mustCompile(t, "allreduce_hierarchical", map[string]int64{"ranks": 4, "nodes": 2, "gpus_per_node": 2})
	node := func(r int) int { return r / 2 }
	netBufsOf := func(p *ir.Plan, self int) ([]bufSet, []*ir.Layout) {
		bs, ls, err := fakeBufs(p, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		for r := range bs {
			if node(r) != node(self) {
				bs[r].in, bs[r].out, bs[r].scratch = netAddr(3, int(ir.BufInput)), netAddr(3, int(ir.BufOutput)), netAddr(3, int(ir.BufScratch))
				bs[r].net = true
			}
		}
		return bs, ls
	}
	for r := range hier.GPUs {
		bs, ls := netBufsOf(hier, r)
		tables, err := (&tableBuilder{p: hier, rank: r, lay: ls[r], bufs: bs, reduce: ir.ReduceSum}).build()
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
		nets := 0
		for bi, tab := range tables {
			for oi, op := range tab.Ops {
				for k := 0; k < int(op.NSrc+op.NDst); k++ {
					ref := tab.Refs[int(op.Ref0)+k]
					buf, off, ok := netDecode(ref.Ptr)
					if !ok {
						if ref.Peer >= 0 && node(int(ref.Peer)) != node(r) {
							t.Errorf("rank %d block %d op %d: rank %d's buffer at device address %#x", r, bi, oi, ref.Peer, ref.Ptr)
						}
						continue
					}
					nets++
					if k < int(op.NSrc) || ir.ChannelType(op.ChanType) != ir.ChanPort || !ir.OpCode(op.Code).Info().CrossNode {
						t.Errorf("rank %d block %d op %d (code %d, channel type %d): net address in ref %d", r, bi, oi, op.Code, op.ChanType, k)
					}
					if buf>>2 != 3 || ref.Peer < 0 || node(int(ref.Peer)) == node(r) {
						t.Errorf("rank %d block %d op %d: net ref to rank %d, buffer %#x", r, bi, oi, ref.Peer, buf)
					}
					limit := map[ir.BufferType]int64{ir.BufInput: bs[ref.Peer].inN, ir.BufOutput: bs[ref.Peer].outN, ir.BufScratch: bs[ref.Peer].scratchN}[ir.BufferType(buf&3)]
					if int64(off)+int64(ref.Size) > limit {
						t.Errorf("rank %d block %d op %d: net ref [%d, +%d) beyond %d bytes", r, bi, oi, off, ref.Size, limit)
					}
				}
			}
		}
		if nets == 0 {
			t.Errorf("rank %d: no port put reaches the other node", r)
		}
	}
	twoshot := mustCompile(t, "allreduce_twoshot", map[string]int64{"ranks": 4})
	bs, ls := netBufsOf(twoshot, 0)
	_, err := (&tableBuilder{p: twoshot, rank: 0, lay: ls[0], bufs: bs, reduce: ir.ReduceSum}).build()
	if err == nil || !strings.Contains(err.Error(), "only a port channel's put reaches") {
		t.Errorf("memory channels across nodes: %v", err)
	}
}
