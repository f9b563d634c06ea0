package cpu

import (
	"math"
	"sort"
	"testing"

	"github.com/msccl-go/msccl-go/ir"
)

// fp8Spec describes a format from first principles, independently of the
// bit tricks in dtype.go: the tests derive every value from it.
type fp8Spec struct {
	name     string
	dt       DType
	ebits, m int
	bias     int
	ieee     bool // exponent all ones is inf/NaN (E5M2); else only S.1111.111 is NaN (E4M3)
	max      float64
	toF32    func(uint8) float32
	fromF32  func(float32) uint8
}

var fp8Specs = []fp8Spec{
	{"e4m3", F8E4M3, 4, 3, 7, false, 448, f8e4m3ToF32, f32ToF8E4M3},
	{"e5m2", F8E5M2, 5, 2, 15, true, 57344, f8e5m2ToF32, f32ToF8E5M2},
}

// value is code c's value by the OCP definition; ok is false for NaN.
func (s *fp8Spec) value(c uint8) (v float64, ok bool) {
	e := int(c>>s.m) & (1<<s.ebits - 1)
	man := int(c) & (1<<s.m - 1)
	sign := 1.0
	if c&0x80 != 0 {
		sign = -1
	}
	switch {
	case s.ieee && e == 1<<s.ebits-1:
		if man == 0 {
			return math.Inf(int(sign)), true
		}
		return 0, false
	case !s.ieee && e == 1<<s.ebits-1 && man == 1<<s.m-1:
		return 0, false
	case e == 0:
		return sign * math.Ldexp(float64(man), 1-s.bias-s.m), true
	}
	return sign * math.Ldexp(float64(1<<s.m+man), e-s.bias-s.m), true
}

// TestFP8Decode checks all 256 codes of both formats against the
// definition, and that each finite or infinite value narrows back to its
// own code (NaNs to the canonical 0x7f).
func TestFP8Decode(t *testing.T) {
	for _, s := range fp8Specs {
		nan := 0
		for i := range 256 {
			c := uint8(i)
			got := s.toF32(c)
			want, ok := s.value(c)
			if !ok {
				nan++
				if !math.IsNaN(float64(got)) {
					t.Errorf("%s %#02x: got %g, want NaN", s.name, c, got)
				}
				if back := s.fromF32(got); back != fp8NaN {
					t.Errorf("%s %#02x: NaN narrows to %#02x, want %#02x", s.name, c, back, fp8NaN)
				}
				continue
			}
			if float64(got) != want || math.Signbit(float64(got)) != (c&0x80 != 0) {
				t.Errorf("%s %#02x: got %g, want %g", s.name, c, got, want)
			}
			back := s.fromF32(got)
			wantBack := c
			if math.IsInf(want, 0) {
				wantBack = c&0x80 | uint8(s.maxCode()) // saturated
			}
			if back != wantBack {
				t.Errorf("%s %#02x (%g): round trip gives %#02x", s.name, c, got, back)
			}
		}
		wantNaN := 2 // E4M3: 0x7f, 0xff
		if s.ieee {
			wantNaN = 6 // E5M2: 3 mantissas x 2 signs
		}
		if nan != wantNaN {
			t.Errorf("%s: %d NaN codes, want %d", s.name, nan, wantNaN)
		}
		if v, _ := s.value(uint8(s.maxCode())); v != s.max {
			t.Errorf("%s: max code %#02x is %g, want %g", s.name, s.maxCode(), v, s.max)
		}
	}
}

func (s *fp8Spec) maxCode() int {
	if s.dt == F8E4M3 {
		return f8e4m3Max
	}
	return f8e5m2Max
}

// refNarrow rounds x to the format by searching the sorted finite values:
// nearest, ties to the even code, saturating, NaN to 0x7f.
func (s *fp8Spec) refNarrow(x float32, pos []float64, codes []uint8) uint8 {
	if math.IsNaN(float64(x)) {
		return fp8NaN
	}
	var sign uint8
	a := float64(x)
	if math.Signbit(a) {
		sign, a = 0x80, -a
	}
	if a >= s.max {
		return sign | uint8(s.maxCode())
	}
	i := sort.SearchFloat64s(pos, a) // pos[i-1] < a <= pos[i]
	if pos[i] == a {
		return sign | codes[i]
	}
	lo, hi := pos[i-1], pos[i]
	switch dl, dh := a-lo, hi-a; {
	case dl < dh:
		return sign | codes[i-1]
	case dh < dl:
		return sign | codes[i]
	case codes[i-1]&1 == 0:
		return sign | codes[i-1]
	}
	return sign | codes[i]
}

// TestFP8Narrow compares f32 -> FP8 with the reference on every f32 near
// an FP8 value or midpoint (a few ulps either side), a million f32 bit
// patterns spread over the whole range, and named cases.
func TestFP8Narrow(t *testing.T) {
	for _, s := range fp8Specs {
		var pos []float64
		var codes []uint8
		for c := range 0x80 {
			if v, ok := s.value(uint8(c)); ok && !math.IsInf(v, 0) {
				pos, codes = append(pos, v), append(codes, uint8(c))
			}
		}
		check := func(x float32) {
			t.Helper()
			if got, want := s.fromF32(x), s.refNarrow(x, pos, codes); got != want {
				t.Fatalf("%s: narrow(%g = %#08x) = %#02x, want %#02x", s.name, x, math.Float32bits(x), got, want)
			}
		}
		near := func(v float64) {
			b := math.Float32bits(float32(v))
			for d := uint32(0); d < 4; d++ {
				for _, sg := range []uint32{0, 0x80000000} {
					check(math.Float32frombits((b + d) | sg))
					if b >= d {
						check(math.Float32frombits((b - d) | sg))
					}
				}
			}
		}
		for i, v := range pos {
			near(v)
			if i+1 < len(pos) {
				near((v + pos[i+1]) / 2) // exact in f32: FP8 values have 4 significant bits
			}
		}
		near(pos[len(pos)-1] * 2)
		for b := uint32(0); b < 1<<32-4099; b += 4099 {
			check(math.Float32frombits(b))
		}
		for _, b := range []uint32{0, 1, 0x007fffff, 0x00800000, 0x7f7fffff, 0x7f800000, 0x7f800001, 0x7fc00000, 0xffc00000, 0xff800000, 0xffffffff} {
			check(math.Float32frombits(b))
		}
	}
}

// TestFP8Cases spells out the rules the comment in dtype.go states, one
// case each, so that a change of rule shows up here by name.
func TestFP8Cases(t *testing.T) {
	inf := float32(math.Inf(1))
	nan := float32(math.NaN())
	for _, c := range []struct {
		what       string
		in         float32
		e4m3, e5m2 uint8
	}{
		{"zero", 0, 0x00, 0x00},
		{"negative zero keeps its sign", float32(math.Copysign(0, -1)), 0x80, 0x80},
		{"one", 1, 0x38, 0x3c},
		{"minus one", -1, 0xb8, 0xbc},
		{"16: exact in both", 16, 0x58, 0x4c},
		{"17: E4M3 tie 16|18 to even 16; E5M2 nearest 16", 17, 0x58, 0x4c},
		{"19: E4M3 tie 18|20 to even 20", 19, 0x5a, 0x4d},
		{"9: E5M2 tie 8|10 to even 8", 9, 0x51, 0x48},
		{"11: E5M2 tie 10|12 to even 12", 11, 0x53, 0x4a},
		{"E4M3 max", 448, 0x7e, 0x5f},
		{"464: E4M3 tie 448|480 stays 448", 464, 0x7e, 0x5f},
		{"500: E4M3 saturates; E5M2 nearest 512", 500, 0x7e, 0x60},
		{"E5M2 max", 57344, 0x7e, 0x7b},
		{"61440: E5M2 would round to inf, saturates", 61440, 0x7e, 0x7b},
		{"1e30 saturates", 1e30, 0x7e, 0x7b},
		{"+inf saturates", inf, 0x7e, 0x7b},
		{"-inf saturates", -inf, 0xfe, 0xfb},
		{"NaN is 0x7f", nan, 0x7f, 0x7f},
		{"negative NaN is 0x7f too", float32(math.Float32frombits(0xffc00000)), 0x7f, 0x7f},
		{"smallest E4M3 subnormal 2^-9", 0x1p-9, 0x01, 0x18},
		{"2^-10: E4M3 tie 0|2^-9 to even 0", 0x1p-10, 0x00, 0x14},
		{"3*2^-10: E4M3 tie 2^-9|2^-8 to even 2^-8", 3 * 0x1p-10, 0x02, 0x1a},
		{"just above 2^-10: E4M3 rounds up", 0x1.000002p-10, 0x01, 0x14},
		{"largest E4M3 subnormal 7*2^-9", 7 * 0x1p-9, 0x07, 0x23},
		{"15*2^-10: ties up into the smallest E4M3 normal; E5M2 tie to 2^-6", 15 * 0x1p-10, 0x08, 0x24},
		{"smallest E5M2 subnormal 2^-16", 0x1p-16, 0x00, 0x01},
		{"2^-17: E5M2 tie to even 0", 0x1p-17, 0x00, 0x00},
		{"3*2^-17: E5M2 tie 2^-16|2^-15 to even 2^-15", 3 * 0x1p-17, 0x00, 0x02},
		{"-2^-17 keeps its sign", -0x1p-17, 0x80, 0x80},
		{"f32 subnormal", math.Float32frombits(1), 0x00, 0x00},
		{"0.1", 0.1, 0x1d, 0x2e},
	} {
		if got := f32ToF8E4M3(c.in); got != c.e4m3 {
			t.Errorf("%s: e4m3(%g) = %#02x, want %#02x", c.what, c.in, got, c.e4m3)
		}
		if got := f32ToF8E5M2(c.in); got != c.e5m2 {
			t.Errorf("%s: e5m2(%g) = %#02x, want %#02x", c.what, c.in, got, c.e5m2)
		}
	}
}

// TestFP8Reduce: reductions accumulate in f32 and round once, so a sum
// whose partial sums are not representable still rounds correctly, and
// an overflowing sum saturates.
func TestFP8Reduce(t *testing.T) {
	var r reducer
	enc := func(dt DType, vs ...float32) []byte {
		b := make([]byte, len(vs))
		storeF(dt, vs, b)
		return b
	}
	for _, c := range []struct {
		dt   DType
		op   ir.ReduceOp
		srcs [][]float32
		want []float32
	}{
		// 16+1+1 = 18 exactly; rounding after each step would give 16.
		{F8E4M3, ir.ReduceSum, [][]float32{{16, 448, -448, 0}, {1, 448, -448, 0}, {1, 1, -1, 0}}, []float32{18, 448, -448, 0}},
		{F8E5M2, ir.ReduceSum, [][]float32{{8, 57344, 1, 0}, {1, 57344, -1, 0}, {1, 1, 0, 0}}, []float32{10, 57344, 0, 0}},
		{F8E4M3, ir.ReduceMin, [][]float32{{1, -2, 0.5, 448}, {-1, 3, 0.25, -448}}, []float32{-1, -2, 0.25, -448}},
		{F8E5M2, ir.ReduceMax, [][]float32{{1, -2, 0.5, 57344}, {-1, 3, 0.25, -57344}}, []float32{1, 3, 0.5, 57344}},
	} {
		srcs := make([][]byte, len(c.srcs))
		for i, v := range c.srcs {
			srcs[i] = enc(c.dt, v...)
		}
		out := make([]byte, len(c.want))
		r.reduce(c.dt, c.op, out, srcs)
		got := make([]float32, len(out))
		loadF(c.dt, out, got)
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("%s %s: element %d = %g, want %g", c.dt, c.op, i, got[i], c.want[i])
			}
		}
	}
}

// TestFP8Inputs: FP8 inputs are +0 and 1 on even ranks, +0 and -1 on odd
// ones (collective.go), and never -0.
func TestFP8Inputs(t *testing.T) {
	for _, dt := range []DType{F8E4M3, F8E5M2} {
		for rank := range 4 {
			in := makeInput(dt, 1, 0, rank, 4096)
			seen := map[float32]int{}
			vals := make([]float32, len(in))
			loadF(dt, in, vals)
			for i, v := range vals {
				if in[i] == 0x80 {
					t.Fatalf("%s rank %d: -0 at %d", dt, rank, i)
				}
				seen[v]++
			}
			one := float32(1)
			if rank%2 == 1 {
				one = -1
			}
			if len(seen) != 2 || seen[0] == 0 || seen[one] == 0 {
				t.Errorf("%s rank %d: values %v, want 0 and %g", dt, rank, seen, one)
			}
		}
	}
}

// TestF8NarrowTable: storeF8's table agrees with f32ToF8 on every upper
// half of an f32 with several lower halves (the table's claim is that
// only whether the lower half is zero matters).
func TestF8NarrowTable(t *testing.T) {
	src := make([]float32, 0, 5<<16)
	for hi := range uint32(1 << 16) {
		for _, lo := range []uint32{0, 1, 0x8000, 0xffff, hi*2654435761>>16 | 1} {
			src = append(src, math.Float32frombits(hi<<16|lo))
		}
	}
	for _, dt := range []DType{F8E4M3, F8E5M2} {
		got := make([]byte, len(src))
		storeF8(dt, src, got)
		for i, f := range src {
			want := f32ToF8E4M3(f)
			if dt == F8E5M2 {
				want = f32ToF8E5M2(f)
			}
			if got[i] != want {
				t.Fatalf("%s: f32 %#08x narrows to %#02x by the table, %#02x by f32ToF8", dt, math.Float32bits(f), got[i], want)
			}
		}
	}
}

// TestF16WidenTable: loadF's f16 table gives f16ToF32's bits for every
// f16, NaN payloads included.
func TestF16WidenTable(t *testing.T) {
	src := make([]byte, 2<<16)
	for v := range 1 << 16 {
		src[2*v], src[2*v+1] = byte(v), byte(v>>8)
	}
	got := make([]float32, 1<<16)
	loadF(F16, src, got)
	for v := range 1 << 16 {
		if w := f16ToF32(uint16(v)); math.Float32bits(got[v]) != math.Float32bits(w) {
			t.Fatalf("f16 %#04x widens to %#08x by the table, %#08x by f16ToF32", v, math.Float32bits(got[v]), math.Float32bits(w))
		}
	}
}
