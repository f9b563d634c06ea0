package ir

import (
	"fmt"
	"slices"

	"github.com/msccl-go/msccl-go/internal/diag"
)

// signals reports whether op signals or waits on its channels, which then
// need a partner on the peer.
func signals(c OpCode) bool {
	switch c {
	case OpSignal, OpWait, OpRlxSignal, OpRlxWait, OpFlush, OpPws, OpPwsf:
		return true
	}
	return false
}

func (v *validator) opChannels(c *blockCtx, op *Op, path *jpath) {
	in := op.Info()
	t := op.ChannelType
	if in.Chans == MaskNone {
		if t != ChanNone {
			v.warnp(path, ".channel_type", "%s takes no channel; channel_type is ignored", in.Name)
		}
		if len(op.ChannelIDs) > 0 {
			v.warnp(path, ".channel_ids", "%s takes no channel; channel_ids is ignored", in.Name)
		}
		return
	}
	if t == ChanNone {
		v.errorp(path, "", "%s needs a channel_type (%s)", in.Name, maskNames(in.Chans))
		return
	}
	if t > ChanSwitch || !in.Chans.Has(t) {
		v.errorp(path, ".channel_type", "%s cannot use %s channels (want %s)", in.Name, t, maskNames(in.Chans))
		return
	}
	if in.ChannelIDs.Has(t) && len(op.ChannelIDs) == 0 {
		v.errorp(path, "", "%s over %s channels needs channel_ids", in.Name, t)
	}
	if len(op.ChannelIDs) > MaxChannelsPerOp {
		v.limitp(path, ".channel_ids", diag.CodeChannelsPerOp, len(op.ChannelIDs), MaxChannelsPerOp, "%s names %d channels; the upstream executor holds at most %d per op", in.Name, len(op.ChannelIDs), MaxChannelsPerOp)
	}
	tbl := c.chans[t]
	for j, id := range op.ChannelIDs {
		jp := path.at(".channel_ids", j)
		if id < 0 || id >= len(tbl) {
			v.errorp(&jp, "", "%s channel %d out of range, the block's %s channel table has %s", t, id, t, count(len(tbl), "entry"))
			continue
		}
		gi := tbl[id]
		if gi < 0 || !signals(op.Code) {
			continue
		}
		fc := v.flat[c.r][t][gi]
		if fc.Peer < 0 || fc.Peer >= len(v.p.GPUs) || fc.Peer == c.r {
			continue // reported at the channel list
		}
		peer, pj, ok := v.partner(c.r, t, gi)
		if ok {
			v.syncPartner(c, op, &jp, id, gi, peer, pj)
		} else {
			v.errorp(&jp, "", "%s uses %s channel %d (gpu channel %d, to rank %d), which has no partner: rank %d has only %s to rank %d, so nothing there answers it",
				in.Name, t, id, gi, fc.Peer, fc.Peer, count(countTo(v.flat[fc.Peer][t], c.r), t.String()+" channel"), c.r)
		}
	}
}

func maskNames(m ChanMask) string { return orList(ChanMemory, ChanSwitch, m.Has, ChannelType.String) }

// orList spells the values from lo to hi that in says are in a set: "a or
// b or c".
func orList[T ~uint8](lo, hi T, in func(T) bool, name func(T) string) string {
	s := ""
	for v := lo; v <= hi; v++ {
		if in(v) {
			if s != "" {
				s += " or "
			}
			s += name(v)
		}
	}
	return s
}

var refKindNames = [...]string{RefLocal: "a local buffer (type)", RefRemote: "a remote buffer (buffer_id)", RefSwitch: "a switch channel (switch_channel_id)"}

func refKindName(k RefKind) string {
	if int(k) < len(refKindNames) {
		return refKindNames[k]
	}
	return "an invalid reference"
}

func maskKinds(m RefMask) string { return orList(RefLocal, RefSwitch, m.Has, refKindName) }

// refs checks one operand list of op against its table entry.
func (v *validator) refs(c *blockCtx, op *Op, path *jpath, key string, refs []BufRef, spec Operand, packet func(int) bool) {
	in := op.Info()
	dotKey := ".src_buff"
	if key == "dst_buff" {
		dotKey = ".dst_buff"
	}
	lp := path.at(dotKey, -1)
	switch n := len(refs); {
	case n > MaxRefsPerOp:
		v.limitp(&lp, "", diag.CodeRefsPerOp, n, MaxRefsPerOp, "%s has %d %s refs; the upstream executor holds at most %d per op", in.Name, n, key, MaxRefsPerOp)
	case n > spec.Max && spec.Max == 0:
		v.errorp(&lp, "", "%s takes no %s", in.Name, key)
	case n > spec.Max:
		v.errorp(&lp, "", "%s takes at most %d %s refs, got %d", in.Name, spec.Max, key, n)
	case n < spec.Min && n == 0:
		v.errorp(path, "", "%s needs %s", in.Name, key)
	case n < spec.Min:
		v.errorp(&lp, "", "%s needs at least %d %s refs, got %d", in.Name, spec.Min, key, n)
	}
	for k := range refs {
		ref := &refs[k]
		rp := lp.at("", k)
		mask := spec.Kinds(k)
		if mask != 0 && !mask.Has(ref.Kind) {
			v.errorp(&rp, "", "%s %s[%d] must be %s, got %s", in.Name, key, k, maskKinds(mask), refKindName(ref.Kind))
			continue
		}
		v.ref(c, op, &rp, ref, packet(k))
	}
}

// ref checks that one reference names an existing buffer and stays inside it.
func (v *validator) ref(c *blockCtx, op *Op, rp *jpath, ref *BufRef, packet bool) {
	in := op.Info()
	var (
		n  int // chunks in the referenced buffer
		bt BufferType
		// How messages name the buffer: this rank's (whose < 0), rank
		// whose's, or switch channel sw's; spelled only when reported.
		whose, sw = -1, -1
	)
	switch ref.Kind {
	case RefLocal:
		bt = ref.Type
		if bt < BufInput || bt > BufScratch {
			v.errorp(rp, ".type", "buffer type must be \"i\", \"o\" or \"s\"")
			return
		}
		n = v.p.chunks(c.g, bt)
		if packet && bt != BufScratch {
			v.errorp(rp, ".type", "%s packets live in scratch (sized twice its payload for the flags), not in %s", in.Name, bt.Long())
		}
	case RefRemote:
		t := op.ChannelType
		if t != ChanMemory && t != ChanPort {
			v.errorp(rp, ".buffer_id", "remote buffer refs need a memory or port channel_type")
			return
		}
		tbl := c.remote[t]
		if ref.BufferID < 0 || ref.BufferID >= len(tbl) {
			v.errorp(rp, ".buffer_id", "remote buffer %d out of range, the block's %s remote buffer table has %s", ref.BufferID, t, count(len(tbl), "entry"))
			return
		}
		gi := tbl[ref.BufferID]
		if gi < 0 {
			return // reported at the table
		}
		rb := &c.g.RemoteBuffers[gi]
		if rb.Rank < 0 || rb.Rank >= len(v.p.GPUs) || rb.Type < BufInput || rb.Type > BufScratch {
			return // reported at remote_buffers
		}
		bt = rb.Type
		n, whose = v.p.chunks(&v.p.GPUs[rb.Rank], bt), rb.Rank
		if packet && bt != BufScratch {
			v.errorp(rp, ".buffer_id", "%s writes packets into the peer's scratch; remote buffer %d is rank %d's %s", in.Name, ref.BufferID, rb.Rank, bt.Long())
		}
	case RefSwitch:
		tbl := c.chans[ChanSwitch]
		if ref.SwitchID < 0 || ref.SwitchID >= len(tbl) {
			v.errorp(rp, ".switch_channel_id", "switch channel %d out of range, the block's switch channel table has %s", ref.SwitchID, count(len(tbl), "entry"))
			return
		}
		gi := tbl[ref.SwitchID]
		if gi < 0 {
			return
		}
		fc := &v.flat[c.r][ChanSwitch][gi]
		if ref.HasRank && (fc.Group == nil || !slices.Contains(fc.Group.Ranks, ref.Rank)) {
			var members []int
			if fc.Group != nil {
				members = fc.Group.Ranks
			}
			v.errorp(rp, ".rank", "rank %d is not a member of switch channel %d's group %v", ref.Rank, ref.SwitchID, members)
		}
		bt = fc.BufferType
		if bt < BufInput || bt > BufScratch {
			return
		}
		n, sw = v.p.chunks(c.g, bt), gi
	default:
		v.errorp(rp, "", "invalid buffer reference kind %d", ref.Kind)
		return
	}
	what := func() string {
		switch {
		case whose >= 0:
			return fmt.Sprintf("rank %d's %s", whose, bt.Long())
		case sw >= 0:
			return fmt.Sprintf("the %s buffer of switch channel %d", bt.Long(), sw)
		}
		return bt.Long()
	}
	switch {
	case ref.Index < 0:
		v.errorp(rp, ".index", "index must not be negative, got %d", ref.Index)
	case ref.Size < 1:
		v.errorp(rp, ".size", "size must be at least 1 chunk, got %d", ref.Size)
	case n == 0:
		v.errorp(rp, "", "%s has no chunks", what())
	case ref.Index >= n:
		v.errorp(rp, ".index", "chunk %d out of range, %s has %s", ref.Index, what(), count(n, "chunk"))
	case ref.Size > n-ref.Index:
		v.errorp(rp, ".size", "chunks %d..%d out of range, %s has %s", ref.Index, ref.Index+ref.Size-1, what(), count(n, "chunk"))
	}
}

// portPeers checks port-channel ops that name one channel per remote
// destination: channel_ids[k] carries dst_buff[k], so there must be one
// channel per destination and it must lead to the rank owning the buffer.
func (v *validator) portPeers(c *blockCtx, op *Op, path *jpath) {
	in := op.Info()
	if op.ChannelType != ChanPort || !in.ChannelIDs.Has(ChanPort) || !in.Dst.First.Has(RefRemote) {
		return
	}
	if len(op.ChannelIDs) != len(op.Dst) {
		v.errorp(path, ".channel_ids", "%s over port channels sends dst_buff[k] through channel_ids[k], but has %d channel_ids and %d dst_buff refs", in.Name, len(op.ChannelIDs), len(op.Dst))
		return
	}
	for k := range op.Dst {
		ref, id := &op.Dst[k], op.ChannelIDs[k]
		if ref.Kind != RefRemote || id < 0 || id >= len(c.chans[ChanPort]) || ref.BufferID < 0 || ref.BufferID >= len(c.remote[ChanPort]) {
			continue // reported above
		}
		gi, bi := c.chans[ChanPort][id], c.remote[ChanPort][ref.BufferID]
		if gi < 0 || bi < 0 {
			continue
		}
		peer, owner := v.flat[c.r][ChanPort][gi].Peer, c.g.RemoteBuffers[bi].Rank
		if peer != owner {
			jp := path.at(".channel_ids", k)
			v.errorp(&jp, "", "port channel %d leads to rank %d, but dst_buff[%d] is in rank %d's memory", id, peer, k, owner)
		}
	}
}
