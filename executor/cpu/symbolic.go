package cpu

import (
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/msccl-go/msccl-go/ir"
)

// Symbolic mode (Options.Symbolic). The byte-level proof checks values
// under one reduction on zero-filled scratch: a schedule that adds a
// scratch slot nobody wrote is right under sum (x + 0 = x) and wrong under
// max, and a result that is right by value says nothing about which
// contributions made it. Here every element is instead an 8-byte
// fingerprint: input element i of rank q in launch l holds w(q, l, i), a
// keyed 64-bit hash; memory a collective must not read before writing it
// (scratch, and output bytes the input does not cover) starts as poison
// fingerprints p(rank, buffer, byte); every reduction, whatever its
// reduce_op, adds modulo 2^64, and copies move fingerprints. An output
// element is then Σ c_t·f(t) over the terms t that reached it, a random
// linear image of the multiset of contributions; it equals the
// definition's Σ over the expected terms (each once) only if it is that
// multiset, except with probability about 2^-64 per comparison. A
// schedule whose every output is exactly "each expected contribution
// once, nothing else" is right for sum, min, max and prod in every type;
// the byte-level run cannot say that for any one of them.
//
// Because the fingerprints carry their origin, a wrong element can be
// decoded: got is matched against combinations of the expected terms
// (missing, doubled), each rank's inputs at other indices and neighbouring
// launches (wrong chunk, stale data), and poison (reads of bytes nobody
// wrote); the difference is reported in words (Mismatch.Explain,
// Finding.Explain) and as data (Terms).

// Fingerprint domains keep inputs and poison apart.
const (
	fpInput  = 1
	fpPoison = 2
)

// fmix is splitmix64's finaliser after the golden-ratio step: a bijection
// of uint64, so fmix(h ^ i) is distinct for distinct i at any h.
func fmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// fpPrefix hashes (seed, domain, a, b) step by step: chaining bijections
// rather than xor-ing multiplied fields avoids structured collisions
// between different triples.
func fpPrefix(seed uint64, domain, a, b int) uint64 {
	return fmix(fmix(fmix(seed^uint64(domain))^uint64(a)) ^ uint64(b))
}

// inputFP is w(rank, launch, i): element i of rank's input in launch.
func inputFP(seed uint64, rank, launch int, i int64) uint64 {
	return fmix(fpPrefix(seed, fpInput, rank, launch) ^ uint64(i))
}

// poisonFP is the fingerprint of the never-written 8 bytes at byte pos of
// one of rank's backing arrays.
func poisonFP(seed uint64, rank, arr int, pos int64) uint64 {
	return fmix(fpPrefix(seed, fpPoison, rank, arr) ^ uint64(pos))
}

// fillSym writes rank's symbolic input of launch into out.
func fillSym(seed uint64, launch, rank int, out []byte) []byte {
	h := fpPrefix(seed, fpInput, rank, launch)
	for i := 0; i+8 <= len(out); i += 8 {
		binary.LittleEndian.PutUint64(out[i:], fmix(h^uint64(i/8)))
	}
	return out
}

// fillPoison fills arr[lo:hi) of rank with poison.
func fillPoison(seed uint64, rank, arr int, b []byte, lo, hi int64) {
	h := fpPrefix(seed, fpPoison, rank, arr)
	for x := lo &^ 7; x+8 <= hi; x += 8 {
		binary.LittleEndian.PutUint64(b[x:], fmix(h^uint64(x)))
	}
}

// poison replaces the zeroes of every buffer a launch may not read
// before writing: scratch, the out-of-place output, and the part of an
// in-place buffer that is not input. It runs once, before the first
// launch; later launches see what the earlier ones left, which decodes
// as stale data (or as the poison no launch overwrote).
func (s *sim) poison() {
	for _, rs := range s.ranks {
		sc := rs.arrs[arrScratch]
		fillPoison(s.opt.Seed, rs.r, arrScratch, sc, 0, int64(len(sc)))
		if !s.p.InPlace {
			o := rs.arrs[arrOut]
			fillPoison(s.opt.Seed, rs.r, arrOut, o, 0, int64(len(o)))
			continue
		}
		m := rs.arrs[arrMain]
		fillPoison(s.opt.Seed, rs.r, arrMain, m, 0, rs.inBase)
		fillPoison(s.opt.Seed, rs.r, arrMain, m, rs.inBase+s.in, int64(len(m)))
	}
}

// symReduce adds fingerprints elementwise modulo 2^64.
func (r *reducer) symReduce(out []byte, srcs [][]byte) {
	n := len(out) / 8
	r.accS = grow(r.accS, n)
	acc := r.accS[:n]
	clear(acc)
	// Accumulate first, store after: out may overlap a source shifted.
	for _, s := range srcs {
		for i := range acc {
			acc[i] += binary.LittleEndian.Uint64(s[8*i:])
		}
	}
	for i, v := range acc {
		binary.LittleEndian.PutUint64(out[8*i:], v)
	}
}

// symState is the bookkeeping the explanations need: who last wrote each
// input and output byte, and per finished launch the output's writers.
type symState struct {
	writers    [][numArrs]writerMap // [rank][array]; scratch unused
	outWriters [][]writerMap        // [launch][rank], output-relative
	prov       *provenance          // Options.Provenance (stale.go); nil when off
	explained  int                  // wrong elements decoded so far
	lookups    int                  // second-stage decoder lookups so far
}

func (s *sim) symState() *symState {
	if s.sym == nil {
		st := &symState{writers: make([][numArrs]writerMap, len(s.ranks)), outWriters: make([][]writerMap, s.launches)}
		for l := range st.outWriters {
			st.outWriters[l] = make([]writerMap, len(s.ranks))
		}
		s.sym = st
	}
	return s.sym
}

// tkey names one term: an input element, or a poison word.
type tkey struct {
	rank   int
	launch int           // -1 for poison
	elem   int64         // input element index, or poison byte offset
	buf    ir.BufferType // poison only
}

func (k tkey) poison() bool { return k.launch < 0 }

// famKey is a sum of the same input element of a subset of ranks.
type famKey struct {
	launch int
	elem   int64
	mask   uint64
	v      fv // the sum, to check a hit on lane 0 against
}

// keyed is a term with its fingerprint. The decoder's tables are keyed
// by lane 0 (a uint64 key is Go's fast map path, and the lookups of a
// hard element run into millions) and a hit is checked on every lane.
type keyed struct {
	k tkey
	v fv
}

// decoder turns an output fingerprint back into terms for one launch.
type decoder struct {
	s        *sim
	l        int
	single   map[uint64]keyed
	fam      map[uint64]famKey // nil until families runs
	nearFP   map[uint64]keyed  // the element's near terms (decode)
	launches []int             // the launches the tables cover
}

// Table budgets: explanations are for reports, and a 64 MiB run must not
// spend gigabytes on them. Past the budget, rarer hypotheses go first
// (far launches, family subsets, then every input and poison term not at
// the element's offset within some chunk: decode's near terms still
// cover those); what remains reads "not decoded".
const (
	decodeBudget  = 1 << 18
	explainBudget = 4096    // wrong elements decoded per run
	lookupBudget  = 8 << 20 // table lookups for two-defect elements per run
)

func (s *sim) newDecoder(l int) *decoder {
	n := len(s.ranks)
	elems := s.in / 8
	var launches []int
	for _, x := range []int{l, l - 1, l + 1, l - 2} {
		if x >= 0 && x < s.launches && int64(len(launches)+1)*int64(n)*elems <= decodeBudget {
			launches = append(launches, x)
		}
	}
	// Sized up front: growing maps of a million entries rehashes them
	// several times over.
	words := int64(0)
	for _, rs := range s.ranks {
		words += (s.arrLen(rs, arrScratch) + s.arrLen(rs, arrOut) + s.arrLen(rs, arrMain)) / 8
	}
	nSingle := int64(len(launches))*int64(n)*elems + min(words, decodeBudget)
	d := &decoder{s: s, l: l, single: make(map[uint64]keyed, nSingle)}
	for _, x := range launches {
		for q := range n {
			for i := range elems {
				k := tkey{rank: q, launch: x, elem: i}
				v := s.termKey(k)
				d.single[v[0]] = keyed{k, v}
			}
		}
	}
	for _, rs := range s.ranks {
		arrs := []struct {
			arr int
			buf ir.BufferType
		}{{arrScratch, ir.BufScratch}, {s.poisonArr(ir.BufOutput), ir.BufOutput}}
		for _, a := range arrs {
			for x := int64(0); x+8 <= s.arrLen(rs, a.arr) && int64(len(d.single)) < nSingle; x += 8 {
				k := tkey{rank: rs.r, launch: -1, elem: x, buf: a.buf}
				v := s.termKey(k)
				d.single[v[0]] = keyed{k, v}
			}
		}
	}
	d.launches = launches
	return d
}

// families builds, on first need, the sums of the same element of
// several ranks: what a reduction of the wrong chunk or of another
// launch's data yields. Most wrong elements decode without them, and at
// 8 ranks they are the largest table.
func (d *decoder) families() {
	if d.fam != nil {
		return
	}
	s := d.s
	n := len(s.ranks)
	elems := s.in / 8
	d.fam = map[uint64]famKey{}
	c := s.p.Collective
	if c != ir.AllReduce && c != ir.ReduceScatter && c != ir.Reduce || n > 16 {
		return
	}
	full := uint64(1)<<n - 1
	subsets := n <= 10 && int64(len(d.launches))*elems<<n <= decodeBudget
	if subsets {
		d.fam = make(map[uint64]famKey, int64(len(d.launches))*elems<<n)
	}
	fps := make([]fv, n)
	for _, x := range d.launches {
		for i := range elems {
			for q := range n {
				fps[q] = s.termKey(tkey{rank: q, launch: x, elem: i})
			}
			if !subsets {
				var sum fv
				for _, f := range fps {
					sum = s.fpAdd(sum, f)
				}
				d.fam[sum[0]] = famKey{launch: x, elem: i, mask: full, v: sum}
				continue
			}
			for m := uint64(3); m <= full; m++ {
				if m&(m-1) == 0 {
					continue // single terms are in d.single
				}
				var sum fv
				for q := range n {
					if m>>q&1 == 1 {
						sum = s.fpAdd(sum, fps[q])
					}
				}
				d.fam[sum[0]] = famKey{launch: x, elem: i, mask: m, v: sum}
			}
		}
	}
}

// coefVecs lists coefficient vectors for k expected terms, fewest
// deviations from "each once" first, so the first match is the simplest
// explanation. Up to 8 terms every vector over {0, 1, 2} is tried; past
// that, those within two deviations of all-ones or of all-zeroes.
func (d *decoder) coefVecs(k int) [][]int8 {
	if v, ok := coefCache.Load(k); ok {
		return v.([][]int8)
	}
	var out [][]int8
	dev := func(v []int8) int {
		c := 0
		for _, x := range v {
			if x != 1 {
				c++
			}
		}
		return c
	}
	if k <= 8 {
		total := 1
		for range k {
			total *= 3
		}
		for code := range total {
			v := make([]int8, k)
			for i, c := 0, code; i < k; i, c = i+1, c/3 {
				v[i] = int8((c%3 + 1) % 3) // 1 first, then 2, then 0
			}
			out = append(out, v)
		}
	} else {
		seen := map[string]bool{}
		add := func(v []int8) {
			if key := string(func() []byte {
				b := make([]byte, len(v))
				for i, x := range v {
					b[i] = byte(x)
				}
				return b
			}()); !seen[key] {
				seen[key] = true
				out = append(out, v)
			}
		}
		for _, base := range []int8{1, 0} {
			for i := -1; i < k; i++ {
				for j := i; j < k; j++ {
					for _, a := range []int8{0, 1, 2} {
						for _, b := range []int8{0, 1, 2} {
							v := make([]int8, k)
							for x := range v {
								v[x] = base
							}
							if i >= 0 {
								v[i] = a
							}
							if j >= 0 && j != i {
								v[j] = b
							}
							add(v)
						}
					}
				}
			}
		}
	}
	devs := make(map[*int8]int, len(out))
	for _, v := range out {
		devs[&v[0]] = dev(v)
	}
	sort.SliceStable(out, func(a, b int) bool { return devs[&out[a][0]] < devs[&out[b][0]] })
	coefCache.Store(k, out)
	return out
}

// coefCache holds coefVecs by term count; the vectors are never changed.
var coefCache sync.Map

// decode finds the terms of got given the expected terms exp (each once)
// and their fingerprints; it returns got's terms minus exp's, or false.
// First it tries the expected terms with coefficients 0, 1, 2 plus at
// most one other term (or family sum) from the tables; then, while the
// run's lookup budget lasts, one more term from near, the terms at the
// same offset in another chunk (input of any rank and nearby launch,
// poison of scratch and output): two defects in one element, such as a
// wrong chunk and an unwritten slot.
func (d *decoder) decode(got fv, exp []tkey, fps []fv, near []tkey) (map[tkey]int, bool) {
	s := d.s
	vecs := d.coefVecs(len(exp))
	// Lane 0 of every hypothesis's sum (6561 of them at 8 terms): the
	// search runs on lane 0, and a hit is checked on every lane.
	sums := make([]uint64, len(vecs))
	for k, v := range vecs {
		a := uint64(0)
		for i, c := range v {
			for range c { // c is 0, 1 or 2
				a = s.add0(a, fps[i][0])
			}
		}
		sums[k] = a
	}
	full := func(k int) fv {
		var a fv
		for i, c := range vecs[k] {
			for range c {
				a = s.fpAdd(a, fps[i])
			}
		}
		return a
	}
	// Cheap hypotheses for every coefficient vector first, then the
	// family sums, built only now.
	// The near terms are looked up in their own small table: at large
	// sizes the global one leaves out input terms (decodeBudget).
	d.nearFP = make(map[uint64]keyed, len(near))
	nearFPs := make([]fv, len(near))
	for k, y := range near {
		nearFPs[k] = s.termKey(y)
		d.nearFP[nearFPs[k][0]] = keyed{y, nearFPs[k]}
	}
	for k, v := range vecs {
		if extra, ok := d.rest(s.sub0(got[0], sums[k]), func() fv { return s.fpSub(got, full(k)) }, false); ok {
			return d.diff(exp, v, extra), true
		}
	}
	d.families()
	for k, v := range vecs {
		if extra, ok := d.rest(s.sub0(got[0], sums[k]), func() fv { return s.fpSub(got, full(k)) }, true); ok {
			return d.diff(exp, v, extra), true
		}
	}
	// Two extra terms with up to 8 ranks' worth of missing and doubled
	// contributions would be millions of lookups per element: keep the
	// vectors closest to "each once" (they come first).
	st := d.s.symState()
	few := vecs[:min(len(vecs), 256)]
	for j, y := range near {
		if st.lookups += len(few); st.lookups > lookupBudget {
			return nil, false
		}
		for k, v := range few {
			r0 := s.sub0(s.sub0(got[0], sums[k]), nearFPs[j][0])
			if extra, ok := d.rest(r0, func() fv { return s.fpSub(s.fpSub(got, full(k)), nearFPs[j]) }, true); ok {
				return d.diff(exp, v, append(extra, y)), true
			}
		}
	}
	return nil, false
}

// rest decodes a remainder as nothing, one term or (with fam) one family
// sum: r0 is its lane 0, rem computes every lane to check a hit.
func (d *decoder) rest(r0 uint64, rem func() fv, fam bool) ([]tkey, bool) {
	if r0 == 0 && rem() == (fv{}) {
		return nil, true
	}
	if x, ok := d.single[r0]; ok && x.v == rem() {
		return []tkey{x.k}, true
	}
	if x, ok := d.nearFP[r0]; ok && x.v == rem() {
		return []tkey{x.k}, true
	}
	if !fam {
		return nil, false
	}
	f, ok := d.fam[r0]
	if !ok || f.v != rem() {
		return nil, false
	}
	var extra []tkey
	for q := range len(d.s.ranks) {
		if f.mask>>q&1 == 1 {
			extra = append(extra, tkey{rank: q, launch: f.launch, elem: f.elem})
		}
	}
	return extra, true
}

// diff is got's terms (exp with coefficients v, plus extra) minus exp.
func (d *decoder) diff(exp []tkey, v []int8, extra []tkey) map[tkey]int {
	diff := map[tkey]int{}
	for i, c := range v {
		if c != 1 {
			diff[exp[i]] += int(c) - 1
		}
	}
	for _, x := range extra {
		diff[x]++
	}
	for k, c := range diff {
		if c == 0 {
			delete(diff, k)
		}
	}
	return diff
}

// near lists the terms at the same offset within another chunk as
// input element e: every rank's input in nearby launches, and poison in
// every rank's scratch (both halves, plain and packet offsets) and
// output. These are what a second defect in one element most often adds.
func (d *decoder) near(e int64) []tkey {
	s := d.s
	var out []tkey
	lay := s.ranks[0].lay
	c0 := s.chunkAt(0, 8*e)
	intra := 8*e - lay.ChunkOffset(int64(c0))
	var launches []int
	for _, x := range []int{d.l, d.l - 1, d.l + 1, d.l - 2} {
		if x >= 0 && x < s.launches {
			launches = append(launches, x)
		}
	}
	for c := int64(0); ; c++ {
		off := lay.ChunkOffset(c) + intra
		// Uniform scratch puts slot c at c times the largest chunk.
		soff := off
		if lay.UniformScratch {
			soff = c*lay.MaxChunk() + intra
		}
		if off+8 > max(s.in, s.out) && soff+8 > lay.Scratch {
			break
		}
		for _, rs := range s.ranks {
			if off+8 <= s.in {
				for _, x := range launches {
					out = append(out, tkey{rank: rs.r, launch: x, elem: off / 8})
				}
			}
			if o := rs.outBase + off; o+8 <= s.arrLen(rs, s.poisonArr(ir.BufOutput)) {
				out = append(out, tkey{rank: rs.r, launch: -1, elem: o, buf: ir.BufOutput})
			}
			for _, raw := range []int64{soff, 2 * soff, rs.half + soff, rs.half + 2*soff} {
				if raw%8 == 0 && raw+8 <= s.arrLen(rs, arrScratch) {
					out = append(out, tkey{rank: rs.r, launch: -1, elem: raw, buf: ir.BufScratch})
				}
			}
		}
	}
	return out
}

// keyFP is the fingerprint of a term key.
func (s *sim) keyFP(k tkey) uint64 {
	if !k.poison() {
		return s.termFP(k)
	}
	return poisonFP(s.opt.Seed, k.rank, s.poisonArr(k.buf), k.elem)
}

// poisonArr is the backing array of a poison term's buffer: in place, the
// output shares the input's array.
func (s *sim) poisonArr(buf ir.BufferType) int {
	switch {
	case buf != ir.BufOutput:
		return arrScratch
	case s.p.InPlace:
		return arrMain
	}
	return arrOut
}

// expTerms lists the terms the definition puts into output element i of
// rank r in launch l (collective.go's expected, term by term).
func (s *sim) expTerms(l, r int, i int64) []tkey {
	n := len(s.ranks)
	inE, outE := s.in/8, s.out/8
	switch s.p.Collective {
	case ir.AllReduce:
		return famTerms(n, l, i)
	case ir.ReduceScatter:
		return famTerms(n, l, int64(r)*outE+i)
	case ir.AllGather:
		return []tkey{{rank: int(i / inE), launch: l, elem: i % inE}}
	case ir.AllToAll:
		blk := inE / int64(n)
		return []tkey{{rank: int(i / blk), launch: l, elem: int64(r)*blk + i%blk}}
	case ir.SendRecv:
		for q := range n {
			if s.p.Peer(q) == r {
				return []tkey{{rank: q, launch: l, elem: i}}
			}
		}
	case ir.Broadcast:
		return []tkey{{rank: s.p.Root, launch: l, elem: i}}
	case ir.Reduce:
		if r == s.p.Root {
			return famTerms(n, l, i)
		}
		return []tkey{{rank: r, launch: l, elem: i}} // in place: its own input
	case ir.Gather:
		if r == s.p.Root {
			return []tkey{{rank: int(i / inE), launch: l, elem: i % inE}}
		}
		return []tkey{{rank: r, launch: l, elem: i - int64(r)*inE}} // in place: its own input
	case ir.Scatter:
		return []tkey{{rank: s.p.Root, launch: l, elem: int64(r)*outE + i}}
	}
	return nil
}

func famTerms(n, l int, i int64) []tkey {
	t := make([]tkey, n)
	for q := range t {
		t[q] = tkey{rank: q, launch: l, elem: i}
	}
	return t
}

func (s *sim) termFP(k tkey) uint64 {
	return inputFP(s.opt.Seed, k.rank, k.launch, k.elem)
}

// toTerms sorts a difference into report form.
func toTerms(diff map[tkey]int) []Term {
	var ts []Term
	for k, c := range diff {
		t := Term{Rank: k.rank, Launch: k.launch, Elem: k.elem, Count: c}
		if k.poison() {
			t.Launch, t.Poison, t.Buffer = 0, true, k.buf
		}
		ts = append(ts, t)
	}
	sort.Slice(ts, func(a, b int) bool {
		x, y := ts[a], ts[b]
		if x.Poison != y.Poison {
			return !x.Poison
		}
		if x.Count < 0 != (y.Count < 0) {
			return x.Count < 0
		}
		if x.Launch != y.Launch {
			return x.Launch < y.Launch
		}
		if x.Elem != y.Elem {
			return x.Elem < y.Elem
		}
		if x.Rank != y.Rank {
			return x.Rank < y.Rank
		}
		// Two poison terms of one rank at one offset differ in buffer:
		// order them too, or the words follow map order.
		if x.Buffer != y.Buffer {
			return x.Buffer < y.Buffer
		}
		return x.Count < y.Count
	})
	return ts
}

// chunkAt is the chunk holding byte off of rank's buffers (all buffers
// use the reference geometry, so one search serves input and output).
func (s *sim) chunkAt(rank int, off int64) int {
	lay := s.ranks[rank].lay
	hi := off/max(lay.Align, 1) + 2
	return sort.Search(int(hi), func(c int) bool { return lay.ChunkOffset(int64(c)+1) > off })
}

// span is a run of consecutive output elements [i0, i0+n) that a finding
// covers, for wording.
type span struct {
	rank   int // the output's rank, for chunk numbers
	i0, n  int64
	launch int
}

// elems names n consecutive elements from i of rank's buffers with their
// chunks: "element 37 (chunk 5)", "elements 32–47 (chunks 2–3)".
func (s *sim) elems(rank int, i, n int64) string {
	c0 := s.chunkAt(rank, 8*i)
	if n <= 1 {
		return fmt.Sprintf("element %d (chunk %d)", i, c0)
	}
	c1 := s.chunkAt(rank, 8*(i+n-1))
	if c0 == c1 {
		return fmt.Sprintf("elements %d–%d (chunk %d)", i, i+n-1, c0)
	}
	return fmt.Sprintf("elements %d–%d (chunks %d–%d)", i, i+n-1, c0, c1)
}

// who names a set of ranks, folding long lists.
func who(ranks []int, n int) string {
	sort.Ints(ranks)
	switch {
	case len(ranks) == 1:
		return fmt.Sprintf("rank %d", ranks[0])
	case len(ranks) == n && n > 2:
		return "every rank"
	case len(ranks) <= 4:
		var b strings.Builder
		for i, r := range ranks {
			switch {
			case i == 0:
			case i == len(ranks)-1:
				b.WriteString(" and ")
			default:
				b.WriteString(", ")
			}
			fmt.Fprint(&b, r)
		}
		return "ranks " + b.String()
	}
	return fmt.Sprintf("ranks %d, %d, %d and %d more ranks", ranks[0], ranks[1], ranks[2], len(ranks)-3)
}

// possessive: "rank 3's", "every rank's", "ranks 1 and 2's".
func possessive(ranks []int, n int) string { return who(ranks, n) + "'s" }

// explain words a difference (Terms of the first element of sp) for the
// output elements of sp.
func (s *sim) explain(terms []Term, sp span) string {
	n := len(s.ranks)
	out := s.elems(sp.rank, sp.i0, sp.n)
	type rep struct {
		miss, got Term
	}
	var missing, extra []Term
	for _, t := range terms {
		if t.Count < 0 {
			missing = append(missing, t)
		} else {
			extra = append(extra, t)
		}
	}
	// Pair a missing contribution with an extra one of the same rank:
	// the element holds the wrong data rather than lacking some.
	var reps []rep
	pair := func(match func(m, x Term) bool) {
		for mi := 0; mi < len(missing); mi++ {
			m := missing[mi]
			for xi, x := range extra {
				if x.Poison || x.Count != 1 || m.Count != -1 || !match(m, x) {
					continue
				}
				reps = append(reps, rep{m, x})
				missing = append(missing[:mi], missing[mi+1:]...)
				extra = append(extra[:xi], extra[xi+1:]...)
				mi--
				break
			}
		}
	}
	pair(func(m, x Term) bool { return m.Rank == x.Rank && m.Launch == x.Launch })
	pair(func(m, x Term) bool { return m.Rank == x.Rank })
	if len(missing) == 1 && len(extra) == 1 {
		pair(func(m, x Term) bool { return true })
	}
	var phrases []string
	// rkey is a replacement but for the rank: replacements of the same
	// element by the same other element fold over ranks. Across ranks
	// (missRank >= 0) each pair stays its own.
	type rkey struct {
		me, xe            int64
		ml, xl            int
		missRank, gotRank int
	}
	groups := map[rkey][]int{}
	var order []rkey
	for _, p := range reps {
		k := rkey{me: p.miss.Elem, xe: p.got.Elem, ml: p.miss.Launch, xl: p.got.Launch, missRank: -1, gotRank: -1}
		if p.miss.Rank != p.got.Rank {
			k.missRank, k.gotRank = p.miss.Rank, p.got.Rank
		}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], p.got.Rank)
	}
	for _, k := range order {
		rs := groups[k]
		switch {
		case k.missRank >= 0:
			from := ""
			if k.xl != k.ml {
				from = fmt.Sprintf(" from launch %d", k.xl)
			}
			phrases = append(phrases, fmt.Sprintf("holds rank %d's %s%s instead of rank %d's %s (wrong rank)",
				k.gotRank, s.elems(k.gotRank, k.xe, sp.n), from, k.missRank, s.elems(k.missRank, k.me, sp.n)))
		case k.me == k.xe:
			phrases = append(phrases, fmt.Sprintf("stale: %s input from launch %d in launch %d, at %s",
				possessive(rs, n), k.xl, k.ml, s.elems(rs[0], k.me, sp.n)))
		default:
			what := "wrong chunk"
			if s.chunkAt(rs[0], 8*k.me) == s.chunkAt(rs[0], 8*k.xe) {
				what = "wrong offset in the chunk"
			}
			if k.xl != k.ml {
				what += fmt.Sprintf(", and from launch %d", k.xl)
			}
			phrases = append(phrases, fmt.Sprintf("holds %s %s instead of %s: %s",
				possessive(rs, n), s.elems(rs[0], k.xe, sp.n), s.elems(rs[0], k.me, sp.n), what))
		}
	}
	// Missing contributions, grouped over ranks.
	var mr []int
	for _, m := range missing {
		mr = append(mr, m.Rank)
	}
	if len(mr) == 1 {
		phrases = append(phrases, fmt.Sprintf("rank %d's contribution to output %s is missing", mr[0], out))
	} else if len(mr) > 1 {
		phrases = append(phrases, fmt.Sprintf("the contributions of %s to output %s are missing", who(mr, n), out))
	}
	// Extra terms: doubled expected contributions, poison, others.
	exp := map[tkey]bool{}
	for _, k := range s.expTerms(sp.launch, sp.rank, sp.i0) {
		exp[k] = true
	}
	twice := map[int][]int{}
	var poison []string
	for _, x := range extra {
		switch {
		case x.Poison:
			if sp.n > 1 {
				poison = append(poison, fmt.Sprintf("rank %d %s bytes [%d:%d)", x.Rank, x.Buffer.Long(), x.Elem, x.Elem+8*sp.n))
			} else {
				poison = append(poison, fmt.Sprintf("rank %d %s byte %d", x.Rank, x.Buffer.Long(), x.Elem))
			}
		case exp[tkey{rank: x.Rank, launch: x.Launch, elem: x.Elem}]:
			twice[x.Count] = append(twice[x.Count], x.Rank)
		default:
			times := ""
			if x.Count > 1 {
				times = fmt.Sprintf(" %d times", x.Count)
			}
			phrases = append(phrases, fmt.Sprintf("includes rank %d's %s of launch %d%s, which does not belong here",
				x.Rank, s.elems(x.Rank, x.Elem, sp.n), x.Launch, times))
		}
	}
	var counts []int
	for c := range twice {
		counts = append(counts, c)
	}
	sort.Ints(counts)
	for _, c := range counts {
		rs := twice[c]
		times := "twice"
		if c > 1 {
			times = fmt.Sprintf("%d times", c+1)
		}
		if len(rs) == 1 {
			phrases = append(phrases, fmt.Sprintf("rank %d's contribution added %s", rs[0], times))
		} else {
			phrases = append(phrases, fmt.Sprintf("the contributions of %s added %s", who(rs, n), times))
		}
	}
	if len(poison) > 0 {
		more := ""
		if len(poison) > 3 {
			more = fmt.Sprintf(" and %d more", len(poison)-3)
			poison = poison[:3]
		}
		phrases = append(phrases, fmt.Sprintf("includes bytes nobody wrote (poison from %s%s)", strings.Join(poison, ", "), more))
	}
	return strings.Join(phrases, "; ")
}

// explainAt words a wrong element or range with what its writer says:
// nothing wrote it, or nothing in this launch.
func (s *sim) explainAt(terms []Term, sp span, writer *Place, wl int) string {
	var pre string
	switch {
	case writer == nil:
		pre = "no op wrote it; "
	case wl != sp.launch:
		pre = fmt.Sprintf("no op wrote it in launch %d (last written in launch %d); ", sp.launch, wl)
	}
	if terms == nil {
		return pre + "not decoded: no combination of the expected contributions, other elements of nearby launches and poison that the decoder tries"
	}
	return pre + s.explain(terms, sp)
}

// shapeOf is a difference relative to output element i: consecutive
// elements with the same shape have the same explanation shifted by one
// element, so they fold into one finding.
func shapeOf(terms []Term, i int64) string {
	var b strings.Builder
	for _, t := range terms {
		rel := t.Elem - i
		if t.Poison {
			rel = t.Elem - 8*i
		}
		fmt.Fprintf(&b, "%d/%d/%d/%d/%t/%d;", t.Rank, t.Launch, rel, t.Count, t.Poison, t.Buffer)
	}
	return b.String()
}

// shiftTerms moves a difference d elements on: input terms by d
// elements, poison by d words.
func shiftTerms(ts []Term, d int64) []Term {
	out := make([]Term, len(ts))
	for k, t := range ts {
		if t.Poison {
			t.Elem += 8 * d
		} else {
			t.Elem += d
		}
		out[k] = t
	}
	return out
}

// predicts reports whether got = want + the difference base shifted by d
// elements, without building the shifted terms.
func (s *sim) predicts(base []Term, d int64, got, want []byte) bool {
	v := binary.LittleEndian.Uint64(want)
	for _, t := range base {
		k := tkey{rank: t.Rank, launch: t.Launch, elem: t.Elem + d}
		if t.Poison {
			k = tkey{rank: t.Rank, launch: -1, elem: t.Elem + 8*d, buf: t.Buffer}
		}
		v += uint64(int64(t.Count)) * s.keyFP(k)
	}
	return v == binary.LittleEndian.Uint64(got)
}
