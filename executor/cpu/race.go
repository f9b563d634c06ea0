package cpu

import (
	"sort"

	"github.com/msccl-go/msccl-go/ir"
)

// acc is one recorded memory access.
type acc struct {
	agent int32
	epoch uint32
	exec  uint64 // op execution: accesses of one execution never race
	place int32
	write bool
	typ   ir.BufferType
	base  int64 // where byte 0 of typ lies in the backing array
	// A kernel's end publishes its writes system-wide: anyone execution-
	// ordered after (pubAgent, pubEpoch), the writer rank's host at the
	// end of the writer's launch, sees them even over relaxed edges.
	pubAgent int32
	pubEpoch uint32
}

// seg is a byte range of one backing array with the same access history:
// the last write and the reads since it (at most one per agent, the
// latest, since later reads of an agent order after earlier ones).
type seg struct {
	lo, hi int64
	w      acc
	hasW   bool
	reads  []acc
}

// shadow is the access history of one backing array as sorted, disjoint
// segments; ranges come from chunks, so there are few of them.
type shadow struct{ segs []seg }

// split makes x a segment boundary and returns the index of the segment
// that starts at x (len(segs) when x is past the end).
func (m *shadow) split(x int64) int {
	i := sort.Search(len(m.segs), func(i int) bool { return m.segs[i].hi > x })
	if i == len(m.segs) || m.segs[i].lo >= x {
		return i
	}
	s := m.segs[i]
	left, right := s, s
	left.hi, right.lo = x, x
	right.reads = append([]acc(nil), s.reads...)
	m.segs = append(m.segs, seg{})
	copy(m.segs[i+2:], m.segs[i+1:])
	m.segs[i], m.segs[i+1] = left, right
	return i + 1
}

// fill makes [lo, hi) fully covered by segments. Gaps appear only on
// first touch, so the common case is a binary search and a short walk.
func (m *shadow) fill(lo, hi int64) {
	i := sort.Search(len(m.segs), func(i int) bool { return m.segs[i].hi > lo })
	var add []seg
	x := lo
	for k := i; k < len(m.segs) && m.segs[k].lo < hi; k++ {
		if m.segs[k].lo > x {
			add = append(add, seg{lo: x, hi: m.segs[k].lo})
		}
		x = m.segs[k].hi
	}
	if x < hi {
		add = append(add, seg{lo: x, hi: hi})
	}
	if len(add) == 0 {
		return
	}
	m.segs = append(m.segs, add...)
	sort.Slice(m.segs, func(i, j int) bool { return m.segs[i].lo < m.segs[j].lo })
}

type raceKey struct {
	a, b      int32
	rank, arr int
}

// detector checks every access against the history of its bytes.
type detector struct {
	mem   [][numArrs]shadow
	seen  map[raceKey]int
	races []RacePair
	s     *sim
}

const maxRaces = 64

// access records a of [lo, hi) of (rank, arr) under the accessor's clocks
// and reports every earlier access it is not ordered after.
func (d *detector) access(rank, arr int, lo, hi int64, a acc, c clocks) {
	if lo >= hi || d.s.opt.NoRaces {
		return
	}
	m := &d.mem[rank][arr]
	m.fill(lo, hi)
	i := m.split(lo)
	j := m.split(hi)
	for k := i; k < j; k++ {
		sg := &m.segs[k]
		if sg.hasW && sg.w.exec != a.exec && !c.knows(int(sg.w.agent), sg.w.epoch, true) && !d.published(sg.w, c) {
			d.report(rank, arr, sg.lo, sg.hi, sg.w, a)
		}
		if a.write {
			for _, r := range sg.reads {
				if r.exec != a.exec && !c.knows(int(r.agent), r.epoch, false) {
					d.report(rank, arr, sg.lo, sg.hi, r, a)
				}
			}
			sg.w, sg.hasW, sg.reads = a, true, sg.reads[:0]
			continue
		}
		replaced := false
		for x := range sg.reads {
			if sg.reads[x].agent == a.agent {
				sg.reads[x], replaced = a, true
				break
			}
		}
		if !replaced {
			sg.reads = append(sg.reads, a)
		}
	}
	if a.write && j-i > 1 {
		// The range now has one history: keep it one segment.
		m.segs[i].hi = m.segs[j-1].hi
		m.segs = append(m.segs[:i+1], m.segs[j:]...)
	}
}

// published reports whether the write w's kernel end, which publishes
// it, is execution-ordered before c's holder. (A proxy's copies are
// never published that way: pubEpoch is the largest epoch.)
func (d *detector) published(w acc, c clocks) bool {
	return w.pubEpoch != ^uint32(0) && c.knows(int(w.pubAgent), w.pubEpoch, false)
}

func (d *detector) report(rank, arr int, lo, hi int64, x, y acc) {
	if sp := d.s.tags.sp; sp != nil {
		// Not ordered by the sparse clocks: the exact run decides.
		sp.miss = true
		return
	}
	k := raceKey{x.place, y.place, rank, arr}
	if i, ok := d.seen[k]; ok {
		r := &d.races[i]
		r.A.Off, r.A.End = min(r.A.Off, lo-x.base), max(r.A.End, hi-x.base)
		r.B.Off, r.B.End = min(r.B.Off, lo-y.base), max(r.B.End, hi-y.base)
		return
	}
	if len(d.races) >= maxRaces {
		return
	}
	d.seen[k] = len(d.races)
	mk := func(a acc) Access {
		return Access{Place: d.s.place(a.place), Buffer: a.typ, BufferRank: rank, Off: lo - a.base, End: hi - a.base, Write: a.write}
	}
	a, b := mk(x), mk(y)
	d.races = append(d.races, RacePair{A: a, B: b, Cause: raceCause(d.s.p, a, b)})
}

// flagSlot says which launch's flag a range of packet payload carries and
// the clocks of the write that put it there.
type flagSlot struct {
	lo, hi int64
	flag   uint32
	c      clocks
	t      float64
}

// flagMap tracks LL packet flags by payload byte ranges of one rank.
type flagMap struct{ s []flagSlot }

// set marks [lo, hi) as written with flag under clocks c.
func (f *flagMap) set(lo, hi int64, flag uint32, c clocks, t float64) {
	var out []flagSlot
	inserted := false
	for _, x := range f.s {
		if x.hi <= lo || x.lo >= hi {
			if !inserted && x.lo >= hi {
				out = append(out, flagSlot{lo, hi, flag, c, t})
				inserted = true
			}
			out = append(out, x)
			continue
		}
		if x.lo < lo {
			y := x
			y.hi = lo
			out = append(out, y)
		}
		if !inserted {
			out = append(out, flagSlot{lo, hi, flag, c, t})
			inserted = true
		}
		if x.hi > hi {
			y := x
			y.lo = hi
			out = append(out, y)
		}
	}
	if !inserted {
		out = append(out, flagSlot{lo, hi, flag, c, t})
	}
	f.s = out
}

// ready reports whether all of [lo, hi) carries flag; if so it joins the
// writers' clocks into into (unless into.E is nil: a check only, which
// blocked readers repeat every round) and returns the latest write time.
// Otherwise it returns the first byte that does not.
func (f *flagMap) ready(lo, hi int64, flag uint32, into clocks) (ok bool, t float64, missing int64) {
	x := lo
	for _, s := range f.s {
		if s.hi <= x {
			continue
		}
		if s.lo > x || s.flag != flag {
			return false, 0, x
		}
		if into.E != nil {
			// A packet's arrival orders execution and shows its payload:
			// it joins E into both (one walk where they share subtrees).
			into.recv(clocks{E: s.c.E, V: s.c.E})
		}
		t = max(t, s.t)
		x = s.hi
		if x >= hi {
			return true, t, 0
		}
	}
	return x >= hi, t, x
}
