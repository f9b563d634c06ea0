package cudaexec

import (
	"fmt"
	"math"
	"sort"

	"github.com/msccl-go/msccl-go/internal/diag"
	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/kernels"
)

// bufSet is where one rank's three buffers are for a binding.
type bufSet struct {
	in, out, scratch uint64 // device addresses
	inN, outN        int64  // bytes addressable from in / out
	scratchN         int64  // bytes allocated for scratch (both halves, packets)
	// net: a rank on another node, whose addresses are net addresses
	// (netproxy.go) that only port puts may reach.
	net bool
}

// buffer is where the buffer of type typ starts and how many bytes it
// holds (scratch: both halves, packets); ok is false for a type a rank
// has no buffer of. The op tables and the socket transport's receiver
// both address buffers through it.
func (bs *bufSet) buffer(typ ir.BufferType) (base uint64, limit int64, ok bool) {
	switch typ {
	case ir.BufInput:
		return bs.in, bs.inN, true
	case ir.BufOutput:
		return bs.out, bs.outN, true
	case ir.BufScratch:
		return bs.scratch, bs.scratchN, true
	}
	return 0, 0, false
}

// tableBuilder resolves one rank's plan into device op tables.
type tableBuilder struct {
	p      *ir.Plan
	rank   int
	lay    *ir.Layout
	bufs   []bufSet // by rank
	reduce ir.ReduceOp
}

// where names an op in error messages.
func where(rank, tb int, path []int) string {
	s := fmt.Sprintf("gpus[%d].threadblocks[%d].ops", rank, tb)
	for i, k := range path {
		if i > 0 {
			s += ".ops"
		}
		s += fmt.Sprintf("[%d]", k)
	}
	return s
}

// blockOrder returns the plan's thread blocks sorted by id, checking that
// the ids are 0..n-1 (the kernel's blockIdx).
func blockOrder(g *ir.GPU, rank int) ([]*ir.ThreadBlock, error) {
	tbs := make([]*ir.ThreadBlock, len(g.ThreadBlocks))
	for i := range g.ThreadBlocks {
		tbs[i] = &g.ThreadBlocks[i]
	}
	sort.SliceStable(tbs, func(i, j int) bool { return tbs[i].ID < tbs[j].ID })
	for i, tb := range tbs {
		if tb.ID != i {
			return nil, fmt.Errorf("gpus[%d]: thread block ids must be 0..%d, found id %d at position %d", rank, len(tbs)-1, tb.ID, i)
		}
	}
	return tbs, nil
}

func (b *tableBuilder) build() ([]kernels.Table, error) {
	g := &b.p.GPUs[b.rank]
	tbs, err := blockOrder(g, b.rank)
	if err != nil {
		return nil, err
	}
	out := make([]kernels.Table, len(tbs))
	for i, tb := range tbs {
		t := &out[i]
		for k := range tb.Ops {
			if err := b.op(t, tb, &tb.Ops[k], []int{k}); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// chanIndex maps an op's TB-local channel id to the GPU-level index of
// that channel among the rank's channels of the same type.
func chanIndex(tb *ir.ThreadBlock, t ir.ChannelType, local int) (int, bool) {
	for _, c := range tb.Channels {
		if c.Type == t {
			if local < 0 || local >= len(c.ChannelIDs) {
				return 0, false
			}
			return c.ChannelIDs[local], true
		}
	}
	return 0, false
}

func (b *tableBuilder) op(t *kernels.Table, tb *ir.ThreadBlock, op *ir.Op, path []int) error {
	at := where(b.rank, tb.ID, path)
	info := op.Info()
	if info.Class == ir.ClassSwitch {
		return diag.Errorc(diag.CodeUnsupported, "%s: op %q needs a switch channel (NVLink multicast), which this executor does not create", at, info.Name)
	}
	red, err := kernels.ReduceCode(op.ReduceOp())
	if err != nil {
		return fmt.Errorf("%s: %w", at, err)
	}
	if (op.ReduceOp() == ir.ReduceNone || op.ReduceOp() == ir.ReduceSum) && info.Reduces {
		// sum (or absent) takes the run's reduction, as the CPU executor does.
		red, err = kernels.ReduceCode(b.reduce)
		if err != nil {
			return err
		}
	}
	d := kernels.Op{Code: uint8(op.Code), Reduce: red, ChanType: uint8(op.ChannelType),
		Ref0: uint16(len(t.Refs)), Idx0: uint16(len(t.Idx))}
	if len(t.Refs) > 0xffff-64 || len(t.Idx) > 0xffff-64 || len(t.Ops) > 0xffff {
		return fmt.Errorf("%s: thread block program too large", at)
	}
	// Channel ids, or semaphore ids.
	switch {
	case op.Code == ir.OpSemAcquire || op.Code == ir.OpSemRelease:
		for _, s := range op.SemaphoreIDs() {
			if s < 0 || s >= len(b.p.GPUs[b.rank].Semaphores) {
				return fmt.Errorf("%s: semaphore id %d out of range", at, s)
			}
			t.Idx = append(t.Idx, uint16(s))
		}
	case len(op.ChannelIDs) > 0:
		for _, c := range op.ChannelIDs {
			gi, ok := chanIndex(tb, op.ChannelType, c)
			if !ok {
				return fmt.Errorf("%s: channel id %d has no %s channel in the thread block's table", at, c, op.ChannelType)
			}
			t.Idx = append(t.Idx, uint16(gi))
		}
	}
	d.NIdx = uint8(len(t.Idx) - int(d.Idx0))
	if op.Code == ir.OpBarrier {
		if op.BarrierID() < 0 || op.BarrierID() >= maxBarriers || op.NumTBs() <= 0 {
			return fmt.Errorf("%s: barrier id %d / num_threadblocks %d out of range", at, op.BarrierID(), op.NumTBs())
		}
		d.Barrier, d.NumTBs = uint16(op.BarrierID()), uint16(op.NumTBs())
	}
	if op.Code == ir.OpPipeline {
		if op.Iter() == nil || op.Iter().UnitSize <= 0 || op.Iter().UnitSize%4 != 0 {
			return fmt.Errorf("%s: pipeline unit_size must be a positive multiple of 4 bytes", at)
		}
		n := b.lay.PipelineIters(op.Iter())
		if n > math.MaxUint32 || len(op.Ops()) > 255 {
			return fmt.Errorf("%s: pipeline too long", at)
		}
		d.Unit, d.NIter, d.NPipe = uint32(op.Iter().UnitSize), uint32(n), uint8(len(op.Ops()))
		t.Ops = append(t.Ops, d)
		for k := range op.Ops() {
			if op.Ops()[k].Code == ir.OpPipeline {
				return diag.Errorc(diag.CodeUnsupported, "%s: nested pipelines are not supported", at)
			}
			if err := b.op(t, tb, &op.Ops()[k], append(append([]int(nil), path...), k)); err != nil {
				return err
			}
		}
		return nil
	}
	if op.ChannelType == ir.ChanPort && info.Class != ir.ClassSync && !info.Chans.Has(ir.ChanPort) {
		return diag.Errorc(diag.CodeUnsupported, "%s: %s over a port channel is not supported (use a memory channel)", at, info.Name)
	}
	for k := range op.Src {
		r, err := b.ref(tb, op, &op.Src[k], op.IsPacketSrc(k), at, "src_buff", k)
		if err != nil {
			return err
		}
		t.Refs = append(t.Refs, r)
	}
	for k := range op.Dst {
		r, err := b.ref(tb, op, &op.Dst[k], op.IsPacketDst(k), at, "dst_buff", k)
		if err != nil {
			return err
		}
		t.Refs = append(t.Refs, r)
	}
	d.NSrc, d.NDst = uint8(len(op.Src)), uint8(len(op.Dst))
	t.Ops = append(t.Ops, d)
	return nil
}

const maxBarriers = 64

// ref resolves one buffer reference to a device address.
func (b *tableBuilder) ref(tb *ir.ThreadBlock, op *ir.Op, r *ir.BufRef, packet bool, at, list string, k int) (kernels.Ref, error) {
	at = fmt.Sprintf("%s.%s[%d]", at, list, k)
	owner, typ := b.rank, r.Type
	peer := int16(-1)
	switch r.Kind {
	case ir.RefLocal:
	case ir.RefRemote:
		// Every remote_buffer_refs entry of the op's channel type, in
		// order, as the validator and the CPU executor read them (taking
		// only the last entry made a block with two entries of one type
		// address other buffers on the GPU than in the proof).
		var err error
		owner, typ, err = b.p.RemoteOwner(b.rank, tb.RemoteTable(op.ChannelType), op.ChannelType, r.BufferID)
		if err != nil {
			return kernels.Ref{}, fmt.Errorf("%s: buffer_id %d: %w", at, r.BufferID, err)
		}
		if owner >= len(b.bufs) {
			return kernels.Ref{}, fmt.Errorf("%s: remote buffer on rank %d out of range", at, owner)
		}
		peer = int16(owner)
	default:
		return kernels.Ref{}, diag.Errorc(diag.CodeUnsupported, "%s: switch channel buffers are not supported", at)
	}
	off, n := b.lay.RefRange(typ, r, op)
	bs := &b.bufs[owner]
	if bs.net && (!op.CrossesNodes() || list != "dst_buff") {
		return kernels.Ref{}, fmt.Errorf("%s: rank %d is on another node, which only a port channel's put reaches (the socket transport), not %s", at, owner, op.Info().Name)
	}
	base, limit, ok := bs.buffer(typ)
	if !ok {
		return kernels.Ref{}, fmt.Errorf("%s: unknown buffer type", at)
	}
	var flags uint16
	if typ == ir.BufScratch {
		flags = kernels.RefScratch
		if b.p.DoubleScratch {
			limit /= 2 // the kernel adds the half offset
		}
	}
	start, end := off, off+n
	if packet {
		flags |= kernels.RefPacket
		start, end = 2*off, 2*(off+n)
	}
	if off < 0 || n < 0 || end > limit || n > math.MaxUint32 {
		return kernels.Ref{}, fmt.Errorf("%s: bytes [%d, %d) of rank %d's %s buffer exceed its %d bytes", at, start, end, owner, typ.Long(), limit)
	}
	return kernels.Ref{Ptr: base + uint64(start), Size: uint32(n), Flags: flags, Peer: peer}, nil
}

// checkPlan refuses what the kernel cannot run, naming the first op.
func checkPlan(p *ir.Plan, allowMulticast bool) error {
	if len(p.GPUs) == 0 {
		return fmt.Errorf("plan %q has no gpus", p.Name)
	}
	if p.BufferAlignment <= 0 || p.BufferAlignment%4 != 0 {
		return fmt.Errorf("plan %q: buffer_alignment %d is not a multiple of 4 bytes", p.Name, p.BufferAlignment)
	}
	if p.NumThreadsPerBlock <= 0 || p.NumThreadsPerBlock > 1024 {
		return fmt.Errorf("plan %q: num_threads_per_block %d out of range 1..1024", p.Name, p.NumThreadsPerBlock)
	}
	for r := range p.GPUs {
		g := &p.GPUs[r]
		for _, c := range g.Channels {
			if c.Type == ir.ChanSwitch && !allowMulticast {
				return diag.Errorc(diag.CodeUnsupported, "gpus[%d]: switch channel (NVLink multicast) refused: multicast is disabled (Options.AllowMulticast)", r)
			}
		}
		for _, tb := range g.ThreadBlocks {
			var walk func(ops []ir.Op, path []int) error
			walk = func(ops []ir.Op, path []int) error {
				for k := range ops {
					pk := append(append([]int(nil), path...), k)
					if ops[k].Info().Class == ir.ClassSwitch {
						return diag.Errorc(diag.CodeUnsupported, "%s: op %q needs NVLink multicast, which this executor does not use", where(r, tb.ID, pk), ops[k].Info().Name)
					}
					if err := walk(ops[k].Ops(), pk); err != nil {
						return err
					}
				}
				return nil
			}
			if err := walk(tb.Ops, nil); err != nil {
				return err
			}
		}
	}
	return nil
}
