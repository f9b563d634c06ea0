package cpu

import (
	"math"
	"sync"
)

// recipe is one launch's inputs as fillInput built them: per rank the
// table and the table offset of every piece. The byte-level check reads
// inputs through it (fastcheck.go) instead of through 64 MiB copies: a
// piece is 4 KiB of a 1 MiB table that stays in the cache.
type recipe struct {
	tabs [][]byte  // per rank
	at   [][]int64 // per rank: table offset of each piece
	vals [][]byte  // per rank: valueTable of tabs[rank], nil when unusable
}

// recipeFor fills s.rec with launch l's recipe (its slices are reused).
func (s *sim) recipeFor(l int) *recipe {
	n := len(s.ranks)
	rc := &s.rec
	if len(rc.tabs) != n {
		rc.tabs, rc.at, rc.vals = make([][]byte, n), make([][]int64, n), make([][]byte, n)
	}
	for r := range n {
		rc.tabs[r], rc.at[r] = InputPieces(s.opt.DType, s.opt.Seed, l, r, s.in, rc.at[r])
		rc.vals[r] = valueTable(s.opt.DType, s.opt.Seed, s.opt.DType.IsFP8() && r%2 == 1)
	}
	return rc
}

// pieceOf is where input byte a of rank r lives in its table, and how
// many bytes from there on belong to the same piece.
func (rc *recipe) pieceOf(r int, a int64) (off, left int64) {
	p, o := a/inputPiece, a%inputPiece
	return rc.at[r][p] + o, inputPiece - o
}

// equalInput says whether got equals rank r's input from byte a on.
func (rc *recipe) equalInput(got []byte, r int, a int64) bool {
	for len(got) > 0 {
		off, left := rc.pieceOf(r, a)
		k := min(left, int64(len(got)))
		if string(got[:k]) != string(rc.tabs[r][off:off+k]) {
			return false
		}
		got, a = got[k:], a+k
	}
	return true
}

// isInput says whether b holds rank's input of launch (fillInput's
// bytes), comparing piece by piece with the table instead of building
// them.
func isInput(dt DType, seed uint64, launch, rank int, b []byte) bool {
	tab, w := pieceWalk(dt, seed, launch, rank)
	for off := 0; off < len(b); off += inputPiece {
		end := min(off+inputPiece, len(b))
		at := w.next()
		if string(b[off:end]) != string(tab[at:at+end-off]) {
			return false
		}
	}
	return true
}

// Values of the input tables, for the exact check: every input element
// is a small integer (Input: [-8, 8], or [0, 15] for the unsigned
// types), stored biased by valueBias as one byte per element, so that
// sums of up to 15 ranks and minima and maxima of any number fit a byte
// lane (fastcheck.go adds and compares eight elements per 64-bit word).
const valueSpan = 16 // the largest biased value

// valueBias shifts dt's input values to [0, valueSpan].
func valueBias(dt DType) int64 {
	if dt == U32 || dt == U8 {
		return 0
	}
	return 8
}

var valueTables sync.Map // tableKey -> []byte (nil: not small integers)

// valueTable is the biased value of every element of inputTable(dt,
// seed, neg), decoded from the table's bytes (not from the draws, so it
// holds whatever the table holds), or nil when an element is not an
// integer in range: the exact check then stands aside.
func valueTable(dt DType, seed uint64, neg bool) []byte {
	k := tableKey{dt, seed, neg}
	if v, ok := valueTables.Load(k); ok {
		return v.([]byte)
	}
	ints, ok := tableInts(dt, inputTable(dt, seed, neg))
	var vals []byte
	if ok {
		vals = make([]byte, len(ints))
		bias := valueBias(dt)
		for i, v := range ints {
			if v+bias < 0 || v+bias > valueSpan {
				vals = nil
				break
			}
			vals[i] = byte(v + bias)
		}
	}
	v, _ := valueTables.LoadOrStore(k, vals)
	return v.([]byte)
}

// tableInts widens a table's elements with the executor's own loaders
// (loadF, loadI); false when a float element is not exactly an integer.
func tableInts(dt DType, tab []byte) ([]int64, bool) {
	ints := make([]int64, len(tab)/dt.Size())
	if !dt.IsFloat() {
		loadI(dt, tab, ints)
		return ints, true
	}
	fs := make([]float32, len(ints))
	loadF(dt, tab, fs)
	for i, f := range fs {
		if f != f || f < -1<<20 || f > 1<<20 || f != float32(int64(f)) || math.Signbit(float64(f)) && f == 0 {
			return nil, false // NaN, huge, fractional or -0
		}
		ints[i] = int64(f)
	}
	return ints, true
}
