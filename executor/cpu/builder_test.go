package cpu

import "github.com/msccl-go/msccl-go/ir"

// direct builds a one-block-per-rank plan where rank r has one channel of
// type ct to every peer (local channel i is peers[i]) and remote buffers
// for every peer's output (ids 0..n-2) and input (ids n-1..2n-3).
func direct(coll ir.Collective, ct ir.ChannelType, n, inChunks, outChunks, scratchChunks int, body func(r int, peers []int) []ir.Op) *ir.Plan {
	p := &ir.Plan{Name: "direct_" + string(coll), Collective: coll, Protocol: ir.Simple,
		BufferAlignment: 16, MaxMessageSize: ^uint64(0), NumThreadsPerBlock: 1024}
	for r := range n {
		var peers []int
		for q := range n {
			if q != r {
				peers = append(peers, q)
			}
		}
		g := ir.GPU{ID: r, InputChunks: inChunks, OutputChunks: outChunks, ScratchChunks: scratchChunks,
			Channels: []ir.Channel{{Type: ct, ConnectedTo: peers}}}
		ids := make([]int, len(peers))
		var bufs []int
		for i, q := range peers {
			ids[i] = i
			g.RemoteBuffers = append(g.RemoteBuffers, ir.RemoteBuffer{Rank: q, Type: ir.BufOutput, AccessChannelTypes: []ir.ChannelType{ct}})
			bufs = append(bufs, i)
		}
		for i, q := range peers {
			g.RemoteBuffers = append(g.RemoteBuffers, ir.RemoteBuffer{Rank: q, Type: ir.BufInput, AccessChannelTypes: []ir.ChannelType{ct}})
			bufs = append(bufs, len(peers)+i)
		}
		g.ThreadBlocks = []ir.ThreadBlock{{ID: 0,
			Channels:         []ir.TBChannel{{Type: ct, ChannelIDs: ids}},
			RemoteBufferRefs: []ir.RemoteBufferRef{{AccessChannelType: ct, RemoteBufferIDs: bufs}},
			Ops:              body(r, peers)}}
		p.GPUs = append(p.GPUs, g)
	}
	return p
}

func loc(t ir.BufferType, idx int) ir.BufRef {
	return ir.BufRef{Kind: ir.RefLocal, Type: t, Index: idx, Size: 1}
}

func rem(id, idx int) ir.BufRef {
	return ir.BufRef{Kind: ir.RefRemote, BufferID: id, Index: idx, Size: 1}
}

func syncOp(code ir.OpCode, ct ir.ChannelType, ids ...int) ir.Op {
	return ir.Op{Code: code, ChannelType: ct, ChannelIDs: ids}
}

func allIDs(peers []int) []int {
	ids := make([]int, len(peers))
	for i := range ids {
		ids[i] = i
	}
	return ids
}

var nop = ir.Op{Code: ir.OpNop}

// handshake is the start of a launch: every peer is in this launch, so
// writing into its buffers cannot overtake its host reading the last
// results. The end: every write into me has landed before my launch ends.
func handshake(peers []int) []ir.Op {
	return []ir.Op{syncOp(ir.OpRlxSignal, ir.ChanMemory, allIDs(peers)...), syncOp(ir.OpRlxWait, ir.ChanMemory, allIDs(peers)...), nop}
}

func finale(ct ir.ChannelType, peers []int) []ir.Op {
	return []ir.Op{nop, syncOp(ir.OpSignal, ct, allIDs(peers)...), syncOp(ir.OpWait, ct, allIDs(peers)...), nop}
}

// collectivePlans are direct algorithms for every collective, 4 ranks.
func collectivePlans() map[string]*ir.Plan {
	const n = 4
	m := map[string]*ir.Plan{}
	m["allgather"] = direct(ir.AllGather, ir.ChanMemory, n, 1, n, 0, func(r int, peers []int) []ir.Op {
		ops := handshake(peers)
		ops = append(ops, ir.Op{Code: ir.OpCopy, Src: []ir.BufRef{loc(ir.BufInput, 0)}, Dst: []ir.BufRef{loc(ir.BufOutput, r)}})
		put := ir.Op{Code: ir.OpPut, ChannelType: ir.ChanMemory}
		for i := range peers {
			put.Src = append(put.Src, loc(ir.BufInput, 0))
			put.Dst = append(put.Dst, rem(i, r))
		}
		return append(append(ops, put), finale(ir.ChanMemory, peers)...)
	})
	m["reducescatter"] = direct(ir.ReduceScatter, ir.ChanMemory, n, n, 1, 0, func(r int, peers []int) []ir.Op {
		ops := handshake(peers)
		rre := ir.Op{Code: ir.OpRre, ChannelType: ir.ChanMemory, Src: []ir.BufRef{loc(ir.BufInput, r)}, Dst: []ir.BufRef{loc(ir.BufOutput, 0)}}
		for i := range peers {
			rre.Src = append(rre.Src, rem(len(peers)+i, r))
		}
		return append(append(ops, rre), finale(ir.ChanMemory, peers)...)
	})
	m["alltoall"] = direct(ir.AllToAll, ir.ChanMemory, n, n, n, 0, func(r int, peers []int) []ir.Op {
		ops := handshake(peers)
		ops = append(ops, ir.Op{Code: ir.OpCopy, Src: []ir.BufRef{loc(ir.BufInput, r)}, Dst: []ir.BufRef{loc(ir.BufOutput, r)}})
		put := ir.Op{Code: ir.OpPut, ChannelType: ir.ChanMemory}
		for i, q := range peers {
			put.Src = append(put.Src, loc(ir.BufInput, q))
			put.Dst = append(put.Dst, rem(i, r))
		}
		return append(append(ops, put), finale(ir.ChanMemory, peers)...)
	})
	m["sendrecv"] = direct(ir.SendRecv, ir.ChanMemory, n, 1, 1, 0, func(r int, peers []int) []ir.Op {
		next := (r + 1) % n
		i := next
		if next > r {
			i = next - 1
		}
		ops := handshake(peers)
		ops = append(ops, ir.Op{Code: ir.OpPut, ChannelType: ir.ChanMemory, Src: []ir.BufRef{loc(ir.BufInput, 0)}, Dst: []ir.BufRef{rem(i, 0)}})
		return append(ops, finale(ir.ChanMemory, peers)...)
	})
	m["broadcast"] = direct(ir.Broadcast, ir.ChanMemory, n, 1, 1, 0, func(r int, peers []int) []ir.Op {
		ops := handshake(peers)
		if r == 0 {
			ops = append(ops, ir.Op{Code: ir.OpCopy, Src: []ir.BufRef{loc(ir.BufInput, 0)}, Dst: []ir.BufRef{loc(ir.BufOutput, 0)}})
			ops = append(ops, putToAll(peers))
		}
		return append(ops, finale(ir.ChanMemory, peers)...)
	})
	// In place: reducescatter's output is input chunk r; allgather's input
	// is output chunk r, so its copy goes (a self-copy would still be a
	// write that the put's read races with).
	rs := clonePlan(m["reducescatter"])
	rs.InPlace = true
	m["reducescatter_inplace"] = rs
	ag := clonePlan(m["allgather"])
	ag.InPlace = true
	for r := range ag.GPUs {
		ops := &ag.GPUs[r].ThreadBlocks[0].Ops
		*ops = append((*ops)[:3], (*ops)[4:]...)
	}
	m["allgather_inplace"] = ag
	// Port channels: the proxy copies, the port signal arrives after the
	// copy (in-order FIFO), flush makes the source reusable.
	m["allgather_port"] = direct(ir.AllGather, ir.ChanPort, n, 1, n, 0, func(r int, peers []int) []ir.Op {
		ops := []ir.Op{syncOp(ir.OpSignal, ir.ChanPort, allIDs(peers)...), syncOp(ir.OpWait, ir.ChanPort, allIDs(peers)...), nop,
			{Code: ir.OpCopy, Src: []ir.BufRef{loc(ir.BufInput, 0)}, Dst: []ir.BufRef{loc(ir.BufOutput, r)}}}
		pws := ir.Op{Code: ir.OpPws, ChannelType: ir.ChanPort, ChannelIDs: allIDs(peers)}
		for i := range peers {
			pws.Src = append(pws.Src, loc(ir.BufInput, 0))
			pws.Dst = append(pws.Dst, rem(i, r))
		}
		ops = append(ops, nop, pws, syncOp(ir.OpFlush, ir.ChanPort, allIDs(peers)...), syncOp(ir.OpWait, ir.ChanPort, allIDs(peers)...), nop)
		return ops
	})
	return m
}

// putToAll is one memory put of input chunk 0 to chunk 0 of every peer
// (remote buffer i: peer i), the direct algorithms' fan-out from a root.
func putToAll(peers []int) ir.Op {
	put := ir.Op{Code: ir.OpPut, ChannelType: ir.ChanMemory}
	for i := range peers {
		put.Src = append(put.Src, loc(ir.BufInput, 0))
		put.Dst = append(put.Dst, rem(i, 0))
	}
	return put
}
