package cpu

import (
	"fmt"

	"github.com/msccl-go/msccl-go/ir"
)

// runRanges runs p in the range mode.
func runRanges(p *ir.Plan, opt Options) (*Report, error) {
	s := &sim{p: p, opt: opt, field: newField(opt.Seed)}
	return s.start()
}

// setupRanges gives rank rs its arrays (lens bytes each) as poison runs
// and an empty packet store. Packets are read only under this launch's
// flag, so the store's initial value is never read; zero adds nothing.
func (s *sim) setupRanges(rs *rankState, lens [numArrs]int64) {
	for a, n := range lens {
		rs.vm[a] = newVmap(n, s.field.poison(rs.r, a))
	}
	rs.vpkt = newVmap(lens[arrScratch]/2, fv{})
	if rs.r == 0 {
		s.vout = make([][]vdata, s.launches)
		for l := range s.vout {
			s.vout[l] = make([]vdata, len(s.p.GPUs))
		}
	}
}

// inputRuns is rank's input in launch: byte i holds R(rank, launch)·g^i.
func (s *sim) inputRuns(rank, launch int) vdata {
	if s.in <= 0 {
		return nil
	}
	return vdata{{0, s.in, s.field.input(rank, launch)}}
}

// expRanges is the definition's output of rank in launch l as runs of
// output bytes (collective.go's expected, run by run); nil when the
// definition leaves it undefined, and only the defined bytes for an
// in-place gather's non-root ranks.
func (s *sim) expRanges(l, r int) vdata {
	f := s.field
	n := len(s.ranks)
	in, out := s.in, s.out
	one := func(v fv) vdata { return appendRun(nil, vrun{0, out, v}) }
	sum := func() fv {
		var v fv
		for q := range n {
			v = v.add(f.input(q, l))
		}
		return v
	}
	gathered := func() vdata {
		var d vdata
		for q := range n {
			d = appendRun(d, vrun{int64(q) * in, int64(q+1) * in, f.input(q, l).mul(f.pow(-int64(q) * in))})
		}
		return d
	}
	root := s.p.Root
	switch s.p.Collective {
	case ir.AllReduce:
		return one(sum())
	case ir.Reduce:
		switch {
		case r == root:
			return one(sum())
		case s.p.InPlace:
			return one(f.input(r, l))
		}
	case ir.ReduceScatter:
		return one(sum().mul(f.pow(int64(r) * out)))
	case ir.AllGather:
		return gathered()
	case ir.Gather:
		switch {
		case r == root:
			return gathered()
		case s.p.InPlace:
			return appendRun(nil, vrun{int64(r) * in, int64(r+1) * in, f.input(r, l).mul(f.pow(-int64(r) * in))})
		}
	case ir.AllToAll:
		blk := in / int64(n)
		var d vdata
		for q := range n {
			d = appendRun(d, vrun{int64(q) * blk, int64(q+1) * blk, f.input(q, l).mul(f.pow(int64(r-q) * blk))})
		}
		return d
	case ir.SendRecv:
		for q := range n {
			if s.p.Peer(q) == r {
				return one(f.input(q, l))
			}
		}
	case ir.Broadcast:
		return one(f.input(root, l))
	case ir.Scatter:
		return one(f.input(root, l).mul(f.pow(int64(r) * out)))
	}
	return nil
}

// fpAt is the fingerprint of byte x of d (output coordinates).
func (s *sim) fpAt(d vdata, x int64) (fv, bool) {
	for _, r := range d {
		if r.lo <= x && x < r.hi {
			return r.v.mul(s.field.pow(x)), true
		}
	}
	return fv{}, false
}

// fpString prints lane 0 of a fingerprint, for Mismatch.Got and Want.
func fpString(v fv, ok bool) string {
	if !ok {
		return "undefined"
	}
	return fmt.Sprintf("%#016x", v[0])
}

// checkRanges compares one launch's outputs with the definition run by
// run, and reports the wrong elements (8 bytes, as in the element mode):
// each piece of a wrong range with one last writer and one run of got
// is decoded once, at its first element, and the words hold for every
// element of it (its content is the same shifted by one element per
// element). Pieces fold into a finding while writer and decoded shape
// stay the same, as the element mode folds elements.
func (s *sim) checkRanges(l int) {
	r := s.report
	st := s.symState()
	defer func() { st.outWriters[l] = nil }()
	const sz = 8
	var dec *decoder
	for rank, got := range s.vout[l] {
		want := s.expRanges(l, rank)
		if got == nil || want == nil {
			continue
		}
		first := len(r.Findings)
		open, openWP, openWL, openShape := -1, int32(-1), -1, ""
		counted := int64(-1) // the last element counted
		writers := st.outWriters[l][rank]
		diffRanges(got, want, func(lo, hi int64) {
			e0, e1 := max(lo/sz, counted+1), (hi+sz-1)/sz
			if e0 >= e1 {
				return
			}
			counted = e1 - 1
			for x := e0 * sz; x < e1*sz; {
				// The piece ends where the writer or the run of got or want
				// changes.
				end := e1 * sz
				wp, wl := int32(-1), -1
				if g, ok := writers.at(x); ok {
					wp, wl = g.place, int(g.launch)
					end = min(end, max((g.hi+sz-1)/sz*sz, x+sz))
				} else if k := nextWriter(&writers, x); k < end {
					end = max(k/sz*sz, x+sz)
				}
				for _, d := range []vdata{got, want} {
					for _, gr := range d {
						if gr.lo <= x && x < gr.hi {
							end = min(end, max((gr.hi+sz-1)/sz*sz, x+sz))
							break
						}
					}
				}
				i, n := x/sz, (end-x)/sz
				r.WrongTotal += int(n)
				keep := len(r.Wrong) < maxMismatches
				if !keep && open < 0 && len(r.Findings) >= maxFindings {
					x = end
					continue
				}
				var base []Term
				sh := "undecoded"
				if st.explained < explainBudget {
					st.explained++
					if dec == nil {
						dec = s.newDecoder(l)
					}
					exp := s.expTerms(l, rank, i)
					fps := make([]fv, len(exp))
					for k, t := range exp {
						fps[k] = s.termKey(t)
					}
					gv, _ := s.fpAt(got, x)
					if diff, ok := dec.decode(gv, exp, fps, dec.near(exp[0].elem)); ok {
						base = toTerms(diff)
						sh = shapeOf(base, i)
					}
				}
				var writer *Place
				if wp >= 0 {
					pl := s.place(wp)
					writer = &pl
				}
				if open >= 0 && !(r.Findings[open].End == x && sh == openShape && wp == openWP && wl == openWL) {
					open = -1
				}
				if open >= 0 {
					r.Findings[open].End = end
					r.Findings[open].Elems += int(n)
				} else if len(r.Findings) < maxFindings {
					r.Findings = append(r.Findings, Finding{Launch: l, Rank: rank, Off: x, End: end, Elems: int(n),
						Writer: writer, WriterLaunch: wl, Terms: base})
					open, openWP, openWL, openShape = len(r.Findings)-1, wp, wl, sh
				}
				for y := x; y < end && len(r.Wrong) < maxMismatches; y += sz {
					var terms []Term
					if base != nil {
						terms = shiftTerms(base, y/sz-i)
					}
					gv, gok := s.fpAt(got, y)
					wv, wok := s.fpAt(want, y)
					r.Wrong = append(r.Wrong, Mismatch{Launch: l, Rank: rank, Off: y, Elem: y / sz, Chunk: s.chunkAt(rank, y), Writer: writer, WriterLaunch: wl,
						Got: fpString(gv, gok), Want: fpString(wv, wok), Terms: terms,
						Explain: s.explainAt(terms, span{rank: rank, i0: y / sz, n: 1, launch: l}, writer, wl)})
				}
				x = end
			}
		})
		for k := first; k < len(r.Findings); k++ {
			f := &r.Findings[k]
			f.Explain = s.explainAt(f.Terms, span{rank: rank, i0: f.Off / sz, n: int64(f.Elems), launch: l}, f.Writer, f.WriterLaunch)
		}
	}
}

// nextWriter is the first written byte after x (1<<62 when none).
func nextWriter(m *writerMap, x int64) int64 {
	for _, g := range m.segs {
		if g.lo > x {
			return g.lo
		}
	}
	return 1 << 62
}

// clobberedRanges reports the input bytes of rank rs that launch l
// changed (out-of-place collectives must leave their input alone).
func (s *sim) clobberedRanges(rs *rankState, l int) {
	now := rs.vm[rs.inArr].get(s.field, rs.inBase, rs.inBase+s.in, nil)
	var bad [][2]int64
	diffRanges(now, s.inputRuns(rs.r, l), func(lo, hi int64) { bad = append(bad, [2]int64{lo, hi}) })
	if len(bad) == 0 {
		return
	}
	s.reportClobbers(rs, l, func(lo, hi int64) bool {
		for _, b := range bad {
			if b[0] < hi && lo < b[1] {
				return true
			}
		}
		return false
	})
}

// arrLen is the length of one of rank rs's backing arrays in either mode.
func (s *sim) arrLen(rs *rankState, arr int) int64 {
	if s.field != nil {
		if m := rs.vm[arr].runs; len(m) > 0 {
			return m[len(m)-1].hi
		}
		return 0
	}
	return int64(len(rs.arrs[arr]))
}

// The decoder (symbolic.go) works in either mode's arithmetic: the
// element mode adds fingerprints modulo 2^64 in lane 0, the range mode
// in the prime field, lane by lane. A term's key is the fingerprint it
// gives the byte it lands on: in the range mode input element e of
// (q, l) is R(q, l)·g^(8e) in output coordinates shifted to byte 8e, so
// every term is compared at the same byte as the element it explains.

func (s *sim) fpAdd(a, b fv) fv {
	if s.field != nil {
		return a.add(b)
	}
	return fv{a[0] + b[0]}
}

func (s *sim) fpSub(a, b fv) fv {
	if s.field != nil {
		for i := range a {
			a[i] = mpAdd(a[i], mp-b[i])
		}
		return a
	}
	return fv{a[0] - b[0]}
}

// add0 and sub0 are fpAdd and fpSub on lane 0 alone.
func (s *sim) add0(a, b uint64) uint64 {
	if s.field != nil {
		return mpAdd(a, b)
	}
	return a + b
}

func (s *sim) sub0(a, b uint64) uint64 {
	if s.field != nil {
		return mpAdd(a, mp-b)
	}
	return a - b
}

// termKey is the fingerprint of a term at its own byte: input element e
// of (q, l) at byte 8e, poison at its byte.
func (s *sim) termKey(k tkey) fv {
	if s.field == nil {
		return fv{s.keyFP(k)}
	}
	if k.poison() {
		return s.field.poison(k.rank, s.poisonArr(k.buf)).mul(s.field.pow(k.elem))
	}
	return s.field.input(k.rank, k.launch).mul(s.field.pow(8 * k.elem))
}
