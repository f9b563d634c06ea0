package compiler

import "github.com/msccl-go/msccl-go/ir"

// LL copies over port channels. A port ppkt is a proxy copy: the proxy
// moves bytes as they are and writes no flags, so its source must
// already be packets in the sender's scratch (the port rule of the op
// table). A chunk-level LL copy of plain data across a port channel is
// therefore lowered to a cpkt of the source into a staging slot of the
// sender's scratch and a port ppkt of those packets. The staging slot is
// the compiler's own: numbered from 0 per rank while lowering and moved
// past every slot the program names once lowering ends (placeStaging).

// staging is the lowerer's record of staging slots.
type staging struct {
	// scratchEnd[r]: the scratch chunks rank r's program refs reach; nil
	// in protocol Simple programs, which stage nothing.
	scratchEnd []int
	next       []int         // [rank] staging chunks handed out
	held       map[aref]aref // plain source -> its staged packets
	refs       []*aref       // every ref naming a staging slot
}

// noteScratch records a ref the program names.
func (sg *staging) noteScratch(a aref) {
	if sg.scratchEnd != nil && a.buf == ir.BufScratch {
		sg.scratchEnd[a.rank] = max(sg.scratchEnd[a.rank], a.idx+a.size)
	}
}

// stage returns packets of plain src in a staging slot of src's rank,
// emitting the cpkt that packs them unless src is already staged and
// unchanged since.
func (lw *lowerer) stage(o *evOp, src aref) aref {
	sg := &lw.sg
	if sg.held == nil {
		sg.held = map[aref]aref{}
		sg.next = make([]int, lw.p.hdr.ranks)
	}
	if s, ok := sg.held[src]; ok {
		return s
	}
	s := aref{rank: src.rank, buf: ir.BufScratch, idx: sg.next[src.rank], size: src.size, packet: true}
	sg.next[src.rank] += src.size
	c := lw.newAction()
	*c = action{rank: src.rank, tb: -1, tbHint: o.tb, pos: o.posRef(), code: ir.OpCpkt}
	c.setReduce(lw.p.hdr.reduce)
	c.src, c.dst = []aref{src}, []aref{s}
	sg.refs = append(sg.refs, &c.dst[0])
	c.seq = int32(len(lw.p.actions))
	lw.p.actions = append(lw.p.actions, c)
	sg.held[src] = s
	return s
}

// wrote forgets staged copies of chunks that action a overwrites: a
// later copy of them packs the new data into a fresh slot (a slot takes
// packets once per launch).
func (sg *staging) wrote(a *action) {
	if len(sg.held) == 0 {
		return
	}
	for src := range sg.held {
		for _, d := range a.dst {
			if overlaps(src, d) {
				delete(sg.held, src)
				break
			}
		}
	}
}

// placeStaging moves every staging slot past the slots its rank's
// program names.
func (sg *staging) placeStaging() {
	for _, r := range sg.refs {
		r.idx += sg.scratchEnd[r.rank]
	}
}
