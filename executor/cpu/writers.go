package cpu

import (
	"bytes"
	"slices"
	"sort"
)

// wseg says that op place (a place number, sim.place), running in launch
// launch, was the last to write bytes [lo, hi) of a backing array.
type wseg struct {
	lo, hi int64
	place  int32
	launch int32
}

// writerMap is the last writer of every byte of one input or output
// array, as sorted disjoint segments. Ops write contiguous ranges and
// neighbouring windows of one op merge, so it stays small whatever the
// buffer size; a per-byte (or per-element) table would cost as much
// memory as the buffers themselves at 64 MiB.
type writerMap struct{ segs []wseg }

// set records that [lo, hi) was last written by (place, launch).
func (m *writerMap) set(lo, hi int64, place, launch int32) {
	m.replace(lo, hi, &wseg{lo: lo, hi: hi, place: place, launch: launch})
}

// del forgets the writers of [lo, hi): the host wrote it.
func (m *writerMap) del(lo, hi int64) { m.replace(lo, hi, nil) }

// replace puts nw (nil: nothing) in place of whatever covered [lo, hi).
func (m *writerMap) replace(lo, hi int64, nw *wseg) {
	if lo >= hi {
		return
	}
	s := m.segs
	// First segment ending after lo, and first starting at or after hi.
	i := sort.Search(len(s), func(k int) bool { return s[k].hi > lo })
	j := sort.Search(len(s), func(k int) bool { return s[k].lo >= hi })
	// The common case, a launch rewriting what the last one wrote.
	if nw != nil && j == i+1 && s[i].lo == lo && s[i].hi == hi {
		s[i] = *nw
		return
	}
	var buf [3]wseg
	mid := buf[:0]
	if i < j && s[i].lo < lo {
		mid = append(mid, wseg{lo: s[i].lo, hi: lo, place: s[i].place, launch: s[i].launch})
	}
	if nw != nil {
		mid = append(mid, *nw)
	}
	if i < j && s[j-1].hi > hi {
		mid = append(mid, wseg{lo: hi, hi: s[j-1].hi, place: s[j-1].place, launch: s[j-1].launch})
	}
	// Merge with equal neighbours so that pipelined windows of one op
	// collapse into one segment.
	if nw != nil {
		if i > 0 && s[i-1].hi == mid[0].lo && s[i-1].place == mid[0].place && s[i-1].launch == mid[0].launch {
			i--
			mid[0].lo = s[i].lo
		}
		if last := len(mid) - 1; j < len(s) && s[j].lo == mid[last].hi && s[j].place == mid[last].place && s[j].launch == mid[last].launch {
			mid[last].hi = s[j].hi
			j++
		}
	}
	m.segs = slices.Replace(s, i, j, mid...)
}

// at returns the segment holding byte x, if any op wrote it.
func (m *writerMap) at(x int64) (wseg, bool) {
	s := m.segs
	i := sort.Search(len(s), func(k int) bool { return s[k].hi > x })
	if i < len(s) && s[i].lo <= x {
		return s[i], true
	}
	return wseg{}, false
}

// within copies the segments overlapping [lo, hi), clipped to it.
func (m *writerMap) within(lo, hi int64) writerMap {
	var out writerMap
	for _, g := range m.segs {
		if g.hi > lo && g.lo < hi {
			g.lo, g.hi = max(g.lo, lo), min(g.hi, hi)
			out.segs = append(out.segs, g)
		}
	}
	return out
}

// noteWrite records a data write into an input or output array (scratch
// needs no writer: only outputs are explained and inputs guarded).
func (s *sim) noteWrite(rank, arr int, lo, hi int64, place int32, launch int) {
	if arr == arrScratch {
		return
	}
	st := s.symState()
	st.writers[rank][arr].set(lo, hi, place, int32(launch))
}

// endLaunch runs at rank rs's boundary after launch l, before the host
// touches the buffers: it keeps the writers of the output for the
// explanation of wrong elements, and checks the postcondition of
// out-of-place collectives that the input is unchanged.
func (s *sim) endLaunch(rs *rankState, l int) {
	st := s.symState()
	w := &st.writers[rs.r][rs.outArr]
	snap := w.within(rs.outBase, rs.outBase+s.out)
	for k := range snap.segs {
		snap.segs[k].lo -= rs.outBase
		snap.segs[k].hi -= rs.outBase
	}
	st.outWriters[l][rs.r] = snap
	iw := &st.writers[rs.r][rs.inArr]
	// The host rewrites the input next: its bytes have no op as writer
	// (an in-place element no op writes in the next launch must not
	// blame this launch's writer), and the next launch's clobber check
	// blames only its own ops.
	defer iw.del(rs.inBase, rs.inBase+s.in)
	if s.p.InPlace {
		return
	}
	if s.field != nil {
		s.clobberedRanges(rs, l)
		return
	}
	now := rs.arrs[rs.inArr][rs.inBase : rs.inBase+s.in]
	if s.report.Inputs[l][rs.r] == nil && isInput(s.opt.DType, s.opt.Seed, l, rs.r, now) {
		return // not kept (Options.OnLaunchInputs), and unchanged
	}
	fed := s.inputsOf(l)[rs.r]
	if bytes.Equal(fed, now) {
		return
	}
	s.reportClobbers(rs, l, func(lo, hi int64) bool { return !bytes.Equal(fed[lo:hi], now[lo:hi]) })
}

// reportClobbers reports what each op that wrote changed bytes of rank
// rs's input in launch l wrote: its whole range, since bytes it happened
// to store unchanged (equal small integers are common at the byte level)
// are no less overwritten.
func (s *sim) reportClobbers(rs *rankState, l int, changed func(lo, hi int64) bool) {
	iw := &s.symState().writers[rs.r][rs.inArr]
	r := s.report
	for _, g := range iw.within(rs.inBase, rs.inBase+s.in).segs {
		lo, hi := g.lo-rs.inBase, g.hi-rs.inBase
		if !changed(lo, hi) {
			continue
		}
		pl := s.place(g.place)
		r.ClobberedBytes += hi - lo
		if n := len(r.Clobbered); n > 0 && r.Clobbered[n-1].Rank == rs.r && r.Clobbered[n-1].Launch == l &&
			r.Clobbered[n-1].End == lo && samePlace(r.Clobbered[n-1].Writer, &pl) {
			r.Clobbered[n-1].End = hi
		} else if n < maxMismatches {
			r.Clobbered = append(r.Clobbered, InputClobber{Launch: l, Rank: rs.r, Off: lo, End: hi, Writer: &pl})
		}
	}
}

func samePlace(a, b *Place) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
