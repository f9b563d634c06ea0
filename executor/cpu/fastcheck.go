package cpu

import (
	"encoding/binary"

	"github.com/msccl-go/msccl-go/ir"
)

// checkFast is the byte-level check of launch l against the collective's
// definition when the outputs are right, which is what the GPU oracle's
// thousands of cases are: expected would build the definition from
// 64 MiB copies of the inputs, with an n-way reduction as costly as the
// plan's own, and checkLaunch then compares. Here inputs are read from
// their recipe (recipe.go: 4 KiB pieces of a table that stays in the
// cache), and reductions are exact integer arithmetic on the inputs'
// values, eight elements per 64-bit word: Input's values are small
// integers, so every partial result of the plan's fp32 (or int64)
// accumulation is exact whatever its order, and the reduction rounds
// once, to the same bytes as the integer result narrowed by storeF
// (storeI). TestCheckFast holds it to expected on every collective, type
// and reduction. It returns false when any output differs, or when it
// cannot tell (symbolic runs, prod, more than 15 ranks in a sum): the
// full check then runs and words what is wrong.
func (s *sim) checkFast(l int) bool {
	if s.field != nil || s.opt.DType == symType {
		return false
	}
	outs := s.report.Outputs[l]
	for _, o := range outs {
		if o == nil {
			return false
		}
	}
	rc := s.recipeFor(l)
	in, out, root := s.in, s.out, s.p.Root
	switch s.p.Collective {
	case ir.AllReduce:
		return s.exactOK(rc) && s.equalReduced(rc, outs, 0, in)
	case ir.Reduce:
		if !s.exactOK(rc) || !s.equalReduced(rc, outs[root:root+1], 0, in) {
			return false
		}
		for r, o := range outs {
			if r != root && s.p.InPlace && !rc.equalInput(o[:in], r, 0) {
				return false
			}
		}
		return true
	case ir.ReduceScatter:
		if !s.exactOK(rc) {
			return false
		}
		for r := range outs {
			if !s.equalReduced(rc, outs[r:r+1], int64(r)*out, out) {
				return false
			}
		}
		return true
	case ir.AllGather, ir.Gather:
		for r, o := range outs {
			switch {
			case s.p.Collective == ir.AllGather || r == root:
				for q := range outs {
					if !rc.equalInput(o[int64(q)*in:int64(q+1)*in], q, 0) {
						return false
					}
				}
			case s.p.InPlace:
				if at := s.outAt(r); !rc.equalInput(o[at:at+in], r, 0) {
					return false
				}
			}
		}
		return true
	case ir.Scatter:
		for r, o := range outs {
			if !rc.equalInput(o[:out], root, int64(r)*out) {
				return false
			}
		}
		return true
	case ir.AllToAll:
		blk := in / int64(len(outs))
		for r, o := range outs {
			for q := range outs {
				if !rc.equalInput(o[int64(q)*blk:int64(q+1)*blk], q, int64(r)*blk) {
					return false
				}
			}
		}
		return true
	case ir.SendRecv:
		for r := range outs {
			if !rc.equalInput(outs[s.p.Peer(r)][:in], r, 0) {
				return false
			}
		}
		return true
	case ir.Broadcast:
		for _, o := range outs {
			if !rc.equalInput(o[:in], root, 0) {
				return false
			}
		}
		return true
	}
	return false
}

// exactOK says whether the run's reduction of these inputs can be done
// in byte lanes: sum, min or max of integer values in [0, valueSpan]
// after the bias, and a sum of at most 255/valueSpan of them.
func (s *sim) exactOK(rc *recipe) bool {
	for _, v := range rc.vals {
		if v == nil {
			return false
		}
	}
	switch s.red {
	case ir.ReduceSum:
		return len(rc.vals)*valueSpan <= 0xff
	case ir.ReduceMin, ir.ReduceMax:
		return true
	}
	return false
}

// equalReduced says whether every outs[k][:m] equals the reduction of
// every rank's input bytes [a, a+m), computed piece by piece.
func (s *sim) equalReduced(rc *recipe, outs [][]byte, a, m int64) bool {
	sz := int64(s.opt.DType.Size())
	enc := s.exactEncoding(len(rc.vals))
	s.lanes = grow(s.lanes, inputPiece/int(sz))
	s.exp = grow(s.exp, inputPiece)
	for k := int64(0); k < m; {
		_, left := rc.pieceOf(0, a+k)
		seg := min(left, m-k) // one piece of every rank's input
		e := seg / sz
		acc := s.lanes[:e]
		for q := range rc.vals {
			off, _ := rc.pieceOf(q, a+k)
			v := rc.vals[q][off/sz:][:e]
			if q == 0 {
				copy(acc, v)
			} else {
				foldLanes(s.red, acc, v)
			}
		}
		exp := s.exp[:seg]
		le := binary.LittleEndian
		switch sz {
		case 1:
			for i, x := range acc {
				exp[i] = byte(enc[x])
			}
		case 2:
			for i, x := range acc {
				le.PutUint16(exp[2*i:], uint16(enc[x]))
			}
		default:
			for i, x := range acc {
				le.PutUint32(exp[4*i:], enc[x])
			}
		}
		for _, o := range outs {
			if string(o[k:k+seg]) != string(exp) {
				return false
			}
		}
		k += seg
	}
	return true
}

// exactEncoding maps a byte lane (a biased result) to the element the
// reducer stores for that integer, as a little-endian word: storeF of it
// as fp32 for float types (it is exact there), storeI for integers.
func (s *sim) exactEncoding(n int) *[256]uint32 {
	if s.enc != nil {
		return s.enc
	}
	dt := s.opt.DType
	bias := valueBias(dt)
	if s.red == ir.ReduceSum {
		bias *= int64(n)
	}
	enc := new([256]uint32)
	var b [4]byte
	for x := range int64(256) {
		v := x - bias
		if dt.IsFloat() {
			storeF(dt, []float32{float32(v)}, b[:])
		} else {
			storeI(dt, []int64{v}, b[:])
		}
		enc[x] = binary.LittleEndian.Uint32(b[:])
	}
	s.enc = enc
	return enc
}

// foldLanes folds v into acc byte lane by byte lane, eight lanes per
// word: lanes hold at most 0xff for sums (exactOK) and at most
// valueSpan for min and max, so no lane carries or borrows into the
// next.
func foldLanes(op ir.ReduceOp, acc, v []byte) {
	const hi = 0x8080808080808080
	le := binary.LittleEndian
	w := len(acc) &^ 7
	v = v[:len(acc)]
	switch op {
	case ir.ReduceSum:
		for i := 0; i < w; i += 8 {
			le.PutUint64(acc[i:], le.Uint64(acc[i:])+le.Uint64(v[i:]))
		}
		for i := w; i < len(acc); i++ {
			acc[i] += v[i]
		}
	case ir.ReduceMin:
		for i := 0; i < w; i += 8 {
			a, b := le.Uint64(acc[i:]), le.Uint64(v[i:])
			ge := ((((a | hi) - b) & hi) >> 7) * 0xff // 0xff in the lanes where a >= b
			le.PutUint64(acc[i:], b&ge|a&^ge)
		}
		for i := w; i < len(acc); i++ {
			acc[i] = min(acc[i], v[i])
		}
	case ir.ReduceMax:
		for i := 0; i < w; i += 8 {
			a, b := le.Uint64(acc[i:]), le.Uint64(v[i:])
			ge := ((((a | hi) - b) & hi) >> 7) * 0xff
			le.PutUint64(acc[i:], a&ge|b&^ge)
		}
		for i := w; i < len(acc); i++ {
			acc[i] = max(acc[i], v[i])
		}
	}
}
