package host

import (
	"fmt"

	"github.com/msccl-go/msccl-go/ir"
)

// ref is a resolved buffer reference: whose buffer, which payload bytes.
type ref struct {
	rank   int
	typ    ir.BufferType
	off, n int64
	packet bool
	group  []int // switch references: the multicast group's ranks
}

// xop is a resolved op; a pipeline keeps its body.
type xop struct {
	code     ir.OpCode
	at       string // gpus[r].threadblocks[b].ops[i] (or ops[i].ops[j])
	src, dst []ref
	ctype    ir.ChannelType
	chans    []int // indices into the rank's channel ends of ctype
	sems     []int
	reduce   ir.ReduceOp
	barrier  int
	numTBs   int64
	body     []xop
	iters    int64
	unit     int64
}

// resolver turns one rank's thread blocks into xops for one buffer set.
type resolver struct {
	p     *ir.Plan
	rank  int
	lay   *ir.Layout
	views []view
	lims  []limit
	ends  [2][]chanEnd
}

func (rs *resolver) block(tb *ir.ThreadBlock) ([]xop, error) {
	return rs.ops(tb, tb.Ops, fmt.Sprintf("gpus[%d].threadblocks[%d].ops", rs.rank, tb.ID))
}

func (rs *resolver) ops(tb *ir.ThreadBlock, ops []ir.Op, at string) ([]xop, error) {
	out := make([]xop, len(ops))
	for i := range ops {
		x, err := rs.op(tb, &ops[i], fmt.Sprintf("%s[%d]", at, i))
		if err != nil {
			return nil, err
		}
		out[i] = x
	}
	return out, nil
}

func (rs *resolver) op(tb *ir.ThreadBlock, op *ir.Op, at string) (xop, error) {
	x := xop{code: op.Code, at: at, ctype: op.ChannelType, reduce: op.ReduceOp(), barrier: op.BarrierID(), numTBs: int64(op.NumTBs())}
	if op.Code >= ir.NumOps {
		return x, fmt.Errorf("%s: invalid op code %d", at, op.Code)
	}
	info := op.Info()
	if op.Code == ir.OpPipeline {
		it := op.Iter()
		if it == nil || it.UnitSize <= 0 || it.NumChunks < 0 {
			return x, fmt.Errorf("%s: pipeline needs iter_context with a positive unit_size", at)
		}
		x.unit = int64(it.UnitSize)
		x.iters = rs.lay.PipelineIters(it)
		for k := range op.Ops() {
			if op.Ops()[k].Code == ir.OpPipeline {
				return x, fmt.Errorf("%s.ops[%d]: nested pipeline", at, k)
			}
		}
		body, err := rs.ops(tb, op.Ops(), at+".ops")
		if err != nil {
			return x, err
		}
		x.body = body
		return x, nil
	}
	if op.Code == ir.OpBarrier && x.numTBs < 1 {
		return x, fmt.Errorf("%s: barrier needs num_threadblocks ≥ 1", at)
	}
	if t := op.TBG(); t != nil && (t.TBGSize < 1 || t.TBID < 0 || t.TBID >= t.TBGSize) {
		return x, fmt.Errorf("%s: tbg_info tb_id %d out of range for tbg_size %d", at, t.TBID, t.TBGSize)
	}
	for k := range op.Src {
		r, err := rs.ref(tb, op, &op.Src[k], op.IsPacketSrc(k))
		if err != nil {
			return x, fmt.Errorf("%s.src_buff[%d]: %w", at, k, err)
		}
		x.src = append(x.src, r)
	}
	for k := range op.Dst {
		r, err := rs.ref(tb, op, &op.Dst[k], op.IsPacketDst(k))
		if err != nil {
			return x, fmt.Errorf("%s.dst_buff[%d]: %w", at, k, err)
		}
		x.dst = append(x.dst, r)
	}
	if len(x.src) < info.Src.Min || len(x.dst) < info.Dst.Min {
		return x, fmt.Errorf("%s: %s needs at least %d src and %d dst buffers", at, info.Name, info.Src.Min, info.Dst.Min)
	}
	if len(op.ChannelIDs) > 0 && op.ChannelType != ir.ChanSwitch {
		t := op.ChannelType
		if t != ir.ChanMemory && t != ir.ChanPort {
			return x, fmt.Errorf("%s: channel_ids need a memory or port channel_type", at)
		}
		table := tb.ChannelTable(t)
		for j, id := range op.ChannelIDs {
			if id < 0 || id >= len(table) {
				return x, fmt.Errorf("%s.channel_ids[%d]: the thread block has no %s channel %d", at, j, t, id)
			}
			flat := table[id]
			if flat < 0 || flat >= len(rs.ends[ir.ChanSlot(t)]) {
				return x, fmt.Errorf("%s.channel_ids[%d]: gpu has no %s channel %d", at, j, t, flat)
			}
			if end := &rs.ends[ir.ChanSlot(t)][flat]; op.SignalsChannels() && end.remote == nil && end.net == nil {
				return x, fmt.Errorf("%s.channel_ids[%d]: %s channel %d to rank %d has no partner there to signal", at, j, t, flat, rs.ends[ir.ChanSlot(t)][flat].peer)
			}
			x.chans = append(x.chans, flat)
		}
	}
	if info.ChannelIDs.Has(op.ChannelType) && len(x.chans) == 0 {
		return x, fmt.Errorf("%s: %s names no channel", at, info.Name)
	}
	if op.ChannelPerDst() && len(x.chans) < len(x.dst) {
		return x, fmt.Errorf("%s: port %s needs one channel per dst buffer", at, info.Name)
	}
	for j, id := range op.SemaphoreIDs() {
		if id < 0 || id >= len(rs.p.GPUs[rs.rank].Semaphores) {
			return x, fmt.Errorf("%s.semaphore_ids[%d]: gpu has no semaphore %d", at, j, id)
		}
		x.sems = append(x.sems, id)
	}
	return x, nil
}

// ref resolves one buffer reference the way the CPU executor and the
// CUDA executor do (ir.RemoteOwner, ir.Layout.RefRange: one copy of the
// reference semantics), to a range of this rank's views.
func (rs *resolver) ref(tb *ir.ThreadBlock, op *ir.Op, br *ir.BufRef, packet bool) (ref, error) {
	r := ref{rank: rs.rank, typ: br.Type, packet: packet}
	switch br.Kind {
	case ir.RefLocal:
	case ir.RefRemote:
		var err error
		if r.rank, r.typ, err = rs.p.RemoteOwner(rs.rank, tb.RemoteTable(op.ChannelType), op.ChannelType, br.BufferID); err != nil {
			return r, err
		}
	case ir.RefSwitch:
		groups := rs.switchGroups()
		ids := tb.ChannelTable(ir.ChanSwitch)
		if br.SwitchID < 0 || br.SwitchID >= len(ids) || ids[br.SwitchID] < 0 || ids[br.SwitchID] >= len(groups) {
			return r, fmt.Errorf("the thread block has no switch channel %d", br.SwitchID)
		}
		g := groups[ids[br.SwitchID]]
		r.group, r.typ = g.Group.Ranks, g.BufferType
	}
	if r.typ == ir.BufNone || r.typ > ir.BufScratch {
		return r, fmt.Errorf("no buffer type")
	}
	if br.Index < 0 || br.Size < 0 || br.Index > 1<<24 || br.Size > 1<<24 {
		return r, fmt.Errorf("chunk index %d or size %d out of range", br.Index, br.Size)
	}
	r.off, r.n = rs.lay.RefRange(r.typ, br, op)
	if r.off < 0 || r.n < 0 {
		return r, fmt.Errorf("chunks [%d, %d) do not map to a byte range", br.Index, br.Index+br.Size)
	}
	if packet && (r.typ != ir.BufScratch || r.off%4 != 0) {
		return r, fmt.Errorf("packets live in scratch at 4-byte payload offsets, not at byte %d of the %s", r.off, r.typ.Long())
	}
	members := r.group
	if members == nil {
		members = []int{r.rank}
	}
	for _, m := range members {
		if m < 0 || m >= len(rs.views) {
			return r, fmt.Errorf("rank %d out of range", m)
		}
		v, lim := &rs.views[m], rs.lims[m]
		var limit int64
		switch r.typ {
		case ir.BufInput:
			limit = lim.in
		case ir.BufOutput:
			limit = lim.out
		default:
			limit = lim.half
		}
		if v.in == nil && v.scratch == nil && !op.CrossesNodes() {
			return r, fmt.Errorf("rank %d's buffers are not mapped here (another node; only port-channel puts reach it)", m)
		}
		end := r.off + r.n
		if packet {
			end *= 2
		}
		if end > limit {
			return r, fmt.Errorf("chunks [%d, %d) end at byte %d, past the %d bytes of rank %d's %s", br.Index, br.Index+br.Size, end, limit, m, r.typ.Long())
		}
	}
	return r, nil
}

// switchGroups lists the rank's multicast groups in the order blocks
// index them (ir.GPU.FlatChannels).
func (rs *resolver) switchGroups() []ir.FlatChannel {
	return rs.p.GPUs[rs.rank].FlatChannels(ir.ChanSwitch)
}
