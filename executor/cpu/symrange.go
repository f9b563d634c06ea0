package cpu

import (
	"math/bits"
	"slices"
	"sort"
)

// The range mode of the symbolic proof (Options.Symbolic without
// Options.PerElement). The element mode (symbolic.go) keeps an 8-byte
// fingerprint per element, so its cost grows with the message size; here
// memory is a list of runs of affine fingerprints, so the cost grows with
// the ops a plan runs and the ranges they touch, not with the bytes.
//
// Arithmetic is over the prime field of p = 2^61 − 1, in two independent
// lanes (each with its own random generator g and random values). Byte x
// of input i of rank q in launch l "is" R(q, l)·g^x, and a never-written
// byte x of one of rank r's arrays is P(r, array)·g^x. A run [lo, hi) of
// a backing array holding V means: byte x of the run holds V·g^x. So a
// whole input, output or scratch array starts as one run; copying
// [a, a+n) to [b, b+n) multiplies V by g^(a−b); a reduction adds the
// aligned runs of its sources (whatever reduce_op says, as in the element
// mode); neighbouring runs with equal V merge.
//
// The formal content of a byte, Σ c·[input (q, l) byte x] + Σ c·[poison
// (r, a) byte x], maps to Σ c·R(q,l)·g^x + Σ c·P(r,a)·g^x: distinct terms
// are distinct monomials, so two different contents are two different
// polynomials of degree at most N (the largest array in bytes) in the
// random values, and agree with probability at most N/p per lane
// (Schwartz–Zippel): below 2^-31 at 1 GiB, squared by the second lane.
// Within a run the content is the same shifted byte by byte, so comparing
// one V against the definition's value checks every byte of the run.

// mp is the Mersenne prime 2^61 − 1.
const mp = 1<<61 - 1

// lanes is the number of independent fingerprint lanes.
const lanes = 2

// fv is a fingerprint value, one field element per lane.
type fv [lanes]uint64

func mpReduce(x uint64) uint64 {
	x = (x & mp) + (x >> 61)
	if x >= mp {
		x -= mp
	}
	return x
}

func mpAdd(a, b uint64) uint64 { return mpReduce(a + b) }

func mpMul(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	// a·b = hi·2^64 + lo, and 2^61 ≡ 1: fold the bits above 61 down.
	return mpReduce((lo & mp) + mpReduce(hi<<3|lo>>61))
}

func mpPow(g uint64, e uint64) uint64 {
	r := uint64(1)
	for ; e > 0; e >>= 1 {
		if e&1 == 1 {
			r = mpMul(r, g)
		}
		g = mpMul(g, g)
	}
	return r
}

func (a fv) add(b fv) fv {
	for i := range a {
		a[i] = mpAdd(a[i], b[i])
	}
	return a
}

func (a fv) mul(b fv) fv {
	for i := range a {
		a[i] = mpMul(a[i], b[i])
	}
	return a
}

// fieldFP turns a 64-bit hash into a nonzero field element per lane.
func fieldFP(h uint64) fv {
	var v fv
	for i := range v {
		h = fmix(h ^ uint64(i+1)*0x9e3779b97f4a7c15)
		v[i] = h % mp
		if v[i] == 0 {
			v[i] = 1
		}
	}
	return v
}

// Fingerprint domains of the range mode beside the element mode's.
const fpGen = 3

// field is one run's random generator and its powers.
type field struct {
	seed   uint64
	g, gi  fv // generator and its inverse
	powers map[int64]fv
	mid    []vrun // vmap.set's scratch
	lastE  int64  // the last power computed (0: none yet)
	lastV  fv
}

func newField(seed uint64) *field {
	f := &field{seed: seed, powers: map[int64]fv{}}
	f.g = fieldFP(fpPrefix(seed, fpGen, 0, 0))
	for i := range f.g {
		if f.g[i] == 1 {
			f.g[i] = 3 // g = 1 would make every shift invisible
		}
		f.gi[i] = mpPow(f.g[i], mp-2)
	}
	return f
}

// pow is g^e for any e (negative: powers of the inverse), cached: a
// plan touches few distinct offsets.
func (f *field) pow(e int64) fv {
	if v, ok := f.powers[e]; ok {
		return v
	}
	var v fv
	if d := e - f.lastE; d > 0 && d <= 64 && f.lastE != 0 {
		// The decoder's tables walk offsets in order: one step from
		// the last power, not a square-and-multiply.
		last := f.lastV // pow(d) below may move lastV
		v = last.mul(f.pow(d))
	} else {
		b, x := f.g, uint64(e)
		if e < 0 {
			b, x = f.gi, uint64(-e)
		}
		for i := range v {
			v[i] = mpPow(b[i], x)
		}
	}
	f.lastE, f.lastV = e, v
	if len(f.powers) < 1<<16 {
		f.powers[e] = v
	}
	return v
}

// input is R(q, l), the value of rank q's input in launch l.
func (f *field) input(rank, launch int) fv {
	return fieldFP(fpPrefix(f.seed, fpInput, rank, launch))
}

// poison is P(r, a), the value of never-written bytes of rank r's array a.
func (f *field) poison(rank, arr int) fv {
	return fieldFP(fpPrefix(f.seed, fpPoison, rank, arr))
}

// vrun is a run of bytes [lo, hi) whose byte x holds v·g^x. In a vmap x
// is the offset in the backing array; in a vdata (data in flight) the
// offset from the start of the data.
type vrun struct {
	lo, hi int64
	v      fv
}

// vdata is data in flight: runs covering [0, n) in order.
type vdata []vrun

// vmap is one backing array (or packet store) as sorted disjoint runs
// that cover it whole.
type vmap struct{ runs []vrun }

func newVmap(n int64, v fv) vmap {
	if n <= 0 {
		return vmap{}
	}
	return vmap{runs: []vrun{{0, n, v}}}
}

// find is the index of the run holding byte x (len when past the end).
func (m *vmap) find(x int64) int {
	return sort.Search(len(m.runs), func(i int) bool { return m.runs[i].hi > x })
}

// get returns bytes [lo, hi) as data: byte t holds u·g^t with u = v·g^lo.
func (m *vmap) get(f *field, lo, hi int64, into vdata) vdata {
	into = into[:0]
	if lo >= hi {
		return into
	}
	sh := f.pow(lo)
	for i := m.find(lo); i < len(m.runs) && m.runs[i].lo < hi; i++ {
		r := m.runs[i]
		into = append(into, vrun{max(r.lo, lo) - lo, min(r.hi, hi) - lo, r.v.mul(sh)})
	}
	return into
}

// set stores d at [lo, lo+len(d)), keeping the runs maximal.
func (m *vmap) set(f *field, lo int64, d vdata) {
	if len(d) == 0 {
		return
	}
	hi := lo + d[len(d)-1].hi
	sh := f.pow(-lo)
	// slices.Replace copies mid into m.runs: one buffer serves every set.
	mid := f.mid[:0]
	defer func() { f.mid = mid[:0] }()
	i := m.find(lo)
	j := i
	for j < len(m.runs) && m.runs[j].lo < hi {
		j++
	}
	if i < j && m.runs[i].lo < lo {
		mid = append(mid, vrun{m.runs[i].lo, lo, m.runs[i].v})
	}
	for _, r := range d {
		mid = appendRun(mid, vrun{r.lo + lo, r.hi + lo, r.v.mul(sh)})
	}
	if i < j && m.runs[j-1].hi > hi {
		mid = appendRun(mid, vrun{hi, m.runs[j-1].hi, m.runs[j-1].v})
	}
	// Merge with equal neighbours outside the replaced range.
	if i > 0 && m.runs[i-1].v == mid[0].v && m.runs[i-1].hi == mid[0].lo {
		i--
		mid[0].lo = m.runs[i].lo
	}
	if j < len(m.runs) && m.runs[j].v == mid[len(mid)-1].v && m.runs[j].lo == mid[len(mid)-1].hi {
		mid[len(mid)-1].hi = m.runs[j].hi
		j++
	}
	m.runs = slices.Replace(m.runs, i, j, mid...)
}

// appendRun appends r, merging it into the last run when it continues it
// with the same value.
func appendRun(rs []vrun, r vrun) []vrun {
	if r.lo >= r.hi {
		return rs
	}
	if n := len(rs); n > 0 && rs[n-1].hi == r.lo && rs[n-1].v == r.v {
		rs[n-1].hi = r.hi
		return rs
	}
	return append(rs, r)
}

// sumData adds data of equal length run by run: the boundaries of the
// result are the union of the sources'.
func sumData(srcs []vdata, n int64) vdata {
	if len(srcs) == 1 {
		return append(vdata(nil), srcs[0]...)
	}
	idx := make([]int, len(srcs))
	var out vdata
	for x := int64(0); x < n; {
		end := n
		var v fv
		for k, s := range srcs {
			for idx[k] < len(s) && s[idx[k]].hi <= x {
				idx[k]++
			}
			if idx[k] == len(s) {
				continue // a source shorter than n contributes nothing
			}
			r := s[idx[k]]
			end = min(end, r.hi)
			v = v.add(r.v)
		}
		out = appendRun(out, vrun{x, end, v})
		x = end
	}
	return out
}

// diffRanges calls bad for each maximal range where got differs from
// want; both are in the same coordinates, sorted, and got covers every
// byte want does (want may cover only part of it: the defined bytes).
func diffRanges(got, want vdata, bad func(lo, hi int64)) {
	open, openLo, openHi := false, int64(0), int64(0)
	flush := func() {
		if open {
			bad(openLo, openHi)
			open = false
		}
	}
	i := 0
	for _, w := range want {
		for i < len(got) && got[i].hi <= w.lo {
			i++
		}
		for k := i; k < len(got) && got[k].lo < w.hi; k++ {
			g := got[k]
			lo, hi := max(g.lo, w.lo), min(g.hi, w.hi)
			if g.v == w.v {
				flush()
				continue
			}
			if open && openHi != lo {
				flush()
			}
			if !open {
				open, openLo = true, lo
			}
			openHi = hi
		}
	}
	flush()
}
