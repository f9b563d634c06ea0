package ir

import "slices"

// Clone returns a deep copy of p: nothing in the copy shares memory with
// p, so mutation tests can edit one plan per case.
func (p *Plan) Clone() *Plan {
	if p == nil {
		return nil
	}
	q := *p
	q.Peers = slices.Clone(p.Peers)
	q.GPUs = make([]GPU, len(p.GPUs))
	for r := range p.GPUs {
		q.GPUs[r] = p.GPUs[r].clone()
	}
	if p.GPUs == nil {
		q.GPUs = nil
	}
	return &q
}

func (g *GPU) clone() GPU {
	h := *g
	h.Channels = cloneSlice(g.Channels, func(c Channel) Channel {
		c.ConnectedTo = slices.Clone(c.ConnectedTo)
		c.RankGroups = cloneSlice(c.RankGroups, func(rg RankGroup) RankGroup {
			rg.Ranks = slices.Clone(rg.Ranks)
			return rg
		})
		return c
	})
	h.RemoteBuffers = cloneSlice(g.RemoteBuffers, func(rb RemoteBuffer) RemoteBuffer {
		rb.AccessChannelTypes = slices.Clone(rb.AccessChannelTypes)
		return rb
	})
	h.Semaphores = slices.Clone(g.Semaphores)
	h.ThreadBlocks = cloneSlice(g.ThreadBlocks, func(tb ThreadBlock) ThreadBlock {
		tb.Channels = cloneSlice(tb.Channels, func(c TBChannel) TBChannel {
			c.ChannelIDs = slices.Clone(c.ChannelIDs)
			return c
		})
		tb.RemoteBufferRefs = cloneSlice(tb.RemoteBufferRefs, func(r RemoteBufferRef) RemoteBufferRef {
			r.RemoteBufferIDs = slices.Clone(r.RemoteBufferIDs)
			return r
		})
		tb.Ops = cloneOps(tb.Ops)
		return tb
	})
	return h
}

func cloneOps(ops []Op) []Op {
	return cloneSlice(ops, func(op Op) Op {
		op.Src = slices.Clone(op.Src)
		op.Dst = slices.Clone(op.Dst)
		op.ChannelIDs = slices.Clone(op.ChannelIDs)
		if op.x != nil {
			x := *op.x
			x.semaphoreIDs = slices.Clone(x.semaphoreIDs)
			if x.tbg != nil {
				t := *x.tbg
				x.tbg = &t
			}
			if x.iter != nil {
				it := *x.iter
				x.iter = &it
			}
			x.ops = cloneOps(x.ops)
			op.x = &x
		}
		return op
	})
}

// cloneSlice copies s element by element through f, keeping nil as nil so
// that a clone is reflect.DeepEqual to its original.
func cloneSlice[T any](s []T, f func(T) T) []T {
	if s == nil {
		return nil
	}
	out := make([]T, len(s))
	for i := range s {
		out[i] = f(s[i])
	}
	return out
}
