package compiler

import "github.com/msccl-go/msccl-go/ir"

// packetShifts places each rank's LL packet slots in scratch apart from
// its plain slots. A plan op addresses packet slot j at twice the plain
// offset of slot j (a packet takes twice its payload), so packet slot j
// covers the bytes of plain slots 2j and 2j+1: left where the program
// numbers them, a packet slot and an unrelated plain slot of one program
// would share bytes that no dependency between the two slots orders.
// Slot numbers in a program are names, not addresses: plain slot k stays
// plan slot k, and packet slot j becomes plan slot j+shift[r], with
// shift[r] = ceil(Q/2) for Q the plain slots rank r uses, so that every
// packet slot starts at or past plain slot Q. A rank whose scratch holds
// only one kind keeps its numbering (shift 0 or no packets to move).
func packetShifts(prog *program) []int {
	h := &prog.hdr
	if h.protocol != ir.LL && !prog.explicit {
		return nil // chunk-level Simple programs write no packets
	}
	plainEnd := make([]int, h.ranks)
	hasPkt := make([]bool, h.ranks)
	var visit func(as []*action)
	visit = func(as []*action) {
		for _, a := range as {
			for _, refs := range [2][]aref{a.src, a.dst} {
				for _, x := range refs {
					if x.buf != ir.BufScratch {
						continue
					}
					if x.packet {
						hasPkt[x.rank] = true
					} else {
						plainEnd[x.rank] = max(plainEnd[x.rank], x.idx+x.size)
					}
				}
			}
			visit(a.body())
		}
	}
	visit(prog.actions)
	var shift []int
	for r := range plainEnd {
		if hasPkt[r] && plainEnd[r] > 0 {
			if shift == nil {
				shift = make([]int, h.ranks)
			}
			shift[r] = (plainEnd[r] + 1) / 2
		}
	}
	return shift
}
