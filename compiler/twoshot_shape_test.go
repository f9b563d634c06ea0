package compiler

import (
	"testing"

	"github.com/msccl-go/msccl-go/ir"
)

// TestTwoShotUsesEveryBlock holds the library's two-shot to the shape
// that makes it as fast as the hand-written one (docs/rationale.md, "Why
// does the two-shot cut every chunk into one piece per block?"): up to 9
// ranks every block of every rank reduces (one op over all ranks' pieces,
// its result written to the rank and every peer) and pushes to every
// peer, rather than one block per rank doing the whole reduction. With
// -D split=1 (the default above 9 ranks) exactly one block per rank
// reduces, the old per-peer schedule.
func TestTwoShotUsesEveryBlock(t *testing.T) {
	const path = "../algorithms/allreduce_twoshot.msccl"
	for _, c := range []struct {
		ranks, split, instances int64
	}{{2, 0, 1}, {3, 0, 1}, {8, 0, 1}, {9, 0, 1}, {8, 0, 2}, {8, 1, 1}} {
		defs := map[string]int64{"ranks": c.ranks, "instances": c.instances}
		blocks := c.ranks * c.instances // split: one per piece; per-peer: one per peer and one reducing
		if c.split != 0 {
			defs["split"] = c.split
		}
		p, _ := compileFile(t, path, defs, Options{})
		for _, g := range p.GPUs {
			if int64(len(g.ThreadBlocks)) != blocks {
				t.Fatalf("%v: rank %d has %d blocks, want %d", defs, g.ID, len(g.ThreadBlocks), blocks)
			}
			reducing := 0
			for _, tb := range g.ThreadBlocks {
				reds, putPeers := 0, map[int]bool{}
				for _, op := range tb.Ops {
					if op.Code.Info().Reduces {
						reds++
						if int64(len(op.Src)) != c.ranks || int64(len(op.Dst)) != c.ranks {
							t.Errorf("%v: rank %d block %d reduces %d sources into %d destinations, want %d and %d", defs, g.ID, tb.ID, len(op.Src), len(op.Dst), c.ranks, c.ranks)
						}
					}
					if op.Code == ir.OpPut {
						for _, d := range op.Dst {
							putPeers[d.BufferID] = true
						}
					}
				}
				if reds > 0 {
					reducing++
				}
				if c.split == 0 && (reds != 1 || int64(len(putPeers)) != c.ranks-1) {
					t.Errorf("%v: rank %d block %d has %d reductions and puts to %d peers' buffers, want 1 and %d", defs, g.ID, tb.ID, reds, len(putPeers), c.ranks-1)
				}
			}
			want := int(blocks)
			if c.split == 1 {
				want = int(c.instances)
			}
			if reducing != want {
				t.Errorf("%v: rank %d: %d blocks reduce, want %d", defs, g.ID, reducing, want)
			}
		}
	}
}
