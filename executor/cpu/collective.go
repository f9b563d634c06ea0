package cpu

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"sync"

	"github.com/msccl-go/msccl-go/internal/diag"
	"github.com/msccl-go/msccl-go/ir"
)

// Input returns the bytes Run feeds rank's input buffer on the given
// launch. Float types get small integers in [-8, 8] so that every sum,
// whatever its order or intermediate rounding, is exact in f16 and bf16 up
// to 16 ranks; integer types get [-8, 8] (i32) or [0, 15] (u32, u8). FP8
// holds few integers exactly (every one up to 16 in E4M3, up to 8 in
// E5M2), so FP8 inputs are 0 or 1 on even ranks and 0 or -1 on odd ones:
// any partial sum of any subset of ranks then lies in [-n/2, n/2], exact
// up to 32 ranks in E4M3 and 16 in E5M2 (no -0 either, whose order
// against +0 Go's min and the GPU's compare would not agree on). With
// opt.Symbolic it returns the fingerprints instead (symbolic.go).
func Input(p *ir.Plan, opt Options, launch, rank int) ([]byte, error) {
	if p == nil || rank < 0 || rank >= len(p.GPUs) {
		return nil, fmt.Errorf("rank %d out of range", rank)
	}
	if opt.Symbolic {
		opt.DType = symType
	}
	if !validType(opt.DType) {
		return nil, fmt.Errorf("unsupported data type %d", opt.DType)
	}
	in, _, err := p.BufferBytes(opt.Size)
	if err != nil {
		return nil, err
	}
	if in%int64(opt.DType.Size()) != 0 {
		return nil, fmt.Errorf("input of %d bytes is not whole %s elements", in, opt.DType)
	}
	return makeInput(opt.DType, opt.Seed, launch, rank, in), nil
}

func splitmix(x *uint64) uint64 {
	*x += 0x9e3779b97f4a7c15
	z := *x
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

func makeInput(dt DType, seed uint64, launch, rank int, n int64) []byte {
	return fillInput(dt, seed, launch, rank, make([]byte, n))
}

// fillInput writes the deterministic input of (seed, launch, rank) into out:
// the values Input documents, so that a correct plan's output equals the
// collective's definition bit for bit.
//
// Drawing every element costs about 2 ns, which at 64 MiB per rank and ten
// launches made input generation a third of the GPU oracle's time; so the
// input is instead 4 KiB pieces copied from a 1 MiB table of drawn elements,
// each piece at a random element offset. Two chunks of a plan still hold
// different data unless two 64-bit draws collide.
func fillInput(dt DType, seed uint64, launch, rank int, out []byte) []byte {
	if dt == symType {
		return fillSym(seed, launch, rank, out)
	}
	tab, w := pieceWalk(dt, seed, launch, rank)
	for off := 0; off < len(out); off += inputPiece {
		copy(out[off:min(off+inputPiece, len(out))], tab[w.next():])
	}
	return out
}

const (
	inputPiece     = 4 << 10 // a multiple of every element size
	inputTableSize = 1 << 20
)

type tableKey struct {
	dt   DType
	seed uint64
	neg  bool // FP8 on odd ranks: the values negated (see Input)
}

// inputTables caches one table per (type, seed); tests run many sizes and
// launches with the same few seeds.
var inputTables sync.Map // tableKey -> []byte

func inputTable(dt DType, seed uint64, neg bool) []byte {
	k := tableKey{dt, seed, neg}
	if t, ok := inputTables.Load(k); ok {
		return t.([]byte)
	}
	t, _ := inputTables.LoadOrStore(k, drawElements(dt, seed, neg, make([]byte, inputTableSize)))
	return t.([]byte)
}

// drawElements fills out with independent draws from the 17 input values
// (for FP8, the 17 draws map onto 0 and 1, or 0 and -1 when neg).
func drawElements(dt DType, seed uint64, neg bool, out []byte) []byte {
	n := int64(len(out))
	st := seed ^ 0x5851f42d4c957f2d
	splitmix(&st)
	// Encode the 17 possible values once; each element is then a copy.
	sz := int64(dt.Size())
	var enc [17][4]byte
	for k := range enc {
		v := int64(k) - 8
		switch dt {
		case F32:
			binary.LittleEndian.PutUint32(enc[k][:], math.Float32bits(float32(v)))
		case F16:
			binary.LittleEndian.PutUint16(enc[k][:], f32ToF16(float32(v)))
		case BF16:
			binary.LittleEndian.PutUint16(enc[k][:], f32ToBF16(float32(v)))
		case I32:
			binary.LittleEndian.PutUint32(enc[k][:], uint32(int32(v)))
		case U32:
			binary.LittleEndian.PutUint32(enc[k][:], uint32(k%16))
		case U8:
			enc[k][0] = byte(k % 16)
		case F8E4M3, F8E5M2:
			f := float32(k % 2)
			if neg && f != 0 {
				f = -f // -1, but +0 stays +0
			}
			if dt == F8E4M3 {
				enc[k][0] = f32ToF8E4M3(f)
			} else {
				enc[k][0] = f32ToF8E5M2(f)
			}
		}
	}
	// One 64-bit draw gives four 16-bit ones; their bias mod 17 is 1 in
	// 3855, irrelevant here.
	var x uint64
	left := 0
	next := func() *[4]byte {
		if left == 0 {
			x, left = splitmix(&st), 4
		}
		v := x & 0xffff
		x >>= 16
		left--
		return &enc[v%17]
	}
	switch sz {
	case 1:
		for i := range out {
			out[i] = next()[0]
		}
	case 2:
		for i := int64(0); i+2 <= n; i += 2 {
			e := next()
			out[i], out[i+1] = e[0], e[1]
		}
	default:
		for i := int64(0); i+4 <= n; i += 4 {
			binary.LittleEndian.PutUint32(out[i:], binary.LittleEndian.Uint32(next()[:]))
		}
	}
	return out
}

// expected computes every rank's output of one launch from its inputs,
// by the collective's definition. A nil entry is an output the definition
// leaves undefined; an entry may also define only part of an output, the
// bytes from outAt(rank) on (an in-place gather's non-root ranks).
//
// Rooted collectives follow NCCL: broadcast copies the root's input to
// every output; reduce reduces every input into the root's output;
// gather concatenates the inputs, rank order, into the root's output;
// scatter gives rank r chunk r of the root's input (the n-th parts of it
// in rank order). The receive buffers of the other ranks in reduce and
// gather are not part of the result (NCCL does not even require them), so
// a plan may leave them alone or use them as temporary space; but in
// place they hold the rank's own input, which the collective must leave
// intact (NCCL's in-place reduce and gather do not modify non-root
// inputs), so those bytes are checked to be that input. Sendrecv: rank r
// sends its input to Plan.Peer(r), so the output of Peer(r) is r's input.
func (s *sim) expected(ins [][]byte) ([][]byte, error) {
	n := len(ins)
	outs := make([][]byte, n)
	// The arena is reused launch after launch: at 64 MiB per rank, fresh
	// buffers cost more in page faults than the reduction itself.
	take := func(k int64) []byte {
		s.expArena = grow(s.expArena, int(k))
		return s.expArena[:k]
	}
	root := s.p.Root
	switch s.p.Collective {
	case ir.AllReduce, ir.Reduce:
		red := take(s.in)
		s.rd.reduce(s.opt.DType, s.red, red, ins)
		for r := range outs {
			switch {
			case s.p.Collective == ir.AllReduce || r == root:
				outs[r] = red
			case s.p.InPlace:
				outs[r] = ins[r]
			}
		}
	case ir.AllGather, ir.Gather:
		all := take(int64(n) * s.in)[:0]
		for _, in := range ins {
			all = append(all, in...)
		}
		for r := range outs {
			switch {
			case s.p.Collective == ir.AllGather || r == root:
				outs[r] = all
			case s.p.InPlace:
				outs[r] = ins[r] // at outAt(r), where the input lives
			}
		}
	case ir.ReduceScatter:
		arena := take(int64(n) * s.out)
		parts := make([][]byte, n)
		for r := range outs {
			for q := range ins {
				parts[q] = ins[q][int64(r)*s.out : int64(r+1)*s.out]
			}
			outs[r] = arena[int64(r)*s.out : int64(r+1)*s.out]
			s.rd.reduce(s.opt.DType, s.red, outs[r], parts)
		}
	case ir.Scatter:
		for r := range outs {
			outs[r] = ins[root][int64(r)*s.out : int64(r+1)*s.out]
		}
	case ir.AllToAll:
		blk := s.in / int64(n)
		arena := take(int64(n) * s.out)
		for r := range outs {
			outs[r] = arena[int64(r)*s.out : int64(r+1)*s.out]
			for q := range ins {
				copy(outs[r][int64(q)*blk:], ins[q][int64(r)*blk:int64(r+1)*blk])
			}
		}
	case ir.SendRecv:
		for r := range outs {
			outs[s.p.Peer(r)] = ins[r]
		}
	case ir.Broadcast:
		for r := range outs {
			outs[r] = ins[root]
		}
	default:
		return nil, fmt.Errorf("collective %q has no definition to check against", s.p.Collective)
	}
	return outs, nil
}

// outAt is the byte offset in rank's output where expected's entry for it
// starts: 0 but for an in-place gather's non-root ranks, whose defined
// bytes are their own input, chunk rank of the shared buffer.
func (s *sim) outAt(rank int) int64 {
	if s.p.Collective == ir.Gather && s.p.InPlace && rank != s.p.Root {
		return int64(rank) * s.in
	}
	return 0
}

// checkSizes refuses sizes whose expected result is not defined, and
// roots and peer maps that name no rank (a plan that skipped Validate:
// expected must not index out of range).
func (s *sim) checkSizes() error {
	n := int64(len(s.p.GPUs))
	sz := int64(s.opt.DType.Size())
	if s.p.Collective.Rooted() && (s.p.Root < 0 || int64(s.p.Root) >= n) {
		return fmt.Errorf("root %d out of range: the plan has %d gpus", s.p.Root, n)
	}
	if s.p.Peers != nil {
		seen := make([]bool, n)
		for r := range n {
			q := s.p.Peer(int(r))
			if int64(len(s.p.Peers)) != n || q != s.p.Peers[r] || seen[q] {
				return fmt.Errorf("peers %v is not a permutation of the %d ranks", s.p.Peers, n)
			}
			seen[q] = true
		}
	}
	switch s.p.Collective {
	case ir.AllToAll:
		if s.in%(n*sz) != 0 {
			return diag.Errorc(diag.CodeSizeRefused, "alltoall size %d is not a whole number of %s elements per rank", s.in, s.opt.DType)
		}
	case ir.SendRecv, ir.Broadcast, ir.AllReduce, ir.Reduce:
		if s.in != s.out {
			return fmt.Errorf("%s needs equal input and output sizes", s.p.Collective)
		}
	case ir.AllGather, ir.ReduceScatter, ir.Gather, ir.Scatter:
		if s.p.Collective.Scatters() && (s.in/n)%sz != 0 || s.out%sz != 0 {
			return diag.Errorc(diag.CodeSizeRefused, "%s size is not a whole number of %s elements per rank", s.p.Collective, s.opt.DType)
		}
	default:
		return fmt.Errorf("collective %q has no definition to check against", s.p.Collective)
	}
	return nil
}

// check compares every launch still held with the definition (a
// streaming run has checked and dropped its launches already).
func (s *sim) check() {
	defer s.placeStaleReads()
	if s.field != nil {
		for l := range s.vout {
			s.checkRanges(l)
		}
		return
	}
	for l := range s.report.Outputs {
		if s.report.Outputs[l] != nil {
			s.checkLaunch(l)
		}
	}
}

// checkLaunch compares one launch's outputs with the definition, records
// each wrong element's last writer, decodes it in symbolic runs, and folds
// the wrong elements into findings.
func (s *sim) checkLaunch(l int) {
	if s.opt.cons != nil {
		s.consCheck(l) // the values are trees or random floats, not the definition's
		return
	}
	r := s.report
	st := s.symState()
	defer func() { st.outWriters[l] = nil }()
	if s.checkFast(l) {
		return
	}
	sz := int64(s.opt.DType.Size())
	sym := s.opt.DType == symType
	want, err := s.expected(s.inputsOf(l))
	if err != nil {
		return
	}
	var dec *decoder
	for rank, got := range r.Outputs[l] {
		w, at := want[rank], s.outAt(rank)
		if got == nil || w == nil || bytes.Equal(got[at:at+int64(len(w))], w) {
			continue
		}
		if at > 0 {
			// w is the expected content of got[at:]: shift it so that the
			// output's own offsets index it below (the bytes before at are
			// not compared). Only a wrong result gets here.
			w = append(make([]byte, at, at+int64(len(w))), w...)
		}
		first := len(r.Findings)
		// The open finding, and its writer (place index) and pattern.
		open, openWP, openWL, openShape := -1, int32(-1), -1, ""
		// The decoded run: base's terms at element baseI, shifted by one
		// element per element, predicted the elements up to lastI.
		var base []Term
		baseI, lastI, baseShape := int64(0), int64(-2), ""
		for off := at; off+sz <= int64(len(w)); off += sz {
			if bytes.Equal(got[off:off+sz], w[off:off+sz]) {
				continue
			}
			r.WrongTotal++
			i := off / sz
			keep := len(r.Wrong) < maxMismatches
			if !keep && open < 0 && len(r.Findings) >= maxFindings {
				continue // counted; nothing more will be reported
			}
			wp, wl := int32(-1), -1
			if g, ok := st.outWriters[l][rank].at(off); ok {
				wp, wl = g.place, int(g.launch)
			}
			sh := "value"
			if sym {
				// An element that continues a decoded run usually has the
				// same defect one element on: checking that costs a few
				// hashes, decoding from scratch thousands of lookups.
				switch {
				case base != nil && lastI == i-1 && s.predicts(base, i-baseI, got[off:], w[off:]):
					sh = baseShape
				case st.explained < explainBudget:
					st.explained++
					if dec == nil {
						dec = s.newDecoder(l)
					}
					base, sh = nil, "undecoded"
					exp := s.expTerms(l, rank, i)
					fps := make([]fv, len(exp))
					for k, t := range exp {
						fps[k] = s.termKey(t)
					}
					if diff, ok := dec.decode(fv{binary.LittleEndian.Uint64(got[off:])}, exp, fps, dec.near(exp[0].elem)); ok {
						base, baseI = toTerms(diff), i
						sh = shapeOf(base, i)
						baseShape = sh
					}
				default:
					base, sh = nil, "undecoded"
				}
				lastI = i
			}
			var terms []Term
			if base != nil {
				terms = shiftTerms(base, i-baseI)
			}
			var writer *Place
			if wp >= 0 {
				pl := s.place(wp)
				writer = &pl
			}
			// Fold into the open finding when this element continues it
			// with the same writer and the same pattern.
			if open >= 0 {
				if r.Findings[open].End == off && sh == openShape && wp == openWP && wl == openWL {
					r.Findings[open].End += sz
					r.Findings[open].Elems++
				} else {
					open = -1
				}
			}
			if open < 0 && len(r.Findings) < maxFindings {
				r.Findings = append(r.Findings, Finding{Launch: l, Rank: rank, Off: off, End: off + sz, Elems: 1,
					Writer: writer, WriterLaunch: wl, Terms: terms,
					Explain: fmt.Sprintf("got %s, want %s (first element)", formatElem(s.opt.DType, got[off:]), formatElem(s.opt.DType, w[off:]))})
				open, openWP, openWL, openShape = len(r.Findings)-1, wp, wl, sh
			}
			if keep {
				m := Mismatch{Launch: l, Rank: rank, Off: off, Elem: i, Chunk: s.chunkAt(rank, off), Writer: writer, WriterLaunch: wl,
					Got: formatElem(s.opt.DType, got[off:]), Want: formatElem(s.opt.DType, w[off:]), Terms: terms}
				if sym {
					m.Explain = s.explainAt(terms, span{rank: rank, i0: i, n: 1, launch: l}, writer, wl)
				}
				r.Wrong = append(r.Wrong, m)
			}
		}
		if sym {
			for k := first; k < len(r.Findings); k++ {
				f := &r.Findings[k]
				f.Explain = s.explainAt(f.Terms, span{rank: rank, i0: f.Off / sz, n: int64(f.Elems), launch: l}, f.Writer, f.WriterLaunch)
			}
		}
	}
}
