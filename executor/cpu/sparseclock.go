package cpu

import (
	"errors"
	"slices"
)

// Sparse clocks: a first pass that proves most plans at a cost per op
// that does not grow with the agents.
//
// In a pipelined schedule such as a ring, every step moves what a block
// knows of O(ranks) agents (rank r at step s learns that rank r-j has
// done step s-j, for every j), so any clock that holds every agent's
// entry pays O(ranks) per op and the proof O(ranks³). Yet a race check
// asks only whether one earlier access (agent, epoch) is ordered before
// the accessor, and in a correct plan the order almost always comes by a
// short path: the writer signalled the reader, or the reader's rank
// ended its kernel (the host) after learning of the write.
//
// So a sparse clock keeps, per agent it holds, the entry and the number
// of hops (joins from another agent's clock) it travelled, and drops
// entries past maxHops; and a rank's host, at each kernel boundary,
// stores its whole clock as a snapshot and hands its blocks only its own
// entry. Every entry a sparse clock holds is at most the entry the exact
// clock (clock.go) would hold, so "ordered" from a sparse clock is true.
// Its entry for a host h at epoch x also stands for everything h knew
// then: the exact clocks change only by whole-clock joins, the host
// alone sets its own entry, and V never runs ahead of E, so any exact E
// (V) clock with h ≥ x holds h's E (V) clock at x. knows follows such
// entries into the snapshots.
//
// "Not ordered" from a sparse clock may be a path it dropped, not a
// race: the run stops (errClockMiss) and Run repeats it with exact
// clocks, whose report is the verdict. A plan whose accesses are all
// ordered by short paths, which is every correct library plan at any
// rank count, is proven by the sparse pass alone.

// maxHops is how many joins an entry travels before it is dropped: the
// longest path a library plan's order needs is a write, a signal to the
// reader's block and that rank's kernel end (two), plus one for a
// semaphore between blocks.
const maxHops = 3

// maxSparse caps a block's or proxy's sparse clock: past it, the entries
// that travelled farthest go first. (A proxy learns from every block of
// its rank.)
const maxSparse = 256

// errClockMiss stops a sparse run at an access its clocks do not order.
var errClockMiss = errors.New("an access the sparse clocks do not order")

// sent is one entry of a sparse clock.
type sent struct {
	a    int32  // agent
	e    uint32 // epoch
	hops uint8
}

// sparseRun is one run's sparse-clock state: the hosts' snapshots and
// the scratch of knows.
type sparseRun struct {
	hostRank []int32      // [agent] the rank whose host it is; -1 for other agents
	snaps    [][]snapshot // [rank][host epoch]
	seen     []uint32     // [rank] highest host epoch visited by the current knows
	seenGen  []uint32     // [rank] knows call that set seen
	gen      uint32       // knows calls and gatherings so far: each is a generation
	miss     bool         // an access was not ordered
	stack    []sent       // knows's pending host entries
	dense    []denseEnt   // [agent] sparseBoundary's gathering
	touched  []int32      // agents gathered in dense
	merge    []sent       // sjoin's merge buffer
}

// denseEnt is an entry of a gathering; gen says which.
type denseEnt struct {
	sent
	gen uint32
}

// snapshot is a host's clocks at one of its epochs, with the host
// entries they hold (knows follows those).
type snapshot struct {
	e, v           []sent
	eHosts, vHosts []sent
}

func newSparseRun(s *sim) *sparseRun {
	sp := &sparseRun{hostRank: make([]int32, s.agents), dense: make([]denseEnt, s.agents), snaps: make([][]snapshot, len(s.ranks)),
		seen: make([]uint32, len(s.ranks)), seenGen: make([]uint32, len(s.ranks))}
	for i := range sp.hostRank {
		sp.hostRank[i] = -1
	}
	for _, rs := range s.ranks {
		sp.hostRank[rs.host] = int32(rs.r)
		sp.snaps[rs.r] = make([]snapshot, s.launches+2)
	}
	return sp
}

// find returns the index of agent a's entry in es, or where it would go.
func find(es []sent, a int32) (int, bool) {
	return slices.BinarySearchFunc(es, a, func(x sent, a int32) int { return int(x.a) - int(a) })
}

func sget(es []sent, a int32) uint32 {
	if i, ok := find(es, a); ok {
		return es[i].e
	}
	return 0
}

// sown makes c's entries its own to change.
func (c *vclock) sown() {
	if c.shared {
		c.ents = append([]sent(nil), c.ents...)
		c.shared, c.borrowed = false, false
	}
}

func (c *vclock) sset(a int32, x uint32) {
	i, ok := find(c.ents, a)
	if ok && c.ents[i].e == x && c.ents[i].hops == 0 {
		return
	}
	c.sown()
	if ok {
		c.ents[i] = sent{a, x, 0}
		return
	}
	c.ents = slices.Insert(c.ents, i, sent{a, x, 0})
}

// sjoin joins src's entries into c, each hop further (hop: 1 for a join
// from another agent's clock, 0 within one agent).
func (c *vclock) sjoin(src []sent, hop uint8) {
	if len(src) == 0 {
		return
	}
	// Usually c already holds everything src brings: one walk over both
	// (sorted) says so.
	if !brings(c.ents, src, hop) {
		return
	}
	// Merge into the run's buffer, then copy back into c's own slice
	// where it has room: most joins then allocate nothing.
	out := c.sp.merge[:0]
	d := c.ents
	for len(d) > 0 || len(src) > 0 {
		switch {
		case len(src) == 0 || len(d) > 0 && d[0].a < src[0].a:
			out = append(out, d[0])
			d = d[1:]
		case len(d) == 0 || src[0].a < d[0].a:
			if x := src[0]; x.hops+hop <= maxHops {
				x.hops += hop
				out = append(out, x)
			}
			src = src[1:]
		default:
			x, y := d[0], src[0]
			y.hops += hop
			if y.hops <= maxHops && (y.e > x.e || y.e == x.e && y.hops < x.hops) {
				x = y
			}
			out = append(out, x)
			d, src = d[1:], src[1:]
		}
	}
	out = capSparse(out)
	c.sp.merge = out
	if c.shared || cap(c.ents) < len(out) {
		c.ents, c.shared, c.borrowed = make([]sent, len(out), len(out)+len(out)/4+2), false, false
	}
	c.ents = c.ents[:len(out)]
	copy(c.ents, out)
}

// brings reports whether joining src (hop further) would change d.
func brings(d, src []sent, hop uint8) bool {
	i := 0
	for _, x := range src {
		if x.hops+hop > maxHops {
			continue
		}
		for i < len(d) && d[i].a < x.a {
			i++
		}
		if i == len(d) || d[i].a != x.a || d[i].e < x.e || d[i].e == x.e && d[i].hops > x.hops+hop {
			return true
		}
	}
	return false
}

// capSparse drops the entries that travelled farthest while es is past
// maxSparse.
func capSparse(es []sent) []sent {
	if len(es) <= maxSparse {
		return es
	}
	for h := uint8(maxHops); h > 0 && len(es) > maxSparse; h-- {
		es = slices.DeleteFunc(es, func(x sent) bool { return x.hops >= h })
	}
	return es
}

// knows reports whether c orders (a, e) before its holder: c's entry for
// a is at least e, directly or through a host snapshot (v: c is a V
// clock).
func (c *vclock) knows(a int, e uint32, v bool) bool {
	if c.sp == nil {
		return c.get(a) >= e
	}
	if sget(c.ents, int32(a)) >= e {
		return true
	}
	sp := c.sp
	sp.gen++
	st := sp.stack[:0]
	st = sp.pushHosts(st, c.ents)
	for len(st) > 0 {
		h := st[len(st)-1]
		st = st[:len(st)-1]
		r := sp.hostRank[h.a]
		if sp.seenGen[r] == sp.gen && sp.seen[r] >= h.e {
			continue
		}
		sp.seenGen[r], sp.seen[r] = sp.gen, h.e
		sn := &sp.snaps[r][h.e]
		es, hs := sn.e, sn.eHosts
		if v {
			es, hs = sn.v, sn.vHosts
		}
		if sget(es, int32(a)) >= e {
			sp.stack = st
			return true
		}
		st = append(st, hs...)
	}
	sp.stack = st
	return false
}

func (sp *sparseRun) pushHosts(st, es []sent) []sent {
	for _, x := range es {
		if sp.hostRank[x.a] >= 0 {
			st = append(st, x)
		}
	}
	return st
}

func (sp *sparseRun) hostsOf(es []sent) []sent {
	var hs []sent
	for _, x := range es {
		if sp.hostRank[x.a] >= 0 {
			hs = append(hs, x)
		}
	}
	return hs
}

// sparseBoundary is boundary's clock work on sparse clocks: the host's
// clocks j gather every block's (one pass over all of them rather than
// one merge per block: the latest entry per agent lands in a dense
// table, and only the agents touched are sorted), set the blocks' and
// the host's entries, and are kept as the snapshot of the host's new
// epoch.
func (s *sim) sparseBoundary(rs *rankState, j clocks) {
	sp := s.tags.sp
	for k, c := range []*vclock{j.E, j.V} {
		sp.gen++ // a new gathering: every dense entry is stale
		for _, x := range c.ents {
			if sp.hostRank[x.a] != int32(rs.r) { // the host's own entry is set below
				sp.gather(x)
			}
		}
		for _, bl := range rs.blocks {
			src := [2]*vclock{bl.clk.E, bl.pend.E}
			if k == 1 {
				src = [2]*vclock{bl.clk.V, bl.pend.V}
			}
			for _, sc := range src {
				for _, x := range sc.ents {
					if x.hops < maxHops {
						x.hops++
						sp.gather(x)
					}
				}
			}
			sp.gather(sent{int32(bl.agent), bl.ph, 0})
		}
		sp.gather(sent{int32(rs.host), rs.hostEpoch, 0})
		slices.Sort(sp.touched)
		out := make([]sent, len(sp.touched))
		for i, a := range sp.touched {
			out[i] = sp.dense[a].sent
		}
		sp.touched = sp.touched[:0]
		c.ents, c.shared, c.borrowed = out, true, false
	}
	sn := &sp.snaps[rs.r][rs.hostEpoch]
	sn.e, sn.v = j.E.ents, j.V.ents
	sn.eHosts, sn.vHosts = sp.hostsOf(sn.e), sp.hostsOf(sn.v)
}

// gather keeps x in the dense table if it is the latest entry of its
// agent seen in this gathering (the nearer one on a tie).
func (sp *sparseRun) gather(x sent) {
	d := &sp.dense[x.a]
	if d.gen != sp.gen {
		*d = denseEnt{sent: x, gen: sp.gen}
		sp.touched = append(sp.touched, x.a)
		return
	}
	if x.e > d.e || x.e == d.e && x.hops < d.hops {
		d.sent = x
	}
}

// sparseStart gives a block at a launch's start the host's entry alone:
// the snapshot stands for the rest.
func (s *sim) sparseStart(rs *rankState, b *block) {
	h := []sent{{int32(rs.host), rs.hostEpoch, 0}}
	b.clk.E.ents, b.clk.E.shared = h, true
	b.clk.V.ents, b.clk.V.shared = h, true
}
