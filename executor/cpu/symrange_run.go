package cpu

import (
	"fmt"

	"github.com/msccl-go/msccl-go/ir"
)

// wordsBudget bounds the memory of the per-element rerun that words a
// range run's wrong results (about 1 MiB messages at 8 ranks): a proof
// runs sizes far below it, and past it the findings keep their ranges
// and writers without the decoded contributions.
const wordsBudget = 256 << 20

// runRanges runs p in the range mode. When it finds wrong results the
// element mode, which can decode them into contributions and words, runs
// again at the same size if that is affordable, and its report stands
// when it agrees on the verdict; a disagreement (a bug in one mode)
// keeps the range report, whose verdict is the stricter.
func runRanges(p *ir.Plan, opt Options) (*Report, error) {
	s := &sim{p: p, opt: opt, field: newField(opt.Seed)}
	rep, err := s.start()
	if err != nil || opt.RangesOnly || rep.WrongTotal == 0 && rep.ClobberedBytes == 0 {
		return rep, err
	}
	if elementBytes(p, opt.Size, s.launches) > wordsBudget {
		return rep, nil
	}
	eo := opt
	eo.PerElement = true
	erep, err := Run(p, eo)
	if err != nil || erep.Verdict != rep.Verdict {
		return rep, nil
	}
	return erep, nil
}

// elementBytes is about what the element mode allocates for p at size
// (the estimate setup uses against MaxMemory).
func elementBytes(p *ir.Plan, size int64, launches int) int64 {
	in, out, err := p.BufferBytes(size)
	if err != nil {
		return 1 << 62
	}
	total := int64(0)
	for r := range p.GPUs {
		lay, err := p.Layout(r, in, out)
		if err != nil || lay.ScratchAlloc < 0 {
			return 1 << 62
		}
		total += (in+out)*int64(1+2*launches) + lay.ScratchAlloc*3/2
	}
	return total
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

// valueAt is lane 0 of byte x's fingerprint in d, for reports.
func (s *sim) valueAt(d vdata, x int64) string {
	for _, r := range d {
		if r.lo <= x && x < r.hi {
			return fmt.Sprintf("%#016x", mpMul(r.v[0], s.field.pow(x)[0]))
		}
	}
	return "undefined"
}

// checkRanges compares one launch's outputs with the definition run by
// run, and reports the wrong elements (8 bytes, as in the element mode)
// folded by their last writer.
func (s *sim) checkRanges(l int) {
	r := s.report
	st := s.symState()
	defer func() { st.outWriters[l] = nil }()
	const sz = 8
	for rank, got := range s.vout[l] {
		want := s.expRanges(l, rank)
		if got == nil || want == nil {
			continue
		}
		counted := int64(-1) // the last element counted
		writers := st.outWriters[l][rank]
		diffRanges(got, want, func(lo, hi int64) {
			e0, e1 := max(lo/sz, counted+1), (hi+sz-1)/sz
			if e0 >= e1 {
				return
			}
			counted = e1 - 1
			r.WrongTotal += int(e1 - e0)
			// Split at the writers' boundaries.
			for x := e0 * sz; x < e1*sz; {
				end := e1 * sz
				wp, wl := int32(-1), -1
				if g, ok := writers.at(x); ok {
					wp, wl = g.place, int(g.launch)
					end = min(end, (g.hi+sz-1)/sz*sz)
				} else if k := nextWriter(&writers, x); k < end {
					end = max(k/sz*sz, x+sz)
				}
				s.rangeFinding(l, rank, x, end, wp, wl, got, want)
				x = end
			}
		})
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

// rangeFinding reports output bytes [lo, hi) of rank in launch l, wrong
// and last written by place wp in launch wl (wp < 0: by nobody).
func (s *sim) rangeFinding(l, rank int, lo, hi int64, wp int32, wl int, got, want vdata) {
	r := s.report
	var writer *Place
	if wp >= 0 {
		pl := s.places[wp]
		writer = &pl
	}
	const sz = 8
	sp := span{rank: rank, i0: lo / sz, n: (hi - lo) / sz, launch: l}
	words := s.rangeExplain(sp, writer, wl)
	if n := len(r.Findings); n > 0 {
		f := &r.Findings[n-1]
		if f.Launch == l && f.Rank == rank && f.End == lo && samePlace(f.Writer, writer) && f.WriterLaunch == wl {
			f.End, f.Elems = hi, f.Elems+int(sp.n)
			f.Explain = s.rangeExplain(span{rank: rank, i0: f.Off / sz, n: (hi - f.Off) / sz, launch: l}, writer, wl)
			goto mismatches
		}
	}
	if len(r.Findings) < maxFindings {
		r.Findings = append(r.Findings, Finding{Launch: l, Rank: rank, Off: lo, End: hi, Elems: int(sp.n), Writer: writer, WriterLaunch: wl, Explain: words})
	}
mismatches:
	for x := lo; x < hi && len(r.Wrong) < maxMismatches; x += sz {
		r.Wrong = append(r.Wrong, Mismatch{Launch: l, Rank: rank, Off: x, Elem: x / sz, Chunk: s.chunkAt(rank, x), Writer: writer, WriterLaunch: wl,
			Got: s.valueAt(got, x), Want: s.valueAt(want, x), Explain: s.rangeExplain(span{rank: rank, i0: x / sz, n: 1, launch: l}, writer, wl)})
	}
}

// rangeExplain words a wrong range without decoding it.
func (s *sim) rangeExplain(sp span, writer *Place, wl int) string {
	pre := ""
	switch {
	case writer == nil:
		pre = "no op wrote it; "
	case wl != sp.launch:
		pre = fmt.Sprintf("no op wrote it in launch %d (last written in launch %d); ", sp.launch, wl)
	}
	return pre + fmt.Sprintf("output %s holds other contributions than the definition (not decoded: the per-element run that says which is skipped above %d MiB of simulated memory; rerun at a smaller size for the words)", s.elems(sp.rank, sp.i0, sp.n), wordsBudget>>20)
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
