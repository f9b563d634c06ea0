package cpu

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/msccl-go/msccl-go/ir"
)

// Input returns the bytes Run feeds rank's input buffer on the given
// launch. Float types get small integers in [-8, 8] so that every sum,
// whatever its order or intermediate rounding, is exact in f16 and bf16 up
// to 16 ranks; integer types get [-8, 8] (i32) or [0, 15] (u32, u8).
func Input(p *ir.Plan, opt Options, launch, rank int) ([]byte, error) {
	if p == nil || rank < 0 || rank >= len(p.GPUs) {
		return nil, fmt.Errorf("rank %d out of range", rank)
	}
	if !opt.DType.valid() {
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

func (s *sim) input(launch, rank int) []byte {
	return makeInput(s.opt.DType, s.opt.Seed, launch, rank, s.in)
}

func splitmix(x *uint64) uint64 {
	*x += 0x9e3779b97f4a7c15
	z := *x
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

func makeInput(dt DType, seed uint64, launch, rank int, n int64) []byte {
	st := seed ^ uint64(launch+1)*0x632be59bd9b4e019 ^ uint64(rank+1)*0x85157af5
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
		}
	}
	out := make([]byte, n)
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
// by the collective's definition.
func (s *sim) expected(ins [][]byte) ([][]byte, error) {
	n := len(ins)
	outs := make([][]byte, n)
	var rd reducer
	switch s.p.Collective {
	case ir.AllReduce:
		red := make([]byte, s.in)
		rd.reduce(s.opt.DType, s.red, red, ins)
		for r := range outs {
			outs[r] = red
		}
	case ir.AllGather:
		all := bytes.Join(ins, nil)
		for r := range outs {
			outs[r] = all
		}
	case ir.ReduceScatter:
		for r := range outs {
			parts := make([][]byte, n)
			for q := range ins {
				parts[q] = ins[q][int64(r)*s.out : int64(r+1)*s.out]
			}
			outs[r] = make([]byte, s.out)
			rd.reduce(s.opt.DType, s.red, outs[r], parts)
		}
	case ir.AllToAll:
		blk := s.in / int64(n)
		for r := range outs {
			outs[r] = make([]byte, s.out)
			for q := range ins {
				copy(outs[r][int64(q)*blk:], ins[q][int64(r)*blk:int64(r+1)*blk])
			}
		}
	case ir.SendRecv:
		for r := range outs {
			outs[r] = ins[(r-1+n)%n]
		}
	case ir.Broadcast:
		for r := range outs {
			outs[r] = ins[0]
		}
	default:
		return nil, fmt.Errorf("collective %q has no definition to check against", s.p.Collective)
	}
	return outs, nil
}

// checkSizes refuses sizes whose expected result is not defined.
func (s *sim) checkSizes() error {
	n := int64(len(s.p.GPUs))
	sz := int64(s.opt.DType.Size())
	switch s.p.Collective {
	case ir.AllToAll:
		if s.in%(n*sz) != 0 {
			return fmt.Errorf("alltoall size %d is not a whole number of %s elements per rank", s.in, s.opt.DType)
		}
	case ir.SendRecv, ir.Broadcast, ir.AllReduce:
		if s.in != s.out {
			return fmt.Errorf("%s needs equal input and output sizes", s.p.Collective)
		}
	case ir.AllGather, ir.ReduceScatter:
		if (s.in/n)%sz != 0 && s.p.Collective == ir.ReduceScatter || s.out%sz != 0 {
			return fmt.Errorf("%s size is not a whole number of %s elements per rank", s.p.Collective, s.opt.DType)
		}
	default:
		return fmt.Errorf("collective %q has no definition to check against", s.p.Collective)
	}
	return nil
}

// check compares every launch's outputs with the definition.
func (s *sim) check() {
	r := s.report
	sz := int64(s.opt.DType.Size())
	for l := range r.Outputs {
		want, err := s.expected(r.Inputs[l])
		if err != nil {
			continue
		}
		for rank, got := range r.Outputs[l] {
			w := want[rank]
			if got == nil || bytes.Equal(got, w) {
				continue
			}
			for off := int64(0); off+sz <= int64(len(w)); off += sz {
				if bytes.Equal(got[off:off+sz], w[off:off+sz]) {
					continue
				}
				r.WrongTotal++
				if len(r.Wrong) < maxMismatches {
					r.Wrong = append(r.Wrong, Mismatch{Launch: l, Rank: rank, Off: off,
						Got: formatElem(s.opt.DType, got[off:]), Want: formatElem(s.opt.DType, w[off:])})
				}
			}
		}
	}
}
