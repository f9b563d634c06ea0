package host

import (
	"encoding/binary"
	"fmt"

	"github.com/msccl-go/msccl-go/ir"
)

// exec runs one op over the window [w, w+unit) of its references.
func (rn *run) exec(bl *blk, x *xop, w, unit int64) error {
	bl.arena = bl.arena[:0]
	e := rn.e
	switch x.code {
	case ir.OpNop:
		// One thread per block: the block's ops are already ordered.
	case ir.OpBarrier:
		bar := e.bars[x.barrier]
		k := e.passes[bl.id][x.barrier] + 1
		e.passes[bl.id][x.barrier] = k
		bar.Add(1)
		return rn.await(bl, x, func() bool { return bar.Load() >= k*x.numTBs }, func() string {
			return fmt.Sprintf("barrier %d of rank %d (%d of %d blocks arrived)", x.barrier, e.rank, bar.Load()-(k-1)*x.numTBs, x.numTBs)
		})
	case ir.OpSignal, ir.OpRlxSignal:
		for _, c := range x.chans {
			rn.signal(x, c)
		}
	case ir.OpWait, ir.OpRlxWait:
		for _, c := range x.chans {
			end := rn.end(ir.ChanSlot(x.ctype), c)
			want := end.expected.Add(1)
			err := rn.await(bl, x, func() bool { return end.inbound.Load() >= want }, func() string {
				return fmt.Sprintf("signal #%d on %s channel %d of rank %d (peer rank %d), %d arrived", want, x.ctype, c, e.rank, end.peer, end.inbound.Load())
			})
			if err != nil {
				return err
			}
		}
	case ir.OpFlush:
		return rn.flush(bl, x)
	case ir.OpSemAcquire:
		for _, id := range x.sems {
			s := &e.sems[id]
			for {
				v := s.Load()
				if v > 0 && s.CompareAndSwap(v, v-1) {
					break
				}
				if v > 0 {
					continue
				}
				err := rn.await(bl, x, func() bool { return s.Load() > 0 }, func() string {
					return fmt.Sprintf("semaphore %d of rank %d (value 0)", id, e.rank)
				})
				if err != nil {
					return err
				}
			}
		}
	case ir.OpSemRelease:
		for _, id := range x.sems {
			e.sems[id].Add(1)
		}
	case ir.OpPut, ir.OpPws, ir.OpPwsf, ir.OpGet:
		return rn.put(bl, x, w, unit)
	case ir.OpCopy:
		if n := opBytes(x, w, unit); n > 0 {
			so, _ := clip(&x.src[0], w, unit)
			do, _ := clip(&x.dst[0], w, unit)
			copy(rn.mem(x.dst[0].rank, x.dst[0].typ, do, n), rn.mem(x.src[0].rank, x.src[0].typ, so, n))
		}
	case ir.OpRe, ir.OpRes, ir.OpRre, ir.OpRres:
		n := opBytes(x, w, unit)
		if n == 0 {
			return nil
		}
		red, err := rn.reduction(x)
		if err != nil {
			return err
		}
		bl.srcs = bl.srcs[:0]
		for k := range x.src {
			o, _ := clip(&x.src[k], w, unit)
			bl.srcs = append(bl.srcs, rn.mem(x.src[k].rank, x.src[k].typ, o, n))
		}
		out := bl.tmp(n)
		bl.red.Reduce(rn.dt, red, out, bl.srcs)
		for k := range x.dst {
			o, _ := clip(&x.dst[k], w, unit)
			copy(rn.mem(x.dst[k].rank, x.dst[k].typ, o, n), out)
		}
	case ir.OpGlres, ir.OpGstore, ir.OpGstorepkt:
		return rn.multicast(bl, x, w, unit)
	case ir.OpPipeline:
		return fmt.Errorf("host: %s: nested pipeline", x.at)
	default:
		return rn.packetOp(bl, x, w, unit)
	}
	return nil
}

// put runs put, pws, pwsf and get: dst[k] gets src[k] (or the only
// source). Over port channels the proxy copies and then signals; over
// memory channels the block copies itself.
func (rn *run) put(bl *blk, x *xop, w, unit int64) error {
	port := x.ctype == ir.ChanPort && len(x.chans) > 0
	for k := range x.dst {
		src, dst := &x.src[min(k, len(x.src)-1)], &x.dst[k]
		so, sn := clip(src, w, unit)
		do, dn := clip(dst, w, unit)
		n := min(sn, dn)
		if port && k < len(x.chans) && rn.end(1, x.chans[k]).net != nil {
			// The peer is on another node: the socket transport.
			e := rn.end(1, x.chans[k])
			r := preq{net: e.net, space: rn.e.space, ch: uint32(e.partner), netSignal: x.code.Info().Signals}
			if n > 0 {
				r.src, r.hasBuf = rn.mem(src.rank, src.typ, so, n), true
				r.buf, r.off = netBuf(rn.b.id, dst.typ, rn.half, false), uint64(do)
			}
			if r.hasBuf || r.netSignal {
				rn.e.prox.push(r)
			}
			continue
		}
		var s, d []byte
		if n > 0 {
			s, d = rn.mem(src.rank, src.typ, so, n), rn.mem(dst.rank, dst.typ, do, n)
		}
		if !port {
			copy(d, s)
			continue
		}
		r := preq{dst: d, src: s}
		if k < len(x.chans) {
			r.end = rn.end(1, x.chans[k])
		}
		// An empty window still signals: the peer's wait counts it.
		if x.code.Info().Signals && r.end != nil {
			r.signal = r.end.remote
		}
		if r.dst != nil || r.signal != nil {
			rn.e.prox.push(r)
		}
	}
	if x.code == ir.OpPwsf {
		return rn.flush(bl, x)
	}
	return nil
}

// packetOp runs the LL packet family: reads wait for this launch's flag
// on every packet they need.
func (rn *run) packetOp(bl *blk, x *xop, w, unit int64) error {
	n := rn.pktBytes(opBytes(x, w, unit))
	if n == 0 {
		return nil
	}
	read := func(r *ref) ([]byte, error) {
		o, _ := clip(r, w, unit)
		if r.packet {
			return rn.readPkts(bl, x, r.rank, o, n)
		}
		return rn.mem(r.rank, r.typ, o, n), nil
	}
	write := func(r *ref, data []byte, port bool, k int) {
		o, _ := clip(r, w, unit)
		if port && k < len(x.chans) && rn.end(1, x.chans[k]).net != nil {
			// To another node: the flag, then the payload; the peer
			// writes the packets.
			msg := binary.LittleEndian.AppendUint32(make([]byte, 0, 4+len(data)), rn.flag)
			rn.e.prox.push(preq{net: rn.end(1, x.chans[k]).net, space: rn.e.space, hasBuf: true,
				buf: netBuf(rn.b.id, ir.BufScratch, rn.half, true), off: uint64(o), src: append(msg, data...)})
			return
		}
		if port {
			// The proxy writes later: it gets its own copy of the data.
			pr := preq{pkts: rn.pkts(r.rank, o, n), src: append([]byte(nil), data...), flag: rn.flag}
			if k < len(x.chans) {
				pr.end = rn.end(1, x.chans[k])
			}
			rn.e.prox.push(pr)
			return
		}
		writePkts(rn.pkts(r.rank, o, n), data, rn.flag)
	}
	switch x.code {
	case ir.OpPpkt, ir.OpRppkt:
		port := x.ctype == ir.ChanPort && len(x.chans) > 0
		for k := range x.dst {
			data, err := read(&x.src[ir.PairedSrc(k, len(x.src))])
			if err != nil {
				return err
			}
			write(&x.dst[k], data, port, k)
		}
	case ir.OpCpkt:
		data, err := read(&x.src[0])
		if err != nil {
			return err
		}
		write(&x.dst[0], data, false, 0)
	case ir.OpUpkt:
		data, err := read(&x.src[0])
		if err != nil {
			return err
		}
		o, _ := clip(&x.dst[0], w, unit)
		copy(rn.mem(x.dst[0].rank, x.dst[0].typ, o, n), data)
	default: // repkt, respkt, recpkt, recspkt
		red, err := rn.reduction(x)
		if err != nil {
			return err
		}
		srcs := make([][]byte, len(x.src))
		for k := range x.src {
			if srcs[k], err = read(&x.src[k]); err != nil {
				return err
			}
		}
		out := bl.tmp(n)
		bl.red.Reduce(rn.dt, red, out, srcs)
		o, _ := clip(&x.dst[0], w, unit)
		copy(rn.mem(x.dst[0].rank, x.dst[0].typ, o, n), out)
		for k := 1; k < len(x.dst); k++ {
			write(&x.dst[k], out, false, k)
		}
	}
	return nil
}

// multicast runs the switch ops as NVLink multicast behaves: a
// load-reduce reads the same bytes of every member of the group, a store
// writes them on every member. Shared memory maps every member, so the
// CPU device needs no multicast object.
func (rn *run) multicast(bl *blk, x *xop, w, unit int64) error {
	n := opBytes(x, w, unit)
	if x.dst[0].packet { // gstorepkt (ir.OpInfo)
		n = rn.pktBytes(n)
	}
	if n == 0 {
		return nil
	}
	so, _ := clip(&x.src[0], w, unit)
	var data []byte
	switch {
	case x.src[0].packet:
		// gstorepkt stores the payload of local packets (ir.OpInfo).
		var err error
		if data, err = rn.readPkts(bl, x, x.src[0].rank, so, n); err != nil {
			return err
		}
	case x.code == ir.OpGlres:
		red, err := rn.reduction(x)
		if err != nil {
			return err
		}
		srcs := make([][]byte, len(x.src[0].group))
		for i, m := range x.src[0].group {
			srcs[i] = rn.mem(m, x.src[0].typ, so, n)
		}
		data = bl.tmp(n)
		if len(srcs) > 0 {
			bl.red.Reduce(rn.dt, red, data, srcs)
		}
	default:
		data = rn.mem(x.src[0].rank, x.src[0].typ, so, n)
	}
	do, _ := clip(&x.dst[0], w, unit)
	for _, m := range x.dst[0].group {
		if x.dst[0].packet {
			writePkts(rn.pkts(m, do, n), data, rn.flag)
			continue
		}
		copy(rn.mem(m, x.dst[0].typ, do, n), data)
	}
	return nil
}
