package cpu

// A wrong output element is found at the end of a launch and blamed on
// the op that wrote it last, usually a final copy; when the element
// holds stale data (an earlier launch's) or poison, the mistake is
// upstream, at the op that read scratch bytes this launch had not
// written yet. Options.Provenance follows such data: a read of scratch
// bytes last written in an earlier launch (or never) taints what its op
// stores, a read of tainted bytes passes the taint on, and a tainted
// output byte names the first read (Finding.Reader). It costs a writer
// map per scratch array, so the proof turns it on only to place the
// findings of a plan already found wrong.

// provenance is Options.Provenance's state.
type provenance struct {
	scratchW []writerMap          // [rank] last writer (and launch) of each scratch byte
	taint    [][numArrs]writerMap // [rank][arr] bytes stored from a stale read; place = that read
	out      map[int][]writerMap  // [launch][rank] tainted output bytes, output-relative
	exec     uint64               // the op execution origin belongs to
	origin   int32                // the stale read behind that execution's stores; -1: none
}

func newProvenance(ranks int) *provenance {
	return &provenance{scratchW: make([]writerMap, ranks), taint: make([][numArrs]writerMap, ranks), out: map[int][]writerMap{}, origin: -1}
}

// note records an access of bytes [lo, hi) of (rank, arr) by op place,
// running in launch, as part of op execution s.exec: an op's loads come
// before its stores.
func (pv *provenance) note(s *sim, place int32, rank, arr int, lo, hi int64, launch int, write bool) {
	if pv.exec != s.exec {
		pv.exec, pv.origin = s.exec, -1
	}
	if !write {
		if pv.origin < 0 && arr == arrScratch && stale(&pv.scratchW[rank], lo, hi, launch) {
			pv.origin = place
		}
		if pv.origin < 0 {
			for _, g := range pv.taint[rank][arr].within(lo, hi).segs {
				if int(g.launch) == launch {
					pv.origin = g.place
					break
				}
			}
		}
		return
	}
	if arr == arrScratch {
		pv.scratchW[rank].set(lo, hi, place, int32(launch))
	}
	rs := s.ranks[rank]
	olo, ohi := max(lo, rs.outBase), min(hi, rs.outBase+s.out)
	toOut := arr == rs.outArr && olo < ohi
	if pv.origin < 0 {
		pv.taint[rank][arr].del(lo, hi)
		if m := pv.out[launch]; toOut && m != nil {
			m[rank].del(olo-rs.outBase, ohi-rs.outBase)
		}
		return
	}
	pv.taint[rank][arr].set(lo, hi, pv.origin, int32(launch))
	if toOut {
		if pv.out[launch] == nil {
			pv.out[launch] = make([]writerMap, len(s.ranks))
		}
		pv.out[launch][rank].set(olo-rs.outBase, ohi-rs.outBase, pv.origin, int32(launch))
	}
}

// stale reports whether any byte of [lo, hi) was last written before
// launch, or never.
func stale(m *writerMap, lo, hi int64, launch int) bool {
	x := lo
	for _, g := range m.within(lo, hi).segs {
		if g.lo > x || int(g.launch) < launch {
			return true
		}
		x = g.hi
	}
	return x < hi
}

// provNote is note on the run's provenance state, made at first use.
func (s *sim) provNote(place int32, rank, arr int, lo, hi int64, launch int, write bool) {
	st := s.symState()
	if st.prov == nil {
		st.prov = newProvenance(len(s.ranks))
	}
	st.prov.note(s, place, rank, arr, lo, hi, launch, write)
}

// placeStaleReads names, for each wrong-result finding whose first bytes
// came from a stale read, the op that read them.
func (s *sim) placeStaleReads() {
	if s.sym == nil || s.sym.prov == nil {
		return
	}
	pv := s.sym.prov
	for i := range s.report.Findings {
		f := &s.report.Findings[i]
		m := pv.out[f.Launch]
		if m == nil {
			continue
		}
		if g, ok := m[f.Rank].at(f.Off); ok {
			pl := s.place(g.place)
			f.Reader = &pl
		}
	}
}
