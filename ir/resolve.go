package ir

import "fmt"

// What both executors do to find the memory an op's buffer reference
// names (the CPU executor's setup and the CUDA executor's op tables):
// one copy here, so that the reference semantics cannot drift apart.

// ChanSlot is a point-to-point channel type's index in the executors'
// per-type channel tables: memory 0, port 1. Switch channels are kept
// apart (they join groups, not pairs).
func ChanSlot(t ChannelType) int {
	if t == ChanPort {
		return 1
	}
	return 0
}

// RemoteOwner resolves a remote reference's buffer_id id, made by an op of
// rank over channels of type t, through table, the block's remote buffer
// table for t (ThreadBlock.RemoteTable; callers build it once per block):
// the rank whose buffer it is and that buffer's type.
func (p *Plan) RemoteOwner(rank int, table []int, t ChannelType, id int) (owner int, typ BufferType, err error) {
	if id < 0 || id >= len(table) {
		return 0, BufNone, fmt.Errorf("block has no remote buffer %d for %s channels", id, t)
	}
	g := table[id]
	rbs := p.GPUs[rank].RemoteBuffers
	if g < 0 || g >= len(rbs) {
		return 0, BufNone, fmt.Errorf("gpu has no remote buffer %d", g)
	}
	owner, typ = rbs[g].Rank, rbs[g].Type
	if owner < 0 || owner >= len(p.GPUs) {
		return 0, BufNone, fmt.Errorf("remote buffer %d names rank %d of %d", g, owner, len(p.GPUs))
	}
	return owner, typ, nil
}

// RefRange is the byte range [off, off+n) of br's chunks in a buffer of
// type typ laid out by l, narrowed to this block's slice when op has
// tbg_info (the group's blocks split the range). The bytes are payload:
// a packet reference occupies twice as many in its buffer.
func (l *Layout) RefRange(typ BufferType, br *BufRef, op *Op) (off, n int64) {
	off, n = l.Ref(typ, br.Index, br.Size)
	if g := op.TBG(); g != nil {
		off, n = l.TBGSlice(off, n, g.TBID, g.TBGSize)
	}
	return off, n
}
