package cpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"sync"
	"unsafe"

	"github.com/msccl-go/msccl-go/ir"
)

// DType is ir's element type (one table for the CPU executor, the
// kernels and the commands); the names below keep this package's API.
type DType = ir.DType

const (
	F32    = ir.F32
	F16    = ir.F16
	BF16   = ir.BF16
	I32    = ir.I32
	U32    = ir.U32
	U8     = ir.U8
	F8E4M3 = ir.F8E4M3 // see f32ToF8E4M3
	F8E5M2 = ir.F8E5M2 // see f32ToF8E5M2
)

// DTypes lists every supported data type.
var DTypes = ir.DTypes

// ParseDType maps "f32", "f16", "bf16", "i32", "u32", "u8", "f8e4m3",
// "f8e5m2" to a DType.
func ParseDType(s string) (DType, error) { return ir.ParseDType(s) }

// symType is the element type of Options.Symbolic runs (ir.Symbolic): an
// 8-byte fingerprint (see symbolic.go) that every reduction adds modulo
// 2^64. It never reaches a GPU executor, a command line or a loop over
// DTypes; Run substitutes it for Options.DType.
const symType = ir.Symbolic

// validType admits the device types and symType.
func validType(d DType) bool { return d.Valid() || d == symType }

// f16ToF32 widens an IEEE half exactly.
func f16ToF32(h uint16) float32 {
	if em := uint32(h & 0x7fff); em >= 0x0400 && em < 0x7c00 {
		// Normal numbers, the common case: rebias the exponent.
		return math.Float32frombits(uint32(h&0x8000)<<16 | (em<<13 + (127-15)<<23))
	}
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	man := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case exp == 0:
		if man == 0 {
			return math.Float32frombits(sign)
		}
		// Subnormal half: normalise into a float32 normal.
		e := uint32(127 - 15 + 1)
		for man&0x400 == 0 {
			man <<= 1
			e--
		}
		return math.Float32frombits(sign | e<<23 | (man&0x3ff)<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | man<<13)
}

// f32ToF16 narrows with round-to-nearest-even, as the GPU's cvt.rn does.
func f32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	man := b & 0x7fffff
	if exp == 0xff {
		if man != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		if e < -10 {
			return sign
		}
		man |= 0x800000
		shift := uint32(14 - e)
		half := uint32(1) << (shift - 1)
		rest := man & (1<<shift - 1)
		v := man >> shift
		if rest > half || (rest == half && v&1 == 1) {
			v++
		}
		return sign | uint16(v)
	}
	v := uint32(e)<<10 | man>>13
	rest := man & 0x1fff
	if rest > 0x1000 || (rest == 0x1000 && v&1 == 1) {
		v++ // may carry into the exponent, which is the right answer
	}
	return sign | uint16(v)
}

func bf16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// f32ToBF16 narrows with round-to-nearest-even, keeping NaNs quiet.
func f32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// FP8 (OCP 8-bit floating point, v1.0; upstream's __fp8_e4m3 and
// __fp8_e5m2). Reductions widen to f32, accumulate there like f16 and bf16,
// and narrow once with round-to-nearest-even. kernels/reduce.cuh holds the
// same conversions in C, step for step; the GPU tests compare the two bit
// for bit.
//
// Overflow saturates in both formats (PTX's "satfinite"): |x| >= the
// largest finite value, infinities included, becomes that value with x's
// sign (448 in E4M3, 57344 in E5M2). E4M3 has no infinity, so its only
// alternative would be NaN; for E5M2 we saturate too, because that is
// what upstream computes: the __nv_fp8_e5m2(float) constructor behind
// __fp8_e5m2 converts with __NV_SATFINITE, and the hardware instruction
// (cvt.rn.satfinite.e5m2x2.f32) has no non-saturating form. One rule for
// both formats also keeps a sum that overflows finite, so min/max of such
// results still order like the exact values do.
//
// A NaN narrows to 0x7f in both formats (E4M3's only NaN, S.1111.111 with
// the sign cleared; E5M2's all-ones quiet NaN). The sign and payload are
// dropped on purpose: the GPU's f32 arithmetic returns the canonical NaN
// (0x7fffffff) whatever its operands were, while Go on x86 keeps an
// operand's payload or makes 0xffc00000 for inf-inf, so only a NaN rule
// that ignores both agrees on the two sides. Zeros keep their sign, and
// a value that rounds to zero becomes zero of its sign.
const (
	fp8NaN      = 0x7f
	f8e4m3Max   = 0x7e       // 448 = 1.75 * 2^8
	f8e5m2Max   = 0x7b       // 57344 = 1.75 * 2^15
	f8e4m3MaxF  = 0x43e00000 // 448 as f32 bits
	f8e5m2MaxF  = 0x47600000 // 57344 as f32 bits
	f8e4m3Bias  = 7
	f8e5m2Bias  = 15
	f8e4m3MBits = 3
	f8e5m2MBits = 2
)

func f32ToF8E4M3(f float32) uint8 {
	return f32ToF8(f, f8e4m3MBits, f8e4m3Bias, f8e4m3Max, f8e4m3MaxF)
}

func f32ToF8E5M2(f float32) uint8 {
	return f32ToF8(f, f8e5m2MBits, f8e5m2Bias, f8e5m2Max, f8e5m2MaxF)
}

// f32ToF8 narrows f to an FP8 format with m mantissa bits and the given
// exponent bias, rounding to nearest even and saturating at maxCode (whose
// value has f32 bits maxF). kernels/reduce.cuh's f32_to_f8 is the same
// code in C.
func f32ToF8(f float32, m, bias int32, maxCode uint8, maxF uint32) uint8 {
	b := math.Float32bits(f)
	sign := uint8(b>>24) & 0x80
	a := b & 0x7fffffff
	switch {
	case a > 0x7f800000:
		return fp8NaN
	case a >= maxF:
		// Saturate: everything from the largest finite value up,
		// infinity included. Below maxF rounding cannot pass it (the
		// next code up is NaN in E4M3, infinity in E5M2, and both are
		// more than half an ulp above maxF), so no check follows the
		// rounding.
		return sign | maxCode
	case a < 0x00800000:
		// Zero or an f32 subnormal, far below half the smallest FP8
		// subnormal (2^-10 in E4M3, 2^-17 in E5M2).
		return sign
	}
	e := int32(a>>23) - 127
	if e < 1-bias {
		// Below FP8's smallest normal: count subnormal quanta of
		// 2^(1-bias-m). With sig the 24-bit significand, |f| =
		// sig * 2^(e-23), so the count is sig >> shift, rounded.
		// A count of 2^m is the smallest normal's code: the carry
		// into the exponent field is the right answer.
		sig := a&0x7fffff | 0x800000
		shift := uint32(24 - bias - m - e)
		if shift > 24 {
			return sign // below half the smallest subnormal
		}
		code := sig >> shift
		rest, half := sig&(1<<shift-1), uint32(1)<<(shift-1)
		if rest > half || (rest == half && code&1 == 1) {
			code++
		}
		return sign | uint8(code)
	}
	s := uint32(23 - m)
	code := uint32(e+bias)<<uint32(m) | (a&0x7fffff)>>s
	rest, half := a&(1<<s-1), uint32(1)<<(s-1)
	if rest > half || (rest == half && code&1 == 1) {
		code++ // may carry into the exponent, which is the right answer
	}
	return sign | uint8(code)
}

// f8e4m3ToF32 widens an E4M3 value exactly; 0x7f and 0xff are NaN.
func f8e4m3ToF32(v uint8) float32 {
	sign := uint32(v&0x80) << 24
	a := uint32(v & 0x7f)
	switch {
	case a == 0x7f:
		return math.Float32frombits(sign | 0x7fc00000)
	case a < 0x08:
		// Subnormal: a * 2^-9, built from bits so that a zero keeps
		// its sign.
		if a == 0 {
			return math.Float32frombits(sign)
		}
		return math.Float32frombits(sign | math.Float32bits(float32(a)*0x1p-9))
	}
	return math.Float32frombits(sign | (a>>3+127-f8e4m3Bias)<<23 | (a&7)<<20)
}

// f8e5m2ToF32 widens an E5M2 value exactly: E5M2 is the upper byte of an
// IEEE half (same exponent width and bias), infinities and NaNs included.
func f8e5m2ToF32(v uint8) float32 { return f16ToF32(uint16(v) << 8) }

// f8Tables hold both formats' widenings, indexed by the byte: loads are
// a table lookup, as fast as the u8 path.
var f8Tables = func() (t [2][256]float32) {
	for i := range 256 {
		t[0][i] = f8e4m3ToF32(uint8(i))
		t[1][i] = f8e5m2ToF32(uint8(i))
	}
	return t
}()

// loadF8 and storeF8 convert FP8 elements: bytes, so no byte order.
func loadF8(dt DType, src []byte, dst []float32) {
	tab := &f8Tables[0]
	if dt == F8E5M2 {
		tab = &f8Tables[1]
	}
	for i, v := range src[:len(dst)] {
		dst[i] = tab[v]
	}
}

func storeF8(dt DType, src []float32, dst []byte) {
	dst = dst[:len(src)]
	tab := f8Narrow()
	t := &tab[0]
	if dt == F8E5M2 {
		t = &tab[1]
	}
	for i, v := range src {
		b := math.Float32bits(v)
		sticky := 0
		if b&0xffff != 0 {
			sticky = 1
		}
		dst[i] = t[sticky][b>>16]
	}
}

// f16Widen tables f16ToF32 over every f16 (exact by construction): the
// conversion was a quarter of an f16 reduction's CPU time in the GPU
// oracle. TestF16WidenTable holds it to f16ToF32.
var f16Widen = sync.OnceValue(func() *[1 << 16]float32 {
	t := new([1 << 16]float32)
	for v := range uint32(1 << 16) {
		t[v] = f16ToF32(uint16(v))
	}
	return t
})

// f8Narrow tables f32ToF8 by the upper 16 bits of the f32 and whether any
// of the lower 16 are set ([format][sticky][upper]). That is all the
// narrowing reads of the lower bits: FP8 keeps at most 3 mantissa bits,
// so every lower bit lies below the rounding point, where only whether
// the discarded part is zero, half or more matters, and half is bit 19
// or above (normal or subnormal result); NaN tests a > 0x7f800000 and
// the saturation and underflow bounds have zero lower halves.
// TestF8NarrowTable holds the table to f32ToF8 on every upper half with
// lower halves 0, 1, 0x8000 and 0xffff. The element-wise conversion was
// two thirds of an FP8 case's CPU time in the GPU oracle.
var f8Narrow = sync.OnceValue(func() *[2][2][1 << 16]uint8 {
	t := new([2][2][1 << 16]uint8)
	for hi := range uint32(1 << 16) {
		for sticky := range uint32(2) {
			f := math.Float32frombits(hi<<16 | sticky)
			t[0][sticky][hi] = f32ToF8E4M3(f)
			t[1][sticky][hi] = f32ToF8E5M2(f)
		}
	}
	return t
})

// The element conversions below view byte slices as typed slices: plans
// and GPUs lay elements out little-endian, as this host does (hostLE), and
// byte-wise decoding cost as much as the rest of a 64 MiB simulation. On a
// big-endian host they fall back to encoding/binary, in words and putWords
// only, so each conversion is written once for both byte orders.
var hostLE = func() bool { x := uint16(1); return *(*byte)(unsafe.Pointer(&x)) == 1 }()

// view reinterprets the first n*size(T) bytes of b as n elements of T.
// Simulated buffers come from make([]byte), which Go aligns to 8 bytes or
// more; element offsets inside them are element-aligned by the plan's
// geometry, and unaligned loads are legal on the hosts we build for.
func view[T uint16 | uint32](b []byte, n int) []T {
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n)
}

// words is b's first n little-endian elements of T: view on a
// little-endian host, a decoded copy elsewhere (which putWords writes
// back after a store).
func words[T uint16 | uint32](b []byte, n int) []T {
	size := int(unsafe.Sizeof(T(0)))
	b = b[:size*n]
	if hostLE {
		return view[T](b, n)
	}
	w := make([]T, n)
	for i := range w {
		if size == 2 {
			w[i] = T(binary.LittleEndian.Uint16(b[2*i:]))
		} else {
			w[i] = T(binary.LittleEndian.Uint32(b[4*i:]))
		}
	}
	return w
}

// putWords lands w, which words returned for b, in b: nothing to do on a
// little-endian host, where w is b itself.
func putWords[T uint16 | uint32](b []byte, w []T) {
	if hostLE {
		return
	}
	for i, v := range w {
		if unsafe.Sizeof(v) == 2 {
			binary.LittleEndian.PutUint16(b[2*i:], uint16(v))
		} else {
			binary.LittleEndian.PutUint32(b[4*i:], uint32(v))
		}
	}
}

// loadF converts n float elements of src into dst.
func loadF(dt DType, src []byte, dst []float32) {
	n := len(dst)
	switch dt {
	case F32:
		for i, v := range words[uint32](src, n) {
			dst[i] = math.Float32frombits(v)
		}
	case F16:
		tab := f16Widen()
		for i, v := range words[uint16](src, n) {
			dst[i] = tab[v]
		}
	case BF16:
		for i, v := range words[uint16](src, n) {
			dst[i] = bf16ToF32(v)
		}
	case F8E4M3, F8E5M2:
		loadF8(dt, src, dst)
	}
}

// loadI widens integer elements so that signed and unsigned compare right;
// sums and products wrap the same way modulo the element width.
func loadI(dt DType, src []byte, dst []int64) {
	n := len(dst)
	switch dt {
	case I32:
		for i, v := range words[uint32](src, n) {
			dst[i] = int64(int32(v))
		}
	case U32:
		for i, v := range words[uint32](src, n) {
			dst[i] = int64(v)
		}
	case U8:
		for i := range dst {
			dst[i] = int64(src[i])
		}
	}
}

// storeF and storeI are the loads' inverses: they narrow dst's first
// len(src) elements from src.
func storeF(dt DType, src []float32, dst []byte) {
	n := len(src)
	switch dt {
	case F32:
		out := words[uint32](dst, n)
		for i, v := range src {
			out[i] = math.Float32bits(v)
		}
		putWords(dst, out)
	case F16:
		out := words[uint16](dst, n)
		for i, v := range src {
			out[i] = f32ToF16(v)
		}
		putWords(dst, out)
	case BF16:
		out := words[uint16](dst, n)
		for i, v := range src {
			out[i] = f32ToBF16(v)
		}
		putWords(dst, out)
	case F8E4M3, F8E5M2:
		storeF8(dt, src, dst)
	}
}

func storeI(dt DType, src []int64, dst []byte) {
	switch dt {
	case I32, U32:
		out := words[uint32](dst, len(src))
		for i, v := range src {
			out[i] = uint32(v)
		}
		putWords(dst, out)
	case U8:
		for i, v := range src {
			dst[i] = byte(v)
		}
	}
}

// reducer reduces byte slices element-wise, accumulating floats in fp32 in
// source order and rounding once. Its buffers grow and are reused, so a
// simulation allocates per op at most, never per element.
type reducer struct {
	accF, tmpF []float32
	accI, tmpI []int64
	accS       []uint64
	keys       []int32 // keyMinMax's
}

// reduceBlock is how many elements reduce converts at a time: small
// enough that the fp32 (or int64) accumulators stay in the L1/L2 cache,
// large enough that the loop overhead vanishes. Converting whole 64 MiB
// operands at once made the simulation memory-bound.
const reduceBlock = 4096

// reduce writes op(srcs[0], srcs[1], ...) into out; every src holds at
// least len(out) bytes and out may alias any of them.
func (r *reducer) reduce(dt DType, op ir.ReduceOp, out []byte, srcs [][]byte) {
	if dt == symType {
		// Fingerprints add whatever the reduction: the sum is a random
		// linear image of the multiset of contributions, which is what
		// the symbolic proof compares (symbolic.go).
		r.symReduce(out, srcs)
		return
	}
	n := len(out) / dt.Size()
	blk := reduceBlock
	shifted := shiftedAlias(out, srcs)
	if shifted {
		// out overlaps a source at another offset: a block written early
		// would be read again later, so convert everything first.
		blk = n
	}
	sz := dt.Size()
	for lo := 0; lo < n; lo += blk {
		m := min(blk, n-lo)
		b0, b1 := lo*sz, (lo+m)*sz
		if dt.IsFloat() {
			if !shifted && keyMinMax(dt, op, out[b0:b1], srcs, b0, &r.keys) {
				continue
			}
			foldBlock(dt, op, out[b0:b1], srcs, b0, &r.accF, &r.tmpF, loadF, foldF, storeF)
		} else {
			foldBlock(dt, op, out[b0:b1], srcs, b0, &r.accI, &r.tmpI, loadI, foldI, storeI)
		}
	}
}

// foldBlock reduces the bytes [b0, b0+len(out)) of every source into out
// through the accumulator type T (fold.go combines a source in).
func foldBlock[T float32 | int64](dt DType, op ir.ReduceOp, out []byte, srcs [][]byte, b0 int, accp, tmpp *[]T,
	load func(DType, []byte, []T), fold func(DType, ir.ReduceOp, []T, []byte, *[]T), store func(DType, []T, []byte)) {
	m := len(out) / dt.Size()
	*accp = grow(*accp, m)
	acc := (*accp)[:m]
	b1 := b0 + len(out)
	load(dt, srcs[0][b0:b1], acc)
	for _, s := range srcs[1:] {
		fold(dt, op, acc, s[b0:b1], tmpp)
	}
	store(dt, acc, out)
}

// shiftedAlias reports whether out shares memory with a source without
// starting at the same address (same start is fine element by element).
func shiftedAlias(out []byte, srcs [][]byte) bool {
	if len(out) == 0 {
		return false
	}
	o0 := uintptr(unsafe.Pointer(unsafe.SliceData(out)))
	o1 := o0 + uintptr(len(out))
	for _, s := range srcs {
		if len(s) == 0 {
			continue
		}
		s0 := uintptr(unsafe.Pointer(unsafe.SliceData(s)))
		s1 := s0 + uintptr(len(s))
		if s0 != o0 && s0 < o1 && o0 < s1 {
			return true
		}
	}
	return false
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// combine folds v into acc elementwise. Float and integer element types
// have different GC shapes, so each instantiation is compiled on its own
// and the loops stay as tight as hand-written ones.
func combine[T float32 | int64](op ir.ReduceOp, acc, v []T) {
	switch op {
	case ir.ReduceMin:
		for i, x := range v {
			acc[i] = min(acc[i], x)
		}
	case ir.ReduceMax:
		for i, x := range v {
			acc[i] = max(acc[i], x)
		}
	case ir.ReduceProd:
		for i, x := range v {
			acc[i] *= x
		}
	default:
		for i, x := range v {
			acc[i] += x
		}
	}
}

// formatElem renders one element for reports.
func formatElem(dt DType, b []byte) string {
	switch dt {
	case symType:
		return fmt.Sprintf("%#016x", binary.LittleEndian.Uint64(b))
	case F32:
		return strconv.FormatFloat(float64(math.Float32frombits(binary.LittleEndian.Uint32(b))), 'g', -1, 32)
	case F16:
		return strconv.FormatFloat(float64(f16ToF32(binary.LittleEndian.Uint16(b))), 'g', -1, 32)
	case BF16:
		return strconv.FormatFloat(float64(bf16ToF32(binary.LittleEndian.Uint16(b))), 'g', -1, 32)
	case I32:
		return strconv.FormatInt(int64(int32(binary.LittleEndian.Uint32(b))), 10)
	case U32:
		return strconv.FormatUint(uint64(binary.LittleEndian.Uint32(b)), 10)
	case F8E4M3:
		return strconv.FormatFloat(float64(f8e4m3ToF32(b[0])), 'g', -1, 32)
	case F8E5M2:
		return strconv.FormatFloat(float64(f8e5m2ToF32(b[0])), 'g', -1, 32)
	}
	return strconv.Itoa(int(b[0]))
}
