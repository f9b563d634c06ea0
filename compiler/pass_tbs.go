package compiler

import (
	"fmt"

	"github.com/msccl-go/msccl-go/ir"
)

// assignTBs puts every action on a thread block of its executing rank.
// Blocks named with `tb N` are kept; the rest are grouped so that work
// with one peer shares a block (its channels then serve both data and
// synchronisation), and a local op joins the block that produced its
// input, so the dependency needs only a nop. A group whose block would
// break the executor's limits (64 ops, 16 channels per type) is split
// over several blocks, consecutive runs of its ops each (see fitBlocks).
// Block ids are then made dense per rank, keeping their order.
func assignTBs(st *state, p *program) {
	placeTBs(st, p, fitBlocks(st, p))
	compactBlocks(st, p)
}

// tbGroup is the work one automatic block would get: a rank's ops with
// one peer (key: the peer rank) or its local ops (key -1).
type tbGroup struct{ rank, key int }

// placeTBs sets a.tb for every action, before compaction. budget bounds
// the ops of each block of a group (absent: one block for the group). It
// returns, for each action, the index in groups of the automatic group
// whose block it joined, -1 for a block named by `tb`.
func placeTBs(st *state, p *program, budget map[tbGroup]int) (groupOf []int32, groups []tbGroup) {
	n := p.hdr.ranks
	maxHint := make([]int, n)
	for i := range maxHint {
		maxHint[i] = -1
	}
	for _, a := range p.actions {
		if int(a.tbHint) > maxHint[a.rank] {
			maxHint[a.rank] = int(a.tbHint)
		}
	}
	// A cell is one automatic block: its group and how many ops it holds.
	type cell struct {
		tb, fill int
		group    int32
	}
	full := func(c *cell) bool {
		b, ok := budget[groups[c.group]]
		return ok && c.fill >= b
	}
	gid := map[tbGroup]int32{}
	cur := make([]map[int]*cell, n)    // [rank] key -> the group's open cell
	cellOf := make([]map[int]*cell, n) // [rank] tb -> its cell; nil for `tb N` blocks
	producer := make([]map[int64]int, n)
	groupOf = make([]int32, len(p.actions))
	for ai, a := range p.actions {
		r := a.rank
		groupOf[ai] = -1
		switch {
		case a.tbHint >= 0:
			a.tb = int(a.tbHint)
		default:
			key := -1
			for _, refs := range [2][]aref{a.dst, a.src} {
				for _, ref := range refs {
					if key < 0 && ref.rank != r {
						key = ref.rank
					}
				}
			}
			if key < 0 && producer[r] != nil {
				best := -1
				for _, s := range a.src {
					for i := s.idx; i < s.idx+s.size; i++ {
						if tb, ok := producer[r][chunkKey(s.rank, s.buf, i)]; ok && tb > best {
							best = tb
						}
					}
				}
				if best >= 0 {
					c := cellOf[r][best]
					if c == nil {
						a.tb = best
						break
					}
					// A full block sends the op to the local group instead.
					if !full(c) {
						a.tb = best
						c.fill++
						groupOf[ai] = c.group
						break
					}
				}
			}
			if cur[r] == nil {
				cur[r], cellOf[r] = map[int]*cell{}, map[int]*cell{}
			}
			c := cur[r][key]
			if c == nil || full(c) {
				g := tbGroup{r, key}
				id, ok := gid[g]
				if !ok {
					id = int32(len(groups))
					gid[g] = id
					groups = append(groups, g)
				}
				maxHint[r]++
				c = &cell{tb: maxHint[r], group: id}
				cur[r][key] = c
				cellOf[r][c.tb] = c
			}
			c.fill++
			a.tb = c.tb
			groupOf[ai] = c.group
		}
		for _, d := range a.dst {
			if d.rank != r {
				continue
			}
			if producer[r] == nil {
				producer[r] = map[int64]int{}
			}
			for i := d.idx; i < d.idx+d.size; i++ {
				producer[r][chunkKey(d.rank, d.buf, i)] = a.tb
			}
		}
	}
	return groupOf, groups
}

// chunkKey names one chunk of one rank's buffer.
func chunkKey(rank int, buf ir.BufferType, idx int) int64 {
	return int64(rank)<<34 | int64(buf)<<32 | int64(uint32(idx))
}

// compactBlocks renumbers each rank's blocks densely and rebuilds
// p.blocks; explicit peer block references are renumbered alike.
func compactBlocks(st *state, p *program) {
	n := p.hdr.ranks
	// remap[r][tb] is block tb's dense number, -1 where rank r has no
	// such block. Block numbers are small (at most 1023 from `tb`, one
	// more per peer when assigned), so dense tables beat maps.
	remap := make([][]int32, n)
	for _, a := range p.actions {
		if a.tb >= len(remap[a.rank]) {
			remap[a.rank] = append(remap[a.rank], make([]int32, a.tb+1-len(remap[a.rank]))...)
		}
		remap[a.rank][a.tb] = 1
	}
	p.blocks = make([][]*block, n)
	for r := range remap {
		k := int32(0)
		for tb, u := range remap[r] {
			if u == 0 {
				remap[r][tb] = -1
				continue
			}
			remap[r][tb] = k
			k++
		}
		p.blocks[r] = make([]*block, k)
		for i := range p.blocks[r] {
			p.blocks[r][i] = &block{rank: r, tb: i}
		}
	}
	lookup := func(r, tb int) (int, bool) {
		if r < 0 || r >= n || tb < 0 || tb >= len(remap[r]) || remap[r][tb] < 0 {
			return 0, false
		}
		return int(remap[r][tb]), true
	}
	var fix func(a *action)
	fix = func(a *action) {
		a.tb = int(remap[a.rank][a.tb])
		for i := range a.peers() {
			p := &a.ch.peers[i]
			if p.tb == noBlock {
				continue
			}
			want := p.tb
			if want < 0 {
				want = int(a.tbHint)
			}
			tb, ok := lookup(p.rank, want)
			if !ok {
				st.errorf(p.rng, fmt.Sprintf("rank %d has no ops in thread block %d, so nothing there can answer; name an existing block with `to %d@TB`", p.rank, want, p.rank),
					"peer block rank(%d) tb %d does not exist", p.rank, want)
				continue
			}
			p.tb = tb
		}
		for _, in := range a.body() {
			in.tbHint = a.tbHint
			in.rank = a.rank
			in.tb = a.tb
			for i := range in.peers() {
				p := &in.ch.peers[i]
				want := p.tb
				if want < 0 {
					want = int(a.tbHint)
				}
				tb, ok := lookup(p.rank, want)
				if !ok {
					st.errorf(p.rng, "", "peer block rank(%d) tb %d does not exist", p.rank, want)
					continue
				}
				p.tb = tb
			}
		}
	}
	// Every block's list is a capped run of one array, sized by a count
	// first: a large program has a hundred thousand blocks, and growing
	// each list by appends made most of this pass's allocations.
	for _, a := range p.actions {
		fix(a)
		p.blocks[a.rank][a.tb].n++
	}
	all := make([]*action, len(p.actions))
	for _, row := range p.blocks {
		for _, blk := range row {
			blk.acts, all = all[:0:blk.n], all[blk.n:]
		}
	}
	for _, a := range p.actions {
		blk := p.blocks[a.rank][a.tb]
		blk.acts = append(blk.acts, a)
	}
}
