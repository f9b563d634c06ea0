package cpu

import (
	"fmt"

	"github.com/msccl-go/msccl-go/ir"
)

// agentCtx is who performs an access: a block, or a rank's proxy acting
// for a block's port request.
type agentCtx struct {
	agent    int
	epoch    uint32
	clk      clocks
	pubAgent int
	pubEpoch uint32
}

// blockCtx: the block's writes are published when its launch ends, which
// is host epoch launch+2 (epoch 1 is the host's write of the first inputs).
//
// The context's clocks are the op's own copy: packets an op reads order
// its later accesses (each thread writes what it computed from the
// packets it read: a data dependency), see pktRead.
func (s *sim) blockCtx(b *block) agentCtx {
	if s.tags.sp != nil {
		s.opClk.borrow(b.clk)
	} else {
		s.opClk.assign(b.clk)
	}
	return agentCtx{agent: b.agent, epoch: b.ph, clk: s.opClk, pubAgent: s.ranks[b.rank].host, pubEpoch: uint32(b.launch + 2)}
}

// proxyCtx: kernel ends do not wait for the proxy, so only flushes and
// port signals publish its copies.
func (s *sim) proxyCtx(rs *rankState) agentCtx {
	return agentCtx{agent: rs.proxy, epoch: rs.proxyEpoch, clk: rs.proxyClk, pubAgent: rs.host, pubEpoch: ^uint32(0)}
}

// clip narrows a reference to a pipeline window.
func clip(r *rref, w, unit int64) (off, n int64) {
	return ir.Window(r.off, r.n, w, unit)
}

// size is the reference's payload bytes, for ir.WindowBytes.
func (r *rref) size() int64 { return r.n }

// locate maps bytes of a referenced buffer to its backing array.
func (s *sim) locate(rank int, typ ir.BufferType, off int64, packet bool, launch int) (arr int, raw, base int64) {
	rs := s.ranks[rank]
	switch typ {
	case ir.BufInput:
		return rs.inArr, rs.inBase + off, rs.inBase
	case ir.BufOutput:
		return rs.outArr, rs.outBase + off, rs.outBase
	}
	h := int64(0)
	if s.p.DoubleScratch {
		h = int64(launch%2) * rs.half
	}
	if packet {
		return arrScratch, h + 2*off, h
	}
	return arrScratch, h + off, h
}

// pktWrite stores data as packets of this launch's flag at (rank, off).
func (s *sim) pktWrite(ctx agentCtx, place int32, rank int, off int64, data payload, launch int, t float64) {
	arr, raw, base := s.locate(rank, ir.BufScratch, off, true, launch)
	n := data.len()
	a := acc{agent: int32(ctx.agent), epoch: ctx.epoch, exec: s.exec, place: place, write: true, typ: ir.BufScratch, base: base, pubAgent: int32(ctx.pubAgent), pubEpoch: ctx.pubEpoch}
	s.det.access(rank, arr, raw, raw+2*n, a, ctx.clk)
	rs := s.ranks[rank]
	p := raw / 2
	if s.field != nil {
		rs.vpkt.set(s.field, p, data.v)
	} else {
		copy(rs.pkt[p:p+n], data.b)
	}
	// The packet carries the writer's execution clock including the write
	// itself: a reader that sees the flag is ordered after it.
	c := clocks{E: s.none.E}
	if !s.opt.NoRaces {
		e := ctx.clk.E.clone()
		e.set(ctx.agent, ctx.epoch)
		c = clocks{E: e.frozen()}
	}
	rs.flags.set(p, p+n, uint32(launch+1), c, t)
}

// pktReady checks that the packets at (rank, off, n) carry this launch's
// flag.
func (s *sim) pktReady(b *block, rank int, off, n int64) (bool, string) {
	_, raw, _ := s.locate(rank, ir.BufScratch, off, true, b.launch)
	ok, _, miss := s.ranks[rank].flags.ready(raw/2, raw/2+n, uint32(b.launch+1), clocks{})
	if ok {
		return true, ""
	}
	at := miss - raw/2 + off
	half := ""
	if s.p.DoubleScratch {
		half = fmt.Sprintf(" half %d", b.launch%2)
	}
	return false, fmt.Sprintf("packets with flag %d at rank %d scratch%s payload byte %d (packet byte %d) of [%d:%d), which nobody has written this launch", b.launch+1, rank, half, at, 2*at, off, off+n)
}

// pktRead returns the payload of ready packets and records the read as
// ordered after the packets' writes; the block learns their execution
// order at its next nop.
func (s *sim) pktRead(b *block, ctx agentCtx, place int32, rank int, off, n int64) payload {
	arr, raw, base := s.locate(rank, ir.BufScratch, off, true, b.launch)
	rs := s.ranks[rank]
	c := s.tmpClk
	c.assign(ctx.clk)
	_, t, _ := rs.flags.ready(raw/2, raw/2+n, uint32(b.launch+1), c)
	join(b.pend.E, c.E)
	join(ctx.clk.E, c.E)
	b.t = max(b.t, t)
	a := acc{agent: int32(b.agent), epoch: b.ph, exec: s.exec, place: place, typ: ir.BufScratch, base: base, pubAgent: int32(s.ranks[b.rank].host), pubEpoch: uint32(b.launch + 2)}
	s.det.access(rank, arr, raw, raw+2*n, a, c)
	if s.field != nil {
		return payload{v: rs.vpkt.get(s.field, raw/2, raw/2+n, nil)}
	}
	return payload{b: rs.pkt[raw/2 : raw/2+n]}
}

func (s *sim) scratchBuf(n int64) []byte {
	s.tmp = grow(s.tmp, int(n))
	return s.tmp[:n]
}

// pktBytes rounds a packet op's byte count down to whole packets: LL16
// packets carry 8 bytes of payload, LL8 packets 4, and upstream's loops
// move whole packets only.
func (s *sim) pktBytes(n int64) int64 {
	return n - n%int64(s.opt.LLWidth/2)
}

// opBytes is the byte count an op moves in this window: the smallest of
// its references (they agree in every well-formed plan).
func opBytes(op *rop, w, unit int64) int64 {
	return ir.WindowBytes(op.src, op.dst, (*rref).size, w, unit)
}

// data runs a data, packet or switch op.
func (s *sim) data(b *block, op *rop, w, unit int64) (bool, string) {
	rs := s.ranks[b.rank]
	ctx := s.blockCtx(b)
	topo := s.topo()
	pl := op.place
	var local, remote int64
	move := func(n int64, rank int) {
		if rank == b.rank {
			local += n
		} else {
			remote += n
		}
	}
	switch op.code {
	case ir.OpPut, ir.OpPws, ir.OpPwsf, ir.OpGet:
		port := len(op.chans) > 0 && op.chans[0].typ == ir.ChanPort
		for k := range op.dst {
			src, dst := &op.src[min(k, len(op.src)-1)], &op.dst[k]
			so, sn := clip(src, w, unit)
			do, dn := clip(dst, w, unit)
			if n := min(sn, dn); n > 0 {
				c := ctx
				if port {
					s.proxyStep(rs, b)
					c = s.proxyCtx(rs)
					rs.proxyT += topo.PortLatencyUs + float64(n)/topo.PortGBps/1e3
				}
				data := s.load(c, pl, src.rank, src.typ, so, n, b.launch)
				s.store(c, pl, dst.rank, dst.typ, do, data, b.launch)
				move(n, src.rank) // get reads remotely
				move(n, dst.rank) // put writes remotely
			}
			// An empty window still signals: the peer's wait counts it.
			if port && op.code.Info().Signals && k < len(op.chans) {
				s.signal(b, op, op.chans[k], false)
			}
		}
		if op.code == ir.OpPwsf {
			b.pend.recv(rs.proxyClk)
			b.t = max(b.t, rs.proxyT)
		}
		if port {
			local, remote = 0, 0
		}
		s.cost(b, local, remote, 0, topo)
		return true, ""
	case ir.OpCopy:
		n := opBytes(op, w, unit)
		if n > 0 {
			so, _ := clip(&op.src[0], w, unit)
			do, _ := clip(&op.dst[0], w, unit)
			data := s.load(ctx, pl, op.src[0].rank, op.src[0].typ, so, n, b.launch)
			s.store(ctx, pl, op.dst[0].rank, op.dst[0].typ, do, data, b.launch)
			local += 2 * n
		}
		s.cost(b, local, 0, 0, topo)
		return true, ""
	case ir.OpRe, ir.OpRes, ir.OpRre, ir.OpRres:
		n := opBytes(op, w, unit)
		if n > 0 {
			srcs := make([]payload, len(op.src))
			for k := range op.src {
				o, _ := clip(&op.src[k], w, unit)
				srcs[k] = s.load(ctx, pl, op.src[k].rank, op.src[k].typ, o, n, b.launch)
				move(n, op.src[k].rank)
			}
			out := s.reduce(op.reduce, srcs, n)
			for k := range op.dst {
				o, _ := clip(&op.dst[k], w, unit)
				s.store(ctx, pl, op.dst[k].rank, op.dst[k].typ, o, out, b.launch)
				move(n, op.dst[k].rank)
			}
		}
		s.cost(b, local, remote, 0, topo)
		return true, ""
	case ir.OpGlres, ir.OpGstore, ir.OpGstorepkt:
		return s.switchOp(b, op, w, unit)
	}
	return s.packetOp(b, op, w, unit)
}

// packetOp runs the LL packet family. Reads of packets wait for this
// launch's flag; nothing runs until every packet it needs is there.
func (s *sim) packetOp(b *block, op *rop, w, unit int64) (bool, string) {
	rs := s.ranks[b.rank]
	ctx := s.blockCtx(b)
	pl := op.place
	n := s.pktBytes(opBytes(op, w, unit))
	topo := s.topo()
	var local, remote int64
	pktSrc := func(k int) bool { return op.src[k].packet }
	if n > 0 {
		for k := range op.src {
			if pktSrc(k) {
				o, _ := clip(&op.src[k], w, unit)
				if ok, why := s.pktReady(b, op.src[k].rank, o, n); !ok {
					if len(op.chans) > 0 && op.chans[0].typ == ir.ChanPort && op.code.Info().PortSrcPacket {
						why += fmt.Sprintf("; over a port channel %s copies its source as it is, so the source must already be packets (a cpkt writes them)", op.code)
					}
					return false, why
				}
			}
		}
	}
	switch op.code {
	case ir.OpPpkt, ir.OpRppkt:
		// dst[k] gets src[k], or src[0] for every k when an rppkt has
		// one source (upstream's fan-out, ir.OpInfo.FanOut): each dst
		// reads it again, which for packets already checked ready
		// above only repeats the read's ordering.
		port := len(op.chans) > 0 && op.chans[0].typ == ir.ChanPort
		for k := range op.dst {
			if n == 0 {
				break
			}
			src, dst := &op.src[ir.PairedSrc(k, len(op.src))], &op.dst[k]
			so, _ := clip(src, w, unit)
			do, _ := clip(dst, w, unit)
			var data payload
			if src.packet {
				data = s.pktRead(b, ctx, pl, src.rank, so, n)
			} else {
				data = s.load(ctx, pl, src.rank, src.typ, so, n, b.launch)
			}
			c := ctx
			t := b.t + topo.OpLatencyUs + float64(2*n)/topo.NVLinkGBps/1e3
			if port {
				s.proxyStep(rs, b)
				c = s.proxyCtx(rs)
				rs.proxyT += topo.PortLatencyUs + float64(2*n)/topo.PortGBps/1e3
				t = rs.proxyT
			}
			s.pktWrite(c, pl, dst.rank, do, data, b.launch, t)
			if !port {
				remote += 2 * n
			}
		}
	case ir.OpCpkt:
		if n > 0 {
			so, _ := clip(&op.src[0], w, unit)
			do, _ := clip(&op.dst[0], w, unit)
			data := s.load(ctx, pl, op.src[0].rank, op.src[0].typ, so, n, b.launch)
			s.pktWrite(ctx, pl, op.dst[0].rank, do, data, b.launch, b.t)
			local += 3 * n
		}
	case ir.OpUpkt:
		if n > 0 {
			so, _ := clip(&op.src[0], w, unit)
			do, _ := clip(&op.dst[0], w, unit)
			data := s.pktRead(b, ctx, pl, op.src[0].rank, so, n)
			s.store(ctx, pl, op.dst[0].rank, op.dst[0].typ, do, data, b.launch)
			local += 3 * n
		}
	default: // repkt, respkt, recpkt, recspkt
		if n > 0 {
			srcs := make([]payload, len(op.src))
			for k := range op.src {
				o, _ := clip(&op.src[k], w, unit)
				if pktSrc(k) {
					srcs[k] = s.pktRead(b, ctx, pl, op.src[k].rank, o, n)
					local += 2 * n
				} else {
					srcs[k] = s.load(ctx, pl, op.src[k].rank, op.src[k].typ, o, n, b.launch)
					local += n
				}
			}
			out := s.reduce(op.reduce, srcs, n)
			d0, _ := clip(&op.dst[0], w, unit)
			s.store(ctx, pl, op.dst[0].rank, op.dst[0].typ, d0, out, b.launch)
			local += n
			t := b.t + topo.OpLatencyUs + float64(2*n)/topo.NVLinkGBps/1e3
			for k := 1; k < len(op.dst); k++ {
				o, _ := clip(&op.dst[k], w, unit)
				s.pktWrite(ctx, pl, op.dst[k].rank, o, out, b.launch, t)
				if op.dst[k].rank == b.rank {
					local += 2 * n
				} else {
					remote += 2 * n
				}
			}
		}
	}
	s.cost(b, local, remote, 0, topo)
	return true, ""
}

// switchOp simulates NVLink multicast: a load-reduce reads the same bytes
// of every rank in the group, a store writes them on every rank.
func (s *sim) switchOp(b *block, op *rop, w, unit int64) (bool, string) {
	ctx := s.blockCtx(b)
	pl := op.place
	n := opBytes(op, w, unit)
	// Packets move whole payloads (gstorepkt: ir.OpInfo says which
	// operands are packets).
	if op.dst[0].packet {
		n = s.pktBytes(n)
	}
	topo := s.topo()
	if n == 0 {
		s.cost(b, 0, 0, 0, topo)
		return true, ""
	}
	var data payload
	so, _ := clip(&op.src[0], w, unit)
	if op.src[0].packet {
		// gstorepkt stores the payload of local packets (ir.OpInfo):
		// it waits for their flags like any packet read.
		if ok, why := s.pktReady(b, op.src[0].rank, so, n); !ok {
			return false, why
		}
	}
	switch {
	case op.src[0].packet:
		data = s.pktRead(b, ctx, pl, op.src[0].rank, so, n)
	case op.code == ir.OpGlres:
		g := s.members(b.rank, &op.src[0])
		srcs := make([]payload, len(g))
		for i, m := range g {
			srcs[i] = s.load(ctx, pl, m, op.src[0].typ, so, n, b.launch)
		}
		data = s.reduce(op.reduce, srcs, n)
	default:
		data = s.load(ctx, pl, op.src[0].rank, op.src[0].typ, so, n, b.launch)
	}
	do, _ := clip(&op.dst[0], w, unit)
	for _, m := range s.members(b.rank, &op.dst[0]) {
		if op.dst[0].packet {
			s.pktWrite(ctx, pl, m, do, data, b.launch, b.t+topo.OpLatencyUs+float64(2*n)/topo.SwitchGBps/1e3)
			continue
		}
		s.store(ctx, pl, m, op.dst[0].typ, do, data, b.launch)
	}
	s.cost(b, 0, 0, n*int64(len(s.members(b.rank, &op.dst[0]))), topo)
	return true, ""
}

// cost advances the block's simulated clock: per-op latency plus bytes
// over the bandwidth of the path they take.
func (s *sim) cost(b *block, local, remote, sw int64, t *Topology) {
	b.t += t.OpLatencyUs + float64(local)/t.HBMGBps/1e3 + float64(remote)/t.NVLinkGBps/1e3 + float64(sw)/t.SwitchGBps/1e3
}
