package compiler

import (
	"fmt"

	"github.com/msccl-go/msccl-go/ir"
)

// assignTBs puts every action on a thread block of its executing rank.
// Blocks named with `tb N` are kept; the rest are grouped so that work
// with one peer shares a block (its channels then serve both data and
// synchronisation), and a local op joins the block that produced its
// input, so the dependency needs only a nop. Block ids are then made
// dense per rank, keeping their order.
func assignTBs(st *state) {
	n := st.hdr.ranks
	maxHint := make([]int, n)
	for i := range maxHint {
		maxHint[i] = -1
	}
	for _, a := range st.actions {
		if int(a.tbHint) > maxHint[a.rank] {
			maxHint[a.rank] = int(a.tbHint)
		}
	}
	auto := make([]map[int]int, n) // [rank] peer key -> tb (key -1: local)
	producer := make([]map[int64]int, n)
	for _, a := range st.actions {
		r := a.rank
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
					a.tb = best
					break
				}
			}
			if auto[r] == nil {
				auto[r] = map[int]int{}
			}
			tb, ok := auto[r][key]
			if !ok {
				maxHint[r]++
				tb = maxHint[r]
				auto[r][key] = tb
			}
			a.tb = tb
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
	st.compactBlocks()
}

// chunkKey names one chunk of one rank's buffer.
func chunkKey(rank int, buf ir.BufferType, idx int) int64 {
	return int64(rank)<<34 | int64(buf)<<32 | int64(uint32(idx))
}

// compactBlocks renumbers each rank's blocks densely and rebuilds
// st.blocks; explicit peer block references are renumbered alike.
func (st *state) compactBlocks() {
	n := st.hdr.ranks
	// remap[r][tb] is block tb's dense number, -1 where rank r has no
	// such block. Block numbers are small (at most 1023 from `tb`, one
	// more per peer when assigned), so dense tables beat maps.
	remap := make([][]int32, n)
	for _, a := range st.actions {
		if a.tb >= len(remap[a.rank]) {
			remap[a.rank] = append(remap[a.rank], make([]int32, a.tb+1-len(remap[a.rank]))...)
		}
		remap[a.rank][a.tb] = 1
	}
	st.blocks = make([][]*block, n)
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
		st.blocks[r] = make([]*block, k)
		for i := range st.blocks[r] {
			st.blocks[r][i] = &block{rank: r, tb: i}
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
	for _, a := range st.actions {
		fix(a)
		st.blocks[a.rank][a.tb].n++
	}
	all := make([]*action, len(st.actions))
	for _, row := range st.blocks {
		for _, blk := range row {
			blk.acts, all = all[:0:blk.n], all[blk.n:]
		}
	}
	for _, a := range st.actions {
		blk := st.blocks[a.rank][a.tb]
		blk.acts = append(blk.acts, a)
	}
}
