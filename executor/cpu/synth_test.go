package cpu

import "github.com/msccl-go/msccl-go/ir"

// synthAllReduce builds an in-place all-pairs two-shot allreduce over
// memory channels: ranks × blocks thread blocks, perBlock chunks of each
// rank's slice per block. Block k of every rank talks to block k of every
// peer over its own channels (the k-th channel pairs with the k-th), reads
// the peers' copies of its chunks (rre), spreads the sums (put), and ends
// with a release handshake. With ranks=8, blocks=16, perBlock=10 it has
// 3584 ops: the benchmark's "few thousand ops" plan.
func synthAllReduce(ranks, blocks, perBlock int) *ir.Plan {
	slice := blocks * perBlock
	p := &ir.Plan{Name: "synth_allpairs", Collective: ir.AllReduce, Protocol: ir.Simple, InPlace: true,
		BufferAlignment: 16, MaxMessageSize: ^uint64(0), NumThreadsPerBlock: 1024}
	for r := range ranks {
		g := ir.GPU{ID: r, InputChunks: ranks * slice, OutputChunks: ranks * slice}
		var peers []int
		for q := range ranks {
			if q != r {
				peers = append(peers, q)
			}
		}
		var conn []int
		for range blocks {
			conn = append(conn, peers...)
		}
		g.Channels = []ir.Channel{{Type: ir.ChanMemory, ConnectedTo: conn}}
		for _, q := range peers {
			g.RemoteBuffers = append(g.RemoteBuffers, ir.RemoteBuffer{Rank: q, Type: ir.BufInput, AccessChannelTypes: []ir.ChannelType{ir.ChanMemory}})
		}
		np := len(peers)
		local := make([]int, np)
		bufs := make([]int, np)
		for i := range np {
			local[i], bufs[i] = i, i
		}
		for k := range blocks {
			ids := make([]int, np)
			for i := range np {
				ids[i] = k*np + i
			}
			tb := ir.ThreadBlock{ID: k,
				Channels:         []ir.TBChannel{{Type: ir.ChanMemory, ChannelIDs: ids}},
				RemoteBufferRefs: []ir.RemoteBufferRef{{AccessChannelType: ir.ChanMemory, RemoteBufferIDs: bufs}}}
			sync := func(code ir.OpCode) ir.Op {
				return ir.Op{Code: code, ChannelType: ir.ChanMemory, ChannelIDs: local}
			}
			nop := ir.Op{Code: ir.OpNop}
			tb.Ops = append(tb.Ops, sync(ir.OpRlxSignal), sync(ir.OpRlxWait), nop)
			var puts []ir.Op
			for j := range perBlock {
				c := r*slice + k*perBlock + j
				rre := ir.Op{Code: ir.OpRre, ChannelType: ir.ChanMemory,
					Src: []ir.BufRef{{Kind: ir.RefLocal, Type: ir.BufInput, Index: c, Size: 1}},
					Dst: []ir.BufRef{{Kind: ir.RefLocal, Type: ir.BufInput, Index: c, Size: 1}}}
				rre.SetReduceOp(ir.ReduceSum)
				put := ir.Op{Code: ir.OpPut, ChannelType: ir.ChanMemory}
				for i := range np {
					rre.Src = append(rre.Src, ir.BufRef{Kind: ir.RefRemote, BufferID: i, Index: c, Size: 1})
					put.Src = append(put.Src, ir.BufRef{Kind: ir.RefLocal, Type: ir.BufInput, Index: c, Size: 1})
					put.Dst = append(put.Dst, ir.BufRef{Kind: ir.RefRemote, BufferID: i, Index: c, Size: 1})
				}
				tb.Ops = append(tb.Ops, rre)
				puts = append(puts, put)
			}
			tb.Ops = append(tb.Ops, nop)
			tb.Ops = append(tb.Ops, puts...)
			tb.Ops = append(tb.Ops, nop, sync(ir.OpSignal), sync(ir.OpWait), nop)
			g.ThreadBlocks = append(g.ThreadBlocks, tb)
		}
		p.GPUs = append(p.GPUs, g)
	}
	return p
}

func countOps(p *ir.Plan) int {
	n := 0
	for _, g := range p.GPUs {
		for _, tb := range g.ThreadBlocks {
			for _, op := range tb.Ops {
				n += 1 + len(op.Ops())
			}
		}
	}
	return n
}
