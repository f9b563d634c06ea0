package cpu

import "github.com/msccl-go/msccl-go/ir"

// payload is the data one op moves: bytes, or runs in the range mode
// (symrange.go). Ops are written once against it, so both modes run the
// same schedule and record the same accesses.
type payload struct {
	b []byte
	v vdata
}

// access records an access of n bytes at (rank, typ, off) and returns
// where they live.
func (s *sim) access(ctx agentCtx, place int32, rank int, typ ir.BufferType, off, n int64, launch int, write bool) (arr int, raw int64) {
	arr, raw, base := s.locate(rank, typ, off, false, launch)
	a := acc{agent: int32(ctx.agent), epoch: ctx.epoch, exec: s.exec, place: place, write: write, typ: typ, base: base, pubAgent: int32(ctx.pubAgent), pubEpoch: ctx.pubEpoch}
	s.det.access(rank, arr, raw, raw+n, a, ctx.clk)
	if write {
		s.noteWrite(rank, arr, raw, raw+n, place, launch)
	}
	if s.opt.Provenance {
		s.provNote(place, rank, arr, raw, raw+n, launch, write)
	}
	return arr, raw
}

// load reads n data bytes at (rank, typ, off). In byte mode the payload
// aliases the array: store it before anything else writes there.
func (s *sim) load(ctx agentCtx, place int32, rank int, typ ir.BufferType, off, n int64, launch int) payload {
	arr, raw := s.access(ctx, place, rank, typ, off, n, launch, false)
	rs := s.ranks[rank]
	if s.field != nil {
		return payload{v: rs.vm[arr].get(s.field, raw, raw+n, nil)}
	}
	return payload{b: s.array(rs, arr)[raw : raw+n]}
}

// array is one of rank rs's backing arrays, the scratch array made
// (zeroed) at its first access.
func (s *sim) array(rs *rankState, arr int) []byte {
	if arr == arrScratch && rs.arrs[arr] == nil {
		rs.arrs[arr] = s.opt.Buffers.get(rs.scratchLen, true)
	}
	return rs.arrs[arr]
}

// store writes d at (rank, typ, off).
func (s *sim) store(ctx agentCtx, place int32, rank int, typ ir.BufferType, off int64, d payload, launch int) {
	n := d.len()
	arr, raw := s.access(ctx, place, rank, typ, off, n, launch, true)
	rs := s.ranks[rank]
	if s.field != nil {
		rs.vm[arr].set(s.field, raw, d.v)
		return
	}
	copy(s.array(rs, arr)[raw:raw+n], d.b)
}

func (d payload) len() int64 {
	if d.v != nil {
		return d.v[len(d.v)-1].hi
	}
	return int64(len(d.b))
}

// reduce combines n bytes of srcs with op: in the range mode every
// reduction adds fingerprints (symbolic.go says why).
func (s *sim) reduce(op ir.ReduceOp, srcs []payload, n int64) payload {
	if s.opt.cons != nil && s.opt.cons.trees {
		return s.treeReduce(srcs, n)
	}
	if s.field != nil {
		vs := make([]vdata, len(srcs))
		for k, x := range srcs {
			vs[k] = x.v
		}
		return payload{v: sumData(vs, n)}
	}
	out := s.scratchBuf(n)
	if len(srcs) == 0 {
		return payload{b: out}
	}
	bs := make([][]byte, len(srcs))
	for k, x := range srcs {
		bs[k] = x.b
	}
	s.rd.reduce(s.opt.DType, op, out, bs)
	return payload{b: out}
}
