package ir

// FlatChannel is one channel of a GPU's flattened list of one type.
// Thread blocks name channels by their position in this list: every
// element of a memory or port entry's connected_to is its own channel, and
// every rank group of a switch entry is its own multicast channel (as
// upstream's parseChannels builds them).
type FlatChannel struct {
	Entry int // index in GPU.Channels
	Elem  int // index in that entry's ConnectedTo (or RankGroups for switch)
	// Peer is the connected rank (memory, port); -1 for switch channels.
	Peer int
	// Nth counts the earlier channels of the same type to the same peer:
	// the Nth channel from A to B pairs with the Nth from B to A.
	Nth int
	// Switch channels only.
	BufferType BufferType
	Group      *RankGroup
}

// FlatChannels returns g's channels of type t in the order thread blocks
// index them.
func (g *GPU) FlatChannels(t ChannelType) []FlatChannel {
	// Sized up front: Validate calls this for every rank of plans with
	// hundreds of channels a rank, and growing by appends doubles the cost.
	n := 0
	for e := range g.Channels {
		if c := &g.Channels[e]; c.Type == t {
			n += len(c.ConnectedTo) + len(c.RankGroups)
		}
	}
	if n == 0 {
		return nil
	}
	out := make([]FlatChannel, 0, n)
	nth := map[int]int{}
	for e := range g.Channels {
		c := &g.Channels[e]
		if c.Type != t {
			continue
		}
		if t == ChanSwitch {
			for k := range c.RankGroups {
				out = append(out, FlatChannel{Entry: e, Elem: k, Peer: -1, BufferType: c.BufferType, Group: &c.RankGroups[k]})
			}
			continue
		}
		for k, peer := range c.ConnectedTo {
			out = append(out, FlatChannel{Entry: e, Elem: k, Peer: peer, Nth: nth[peer]})
			nth[peer]++
		}
	}
	return out
}

// ChannelTable returns the block's local channel table for type t: local
// channel id k names GPU channel ChannelTable(t)[k]. Several entries of one
// type concatenate, as upstream's setupChannels appends them.
func (tb *ThreadBlock) ChannelTable(t ChannelType) []int {
	return localTable(tb.Channels, t, func(c *TBChannel) (ChannelType, []int) { return c.Type, c.ChannelIDs })
}

// RemoteTable returns the block's local remote buffer table for access
// type t: an op's buffer_id k over a channel of type t names
// GPU.RemoteBuffers[RemoteTable(t)[k]].
func (tb *ThreadBlock) RemoteTable(t ChannelType) []int {
	return localTable(tb.RemoteBufferRefs, t, func(r *RemoteBufferRef) (ChannelType, []int) {
		return r.AccessChannelType, r.RemoteBufferIDs
	})
}

// localTable concatenates the ids of the entries of type t, in order: a
// block's TB-local table of one channel type.
func localTable[E any](entries []E, t ChannelType, entry func(*E) (ChannelType, []int)) []int {
	var out []int
	for i := range entries {
		if et, ids := entry(&entries[i]); et == t {
			out = append(out, ids...)
		}
	}
	return out
}

// Partner returns the channel on the peer that channel idx (an index into
// rank's FlatChannels(t)) pairs with: the peer's rank and the index into
// its FlatChannels(t). ok is false when idx is out of range, t is the
// switch type, or the peer lists fewer channels back (upstream pads such
// channels with unpaired ones that nothing on the peer waits on).
func (p *Plan) Partner(rank int, t ChannelType, idx int) (peer, peerIdx int, ok bool) {
	if rank < 0 || rank >= len(p.GPUs) || t == ChanSwitch {
		return 0, 0, false
	}
	flat := p.GPUs[rank].FlatChannels(t)
	if idx < 0 || idx >= len(flat) {
		return 0, 0, false
	}
	peer, nth := flat[idx].Peer, flat[idx].Nth
	if peer < 0 || peer >= len(p.GPUs) || peer == rank {
		return 0, 0, false
	}
	for j, c := range p.GPUs[peer].FlatChannels(t) {
		if c.Peer == rank && c.Nth == nth {
			return peer, j, true
		}
	}
	return 0, 0, false
}

// chunks returns how many chunks g has in buffer b. In-place plans may
// leave output_chunks at 0: the output then is the input buffer (upstream
// hands the same pointer for both), so output refs are bounded by the
// input's chunks.
func (p *Plan) chunks(g *GPU, b BufferType) int {
	switch b {
	case BufInput:
		return g.InputChunks
	case BufOutput:
		if g.OutputChunks == 0 && p.InPlace {
			return g.InputChunks
		}
		return g.OutputChunks
	case BufScratch:
		return g.ScratchChunks
	}
	return 0
}
