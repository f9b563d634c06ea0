package ir

import (
	"fmt"
	"strconv"
	"strings"
)

// tbgGroups checks that the blocks of each thread-block group together
// cover their op's range. An op with tbg_info {tb_id, tbg_size} does only
// slice tb_id of its chunks; the other slices must come from matching ops
// (same op, same buffers) in other blocks. A slice no block does is never
// copied or reduced; a slice done twice is done by two blocks at once.
// Matching resolves block-local ids, since partner blocks may number the
// same remote buffer differently.
func (v *validator) tbgGroups(r int) {
	g := &v.p.GPUs[r]
	type group struct {
		first string // path of the first op, where the problem is reported
		size  int
		name  string
		count []int // per tb_id
	}
	groups := map[string]*group{}
	var order []string
	for t := range g.ThreadBlocks {
		tb := &g.ThreadBlocks[t]
		var walk func(ops []Op, path *jpath)
		walk = func(ops []Op, path *jpath) {
			for i := range ops {
				op := &ops[i]
				if len(op.Ops()) > 0 {
					walk(op.Ops(), &jpath{up: heapPath(path), key: ".ops", idx: i})
				}
				if op.TBG() == nil || !op.Info().TBG || op.TBG().TBGSize < 2 || op.TBG().TBGSize > 1024 || op.TBG().TBID < 0 || op.TBG().TBID >= op.TBG().TBGSize {
					continue // size 1 is the whole range; bad ids are reported at the op
				}
				key := tbgKey(g, tb, op)
				gr := groups[key]
				if gr == nil {
					first := path.at(".ops", i)
					gr = &group{first: first.String(), size: op.TBG().TBGSize, name: op.Code.String(), count: make([]int, op.TBG().TBGSize)}
					groups[key] = gr
					order = append(order, key)
				}
				gr.count[op.TBG().TBID]++
			}
		}
		walk(tb.Ops, &jpath{key: "gpus[" + strconv.Itoa(r) + "].threadblocks", idx: t})
	}
	for _, key := range order {
		gr := groups[key]
		most, at := 0, 0
		for id, n := range gr.count {
			if n > most {
				most, at = n, id
			}
		}
		for id, n := range gr.count {
			if n != most {
				v.errorf(gr.first+".tbg_info", "%s is split over a group of %d blocks, but slice %d is done %s while slice %d is done %s; each block of the group must do its slice once",
					gr.name, gr.size, id, times(n), at, times(most))
				break
			}
		}
	}
}

func times(n int) string {
	switch n {
	case 0:
		return "never"
	case 1:
		return "once"
	case 2:
		return "twice"
	}
	return fmt.Sprintf("%d times", n)
}

// tbgKey names what an op does independently of the block it is in:
// its code, group size and resolved buffer references.
func tbgKey(g *GPU, tb *ThreadBlock, op *Op) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d/%d", op.Code, op.TBG().TBGSize)
	for _, refs := range [][]BufRef{op.Src, op.Dst} {
		b.WriteByte('|')
		for _, r := range refs {
			switch r.Kind {
			case RefLocal:
				fmt.Fprintf(&b, "l%d", r.Type)
			case RefRemote:
				fmt.Fprintf(&b, "r%s", remoteName(g, tb, op.ChannelType, r.BufferID))
			case RefSwitch:
				gi := -1
				if tbl := tb.ChannelTable(ChanSwitch); r.SwitchID >= 0 && r.SwitchID < len(tbl) {
					gi = tbl[r.SwitchID]
				}
				fmt.Fprintf(&b, "s%d", gi)
			}
			fmt.Fprintf(&b, "[%d+%d]", r.Index, r.Size)
		}
	}
	return b.String()
}
