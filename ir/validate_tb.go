package ir

import (
	"slices"

	"github.com/msccl-go/msccl-go/internal/diag"
)

// blockCtx is what the op checks need to know about the block they are in.
type blockCtx struct {
	r    int
	g    *GPU
	tb   *ThreadBlock
	path *jpath
	// Local tables: chans[t][k] is the GPU channel (index into the flat
	// list of type t) named by local channel id k; remote[t][k] the GPU
	// remote buffer named by local buffer id k over channel type t. An
	// entry is -1 where the table itself holds a bad index (reported once,
	// at the table).
	chans  [numChanTypes][]int
	remote [numChanTypes][]int
}

func (v *validator) threadBlock(r, t int) {
	g := &v.p.GPUs[r]
	tb := &g.ThreadBlocks[t]
	gp := jpath{key: "gpus", idx: r}
	tp := gp.at(".threadblocks", t)
	c := &blockCtx{r: r, g: g, tb: tb, path: &tp}
	if tb.ID != t {
		v.errorp(c.path, ".id", "thread block at position %d has id %d; blocks must be listed in id order", t, tb.ID)
	}
	v.channelTable(c)
	v.remoteTable(c)
	n := 0
	for i := range tb.Ops {
		n++
		if tb.Ops[i].Code == OpPipeline {
			n += len(tb.Ops[i].Ops())
		}
	}
	if n > MaxOpsPerBlock {
		v.limitp(c.path, ".ops", diag.CodeOpsPerBlock, n, MaxOpsPerBlock, "block has %d ops counting pipeline bodies; the upstream executor holds at most %d per block", n, MaxOpsPerBlock)
	}
	for i := range tb.Ops {
		op := c.path.at(".ops", i)
		v.op(c, &tb.Ops[i], &op, false)
	}
}

func (v *validator) channelTable(c *blockCtx) {
	for k, tc := range c.tb.Channels {
		kp := c.path.at(".channels", k)
		if tc.Type < ChanMemory || tc.Type > ChanSwitch {
			v.errorp(&kp, ".channel_type", "channel_type must be memory, port or switch, got %s", tc.Type)
			continue
		}
		flat := v.flat[c.r][tc.Type]
		if c.chans[tc.Type] == nil {
			// Sized once: plans have a hundred thousand blocks.
			c.chans[tc.Type] = make([]int, 0, len(tc.ChannelIDs))
		}
		for j, id := range tc.ChannelIDs {
			jp := kp.at(".channel_ids", j)
			if id < 0 || id >= len(flat) {
				v.errorp(&jp, "", "%s channel %d out of range, gpu %d has %s", tc.Type, id, c.r, count(len(flat), tc.Type.String()+" channel"))
				id = -1
			}
			if len(c.chans[tc.Type]) == MaxChannelsPerBlock {
				n := 0
				for _, x := range c.tb.Channels {
					if x.Type == tc.Type {
						n += len(x.ChannelIDs)
					}
				}
				v.limitp(&jp, "", diag.CodeChannelsPerBlock, n, MaxChannelsPerBlock, "block uses more than %d %s channels; the upstream executor holds at most %d per type", MaxChannelsPerBlock, tc.Type, MaxChannelsPerBlock)
			}
			c.chans[tc.Type] = append(c.chans[tc.Type], id)
		}
	}
}

func (v *validator) remoteTable(c *blockCtx) {
	for k, rr := range c.tb.RemoteBufferRefs {
		kp := c.path.at(".remote_buffer_refs", k)
		t := rr.AccessChannelType
		if t != ChanMemory && t != ChanPort {
			v.errorp(&kp, ".access_channel_type", "access_channel_type must be memory or port, got %s", t)
			continue
		}
		if c.remote[t] == nil {
			c.remote[t] = make([]int, 0, len(rr.RemoteBufferIDs))
		}
		for j, id := range rr.RemoteBufferIDs {
			jp := kp.at(".remote_buffer_ids", j)
			switch {
			case id < 0 || id >= len(c.g.RemoteBuffers):
				v.errorp(&jp, "", "remote buffer %d out of range, gpu %d has %s", id, c.r, count(len(c.g.RemoteBuffers), "remote buffer"))
				id = -1
			case !slices.Contains(c.g.RemoteBuffers[id].AccessChannelTypes, t):
				v.errorp(&jp, "", "remote buffer %d is not accessible over %s channels (its access_channel_types are %v)", id, t, c.g.RemoteBuffers[id].AccessChannelTypes)
				id = -1
			}
			if len(c.remote[t]) == MaxRemoteBuffersPerBlock {
				n := 0
				for _, x := range c.tb.RemoteBufferRefs {
					if x.AccessChannelType == t {
						n += len(x.RemoteBufferIDs)
					}
				}
				v.limitp(&jp, "", diag.CodeRemoteBuffersPerBlock, n, MaxRemoteBuffersPerBlock, "block uses more than %d remote buffers over %s channels; the upstream executor holds at most %d per type", MaxRemoteBuffersPerBlock, t, MaxRemoteBuffersPerBlock)
			}
			c.remote[t] = append(c.remote[t], id)
		}
	}
}

// opHasPacket reports whether any operand of the op holds LL packets.
func opHasPacket(in *OpInfo) bool {
	return in.Class == ClassPacket || in.Src.PacketFirst || in.Src.PacketRest || in.Dst.PacketFirst || in.Dst.PacketRest
}

func (v *validator) op(c *blockCtx, op *Op, path *jpath, inPipeline bool) {
	if op.Code >= NumOps {
		v.errorp(path, ".name", "invalid op code %d", op.Code)
		return
	}
	if op.Code == OpNop && op.ChannelType == ChanNone && len(op.ChannelIDs) == 0 && len(op.Src) == 0 && len(op.Dst) == 0 &&
		op.ReduceOp() == ReduceNone && op.TBG() == nil && len(op.SemaphoreIDs()) == 0 && op.Iter() == nil && len(op.Ops()) == 0 {
		// A bare nop, often a third of a plan, passes every check below.
		return
	}
	in := op.Info()
	if opHasPacket(in) {
		if v.p.Protocol != LL {
			v.errorp(path, ".name", "%s is an LL packet op but the plan's protocol is %s; packet plans must say \"LL\" so that scratch is sized for the flags", in.Name, v.p.Protocol)
		}
		if inPipeline {
			v.errorp(path, ".name", "%s cannot run inside a pipeline: upstream's packet handlers ignore the pipeline window and would redo the whole range every iteration", in.Name)
		}
	}
	v.opChannels(c, op, path)
	v.refs(c, op, path, "src_buff", op.Src, in.Src, op.IsPacketSrc)
	v.refs(c, op, path, "dst_buff", op.Dst, in.Dst, op.IsPacketDst)
	if !in.PairsOK(len(op.Src), len(op.Dst)) && len(op.Src) > 0 && len(op.Dst) > 0 {
		also := ""
		if in.FanOut {
			also = " (or its one src_buff to every dst_buff)"
		}
		v.errorp(path, ".dst_buff", "%s copies src_buff[k] to dst_buff[k]%s, but has %d src_buff and %d dst_buff refs", in.Name, also, len(op.Src), len(op.Dst))
	}
	v.portPeers(c, op, path)
	switch {
	case in.Reduces:
		if op.ReduceOp() != ReduceNone && !slices.Contains(reduceOps, op.ReduceOp()) {
			v.errorp(path, ".reduce_op", "unknown reduce_op %q (want sum, min, max or prod)", op.ReduceOp())
		}
	case op.ReduceOp() != ReduceNone:
		v.warnp(path, ".reduce_op", "%s does not reduce; reduce_op is ignored", in.Name)
	}
	if op.TBG() != nil {
		v.sawTBG = true
		switch {
		case !in.TBG:
			v.errorp(path, ".tbg_info", "%s does not take tbg_info", in.Name)
		case op.TBG().TBGSize < 1:
			v.errorp(path, ".tbg_info.tbg_size", "tbg_size must be at least 1, got %d", op.TBG().TBGSize)
		case op.TBG().TBID < 0 || op.TBG().TBID >= op.TBG().TBGSize:
			v.errorp(path, ".tbg_info.tb_id", "tb_id %d out of range for a group of %d blocks", op.TBG().TBID, op.TBG().TBGSize)
		}
	}
	v.semaphores(c, op, path)
	if op.Code == OpBarrier {
		if op.BarrierID() < 0 || op.BarrierID() >= MaxBarriers {
			v.errorp(path, ".barrier_id", "barrier_id %d out of range; the upstream executor has %d barriers (0..%d)", op.BarrierID(), MaxBarriers, MaxBarriers-1)
		}
		if op.NumTBs() < 1 || op.NumTBs() > len(c.g.ThreadBlocks) {
			v.errorp(path, ".num_threadblocks", "barrier over %d blocks, but gpu %d has %s", op.NumTBs(), c.r, count(len(c.g.ThreadBlocks), "block"))
		}
		v.barrier(c, op, path)
	}
	if op.Code == OpPipeline {
		v.pipeline(c, op, path, inPipeline)
	}
}

func (v *validator) semaphores(c *blockCtx, op *Op, path *jpath) {
	in := op.Info()
	if !in.Semaphores {
		if len(op.SemaphoreIDs()) > 0 {
			v.warnp(path, ".semaphore_ids", "%s does not use semaphores; semaphore_ids is ignored", in.Name)
		}
		return
	}
	if len(op.SemaphoreIDs()) == 0 {
		v.errorp(path, "", "%s needs semaphore_ids", in.Name)
	}
	if len(op.SemaphoreIDs()) > MaxSemaphoresPerOp {
		v.limitp(path, ".semaphore_ids", diag.CodeSemaphoresPerOp, len(op.SemaphoreIDs()), MaxSemaphoresPerOp, "%s names %d semaphores; the upstream executor holds at most %d per op", in.Name, len(op.SemaphoreIDs()), MaxSemaphoresPerOp)
	}
	for j, id := range op.SemaphoreIDs() {
		if id < 0 || id >= len(c.g.Semaphores) {
			sp := path.at(".semaphore_ids", j)
			v.errorp(&sp, "", "semaphore %d out of range, gpu %d has %s", id, c.r, count(len(c.g.Semaphores), "semaphore"))
		}
	}
}

func (v *validator) pipeline(c *blockCtx, op *Op, path *jpath, inPipeline bool) {
	if inPipeline {
		v.errorp(path, ".name", "pipelines cannot nest")
	}
	if op.Iter() == nil {
		v.errorp(path, "", "pipeline needs iter_context")
	} else {
		switch {
		case op.Iter().UnitSize <= 0:
			v.errorp(path, ".iter_context.unit_size", "unit_size must be positive, got %d", op.Iter().UnitSize)
		case v.p.BufferAlignment > 0 && op.Iter().UnitSize%v.p.BufferAlignment != 0:
			v.errorp(path, ".iter_context.unit_size", "unit_size %d is not a multiple of buffer_alignment %d; every window would start misaligned", op.Iter().UnitSize, v.p.BufferAlignment)
		}
		if op.Iter().NumChunks <= 0 {
			v.errorp(path, ".iter_context.num_chunks", "num_chunks must be positive, got %d", op.Iter().NumChunks)
		}
	}
	if len(op.Ops()) == 0 {
		v.errorp(path, ".ops", "pipeline body is empty")
	}
	if len(op.Ops()) == 0 {
		return
	}
	base := heapPath(path)
	for i := range op.Ops() {
		v.op(c, &op.Ops()[i], &jpath{up: base, key: ".ops", idx: i}, true)
	}
}
